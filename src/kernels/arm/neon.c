/*
 * The baseline ARMv8-A NEON table: float-format dots (F32, F16, BF16) and
 * gemms, the activation quantizers (Q8_0, Q8_1, Q8_K) and the F16 row
 * conversions used by the KV cache, attention and SwiGLU (attention.c),
 * plus the integer dots and gemms of
 * quants_tmpl.h with a widening multiply (SMULL + SADALP) for CPUs without
 * SDOT.
 */
#include "kernels/arm/arm.h"

#if defined(PLM_ARM)

#include <float.h>
#include <math.h>

#include "kernels/arm/unpack.h"
#include "quant/quant.h"

/* acc += a * b over 16 int8 lanes: eight products per SMULL fit int16
 * (|a * b| <= 16384), and SADALP adds neighbouring pairs into int32. */
static inline int32x4_t plm_dot_neon(int32x4_t acc, int8x16_t a, int8x16_t b) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

#define PLM_SFX neon
#define PLM_FN_ATTR
#define PLM_DOT(acc, a, b) plm_dot_neon(acc, a, b)
#include "kernels/arm/quants_tmpl.h"
#undef PLM_DOT
#undef PLM_FN_ATTR
#undef PLM_SFX

/* ---- float formats ------------------------------------------------------
 * The reference rounds each product to float and sums in double; so do
 * these, two doubles per lane pair, so that results match it to the last
 * bit or nearly (only the order of the double additions differs).  F32 is
 * found in small models and norms; the double sums keep pocketlm's output
 * on such models the same on every table. */

static inline float64x2_t add_products(float64x2_t acc0, float64x2_t *acc1, float32x4_t p) {
    *acc1 = vaddq_f64(*acc1, vcvt_high_f64_f32(p));
    return vaddq_f64(acc0, vcvt_f64_f32(vget_low_f32(p)));
}

static void vec_dot_f32(int64_t n, float *s, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = add_products(s0, &s1, vmulq_f32(vld1q_f32(w + i), vld1q_f32(a + i)));
        s2 = add_products(s2, &s3, vmulq_f32(vld1q_f32(w + i + 4), vld1q_f32(a + i + 4)));
    }
    double sum = vaddvq_f64(vaddq_f64(vaddq_f64(s0, s1), vaddq_f64(s2, s3)));
    for (; i < n; i++) sum += (double)(w[i] * a[i]);
    *s = (float)sum;
}

static inline __attribute__((always_inline)) float32x4x2_t load8_f16(const plm_fp16_t *p) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
    return (float32x4x2_t){{vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)}};
}

static inline __attribute__((always_inline)) float32x4x2_t load8_bf16(const plm_bf16_t *p) {
    const uint16x8_t b = vld1q_u16(p);
    return (float32x4x2_t){{vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(b), 16)),
                            vreinterpretq_f32_u32(vshll_high_n_u16(b, 16))}};
}

/* Weights i..i+7 and weight i of a row of `type` (F16 or BF16, a constant at
 * every call) as floats: f16 with FCVTL (exact); bf16 is the top half of an
 * f32, widened by shifting 16 bits left. */
PLM_ARM_INL float32x4x2_t load8_half(plm_type type, const char *row, int64_t i) {
    if (type == PLM_TYPE_F16) return load8_f16((const plm_fp16_t *)(const void *)row + i);
    return load8_bf16((const plm_bf16_t *)(const void *)row + i);
}

PLM_ARM_INL float half_to_f32(plm_type type, const char *row, int64_t i) {
    if (type == PLM_TYPE_F16) return plm_arm_h2f(((const plm_fp16_t *)(const void *)row)[i]);
    return plm_bf16_to_fp32(((const plm_bf16_t *)(const void *)row)[i]);
}

/* F16 and BF16: widened to f32, then as F32. */
PLM_ARM_INL void vec_dot_half(plm_type type, int64_t n, float *s, const void *vw, const void *va) {
    const char *w = vw;
    const float *a = va;
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4x2_t wv = load8_half(type, w, i);
        s0 = add_products(s0, &s1, vmulq_f32(wv.val[0], vld1q_f32(a + i)));
        s2 = add_products(s2, &s3, vmulq_f32(wv.val[1], vld1q_f32(a + i + 4)));
    }
    double sum = vaddvq_f64(vaddq_f64(vaddq_f64(s0, s1), vaddq_f64(s2, s3)));
    for (; i < n; i++) sum += (double)(half_to_f32(type, w, i) * a[i]);
    *s = (float)sum;
}

static void vec_dot_f16(int64_t n, float *s, const void *vw, const void *va) {
    vec_dot_half(PLM_TYPE_F16, n, s, vw, va);
}

static void vec_dot_bf16(int64_t n, float *s, const void *vw, const void *va) {
    vec_dot_half(PLM_TYPE_BF16, n, s, vw, va);
}

/* gemm for F16/BF16 weights: a tile of FR rows x FT tokens in which every
 * 8 weights are loaded and widened once for the FT tokens.  Products are
 * summed with FMLA in float for FCHUNK elements per row (64 per lane), and
 * each chunk's sum joins a double total: llama.cpp sums its f16 dots in
 * float, and the x86 tables' float gemm does the same.  Per 8 weights and
 * token: 2 activation loads and 2 FMLA, where vec_dot spends a multiply, two
 * widenings to double and two double adds per 4.  F32 is below: its
 * products must be summed in double as vec_dot does (stories260K's logits
 * move visibly otherwise, its dot products cancel heavily).
 * Rows go in bands as the integer gemms (quants_tmpl.h), so a tile of 4
 * activation rows is reused by a band's rows from L1/L2. */
enum { FR = 2, FT = 4, FCHUNK = 256 };

/* One tile of nr <= FR rows x nt <= FT tokens of an F16/BF16 matrix. */
PLM_ARM_INL void ftile_half(plm_type type, int nr, int nt, int64_t k, const char *w, size_t ws, const char *act,
                            size_t as, float *out, int64_t os) {
    double tot[FR][FT] = {{0}};
    const int64_t k8 = k & ~(int64_t)7;
    for (int64_t i0 = 0; i0 < k8; i0 += FCHUNK) {
        const int64_t i1 = k8 - i0 < FCHUNK ? k8 : i0 + FCHUNK;
        float32x4_t acc[FR][FT];
        for (int r = 0; r < nr; r++)
            for (int t = 0; t < nt; t++) acc[r][t] = vdupq_n_f32(0.0f);
        for (int64_t i = i0; i < i1; i += 8) {
            float32x4x2_t wv[FR];
            for (int r = 0; r < nr; r++) wv[r] = load8_half(type, w + r * ws, i);
            for (int t = 0; t < nt; t++) {
                const float *a = (const float *)(const void *)(act + t * as) + i;
                const float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4);
                for (int r = 0; r < nr; r++)
                    acc[r][t] = vfmaq_f32(vfmaq_f32(acc[r][t], wv[r].val[0], a0), wv[r].val[1], a1);
            }
        }
        for (int r = 0; r < nr; r++)
            for (int t = 0; t < nt; t++)
                tot[r][t] += vaddvq_f64(vaddq_f64(vcvt_f64_f32(vget_low_f32(acc[r][t])), vcvt_high_f64_f32(acc[r][t])));
    }
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nt; t++) {
            const float *a = (const float *)(const void *)(act + t * as);
            for (int64_t i = k8; i < k; i++) tot[r][t] += (double)(half_to_f32(type, w + r * ws, i) * a[i]);
            out[t * os + r] = (float)tot[r][t];
        }
}

/* The plm_gemm_fn of F16 or BF16 (`type`, a constant at every call): full
 * tiles take the constant-size path, so their loops unroll. */
PLM_ARM_INL void gemm_half(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                           size_t as, int nt, float *out, int64_t os) {
    for (int64_t b0 = 0; b0 < nr; b0 += PLM_ARM_GEMM_RB) {
        const int64_t b1 = nr - b0 < PLM_ARM_GEMM_RB ? nr : b0 + PLM_ARM_GEMM_RB;
        for (int t = 0; t < nt; t += FT)
            for (int64_t r = b0; r < b1; r += FR) {
                const int rn = b1 - r < FR ? (int)(b1 - r) : FR, tn = nt - t < FT ? nt - t : FT;
                const char *wr = (const char *)w + (size_t)r * ws, *at = (const char *)act + (size_t)t * as;
                if (rn == FR && tn == FT) ftile_half(type, FR, FT, k, wr, ws, at, as, out + t * os + r, os);
                else ftile_half(type, rn, tn, k, wr, ws, at, as, out + t * os + r, os);
            }
    }
}

static void gemm_f16(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as, int nt,
                     float *out, int64_t os) {
    gemm_half(PLM_TYPE_F16, k, w, ws, nr, act, as, nt, out, os);
}

static void gemm_bf16(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as, int nt,
                      float *out, int64_t os) {
    gemm_half(PLM_TYPE_BF16, k, w, ws, nr, act, as, nt, out, os);
}

/* gemm for F32 weights: vec_dot_f32's arithmetic (float products, double
 * sums in the same order, so the same bits) for up to FT tokens at once,
 * each 8 weights loaded once for all of them: the tile saves the weight
 * traffic, which is what a prefill over F32 weights is short of. */
static inline __attribute__((always_inline)) void ftile_f32(int nt, int64_t k, const float *w, const char *act,
                                                           size_t as, float *out, int64_t os) {
    float64x2_t s[FT][4];
    for (int t = 0; t < nt; t++) s[t][0] = s[t][1] = s[t][2] = s[t][3] = vdupq_n_f64(0.0);
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        const float32x4_t w0 = vld1q_f32(w + i), w1 = vld1q_f32(w + i + 4);
        for (int t = 0; t < nt; t++) {
            const float *a = (const float *)(const void *)(act + t * as) + i;
            s[t][0] = add_products(s[t][0], &s[t][1], vmulq_f32(w0, vld1q_f32(a)));
            s[t][2] = add_products(s[t][2], &s[t][3], vmulq_f32(w1, vld1q_f32(a + 4)));
        }
    }
    for (int t = 0; t < nt; t++) {
        const float *a = (const float *)(const void *)(act + t * as);
        double sum = vaddvq_f64(vaddq_f64(vaddq_f64(s[t][0], s[t][1]), vaddq_f64(s[t][2], s[t][3])));
        for (int64_t j = i; j < k; j++) sum += (double)(w[j] * a[j]);
        out[t * os] = (float)sum;
    }
}

static void gemm_f32(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as, int nt,
                     float *out, int64_t os) {
    for (int64_t b0 = 0; b0 < nr; b0 += PLM_ARM_GEMM_RB) {
        const int64_t b1 = nr - b0 < PLM_ARM_GEMM_RB ? nr : b0 + PLM_ARM_GEMM_RB;
        for (int t = 0; t < nt; t += FT)
            for (int64_t r = b0; r < b1; r++) {
                const float *wr = (const float *)(const void *)((const char *)w + (size_t)r * ws);
                const char *at = (const char *)act + (size_t)t * as;
                if (nt - t >= FT) ftile_f32(FT, k, wr, at, as, out + t * os + r, os);
                else ftile_f32(nt - t, k, wr, at, as, out + t * os + r, os);
            }
    }
}

/* F16 rows (the KV cache): FCVTN rounds to nearest even, keeps subnormals
 * (FPCR.FZ16 is off) and quiets NaNs keeping their top payload bits, which
 * is exactly what plm_fp32_to_fp16 does. */
static void quantize_row_f16(const float *x, void *vy, int64_t n) {
    plm_fp16_t *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(x + i)), vld1q_f32(x + i + 4));
        vst1q_u16(y + i, vreinterpretq_u16_f16(h));
    }
    for (; i < n; i++) y[i] = plm_fp32_to_fp16(x[i]);
}

static void dequantize_row_f16(const void *vx, float *y, int64_t n) {
    const plm_fp16_t *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(x + i));
        vst1q_f32(y + i, vcvt_f32_f16(vget_low_f16(h)));
        vst1q_f32(y + i + 4, vcvt_high_f32_f16(h));
    }
    for (; i < n; i++) y[i] = plm_arm_h2f(x[i]);
}

/* 16 signed bytes times d -> 16 floats (exact, as the reference). */
static inline void scale_bytes16(float *y, int8x16_t q, float d) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_high_s8(q);
    vst1q_f32(y, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), d));
    vst1q_f32(y + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), d));
    vst1q_f32(y + 8, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), d));
    vst1q_f32(y + 12, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(hi)), d));
}

/* Q8_0/Q4_0 rows (the quantized KV cache's value rows) -> floats. */
PLM_ARM_INL void dequantize_32(plm_type type, const void *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, y += 32) {
        int8x16_t e0, e1;
        float m;
        const float d = plm_arm_unpack32(type, x, b, &e0, &e1, &m);
        scale_bytes16(y, e0, d);
        scale_bytes16(y + 16, e1, d);
    }
}

static void dequantize_row_q8_0(const void *x, float *y, int64_t n) { dequantize_32(PLM_TYPE_Q8_0, x, y, n); }
static void dequantize_row_q4_0(const void *x, float *y, int64_t n) { dequantize_32(PLM_TYPE_Q4_0, x, y, n); }

/* ---- activation quantizers ----------------------------------------------
 * Byte-identical to quant/quantize.c: same scale expressions, products
 * without fused multiply-add, and the same rounding (Q8_0/Q8_1 round half
 * away from zero like roundf: FCVTAS; Q8_K rounds half to even like
 * nearest_int: FCVTNS).  A block holding NaN or infinity goes to the
 * reference, whose handling of them is not worth copying. */

static inline float absmax32(const float *x, float32x4_t v[8]) {
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int k = 0; k < 8; k++) {
        v[k] = vld1q_f32(x + 4 * k);
        m = vmaxq_f32(m, vabsq_f32(v[k]));  /* FMAX: a NaN propagates */
    }
    return vmaxvq_f32(m);
}

/* 32 floats times id, rounded half away from zero, to int8 (in range by
 * construction; saturating narrows anyway). */
static inline int8x16x2_t round32(const float32x4_t v[8], float id) {
    int16x8_t h[4];
    for (int k = 0; k < 4; k++)
        h[k] = vcombine_s16(vqmovn_s32(vcvtaq_s32_f32(vmulq_n_f32(v[2 * k], id))),
                            vqmovn_s32(vcvtaq_s32_f32(vmulq_n_f32(v[2 * k + 1], id))));
    int8x16x2_t q;
    q.val[0] = vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1]));
    q.val[1] = vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3]));
    return q;
}

/* Block x of 32 as the reference rounds it for Q8_0 and Q8_1: the scale
 * d = amax / 127 to *d and (as f16) *dh, the quants to qs and *q; false,
 * with nothing written, for a block holding NaN or infinity. */
static inline bool quantize_block_q8(const float *x, plm_fp16_t *dh, int8_t *qs, float *d, int8x16x2_t *q) {
    float32x4_t v[8];
    const float amax = absmax32(x, v);
    if (!(amax <= FLT_MAX)) return false;
    *d = amax / 127;
    const float id = *d ? 1.0f / *d : 0.0f;
    *dh = plm_fp32_to_fp16(*d);
    *q = round32(v, id);
    vst1q_s8(qs, q->val[0]);
    vst1q_s8(qs + 16, q->val[1]);
    return true;
}

static void quantize_row_q8_0(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float d;
        int8x16x2_t q;
        if (!quantize_block_q8(x, &y[i].d, y[i].qs, &d, &q)) plm_quantize_row_q8_0(x, &y[i], QK8_0);
    }
}

static void quantize_row_q8_1(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        float d;
        int8x16x2_t q;
        if (!quantize_block_q8(x, &y[i].d, y[i].qs, &d, &q)) {
            plm_quantize_row_q8_1(x, &y[i], QK8_1);
            continue;
        }
        const int sum = vaddlvq_s8(q.val[0]) + vaddlvq_s8(q.val[1]);
        y[i].s = plm_fp32_to_fp16((float)sum * d);
    }
}

static void quantize_row_q8_K(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int k = 0; k < QK_K; k += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + k)));
        const float amax = vmaxvq_f32(m);
        if (!(amax <= FLT_MAX)) {
            plm_quantize_row_q8_K(x, &y[i], QK_K);
            continue;
        }
        memset(&y[i], 0, sizeof y[i]);
        if (amax == 0.0f) continue;
        /* the reference keeps the sign of the first element of largest
         * magnitude: find it four lanes at a time */
        float max = amax;
        for (int k = 0; k < QK_K; k += 4) {
            const float32x4_t v = vld1q_f32(x + k);
            if (vmaxvq_u32(vceqq_f32(vabsq_f32(v), vdupq_n_f32(amax)))) {
                int l = 0;
                while (fabsf(x[k + l]) != amax) l++;
                max = x[k + l];
                break;
            }
        }
        const float iscale = -127.0f / max;
        for (int k = 0; k < QK_K; k += 16) {
            int16x8_t h[2];
            for (int c = 0; c < 2; c++) {
                const float *p = x + k + 8 * c;
                h[c] = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(p), iscale))),
                                    vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(p + 4), iscale))));
            }
            const int8x16_t q = vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1]));
            vst1q_s8(y[i].qs + k, q);
            y[i].bsums[k / 16] = (int16_t)vaddlvq_s8(q);
        }
        y[i].d = 1 / iscale;
    }
}

void plm_arm_fill_neon(plm_kernels *t) {
    t->vec_dot[PLM_TYPE_F32] = vec_dot_f32;
    t->vec_dot[PLM_TYPE_F16] = vec_dot_f16;
    t->vec_dot[PLM_TYPE_BF16] = vec_dot_bf16;
    t->attn_f16 = plm_arm_attn_f16;
    t->attn_f16_pass = plm_arm_attn_f16_pass;
    t->attn_quant = plm_arm_attn_quant;
    t->attn_quant_pass = plm_arm_attn_quant_pass;
    t->swiglu = plm_arm_swiglu;
    t->gemm[PLM_TYPE_F32] = gemm_f32;
    t->gemm[PLM_TYPE_F16] = gemm_f16;
    t->gemm[PLM_TYPE_BF16] = gemm_bf16;
    t->quantize_row[PLM_TYPE_F16] = quantize_row_f16;
    t->dequantize_row[PLM_TYPE_F16] = dequantize_row_f16;
    t->dequantize_row[PLM_TYPE_Q8_0] = dequantize_row_q8_0;
    t->dequantize_row[PLM_TYPE_Q4_0] = dequantize_row_q4_0;
    t->quantize_row[PLM_TYPE_Q8_0] = quantize_row_q8_0;
    t->quantize_row[PLM_TYPE_Q8_1] = quantize_row_q8_1;
    t->quantize_row[PLM_TYPE_Q8_K] = quantize_row_q8_K;
    fill_quants_neon(t);
}

#else
typedef int plm_arm_neon_unused; /* ISO C: no empty translation unit */
#endif
