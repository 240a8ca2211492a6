/*
 * Integer dot products of the quantized formats against their Q8 activation
 * rows, written once and compiled twice: neon.c includes this file with a
 * widening-multiply DOT, dotprod.c with SDOT.  (No include guard on purpose.)
 *
 * The includer defines:
 *   PLM_SFX        suffix of the function names (neon, dotprod)
 *   PLM_FN_ATTR    attributes for every function (a target attribute or empty)
 *   PLM_DOT(acc, a, b)  acc (int32x4) += the 16 products a[i] * b[i] of two
 *                  int8x16 vectors, spread over the four lanes in any way:
 *                  only the lane total is ever used.
 *
 * As in the reference, every block (or sub-block) is summed exactly in
 * integers and only block totals are scaled in float.  The K-quants keep the
 * reference's float expression per super-block, so they give its results to
 * the bit; the 32-element formats accumulate scaled block sums four lanes
 * wide, which only changes the float summation order.
 *
 * Layouts are those of quant/blocks.h; the comments say which bits go where.
 */

#include "kernels/arm/unpack.h"

#define PLM_CAT_(a, b) a##b
#define PLM_CAT(a, b) PLM_CAT_(a, b)
#define FN(name) PLM_CAT(name##_, PLM_SFX)

/* ---- 32-element formats ------------------------------------------------- */

/* Integer dot of 32 weights (w0: elements 0..15, w1: 16..31) with q8[32]. */
PLM_FN_ATTR static inline int32x4_t FN(dot32)(int8x16_t w0, int8x16_t w1, const int8_t *q8) {
    int32x4_t acc = PLM_DOT(vdupq_n_s32(0), w0, vld1q_s8(q8));
    return PLM_DOT(acc, w1, vld1q_s8(q8 + 16));
}

/* IQ4_NL levels of 32 nibbles (IQ4_XS sub-blocks) with q8[32]. */
PLM_FN_ATTR static inline int32x4_t FN(block_iq4_nl)(const uint8_t *qs, int8x16_t levels, const int8_t *q8) {
    uint8x16_t lo, hi;
    plm_arm_nibbles(qs, &lo, &hi);
    return FN(dot32)(vqtbl1q_s8(levels, lo), vqtbl1q_s8(levels, hi), q8);
}

/* acc + the scaled integer dot of block b of a 32-element weight row with
 * its activation block (Q8_1 for Q4_1/Q5_1, else Q8_0); type is a constant
 * at every call.  The min term of Q4_1/Q5_1 is the caller's. */
PLM_ARM_INL PLM_FN_ATTR float32x4_t FN(add_block32)(float32x4_t acc, plm_type type, const void *w, const void *a,
                                                    int64_t b) {
    int8x16_t e0, e1;
    float m;
    const plm_fp16_t *da, *sa;
    const float d = plm_arm_unpack32(type, w, b, &e0, &e1, &m);
    const int8_t *q8 = plm_arm_act32(type, a, b, &da, &sa);
    return vmlaq_n_f32(acc, vcvtq_f32_s32(FN(dot32)(e0, e1, q8)), d * plm_arm_h2f(*da));
}

/* The scaled block sums of a 32-element row: two blocks per iteration into
 * two float accumulators, so the convert and multiply-add of one block
 * overlap the integer work of the next. */
PLM_ARM_INL PLM_FN_ATTR float FN(dot_row32)(plm_type type, int64_t n, const void *w, const void *a) {
    const int64_t nb = n / 32;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        acc0 = FN(add_block32)(acc0, type, w, a, i);
        acc1 = FN(add_block32)(acc1, type, w, a, i + 1);
    }
    if (i < nb) acc0 = FN(add_block32)(acc0, type, w, a, i);
    return vaddvq_f32(vaddq_f32(acc0, acc1));
}

PLM_FN_ATTR static void FN(vec_dot_q4_0)(int64_t n, float *s, const void *vw, const void *va) {
    *s = FN(dot_row32)(PLM_TYPE_Q4_0, n, vw, va);
}

PLM_FN_ATTR static void FN(vec_dot_q8_0)(int64_t n, float *s, const void *vw, const void *va) {
    *s = FN(dot_row32)(PLM_TYPE_Q8_0, n, vw, va);
}

PLM_FN_ATTR static void FN(vec_dot_q5_0)(int64_t n, float *s, const void *vw, const void *va) {
    *s = FN(dot_row32)(PLM_TYPE_Q5_0, n, vw, va);
}

PLM_FN_ATTR static void FN(vec_dot_iq4_nl)(int64_t n, float *s, const void *vw, const void *va) {
    *s = FN(dot_row32)(PLM_TYPE_IQ4_NL, n, vw, va);
}

/* The KV cache types' vec_dot row by row, inlined: a quantized cache's key
 * scores (attn_quant.c) are rows of a head's few blocks, where a call per
 * key cost about as much as its dot (x86, blocks32.h: gemv_q8_0). */
PLM_FN_ATTR static void FN(gemv_q8_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, float *out) {
    for (int64_t r = 0; r < nr; r++) out[r] = FN(dot_row32)(PLM_TYPE_Q8_0, k, (const char *)w + r * ws, act);
}

PLM_FN_ATTR static void FN(gemv_q4_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, float *out) {
    for (int64_t r = 0; r < nr; r++) out[r] = FN(dot_row32)(PLM_TYPE_Q4_0, k, (const char *)w + r * ws, act);
}

/* Q4_1/Q5_1 add the min term m * (d_a * sum(q_a)), which Q8_1 carries as s. */
PLM_FN_ATTR static void FN(vec_dot_q4_1)(int64_t n, float *s, const void *vw, const void *va) {
    const block_q4_1 *x = vw;
    const block_q8_1 *y = va;
    float mins = 0.0f;
    for (int64_t i = 0; i < n / QK4_1; i++) mins += plm_arm_h2f(x[i].m) * plm_arm_h2f(y[i].s);
    *s = FN(dot_row32)(PLM_TYPE_Q4_1, n, x, y) + mins;
}

PLM_FN_ATTR static void FN(vec_dot_q5_1)(int64_t n, float *s, const void *vw, const void *va) {
    const block_q5_1 *x = vw;
    const block_q8_1 *y = va;
    float mins = 0.0f;
    for (int64_t i = 0; i < n / QK5_1; i++) mins += plm_arm_h2f(x[i].m) * plm_arm_h2f(y[i].s);
    *s = FN(dot_row32)(PLM_TYPE_Q5_1, n, x, y) + mins;
}

/* ---- K-quants (256-element super-blocks, Q8_K activations) --------------
 * Each sub-block's int32x4 of products is multiplied by its integer scale
 * and accumulated in one int32x4 (MLA by scalar); one horizontal add per
 * super-block gives the reference's isum exactly. */

/* sum over 16 sub-blocks of 16 of bsums[j] * m[j], m given as 16 bytes */
PLM_FN_ATTR static inline int FN(bsums_dot16)(const int16_t *bsums, uint8x16_t m) {
    const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m)));
    const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_high_u8(m));
    return vaddvq_s32(plm_arm_mins_dot16(m0, m1, bsums));
}

/* Q2_K/Q3_K: the integer dot of a super-block's codes with q8, each
 * sub-block j of 16 times scale[j].  Per 128 elements (half), bit-plane p
 * (bits 2p, 2p+1) of qs[l] is element 32p + l; Q3_K's codes are that minus
 * 4 where the element's hmask bit (bit 4*half + p of hmask[l]) is clear. */
PLM_ARM_INL PLM_FN_ATTR int32x4_t FN(isum_planes)(plm_type type, const uint8_t *qs, const uint8_t *hmask,
                                                  const int8_t *scale, const int8_t *q8) {
    uint8x16_t h0 = vdupq_n_u8(0), h1 = vdupq_n_u8(0);
    if (type == PLM_TYPE_Q3_K) {
        h0 = vld1q_u8(hmask);
        h1 = vld1q_u8(hmask + 16);
    }
    int32x4_t isum = vdupq_n_s32(0);
    /* fully unrolled: left to itself gcc keeps NEON's Q3_K loop rolled */
    _Pragma("GCC unroll 2") for (int half = 0; half < 2; half++) {
        uint8x16_t q0 = vld1q_u8(qs + 32 * half), q1 = vld1q_u8(qs + 32 * half + 16);
        _Pragma("GCC unroll 4") for (int p = 0; p < 4; p++, q8 += 32) {
            const int j = 8 * half + 2 * p;
            int8x16_t v0 = vreinterpretq_s8_u8(vandq_u8(q0, vdupq_n_u8(3)));
            int8x16_t v1 = vreinterpretq_s8_u8(vandq_u8(q1, vdupq_n_u8(3)));
            if (type == PLM_TYPE_Q3_K) {
                v0 = plm_arm_q3_K_codes(q0, h0);
                v1 = plm_arm_q3_K_codes(q1, h1);
                h0 = vshrq_n_u8(h0, 1);
                h1 = vshrq_n_u8(h1, 1);
            }
            isum = vmlaq_n_s32(isum, PLM_DOT(vdupq_n_s32(0), v0, vld1q_s8(q8)), scale[j]);
            isum = vmlaq_n_s32(isum, PLM_DOT(vdupq_n_s32(0), v1, vld1q_s8(q8 + 16)), scale[j + 1]);
            q0 = vshrq_n_u8(q0, 2);
            q1 = vshrq_n_u8(q1, 2);
        }
    }
    return isum;
}

/* Q2_K: sub-block j of 16 has scale scales[j] & 15 and min scales[j] >> 4. */
PLM_FN_ATTR static void FN(vec_dot_q2_K)(int64_t n, float *s, const void *vw, const void *va) {
    const block_q2_K *x = vw;
    const block_q8_K *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8x16_t sc = vld1q_u8(x[i].scales);
        const int summ = FN(bsums_dot16)(y[i].bsums, vshrq_n_u8(sc, 4));
        int8_t scale[16]; /* 0..15 */
        vst1q_s8(scale, vreinterpretq_s8_u8(vandq_u8(sc, vdupq_n_u8(0x0f))));
        const int32x4_t isum = FN(isum_planes)(PLM_TYPE_Q2_K, x[i].qs, NULL, scale, y[i].qs);
        const float dall = y[i].d * plm_arm_h2f(x[i].d);
        const float dmin = y[i].d * plm_arm_h2f(x[i].dmin);
        sum += dall * vaddvq_s32(isum) - dmin * summ;
    }
    *s = sum;
}

/* Q3_K: 16 signed 6-bit scales biased by 32. */
PLM_FN_ATTR static void FN(vec_dot_q3_K)(int64_t n, float *s, const void *vw, const void *va) {
    const block_q3_K *x = vw;
    const block_q8_K *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t scale[16];
        vst1q_s8(scale, plm_arm_q3_K_scales(x[i].scales));
        const int32x4_t isum = FN(isum_planes)(PLM_TYPE_Q3_K, x[i].qs, x[i].hmask, scale, y[i].qs);
        sum += plm_arm_h2f(x[i].d) * y[i].d * vaddvq_s32(isum);
    }
    *s = sum;
}

/* Q4_K/Q5_K (plm_arm_q45_K_pair; qh NULL for Q4_K).
 * d * isum - dmin * sum(bsums * mins), as the reference. */
PLM_FN_ATTR static inline float FN(dot_q45_K)(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                                              float d, float dmin, const block_q8_K *y) {
    uint8_t sm[16];
    plm_arm_k4_scales(scales, sm);
    /* mins pair with the sums of each 32 activations (two bsums) */
    const int16x8_t b0 = vld1q_s16(y->bsums), b1 = vld1q_s16(y->bsums + 8);
    const int16x8_t bsum32 = vpaddq_s16(b0, b1);
    const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(sm + 8)));
    int32x4_t macc = vmull_s16(vget_low_s16(bsum32), vget_low_s16(mins));
    macc = vmlal_high_s16(macc, bsum32, mins);
    const int summ = vaddvq_s32(macc);

    uint8x16_t h0 = vdupq_n_u8(0), h1 = vdupq_n_u8(0);
    if (qh) {
        h0 = vld1q_u8(qh);
        h1 = vld1q_u8(qh + 16);
    }
    int32x4_t isum = vdupq_n_s32(0);
    const int8_t *q8 = y->qs;
    for (int j = 0; j < 4; j++, qs += 32, q8 += 64) {
        uint8x16_t c[4];
        plm_arm_q45_K_pair(qs, qh != NULL, &h0, &h1, c);
        isum = vmlaq_n_s32(isum, FN(dot32)(vreinterpretq_s8_u8(c[0]), vreinterpretq_s8_u8(c[1]), q8), sm[2 * j]);
        isum = vmlaq_n_s32(isum, FN(dot32)(vreinterpretq_s8_u8(c[2]), vreinterpretq_s8_u8(c[3]), q8 + 32),
                           sm[2 * j + 1]);
    }
    return d * y->d * vaddvq_s32(isum) - dmin * y->d * summ;
}

PLM_FN_ATTR static void FN(vec_dot_q4_K)(int64_t n, float *s, const void *vw, const void *va) {
    const block_q4_K *x = vw;
    const block_q8_K *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++)
        sum += FN(dot_q45_K)(x[i].scales, x[i].qs, NULL, plm_arm_h2f(x[i].d), plm_arm_h2f(x[i].dmin), &y[i]);
    *s = sum;
}

PLM_FN_ATTR static void FN(vec_dot_q5_K)(int64_t n, float *s, const void *vw, const void *va) {
    const block_q5_K *x = vw;
    const block_q8_K *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++)
        sum += FN(dot_q45_K)(x[i].scales, x[i].qs, x[i].qh, plm_arm_h2f(x[i].d), plm_arm_h2f(x[i].dmin),
                             &y[i]);
    *s = sum;
}

/* Q6_K (plm_arm_q6_K_half): sub-blocks of 16 with signed 8-bit scales. */
PLM_FN_ATTR static void FN(vec_dot_q6_K)(int64_t n, float *s, const void *vw, const void *va) {
    const block_q6_K *x = vw;
    const block_q8_K *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32x4_t isum = vdupq_n_s32(0);
        for (int half = 0; half < 2; half++) {
            const int8_t *sc = x[i].scales + 8 * half;
            const int8_t *q8 = y[i].qs + 128 * half;
            int8x16_t q[8];
            plm_arm_q6_K_half(x[i].ql + 64 * half, x[i].qh + 32 * half, q);
            for (int k = 0; k < 8; k++)
                isum = vmlaq_n_s32(isum, PLM_DOT(vdupq_n_s32(0), q[k], vld1q_s8(q8 + 16 * k)), sc[k]);
        }
        sum += plm_arm_h2f(x[i].d) * y[i].d * vaddvq_s32(isum);
    }
    *s = sum;
}

/* IQ4_XS: 8 sub-blocks of 32 nibbles through the IQ4_NL levels, 6-bit scales
 * biased by 32 (see plm_iq4_xs_scale). */
PLM_FN_ATTR static void FN(vec_dot_iq4_xs)(int64_t n, float *s, const void *vw, const void *va) {
    const block_iq4_xs *x = vw;
    const block_q8_K *y = va;
    const int8x16_t levels = vld1q_s8(kvalues_iq4nl);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32x4_t isum = vdupq_n_s32(0);
        for (int ib = 0; ib < QK_K / 32; ib++)
            isum = vmlaq_n_s32(isum, FN(block_iq4_nl)(x[i].qs + 16 * ib, levels, y[i].qs + 32 * ib),
                               plm_iq4_xs_scale(&x[i], ib) - 32);
        sum += plm_arm_h2f(x[i].d) * y[i].d * vaddvq_s32(isum);
    }
    *s = sum;
}

/* ---- prefill gemm: decode once, dot with four tokens ---------------------
 * A tile is one weight row against four tokens, over all of k.  Each block
 * (K-quants: super-block) is decoded once (unpack.h) and dotted with the
 * four tokens' activations.  Each token's integer sum is spread over the
 * four lanes of its own int32x4; three pairwise adds (ADDP) gather the four
 * tokens' totals into one vector, so the float work of a block (convert,
 * scale, accumulate) is one instruction each for four tokens, and so is the
 * product of weight and activation scales.  Lane t of the float accumulator
 * is token t's sum, taken in block order.
 *
 * Instructions per 32 weights and token: 2 SDOT (the NEON table's widening
 * dot: 2 x (SMULL, SMULL2, 2 SADALP) = 8) and 2 activation loads; the decode
 * (3 to 10 instructions per 32 weights) is paid once for four tokens.
 *   32-element formats, per block and 4 tokens: 3 ADDP, SCVTF, FMUL, FMLA
 *     and the gather of the 4 activation scales (4 lane loads, FCVTL);
 *     Q4_1/Q5_1 one more FMLA with the Q8_1 sums.
 *   K-quants, per 16 weights and 4 tokens: one load of decoded weights, 4
 *     SDOT; per sub-block (16 or 32 weights): 3 ADDP and one MLA by its
 *     integer scale (none for Q2_K, whose scales are folded into the decoded
 *     codes); the mins and the float work once per 256 weights, in vec_dot's
 *     float expression (plm_arm_k_accum), so K-quant results equal vec_dot's
 *     to the bit.
 * The vec_dot loop pays the decode, the horizontal add and the float work
 * for every (row, token).
 *
 * Rows go in bands of PLM_ARM_GEMM_RB: every 4-token tile of activation rows
 * (4 x k bytes, L1) passes over the band's rows (L2) before the next band.
 * A last tile of 2 or 3 tokens repeats its last token in the spare lanes
 * (computed, not stored); a last single token takes the vec_dot. */

PLM_ARM_INL PLM_FN_ATTR float32x4_t FN(tile32)(plm_type type, int64_t nb, const void *w, const char *const a[4]) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        int8x16_t e0, e1;
        float m;
        const float d = plm_arm_unpack32(type, w, b, &e0, &e1, &m);
        const plm_fp16_t *da[4], *sa[4];
        int32x4_t s[4];
        for (int t = 0; t < 4; t++) s[t] = FN(dot32)(e0, e1, plm_arm_act32(type, a[t], b, &da[t], &sa[t]));
        acc = vfmaq_f32(acc, vcvtq_f32_s32(plm_arm_reduce4(s)), vmulq_n_f32(plm_arm_h2f4(da), d));
        if (plm_arm_has_min32(type)) acc = vfmaq_n_f32(acc, plm_arm_h2f4(sa), m);
    }
    return acc;
}

PLM_ARM_INL PLM_FN_ATTR float32x4_t FN(tilek)(plm_type type, int64_t nb, const void *w, const char *const a[4]) {
    const int sub = plm_arm_k_sub(type);
    float32x4_t acc = vdupq_n_f32(0.0f);
    plm_arm_kdec u;
    for (int64_t b = 0; b < nb; b++) {
        plm_arm_unpack_k(type, w, b, &u);
        const block_q8_K *y[4];
        for (int t = 0; t < 4; t++) y[t] = (const block_q8_K *)(const void *)a[t] + b;
        int32x4_t isum = vdupq_n_s32(0);
        for (int j = 0; j < QK_K / sub; j++) {
            int32x4_t s[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
            for (int e = j * sub; e < (j + 1) * sub; e += 16) {
                const int8x16_t q = vld1q_s8(u.q + e);
                for (int t = 0; t < 4; t++) s[t] = PLM_DOT(s[t], q, vld1q_s8(y[t]->qs + e));
            }
            isum = sub == QK_K ? plm_arm_reduce4(s) : vmlaq_n_s32(isum, plm_arm_reduce4(s), u.sc[j]);
        }
        const float32x4_t da = {y[0]->d, y[1]->d, y[2]->d, y[3]->d};
        int32x4_t summ = vdupq_n_s32(0);
        if (plm_arm_k_has_min(type)) {
            int32x4_t m[4];
            for (int t = 0; t < 4; t++) m[t] = plm_arm_mins_dot(u.mn, y[t]->bsums);
            summ = plm_arm_reduce4(m);
        }
        acc = plm_arm_k_accum(acc, isum, vmulq_n_f32(da, u.d), plm_arm_k_has_min(type), summ,
                              vmulq_n_f32(da, u.dmin));
    }
    return acc;
}

/* The plm_gemm_fn of `type` (a constant at every call); dot1 is its vec_dot. */
PLM_ARM_INL PLM_FN_ATTR void FN(gemm)(plm_type type, plm_vec_dot_fn dot1, int64_t k, const void *w, size_t ws,
                                      int64_t nr, const void *act, size_t as, int nt, float *out, int64_t os) {
    const int64_t nb = plm_arm_is_k(type) ? k / QK_K : k / 32;
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
            for (int64_t r = r0; r < r1; r++) {
                const void *wr = wc + (size_t)r * ws;
                float v[4];
                vst1q_f32(v, plm_arm_is_k(type) ? FN(tilek)(type, nb, wr, a) : FN(tile32)(type, nb, wr, a));
                for (int i = 0; i < n; i++) out[(int64_t)(t0 + i) * os + r] = v[i];
            }
        }
    }
}

PLM_FN_ATTR static void FN(gemm_q4_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    FN(gemm)(PLM_TYPE_Q4_0, FN(vec_dot_q4_0), k, w, ws, nr, act, as, nt, out, os);
}

PLM_FN_ATTR static void FN(gemm_q4_1)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    FN(gemm)(PLM_TYPE_Q4_1, FN(vec_dot_q4_1), k, w, ws, nr, act, as, nt, out, os);
}

PLM_FN_ATTR static void FN(gemm_q5_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    FN(gemm)(PLM_TYPE_Q5_0, FN(vec_dot_q5_0), k, w, ws, nr, act, as, nt, out, os);
}

PLM_FN_ATTR static void FN(gemm_q5_1)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    FN(gemm)(PLM_TYPE_Q5_1, FN(vec_dot_q5_1), k, w, ws, nr, act, as, nt, out, os);
}

PLM_FN_ATTR static void FN(gemm_q8_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    FN(gemm)(PLM_TYPE_Q8_0, FN(vec_dot_q8_0), k, w, ws, nr, act, as, nt, out, os);
}

PLM_FN_ATTR static void FN(gemm_iq4_nl)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    FN(gemm)(PLM_TYPE_IQ4_NL, FN(vec_dot_iq4_nl), k, w, ws, nr, act, as, nt, out, os);
}

PLM_FN_ATTR static void FN(gemm_q2_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    FN(gemm)(PLM_TYPE_Q2_K, FN(vec_dot_q2_K), k, w, ws, nr, act, as, nt, out, os);
}

PLM_FN_ATTR static void FN(gemm_q3_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    FN(gemm)(PLM_TYPE_Q3_K, FN(vec_dot_q3_K), k, w, ws, nr, act, as, nt, out, os);
}

PLM_FN_ATTR static void FN(gemm_q4_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    FN(gemm)(PLM_TYPE_Q4_K, FN(vec_dot_q4_K), k, w, ws, nr, act, as, nt, out, os);
}

PLM_FN_ATTR static void FN(gemm_q5_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    FN(gemm)(PLM_TYPE_Q5_K, FN(vec_dot_q5_K), k, w, ws, nr, act, as, nt, out, os);
}

PLM_FN_ATTR static void FN(gemm_q6_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    FN(gemm)(PLM_TYPE_Q6_K, FN(vec_dot_q6_K), k, w, ws, nr, act, as, nt, out, os);
}

PLM_FN_ATTR static void FN(gemm_iq4_xs)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    FN(gemm)(PLM_TYPE_IQ4_XS, FN(vec_dot_iq4_xs), k, w, ws, nr, act, as, nt, out, os);
}

#include "kernels/arm/codebooks_tmpl.h"

/* The integer-dot and gemm entries of a table. */
static void FN(fill_quants)(plm_kernels *t) {
    FN(fill_codebooks)(t);
    t->vec_dot[PLM_TYPE_Q4_0] = FN(vec_dot_q4_0);
    t->vec_dot[PLM_TYPE_Q4_1] = FN(vec_dot_q4_1);
    t->vec_dot[PLM_TYPE_Q5_0] = FN(vec_dot_q5_0);
    t->vec_dot[PLM_TYPE_Q5_1] = FN(vec_dot_q5_1);
    t->vec_dot[PLM_TYPE_Q8_0] = FN(vec_dot_q8_0);
    t->vec_dot[PLM_TYPE_IQ4_NL] = FN(vec_dot_iq4_nl);
    t->gemv[PLM_TYPE_Q8_0] = FN(gemv_q8_0);
    t->gemv[PLM_TYPE_Q4_0] = FN(gemv_q4_0);
    t->vec_dot[PLM_TYPE_Q2_K] = FN(vec_dot_q2_K);
    t->vec_dot[PLM_TYPE_Q3_K] = FN(vec_dot_q3_K);
    t->vec_dot[PLM_TYPE_Q4_K] = FN(vec_dot_q4_K);
    t->vec_dot[PLM_TYPE_Q5_K] = FN(vec_dot_q5_K);
    t->vec_dot[PLM_TYPE_Q6_K] = FN(vec_dot_q6_K);
    t->vec_dot[PLM_TYPE_IQ4_XS] = FN(vec_dot_iq4_xs);
    t->gemm[PLM_TYPE_Q4_0] = FN(gemm_q4_0);
    t->gemm[PLM_TYPE_Q4_1] = FN(gemm_q4_1);
    t->gemm[PLM_TYPE_Q5_0] = FN(gemm_q5_0);
    t->gemm[PLM_TYPE_Q5_1] = FN(gemm_q5_1);
    t->gemm[PLM_TYPE_Q8_0] = FN(gemm_q8_0);
    t->gemm[PLM_TYPE_IQ4_NL] = FN(gemm_iq4_nl);
    t->gemm[PLM_TYPE_Q2_K] = FN(gemm_q2_K);
    t->gemm[PLM_TYPE_Q3_K] = FN(gemm_q3_K);
    t->gemm[PLM_TYPE_Q4_K] = FN(gemm_q4_K);
    t->gemm[PLM_TYPE_Q5_K] = FN(gemm_q5_K);
    t->gemm[PLM_TYPE_Q6_K] = FN(gemm_q6_K);
    t->gemm[PLM_TYPE_IQ4_XS] = FN(gemm_iq4_xs);
}

#undef FN
#undef PLM_CAT
#undef PLM_CAT_
