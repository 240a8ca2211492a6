/*
 * Attention over the f16 KV cache and SwiGLU for the NEON table (and so for
 * dotprod and i8mm, which copy it): the arithmetic of plm_attn_f16 and
 * plm_swiglu (ops.h), laid out as the x86 kernel lays it out.
 *
 * A block of keys (and of values) is converted to f32 on the stack once and
 * shared by every query head of the GQA group; scores and values run eight
 * independent FMA chains, enough for two FMA pipes of latency 4; exp is a
 * polynomial four lanes at a time.  Scores keep the reference's order where
 * it matters: whole steps of 32 in SIMD (each key's eight lanes reduced as
 * the x86 kernel reduces them), the rest one by one in float.
 *
 * Over a quantized cache (plm_arm_attn_quant) the same block functions run
 * in the shared loop of attn_quant.c.
 */
#include "kernels/arm/arm.h"

#if defined(PLM_ARM)

#include <math.h>

#include "kernels/attn_quant.h"
#include "kernels/ops.h"
#include "quant/fp16.h"

#define INL static inline __attribute__((always_inline))

/* Floats of one staged block of keys (and one of values): 16 KiB each. */
enum { ATTN_STAGE = 4096 };

/* e^x four lanes at a time: x = n ln2 + r, |r| <= ln2/2, e^r by its Taylor
 * series to r^7, times 2^n in the exponent bits; 0 below -87.3 (so padding
 * lanes of -inf weigh nothing), +inf above 88.37. */
INL float32x4_t exp4(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(-87.33654f), hi = vdupq_n_f32(88.37626f);
    const uint32x4_t keep = vcgeq_f32(x, lo), over = vcgtq_f32(x, hi);
    x = vminq_f32(vmaxq_f32(x, lo), hi);
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504f));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.0f / 5040);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 720), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    const float32x4_t y = vreinterpretq_f32_u32(
        vandq_u32(vreinterpretq_u32_f32(vmulq_f32(p, vreinterpretq_f32_s32(e))), keep));
    return vbslq_f32(over, vdupq_n_f32(INFINITY), y);
}

/* Eight f16 of the query as two f32 vectors (elements 0-3, 4-7). */
INL float32x4x2_t load_q8(const uint16_t *q) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(q));
    return (float32x4x2_t){{vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)}};
}

/* One key's eight lanes (lo = lanes 0-3, hi = 4-7) summed pairwise as the
 * x86 kernel's two hadds and final add do. */
INL float sum8(float32x4_t lo, float32x4_t hi) {
    const float32x4_t p = vpaddq_f32(lo, hi);  /* l0+l1, l2+l3, h0+h1, h2+h3 */
    const float32x4_t q = vpaddq_f32(p, p);    /* (l01)+(l23), (h01)+(h23) */
    return vgetq_lane_f32(q, 0) + vgetq_lane_f32(q, 1);
}

INL float dot_tail(const uint16_t *q, const float *k, int i, int hd) {
    float t = 0.0f;
    for (; i < hd; i++) t += plm_arm_h2f(q[i]) * k[i];
    return t;
}

/* scores[j] = scale * q . k_j over rows of hd floats, four keys at a time
 * (two chains a key), then one. */
static void block_scores(float *scores, const uint16_t *q, const float *kb, int n_keys, int hd, float scale) {
    const int h32 = hd & ~31;
    int j = 0;
    for (; j + 4 <= n_keys; j += 4) {
        const float *k0 = kb + (size_t)j * hd;
        float32x4_t a[4][2];
        for (int u = 0; u < 4; u++) a[u][0] = a[u][1] = vdupq_n_f32(0.0f);
        for (int i = 0; i < h32; i += 8) {
            const float32x4x2_t qv = load_q8(q + i);
            for (int u = 0; u < 4; u++) {
                a[u][0] = vfmaq_f32(a[u][0], qv.val[0], vld1q_f32(k0 + u * hd + i));
                a[u][1] = vfmaq_f32(a[u][1], qv.val[1], vld1q_f32(k0 + u * hd + i + 4));
            }
        }
        for (int u = 0; u < 4; u++)
            scores[j + u] = (sum8(a[u][0], a[u][1]) + dot_tail(q, k0 + u * hd, h32, hd)) * scale;
    }
    for (; j < n_keys; j++) {
        const float *kj = kb + (size_t)j * hd;
        float32x4_t lo = vdupq_n_f32(0.0f), hi = lo;
        for (int i = 0; i < h32; i += 8) {
            const float32x4x2_t qv = load_q8(q + i);
            lo = vfmaq_f32(lo, qv.val[0], vld1q_f32(kj + i));
            hi = vfmaq_f32(hi, qv.val[1], vld1q_f32(kj + i + 4));
        }
        scores[j] = (sum8(lo, hi) + dot_tail(q, kj, h32, hd)) * scale;
    }
}

/* o += sum_j w[j] v_j over rows of hd floats: 32 values of o in registers
 * across the keys, then 4, then one. */
static void block_values(float *o, const float *w, const float *vb, int n_keys, int hd) {
    int i0 = 0;
    for (; i0 + 32 <= hd; i0 += 32) {
        float32x4_t acc[8];
        for (int u = 0; u < 8; u++) acc[u] = vld1q_f32(o + i0 + 4 * u);
        for (int j = 0; j < n_keys; j++) {
            const float *vj = vb + (size_t)j * hd + i0;
            for (int u = 0; u < 8; u++) acc[u] = vfmaq_n_f32(acc[u], vld1q_f32(vj + 4 * u), w[j]);
        }
        for (int u = 0; u < 8; u++) vst1q_f32(o + i0 + 4 * u, acc[u]);
    }
    for (; i0 + 4 <= hd; i0 += 4) {
        float32x4_t acc = vld1q_f32(o + i0);
        for (int j = 0; j < n_keys; j++) acc = vfmaq_n_f32(acc, vld1q_f32(vb + (size_t)j * hd + i0), w[j]);
        vst1q_f32(o + i0, acc);
    }
    for (int i = i0; i < hd; i++)
        for (int j = 0; j < n_keys; j++) o[i] += w[j] * vb[(size_t)j * hd + i];
}

/* plm_softmax_run_block with NEON max and exp; s has room for n rounded up
 * to 4, the lanes past n padded with -inf. */
static void softmax_run_block(plm_softmax_run *r, float *s, int n, float *o, int hd) {
    const int n4 = (n + 3) & ~3;
    for (int j = n; j < n4; j++) s[j] = -INFINITY;
    float32x4_t vmax = vdupq_n_f32(r->max);
    for (int j = 0; j < n4; j += 4) vmax = vmaxq_f32(vmax, vld1q_f32(s + j));
    const float max = vmaxvq_f32(vmax);
    plm_softmax_run_raise(r, max, o, hd);
    float32x4_t sum = vdupq_n_f32(0.0f);
    for (int j = 0; j < n4; j += 4) {
        const float32x4_t e = exp4(vsubq_f32(vld1q_f32(s + j), vdupq_n_f32(max)));
        vst1q_f32(s + j, e);
        sum = vaddq_f32(sum, e);
    }
    r->sum += vaddvq_f32(sum);
}

/* The exact mode's weights: f16(exp(s - max) * inv_sum), four at a time
 * (FCVTN rounds to nearest even, as plm_fp32_to_fp16 does). */
static void block_weights(float *s, int n, float max, float inv_sum) {
    const int n4 = (n + 3) & ~3;
    for (int j = n; j < n4; j++) s[j] = -INFINITY;
    for (int j = 0; j < n4; j += 4) {
        const float32x4_t w = vmulq_n_f32(exp4(vsubq_f32(vld1q_f32(s + j), vdupq_n_f32(max))), inv_sum);
        vst1q_f32(s + j, vcvt_f32_f16(vcvt_f16_f32(w)));
    }
}

/* n rows of hd f16 values (stride bytes apart) -> n rows of hd floats. */
static void stage_rows(float *dst, const char *src, size_t stride, int n, int hd) {
    for (int j = 0; j < n; j++, dst += hd) {
        const uint16_t *r = (const uint16_t *)(const void *)(src + (size_t)j * stride);
        int i = 0;
        for (; i + 4 <= hd; i += 4) vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(r + i))));
        for (; i < hd; i++) dst[i] = plm_arm_h2f(r[i]);
    }
}

static void stage_keys(float *dst, const char *src, size_t stride, int n, int hd) {
    stage_rows(dst, src, stride, n, hd);
}

static void stage_values(float *dst, const char *src, size_t stride, int n, int hd) {
    stage_rows(dst, src, stride, n, hd);
}

/* Head by head over the staged rows (v, vs: unused). */
static void heads_values(float *o, const float *w, int n_q, const float *vst, const char *v, size_t vs, int n, int hd) {
    (void)v, (void)vs;
    for (int i = 0; i < n_q; i++) block_values(o + (size_t)i * hd, w + (size_t)i * PLM_ATTN_BLOCK, vst, n, hd);
}

#define ATTN_TGT
#include "kernels/attn_pass.h"
#undef ATTN_TGT

void plm_arm_attn_f16(float *o, const uint16_t *q, int n_q, const void *k, const void *v, size_t ks, size_t vs,
                      int n_keys, int hd, float scale, bool flash) {
    plm_attn_f16_passes(attn_pass, o, q, n_q, k, v, ks, vs, n_keys, hd, scale, flash);
}

void plm_arm_attn_f16_pass(float *o, const uint16_t *q, int n_q, const char *k, const char *v, size_t ks, size_t vs,
                           int n_keys, int hd, float scale, plm_softmax_run *run, int pass, float *kept) {
    attn_pass(o, q, n_q, k, v, ks, vs, n_keys, hd, scale, run, pass, kept);
}

static const plm_attn_blocks arm_attn_blocks = {softmax_run_block, block_weights, block_values, NULL};

void plm_arm_attn_quant(const plm_kernels *kt, float *o, const float *q, int n_q, plm_type type_k, const void *k,
                        size_t ks, plm_type type_v, const void *v, size_t vs, int n_keys, int hd, float scale,
                        bool flash) {
    plm_attn_quant_run(&arm_attn_blocks, kt, o, q, n_q, type_k, k, ks, type_v, v, vs, n_keys, hd, scale, flash);
}

void plm_arm_attn_quant_pass(const plm_kernels *kt, float *o, const void *q, int n_q, plm_type type_k, const char *k,
                             size_t ks, plm_type type_v, const char *v, size_t vs, int n_keys, int hd, float scale,
                             plm_softmax_run *run, int pass, float *kept) {
    plm_attn_quant_pass(&arm_attn_blocks, kt, o, q, n_q, type_k, k, ks, type_v, v, vs, n_keys, hd, scale, run, pass,
                        kept);
}

/* g = silu(g) * u four at a time: g / (1 + e^-g) * u. */
void plm_arm_swiglu(float *g, const float *u, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t x = vld1q_f32(g + i);
        const float32x4_t e = exp4(vnegq_f32(x));
        vst1q_f32(g + i, vmulq_f32(vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), e)), vld1q_f32(u + i)));
    }
    plm_swiglu(g + i, u + i, n - i);
}

#endif /* PLM_ARM */
