/*
 * Half-precision conversions: IEEE binary16 ("f16") and bfloat16 ("bf16").
 *
 * Everything here is integer bit arithmetic, so the results do not depend on
 * the FPU's rounding mode or on flush-to-zero settings, and need no lookup
 * table (no global state).  Semantics match ggml:
 *   f32 -> f16   round to nearest, ties to even; overflow -> inf; subnormals
 *                kept; NaN stays NaN (quieted, sign and top payload kept).
 *   f32 -> bf16  round to nearest, ties to even; subnormals kept (not
 *                flushed); NaN forced quiet by setting bit 6, as ggml does.
 *   f16/bf16 -> f32 is exact.
 */
#ifndef PLM_QUANT_FP16_H
#define PLM_QUANT_FP16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t plm_fp16_t;  /* IEEE binary16 bits */
typedef uint16_t plm_bf16_t;  /* bfloat16 bits (top half of an f32) */

static inline uint32_t plm_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float plm_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float plm_fp16_to_fp32(plm_fp16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    if (exp == 0x1f)  /* inf or NaN: widen the payload */
        return plm_f32_from_bits(sign | 0x7f800000u | (man << 13));
    if (exp != 0)     /* normal: rebias 15 -> 127 */
        return plm_f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
    /* zero or subnormal: man * 2^-24 is exact and a normal f32 */
    return plm_f32_from_bits(sign | plm_f32_bits((float)man * 0x1p-24f));
}

static inline plm_fp16_t plm_fp32_to_fp16(float f) {
    const uint32_t x = plm_f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)  /* NaN: keep the top payload bits, make it quiet */
        return (plm_fp16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u)  /* >= 65520, halfway past the largest half: inf */
        return (plm_fp16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) {  /* >= 2^-14: normal half */
        ax += 0xfffu + ((ax >> 13) & 1u);  /* ties to even; carry bumps exp */
        return (plm_fp16_t)(sign | ((ax - 0x38000000u) >> 13));
    }
    if (ax <= 0x33000000u)  /* <= 2^-25: rounds to zero (2^-25 ties to even 0) */
        return (plm_fp16_t)sign;
    /* subnormal half: count in units of 2^-24, rounding the shifted-out bits */
    const uint32_t e = ax >> 23;  /* 102..112 */
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  /* 14..24 */
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) r++;
    return (plm_fp16_t)(sign | r);
}

static inline float plm_bf16_to_fp32(plm_bf16_t h) {
    return plm_f32_from_bits((uint32_t)h << 16);
}

static inline plm_bf16_t plm_fp32_to_bf16(float f) {
    const uint32_t x = plm_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (plm_bf16_t)((x >> 16) | 0x40u);
    /* Adding 0x7fff (+1 when the kept lsb is odd) carries exactly when the
     * dropped half is above one half, or a tie with an odd kept part; a carry
     * into the exponent, up to inf, is the correct rounding. */
    return (plm_bf16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

void plm_fp16_to_fp32_row(const plm_fp16_t *x, float *y, int64_t n);
void plm_fp32_to_fp16_row(const float *x, plm_fp16_t *y, int64_t n);
void plm_bf16_to_fp32_row(const plm_bf16_t *x, float *y, int64_t n);
void plm_fp32_to_bf16_row(const float *x, plm_bf16_t *y, int64_t n);

#endif
