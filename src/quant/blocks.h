/*
 * ggml's quantized block layouts, byte for byte (ggml-common.h).  A tensor row
 * of n elements is n / QK consecutive blocks; GGUF stores them unpadded, so
 * every struct below must have exactly the size in types.c (checked here).
 *
 * Conventions shared by the 32-element formats: element j of the first half
 * of a block is the low nibble of qs[j], element j + 16 is the high nibble.
 * Scales ("d", "m", "dmin") are f16 unless noted.
 */
#ifndef PLM_QUANT_BLOCKS_H
#define PLM_QUANT_BLOCKS_H

#include <stdint.h>
#include <string.h>

#include "quant/fp16.h"

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK4_NL 32
#define QK_K 256
#define K_SCALE_SIZE 12

/* x = d * (q - 8), q in 0..15 */
typedef struct {
    plm_fp16_t d;
    uint8_t qs[QK4_0 / 2];
} block_q4_0;

/* x = d * q + m, q in 0..15 */
typedef struct {
    plm_fp16_t d, m;
    uint8_t qs[QK4_1 / 2];
} block_q4_1;

/* x = d * (q - 16); bit 4 of element j is bit j of qh (little-endian u32) */
typedef struct {
    plm_fp16_t d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
} block_q5_0;

/* x = d * q + m, q in 0..31 */
typedef struct {
    plm_fp16_t d, m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;

/* x = d * q */
typedef struct {
    plm_fp16_t d;
    int8_t qs[QK8_0];
} block_q8_0;

/* x = d * q; s = d * sum(q), so a dot with a Q4_1/Q5_1 min costs one multiply */
typedef struct {
    plm_fp16_t d, s;
    int8_t qs[QK8_1];
} block_q8_1;

/* 16 sub-blocks of 16: x = d * (scales[i] & 15) * q - dmin * (scales[i] >> 4),
 * q = 2 bits; each 128 elements use 32 bytes of qs, 4 bit-planes of 32. */
typedef struct {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    plm_fp16_t d, dmin;
} block_q2_K;

/* 16 sub-blocks of 16 with 6-bit signed scales (biased by 32) packed in 12
 * bytes; q = 2 low bits in qs plus a "not set means -4" bit in hmask. */
typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    plm_fp16_t d;
} block_q3_K;

/* 8 sub-blocks of 32, 6-bit scale and min each packed in 12 bytes:
 * x = d * sc * q - dmin * m, q = 4 bits. */
typedef struct {
    plm_fp16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
} block_q4_K;

/* As Q4_K, plus a fifth bit per element in qh. */
typedef struct {
    plm_fp16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;

/* 16 sub-blocks of 16, 8-bit signed scales: x = d * scales[i] * (q - 32),
 * q = 4 low bits in ql plus 2 high bits in qh. */
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    plm_fp16_t d;
} block_q6_K;

/* Activation format for the K-quants: f32 scale, and the sums of each 16
 * quants precomputed so the mins of Q2_K/Q4_K/Q5_K cost 16 multiplies. */
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_K;

/* x = d * kvalues_iq4nl[q] */
typedef struct {
    plm_fp16_t d;
    uint8_t qs[QK4_NL / 2];
} block_iq4_nl;

/* 8 sub-blocks of 32 with 6-bit scales (4 low bits in scales_l, 2 high bits
 * in scales_h), biased by 32: x = d * (ls - 32) * kvalues_iq4nl[q]. */
typedef struct {
    plm_fp16_t d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1 size");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K size");
_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");
_Static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs size");

/* ---- the codebook formats (IQ1/IQ2/IQ3): 256-element blocks whose groups
 * of 8 (or 4) weights are one index into a lattice (iq_tables.h), with signs
 * stored apart; sub-block scales are small odd integers 2s+1. ---- */

/* Per 32: 8 bytes = four u8 grid indices (groups of 8), then a u32 whose
 * 4 x 7 low bits are sign codes (plm_iq2_signs) and top 4 bits the scale s:
 * x = d * (2s+1) / 8 * grid * sign. */
typedef struct {
    plm_fp16_t d;
    uint16_t qs[QK_K / 8];
} block_iq2_xxs;

/* Per group of 8: u16 = 9-bit grid index | 7-bit sign code << 9; per 16 a
 * 4-bit scale (low nibble first): x = d * (2s+1) / 8 * grid * sign. */
typedef struct {
    plm_fp16_t d;
    uint16_t qs[QK_K / 8];
    uint8_t scales[QK_K / 32];
} block_iq2_xs;

/* Per group of 8: 8 low index bits in qs[0..31], 2 high bits in qh (2 per
 * group, 4 groups a byte), a full sign byte in qs[32..63]; scales as IQ2_XS. */
typedef struct {
    plm_fp16_t d;
    uint8_t qs[QK_K / 4];
    uint8_t qh[QK_K / 32];
    uint8_t scales[QK_K / 32];
} block_iq2_s;

/* Per group of 4: a u8 index into the 256-point 3-bit grid (qs[0..63]);
 * per 32 a u32 (after the indices) of 4 x 7 sign bits and a 4-bit scale:
 * x = d * (2s+1) / 4 * grid * sign. */
typedef struct {
    plm_fp16_t d;
    uint8_t qs[3 * QK_K / 8];
} block_iq3_xxs;

/* Per group of 4: 8 index bits in qs plus a ninth in qh (one bit a group),
 * a full sign byte per 8 weights, a 4-bit scale per 32: x = d * (2s+1) *
 * grid * sign. */
typedef struct {
    plm_fp16_t d;
    uint8_t qs[QK_K / 4];
    uint8_t qh[QK_K / 32];
    uint8_t signs[QK_K / 8];
    uint8_t scales[QK_K / 64];
} block_iq3_s;

/* Per group of 8: 8 index bits in qs, 3 more in qh[sub-block] (bits 3l..);
 * qh's bits 12..14 are the scale s, bit 15 the sign of the shift:
 * x = d * (2s+1) * (grid +- 1/8), grid in {-1, 0, 1}. */
typedef struct {
    plm_fp16_t d;
    uint8_t qs[QK_K / 8];
    uint16_t qh[QK_K / 32];
} block_iq1_s;

/* As IQ1_S, but a 3-bit scale per 16 and the shift sign per 8 (bit 3 / 7
 * of each qh nibble, whose low 3 bits extend the index); the f16 block
 * scale is spread over the top nibbles of the four u16 of scales. */
typedef struct {
    uint8_t qs[QK_K / 8];
    uint8_t qh[QK_K / 16];
    uint8_t scales[QK_K / 32];
} block_iq1_m;

#define IQ1_DELTA 0.125f

/* Ternary: 5 trits a byte as a base-3 fraction (qs: 240 weights, element
 * 32 * n + m is trit n of byte m, then a 16-byte tail the same way), the
 * last 16 four a byte in qh: x = d * (t - 1). */
typedef struct {
    uint8_t qs[(QK_K - 4 * QK_K / 64) / 5];
    uint8_t qh[QK_K / 64];
    plm_fp16_t d;
} block_tq1_0;

/* Ternary at 2 bits: element 128*h + 32*l + m is bits 2l of qs[32h + m];
 * x = d * (q - 1). */
typedef struct {
    uint8_t qs[QK_K / 4];
    plm_fp16_t d;
} block_tq2_0;

/* OCP microscaling FP4: an E8M0 exponent shared by 32 E2M1 values, nibbles
 * as Q4_0 (element j low nibble of qs[j], j + 16 high nibble). */
#define QK_MXFP4 32
typedef struct {
    uint8_t e;
    uint8_t qs[QK_MXFP4 / 2];
} block_mxfp4;

_Static_assert(sizeof(block_iq2_xxs) == 66, "block_iq2_xxs size");
_Static_assert(sizeof(block_iq2_xs) == 74, "block_iq2_xs size");
_Static_assert(sizeof(block_iq2_s) == 82, "block_iq2_s size");
_Static_assert(sizeof(block_iq3_xxs) == 98, "block_iq3_xxs size");
_Static_assert(sizeof(block_iq3_s) == 110, "block_iq3_s size");
_Static_assert(sizeof(block_iq1_s) == 50, "block_iq1_s size");
_Static_assert(sizeof(block_iq1_m) == 56, "block_iq1_m size");
_Static_assert(sizeof(block_tq1_0) == 54, "block_tq1_0 size");
_Static_assert(sizeof(block_tq2_0) == 66, "block_tq2_0 size");
_Static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 size");

/* E2M1 values doubled (so they are integers): 0, 0.5, 1, 1.5, 2, 3, 4, 6
 * and their negatives; the block scale is then half the E8M0 power of 2. */
static const int8_t kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 2^(e - 128): half of the E8M0 scale 2^(e - 127), built from its bits
 * (e = 0 and 1 give the subnormals 2^-128 and 2^-127). */
static inline float plm_e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The 16 levels of IQ4_NL/IQ4_XS: a non-uniform grid denser near zero. */
static const int8_t kvalues_iq4nl[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* Unpacks the 6-bit scale and min of sub-block j (0..7) of Q4_K/Q5_K: the
 * first four sit in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins);
 * the last four take their low 4 bits from bytes 8..11 and their top 2 bits
 * from the spare top bits of bytes 0..7. */
static inline void plm_get_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Unpacks the 6-bit scale of sub-block j (0..15) of Q3_K, still biased by
 * 32: low 4 bits are the nibbles of bytes 0..7 (low nibbles first), high 2
 * bits are the 2-bit fields of bytes 8..11. */
static inline int plm_q3_K_scale(int j, const uint8_t *s) {
    const int lo = j < 8 ? (s[j] & 0xf) : (s[j - 8] >> 4);
    const int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    return lo | (hi << 4);
}

/* The 6-bit scale of 32-element sub-block j (0..7) of IQ4_XS, still biased. */
static inline int plm_iq4_xs_scale(const block_iq4_xs *b, int j) {
    return ((b->scales_l[j / 2] >> (4 * (j % 2))) & 0xf) | (((b->scales_h >> (2 * j)) & 3) << 4);
}

#endif
