/*
 * The i8mm table: the dotprod table plus a tiled prefill gemm built on SMMLA
 * for every quantized weight format (and, from repacked_i8mm.c, the SMMLA
 * gemm of the row-interleaved layout).
 *
 * SMMLA multiplies a 2x8 int8 matrix by the transpose of another 2x8 one
 * and adds the 2x2 int32 result to an accumulator: with the first operand
 * holding 8 quants of weight rows r and r+1 and the second 8 quants of
 * activation rows t and t+1, one instruction yields the four dot products
 * of a 2-row x 2-token tile, lanes [r.t, r.t+1, r+1.t, r+1.t+1]: 32
 * multiply-adds, twice SDOT's 16, and the lanes are already the four
 * separate sums, so no horizontal adds.
 *
 * A tile is 2 rows x 4 tokens (two token pairs) over all of k.  Each weight
 * block is decoded once (unpack.h) for both rows, interleaved in 8-byte
 * halves (ZIP1/ZIP2 on 64-bit lanes) and used by both token pairs; each
 * token pair's activations are interleaved the same way.  Per 32 weights of
 * the 2x4 tile: 8 SMMLA, 8 activation loads, 8 + 4 ZIPs, two decodes.
 *   32-element formats: a block's four SMMLA sums are scaled by the four
 *     products [d_r d_t, d_r d_t+1, d_r+1 d_t, d_r+1 d_t+1] and accumulated
 *     in float (Q4_1/Q5_1 add [m_r s_t, ...] of the Q8_1 sums).
 *   K-quants: each sub-block's sums are multiplied by the integer scale
 *     vector [sc_r, sc_r, sc_r+1, sc_r+1] (one MLA per sub-block and token
 *     pair; none for Q2_K, pre-scaled) into the super-block's exact integer
 *     sum; the mins are dotted with the bsums per (row, token) and the float
 *     work is done once per 256 weights, in vec_dot's expression, so K-quant
 *     results equal vec_dot's to the bit.
 * Rows go in bands as in quants_tmpl.h; an odd last row is paired with
 * itself and stored once; a last tile of 2 or 3 tokens repeats its last
 * token; a last single token takes the (dotprod) vec_dot.
 */
#include "kernels/arm/arm.h"

#if defined(PLM_ARM)

#include "kernels/arm/unpack.h"

#define I8MM_INL PLM_ARM_INL PLM_TARGET_I8MM

/* vec_dot of the table below this one, for single trailing tokens; written
 * once while the tables are built. */
static plm_vec_dot_fn tail_dot[PLM_TYPE_COUNT];

/* The 64-bit halves: [a.lo, b.lo] and [a.hi, b.hi]. */
static inline int8x16_t zip_lo(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
static inline int8x16_t zip_hi(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

/* p += the 2x2 dot products of 16 elements: two weight rows, already
 * interleaved as wl (elements 0..7 of both) and wh (8..15), by tokens x, z. */
I8MM_INL int32x4_t mm16(int32x4_t p, int8x16_t wl, int8x16_t wh, int8x16_t x, int8x16_t z) {
    p = vmmlaq_s32(p, wl, zip_lo(x, z));
    return vmmlaq_s32(p, wh, zip_hi(x, z));
}

/* [a, a, b, b] */
static inline float32x4_t pair_f32(float a, float b) { return vcombine_f32(vdup_n_f32(a), vdup_n_f32(b)); }

/* Token pair tp's lanes of v, repeated: [v[2tp], v[2tp+1], v[2tp], v[2tp+1]]. */
static inline float32x4_t tok_pair(float32x4_t v, int tp) {
    const float32x2_t h = tp ? vget_high_f32(v) : vget_low_f32(v);
    return vcombine_f32(h, h);
}

/* Rows w0, w1 x tokens a[0..3] of a 32-element format; acc[tp] gets the
 * lanes [r0.t, r0.t+1, r1.t, r1.t+1] for t = 2 tp. */
I8MM_INL void tile32(plm_type type, int64_t nb, const void *w0, const void *w1, const char *const a[4],
                     float32x4_t acc[2]) {
    acc[0] = acc[1] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        int8x16_t r0a, r0b, r1a, r1b;
        float m0, m1;
        const float d0 = plm_arm_unpack32(type, w0, b, &r0a, &r0b, &m0);
        const float d1 = plm_arm_unpack32(type, w1, b, &r1a, &r1b, &m1);
        const int8x16_t wl0 = zip_lo(r0a, r1a), wh0 = zip_hi(r0a, r1a);
        const int8x16_t wl1 = zip_lo(r0b, r1b), wh1 = zip_hi(r0b, r1b);
        const plm_fp16_t *dp[4], *sp[4];
        const int8_t *q[4];
        for (int t = 0; t < 4; t++) q[t] = plm_arm_act32(type, a[t], b, &dp[t], &sp[t]);
        const float32x4_t da = plm_arm_h2f4(dp), dw = pair_f32(d0, d1);
        for (int tp = 0; tp < 2; tp++) {
            const int8_t *x = q[2 * tp], *z = q[2 * tp + 1];
            int32x4_t p = mm16(vdupq_n_s32(0), wl0, wh0, vld1q_s8(x), vld1q_s8(z));
            p = mm16(p, wl1, wh1, vld1q_s8(x + 16), vld1q_s8(z + 16));
            acc[tp] = vfmaq_f32(acc[tp], vcvtq_f32_s32(p), vmulq_f32(dw, tok_pair(da, tp)));
            if (plm_arm_has_min32(type))
                acc[tp] = vfmaq_f32(acc[tp], pair_f32(m0, m1), tok_pair(plm_arm_h2f4(sp), tp));
        }
    }
}

/* The same for a K format (Q8_K activations). */
I8MM_INL void tilek(plm_type type, int64_t nb, const void *w0, const void *w1, const char *const a[4],
                    float32x4_t acc[2]) {
    const int sub = plm_arm_k_sub(type);
    plm_arm_kdec u0, u1;
    acc[0] = acc[1] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        plm_arm_unpack_k(type, w0, b, &u0);
        plm_arm_unpack_k(type, w1, b, &u1);
        const block_q8_K *y[4];
        for (int t = 0; t < 4; t++) y[t] = (const block_q8_K *)(const void *)a[t] + b;
        int32x4_t isum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
        for (int j = 0; j < QK_K / sub; j++) {
            int32x4_t p[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
            for (int e = j * sub; e < (j + 1) * sub; e += 16) {
                const int8x16_t wa = vld1q_s8(u0.q + e), wb = vld1q_s8(u1.q + e);
                const int8x16_t wl = zip_lo(wa, wb), wh = zip_hi(wa, wb);
                for (int tp = 0; tp < 2; tp++)
                    p[tp] = mm16(p[tp], wl, wh, vld1q_s8(y[2 * tp]->qs + e), vld1q_s8(y[2 * tp + 1]->qs + e));
            }
            if (sub == QK_K) {
                isum[0] = p[0];
                isum[1] = p[1];
            } else {
                const int32x4_t sc = vcombine_s32(vdup_n_s32(u0.sc[j]), vdup_n_s32(u1.sc[j]));
                isum[0] = vmlaq_s32(isum[0], p[0], sc);
                isum[1] = vmlaq_s32(isum[1], p[1], sc);
            }
        }
        const float32x4_t da = {y[0]->d, y[1]->d, y[2]->d, y[3]->d};
        const float32x4_t dw = pair_f32(u0.d, u1.d);
        int32x4_t mins[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
        if (plm_arm_k_has_min(type)) {
            /* per row, lanes = tokens; then regrouped as the SMMLA lanes */
            int32x4_t m0[4], m1[4];
            for (int t = 0; t < 4; t++) {
                m0[t] = plm_arm_mins_dot(u0.mn, y[t]->bsums);
                m1[t] = plm_arm_mins_dot(u1.mn, y[t]->bsums);
            }
            const int32x4_t s0 = plm_arm_reduce4(m0), s1 = plm_arm_reduce4(m1);
            mins[0] = vcombine_s32(vget_low_s32(s0), vget_low_s32(s1));
            mins[1] = vcombine_s32(vget_high_s32(s0), vget_high_s32(s1));
        }
        for (int tp = 0; tp < 2; tp++)
            acc[tp] = plm_arm_k_accum(acc[tp], isum[tp], vmulq_f32(dw, tok_pair(da, tp)), plm_arm_k_has_min(type),
                                      mins[tp], vmulq_f32(pair_f32(u0.dmin, u1.dmin), tok_pair(da, tp)));
    }
}

I8MM_INL void gemm_run(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                       size_t as, int nt, float *out, int64_t os) {
    const int64_t nb = plm_arm_is_k(type) ? k / QK_K : k / 32;
    const plm_vec_dot_fn dot1 = tail_dot[type];
    const char *wc = w, *ac = act;
    for (int64_t r0 = 0; r0 < nr; r0 += PLM_ARM_GEMM_RB) {
        const int64_t r1 = nr - r0 < PLM_ARM_GEMM_RB ? nr : r0 + PLM_ARM_GEMM_RB;
        for (int t0 = 0; t0 < nt; t0 += PLM_ARM_GEMM_T) {
            const int n = nt - t0 < PLM_ARM_GEMM_T ? nt - t0 : PLM_ARM_GEMM_T;
            if (n == 1) {
                for (int64_t r = r0; r < r1; r++)
                    dot1(k, &out[(int64_t)t0 * os + r], wc + (size_t)r * ws, ac + (size_t)t0 * as);
                continue;
            }
            const char *a[4];
            for (int i = 0; i < 4; i++) a[i] = ac + (size_t)(t0 + (i < n ? i : n - 1)) * as;
            for (int64_t r = r0; r < r1; r += 2) {
                const int two = r + 1 < r1;
                const char *w0 = wc + (size_t)r * ws, *w1 = two ? w0 + ws : w0;
                float32x4_t acc[2];
                if (plm_arm_is_k(type)) tilek(type, nb, w0, w1, a, acc);
                else tile32(type, nb, w0, w1, a, acc);
                float v[8]; /* token pair tp: v[4 tp + (0, 1)] row r, v[4 tp + (2, 3)] row r + 1 */
                vst1q_f32(v, acc[0]);
                vst1q_f32(v + 4, acc[1]);
                for (int i = 0; i < n; i++) {
                    float *o = out + (int64_t)(t0 + i) * os + r;
                    o[0] = v[4 * (i / 2) + i % 2];
                    if (two) o[1] = v[4 * (i / 2) + 2 + i % 2];
                }
            }
        }
    }
}

PLM_TARGET_I8MM static void gemm_q4_0(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                      int nt, float *out, int64_t os) {
    gemm_run(PLM_TYPE_Q4_0, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_q4_1(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                      int nt, float *out, int64_t os) {
    gemm_run(PLM_TYPE_Q4_1, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_q5_0(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                      int nt, float *out, int64_t os) {
    gemm_run(PLM_TYPE_Q5_0, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_q5_1(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                      int nt, float *out, int64_t os) {
    gemm_run(PLM_TYPE_Q5_1, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_q8_0(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                      int nt, float *out, int64_t os) {
    gemm_run(PLM_TYPE_Q8_0, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_iq4_nl(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                        int nt, float *out, int64_t os) {
    gemm_run(PLM_TYPE_IQ4_NL, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_q2_K(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                      int nt, float *out, int64_t os) {
    gemm_run(PLM_TYPE_Q2_K, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_q3_K(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                      int nt, float *out, int64_t os) {
    gemm_run(PLM_TYPE_Q3_K, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_q4_K(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                      int nt, float *out, int64_t os) {
    gemm_run(PLM_TYPE_Q4_K, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_q5_K(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                      int nt, float *out, int64_t os) {
    gemm_run(PLM_TYPE_Q5_K, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_q6_K(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                      int nt, float *out, int64_t os) {
    gemm_run(PLM_TYPE_Q6_K, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_iq4_xs(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                        int nt, float *out, int64_t os) {
    gemm_run(PLM_TYPE_IQ4_XS, k, w, ws, nr, act, as, nt, out, os);
}

void plm_arm_fill_i8mm(plm_kernels *t) {
    for (int i = 0; i < PLM_TYPE_COUNT; i++) tail_dot[i] = t->vec_dot[i];
    t->gemm[PLM_TYPE_Q4_0] = gemm_q4_0;
    t->gemm[PLM_TYPE_Q4_1] = gemm_q4_1;
    t->gemm[PLM_TYPE_Q5_0] = gemm_q5_0;
    t->gemm[PLM_TYPE_Q5_1] = gemm_q5_1;
    t->gemm[PLM_TYPE_Q8_0] = gemm_q8_0;
    t->gemm[PLM_TYPE_IQ4_NL] = gemm_iq4_nl;
    t->gemm[PLM_TYPE_Q2_K] = gemm_q2_K;
    t->gemm[PLM_TYPE_Q3_K] = gemm_q3_K;
    t->gemm[PLM_TYPE_Q4_K] = gemm_q4_K;
    t->gemm[PLM_TYPE_Q5_K] = gemm_q5_K;
    t->gemm[PLM_TYPE_Q6_K] = gemm_q6_K;
    t->gemm[PLM_TYPE_IQ4_XS] = gemm_iq4_xs;
    plm_arm_fill_repacked_i8mm(t);
}

#else
typedef int plm_arm_i8mm_unused; /* ISO C: no empty translation unit */
#endif
