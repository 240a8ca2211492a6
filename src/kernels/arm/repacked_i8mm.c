/*
 * SMMLA (i8mm) kernels for row-interleaved weights (quant/repack.h), for
 * batches of two or more tokens: Q4_0, Q5_0, Q8_0, IQ4_NL, Q4_K, Q5_K, Q6_K
 * and IQ4_XS.  One token (decode, and the odd last token of a batch) stays on
 * the dotprod table's by-element SDOT kernels (repacked.c): SMMLA's second
 * operand holds two tokens, so with one it would do half its work for
 * nothing.
 *
 * SMMLA multiplies a 2x8 int8 matrix by the transpose of another: with rows
 * r, r' of the weights in the first operand and tokens t, t' in the second,
 * it adds [r.t, r.t', r'.t, r'.t'] (8 elements each) to four int32 lanes, 32
 * multiply-adds where a by-element SDOT does 16.  USMMLA is the same with
 * unsigned weights, which takes the layout's unsigned codes (Q8_0's w + 128,
 * Q4_0's w + 8, Q5_0's w + 16, Q6_K's w + 32, Q4_K's and Q5_K's codes) as
 * they are; the offset o comes back as -o * sum(a), itself one SMMLA of a
 * constant -o matrix by the same token operand, whose lanes are already in
 * the accumulator's order.
 *
 * The layout keeps 4 elements of a row together (a 16-byte load of run g,
 * quarter m is rows 4m..4m+3, elements 4g..4g+3), and SMMLA wants 8: ZIP1
 * and ZIP2 on 32-bit lanes of groups 2h and 2h+1 give rows 4m, 4m+1 and
 * rows 4m+2, 4m+3 with elements 8h..8h+7 each, one ZIP per 16 weight bytes,
 * used by every token pair of the tile.  A token pair's 32 activations are
 * interleaved in 8-byte halves (ZIP on 64-bit lanes) once per block and
 * serve all 16 rows.
 *
 * A tile is 16 rows x 4 tokens (two pairs); its float accumulators keep the
 * SMMLA lane order and are transposed (UZP) once at the end.
 *   Q4_0, Q5_0, Q8_0, IQ4_NL: per block and quarter, a pair's integer sums times
 *     [d_r d_t, d_r d_t', d_r' d_t, d_r' d_t'] into the accumulator.
 *   super-blocks: a sub-block's sums times the integer scales [s_r, s_r,
 *     s_r', s_r'] (MLA) into the super-block's integer total (Q6_K: per 16
 *     elements, each sum started at -32 * the tokens' bsums); Q4_K/Q5_K's
 *     mins are dotted with the token's sub-block sums per row (lanes = rows,
 *     as repacked.c does) and zipped into the same lane order; the float
 *     work is once per 256.  IQ4_NL/IQ4_XS look their levels up (TBL) and
 *     use the signed SMMLA.
 * The codes and scale planes are read as repacked.c reads them, by the same
 * functions (repacked_unpack.h).
 */
#include "kernels/arm/arm.h"

#if defined(PLM_ARM)

#include "kernels/arm/repacked_unpack.h"

enum { RPM_R = PLM_REPACK_ROWS, RPM_TP = 2 }; /* rows per group, token pairs per tile */

#define RPM_INL PLM_ARM_INL PLM_TARGET_I8MM

/* The dotprod table's kernels, for single tokens; written once while the
 * tables are built. */
static plm_gemm_fn one_token[PLM_TYPE_COUNT];

/* Rows 4m, 4m+1 (lo) or 4m+2, 4m+3 (hi) with 8 elements each, from runs
 * g0 = 2h and g1 = 2h + 1 of quarter m. */
RPM_INL uint8x16_t rpm_rows_lo(uint8x16_t g0, uint8x16_t g1) {
    return vreinterpretq_u8_u32(vzip1q_u32(vreinterpretq_u32_u8(g0), vreinterpretq_u32_u8(g1)));
}
RPM_INL uint8x16_t rpm_rows_hi(uint8x16_t g0, uint8x16_t g1) {
    return vreinterpretq_u8_u32(vzip2q_u32(vreinterpretq_u32_u8(g0), vreinterpretq_u32_u8(g1)));
}

/* Tokens t, t' with 8 elements each: [x.lo, z.lo] or [x.hi, z.hi]. */
RPM_INL int8x16_t rpm_toks_lo(int8x16_t x, int8x16_t z) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(z)));
}
RPM_INL int8x16_t rpm_toks_hi(int8x16_t x, int8x16_t z) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(z)));
}

/* A token pair's 32 elements as four SMMLA operands (elements 8h..8h+7). */
RPM_INL void rpm_toks(const int8_t *x, const int8_t *z, int8x16_t B[4]) {
    const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16), z0 = vld1q_s8(z), z1 = vld1q_s8(z + 16);
    B[0] = rpm_toks_lo(x0, z0);
    B[1] = rpm_toks_hi(x0, z0);
    B[2] = rpm_toks_lo(x1, z1);
    B[3] = rpm_toks_hi(x1, z1);
}

/* -o * (each token's sum over the 32 elements), in the SMMLA lane order. */
RPM_INL int32x4_t rpm_offset(int o, const int8x16_t B[4]) {
    int32x4_t s = vdupq_n_s32(0);
    if (o == 0) return s;
    const int8x16_t neg = vdupq_n_s8((int8_t)-o);
    _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) s = vmmlaq_s32(s, neg, B[h]);
    return s;
}

/* IQ4_NL and IQ4_XS: codes index signed levels (a TBL per operand). */
RPM_INL bool rpm_signed(plm_type type) { return type == PLM_TYPE_IQ4_NL || type == PLM_TYPE_IQ4_XS; }

/* p += the 2 rows x 2 tokens of weights A (unsigned codes, or IQ4_NL's
 * signed levels) and tokens B. */
RPM_INL int32x4_t rpm_mm(plm_type type, int32x4_t p, uint8x16_t A, int8x16_t B) {
    if (rpm_signed(type)) return vmmlaq_s32(p, vreinterpretq_s8_u8(A), B);
    return vusmmlaq_s32(p, A, B);
}

/* Quarter m's weights as SMMLA operands: A[h][0] rows 4m, 4m+1 and A[h][1]
 * rows 4m+2, 4m+3, elements 8h..8h+7, from its runs G[0..7]. */
RPM_INL void rpm_quarter(plm_type type, const uint8x16_t G[8], uint8x16_t A[4][2]) {
    _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) {
        A[h][0] = rpm_rows_lo(G[2 * h], G[2 * h + 1]);
        A[h][1] = rpm_rows_hi(G[2 * h], G[2 * h + 1]);
        if (rpm_signed(type)) {
            const int8x16_t lv = vld1q_s8(kvalues_iq4nl);
            A[h][0] = vreinterpretq_u8_s8(vqtbl1q_s8(lv, A[h][0]));
            A[h][1] = vreinterpretq_u8_s8(vqtbl1q_s8(lv, A[h][1]));
        }
    }
}

/* [v0, v0, v1, v1] (lo) and [v2, v2, v3, v3] (hi): rows in SMMLA lanes. */
RPM_INL float32x4_t rpm_pair_lo(float32x4_t v) { return vzip1q_f32(v, v); }
RPM_INL float32x4_t rpm_pair_hi(float32x4_t v) { return vzip2q_f32(v, v); }

/* The 16 rows x 2 TP tokens of acc (SMMLA lane order) to out. */
RPM_INL void rpm_store(int TP, float32x4_t acc[4][2][RPM_TP], float *out, int64_t os) {
    _Pragma("GCC unroll 2") for (int tp = 0; tp < TP; tp++)
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) {
            vst1q_f32(out + 2 * tp * os + 4 * m, vuzp1q_f32(acc[m][0][tp], acc[m][1][tp]));
            vst1q_f32(out + (2 * tp + 1) * os + 4 * m, vuzp2q_f32(acc[m][0][tp], acc[m][1][tp]));
        }
}

RPM_INL void rpm_zero(float32x4_t acc[4][2][RPM_TP]) {
    _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
        _Pragma("GCC unroll 2") for (int rp = 0; rp < 2; rp++)
            _Pragma("GCC unroll 2") for (int tp = 0; tp < RPM_TP; tp++) acc[m][rp][tp] = vdupq_n_f32(0.0f);
}

/* 2 TP tokens x 16 rows of one group of a 32-element format, all blocks. */
RPM_INL void rpm_tile32(plm_type type, int TP, const uint8_t *grp, int64_t nb, const char *act, size_t as, float *out,
                        int64_t os) {
    const size_t sb = plm_arm_rp_block32(type);
    const int o = plm_arm_rp_offset32(type);
    float32x4_t acc[4][2][RPM_TP];
    rpm_zero(acc);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = grp + (size_t)b * sb, *codes = blk + RPM_R * sizeof(plm_fp16_t);
        int8x16_t B[RPM_TP][4];
        int32x4_t init[RPM_TP];
        float32x4_t da[RPM_TP]; /* [d_t, d_t', d_t, d_t'] */
        _Pragma("GCC unroll 2") for (int tp = 0; tp < TP; tp++) {
            const block_q8_0 *x = (const block_q8_0 *)(const void *)(act + (size_t)(2 * tp) * as) + b;
            const block_q8_0 *z = (const block_q8_0 *)(const void *)(act + (size_t)(2 * tp + 1) * as) + b;
            rpm_toks(x->qs, z->qs, B[tp]);
            init[tp] = rpm_offset(o, B[tp]);
            const float dx = plm_arm_h2f(x->d), dz = plm_arm_h2f(z->d);
            da[tp] = (float32x4_t){dx, dz, dx, dz};
        }
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) {
            const float32x4_t dw = plm_arm_rp_f16x4(blk, m);
            const float32x4_t dr[2] = {rpm_pair_lo(dw), rpm_pair_hi(dw)};
            uint8x16_t G[8], A[4][2];
            _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) G[g] = plm_arm_rp_codes32(type, codes, g, m);
            rpm_quarter(type, G, A);
            _Pragma("GCC unroll 2") for (int rp = 0; rp < 2; rp++)
                _Pragma("GCC unroll 2") for (int tp = 0; tp < TP; tp++) {
                    int32x4_t p = init[tp];
                    _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) p = rpm_mm(type, p, A[h][rp], B[tp][h]);
                    acc[m][rp][tp] = vfmaq_f32(acc[m][rp][tp], vcvtq_f32_s32(p), vmulq_f32(dr[rp], da[tp]));
                }
        }
    }
    rpm_store(TP, acc, out, os);
}

/* ---- super-block formats: Q4_K, Q5_K, Q6_K, IQ4_XS ------------------------ */

/* [a0, b0, a1, b1] (lo) and [a2, b2, a3, b3] (hi): rows-as-lanes of two
 * tokens in SMMLA lane order. */
RPM_INL int32x4_t rpm_toklanes_lo(int32x4_t a, int32x4_t b) { return vzip1q_s32(a, b); }
RPM_INL int32x4_t rpm_toklanes_hi(int32x4_t a, int32x4_t b) { return vzip2q_s32(a, b); }

/* [v, v', v, v'] for int16 values of tokens t, t' times f. */
RPM_INL int32x4_t rpm_tok_i16(int16_t v, int16_t v2, int f) {
    const int32x2_t h = {f * v, f * v2};
    return vcombine_s32(h, h);
}

/* 2 TP tokens x 16 rows of one group of a super-block format, all
 * super-blocks.  Q6_K has a scale per 16 elements: operands h = 0, 1 and
 * h = 2, 3 go to separate sums, each started at -32 * its bsum. */
RPM_INL void rpm_tile_k(plm_type type, int TP, const uint8_t *grp, int64_t nb, const char *act, size_t as, float *out,
                        int64_t os) {
    const plm_repack_k_layout L = plm_repack_k(type);
    const size_t sb = RPM_R * plm_row_size(type, QK_K);
    const bool q6 = type == PLM_TYPE_Q6_K;
    float32x4_t acc[4][2][RPM_TP];
    rpm_zero(acc);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = grp + (size_t)b * sb;
        int8_t sc[8][16], mn[8][16];
        if (plm_arm_rp_mins(type)) plm_arm_rp_scales_k4(blk + L.scales, sc, mn);
        else if (type == PLM_TYPE_IQ4_XS) plm_arm_rp_scales_xs(blk + L.scales, sc);
        const int8_t *q6sc = (const int8_t *)(blk + L.scales); /* Q6_K: 16 planes of int8 scales */
        const block_q8_K *y[2 * RPM_TP];
        _Pragma("GCC unroll 4") for (int t = 0; t < 2 * TP; t++) y[t] = (const block_q8_K *)(const void *)(act + (size_t)t * as) + b;
        float32x4_t da[RPM_TP];
        _Pragma("GCC unroll 2") for (int tp = 0; tp < TP; tp++) {
            const float dx = y[2 * tp]->d, dz = y[2 * tp + 1]->d;
            da[tp] = (float32x4_t){dx, dz, dx, dz};
        }
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) {
            int32x4_t isum[2][RPM_TP];
            _Pragma("GCC unroll 2") for (int rp = 0; rp < 2; rp++)
                _Pragma("GCC unroll 2") for (int tp = 0; tp < RPM_TP; tp++) isum[rp][tp] = vdupq_n_s32(0);
            /* left rolled: unrolled, gcc 12 spills (6072 instructions a
             * super-block against 3743) */
            for (int s = 0; s < 8; s++) {
                uint8x16_t G[8], A[4][2];
                _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) G[g] = plm_arm_rp_codes_k(type, blk, s, g, m);
                rpm_quarter(type, G, A);
                /* the rows' integer scales in SMMLA lanes; Q6_K's second half's in scB */
                const int32x4_t s4 = plm_arm_rp_i8x4((q6 ? q6sc + 32 * s : sc[s]) + 4 * m);
                const int32x4_t s4b = q6 ? plm_arm_rp_i8x4(q6sc + 32 * s + 16 + 4 * m) : s4;
                const int32x4_t scA[2] = {vzip1q_s32(s4, s4), vzip2q_s32(s4, s4)};
                const int32x4_t scB[2] = {vzip1q_s32(s4b, s4b), vzip2q_s32(s4b, s4b)};
                _Pragma("GCC unroll 2") for (int tp = 0; tp < TP; tp++) {
                    const block_q8_K *x = y[2 * tp], *z = y[2 * tp + 1];
                    int8x16_t B[4];
                    rpm_toks(x->qs + 32 * s, z->qs + 32 * s, B);
                    const int32x4_t oA = q6 ? rpm_tok_i16(x->bsums[2 * s], z->bsums[2 * s], -32) : vdupq_n_s32(0);
                    const int32x4_t oB = q6 ? rpm_tok_i16(x->bsums[2 * s + 1], z->bsums[2 * s + 1], -32) : vdupq_n_s32(0);
                    _Pragma("GCC unroll 2") for (int rp = 0; rp < 2; rp++) {
                        int32x4_t p = rpm_mm(type, oA, A[0][rp], B[0]);
                        p = rpm_mm(type, p, A[1][rp], B[1]);
                        if (q6) {
                            isum[rp][tp] = vmlaq_s32(isum[rp][tp], p, scA[rp]);
                            p = oB;
                        }
                        p = rpm_mm(type, p, A[2][rp], B[2]);
                        p = rpm_mm(type, p, A[3][rp], B[3]);
                        isum[rp][tp] = vmlaq_s32(isum[rp][tp], p, scB[rp]);
                    }
                }
            }
            const float32x4_t dw = plm_arm_rp_f16x4(blk, m);
            const float32x4_t dr[2] = {rpm_pair_lo(dw), rpm_pair_hi(dw)};
            _Pragma("GCC unroll 2") for (int tp = 0; tp < TP; tp++)
                _Pragma("GCC unroll 2") for (int rp = 0; rp < 2; rp++)
                    acc[m][rp][tp] = vfmaq_f32(acc[m][rp][tp], vcvtq_f32_s32(isum[rp][tp]), vmulq_f32(dr[rp], da[tp]));
            if (!plm_arm_rp_mins(type)) continue;
            /* the mins of rows 4m..4m+3 against each token's sub-block sums */
            int32x4_t imin[2 * RPM_TP];
            _Pragma("GCC unroll 4") for (int t = 0; t < 2 * TP; t++) imin[t] = vdupq_n_s32(0);
            _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
                const int32x4_t m4 = plm_arm_rp_i8x4(mn[s] + 4 * m);
                _Pragma("GCC unroll 4") for (int t = 0; t < 2 * TP; t++)
                    imin[t] = vmlaq_n_s32(imin[t], m4, y[t]->bsums[2 * s] + y[t]->bsums[2 * s + 1]);
            }
            const float32x4_t dm = plm_arm_rp_f16x4(blk + L.dmin, m);
            const float32x4_t mr[2] = {rpm_pair_lo(dm), rpm_pair_hi(dm)};
            _Pragma("GCC unroll 2") for (int tp = 0; tp < TP; tp++) {
                const int32x4_t mins[2] = {rpm_toklanes_lo(imin[2 * tp], imin[2 * tp + 1]),
                                           rpm_toklanes_hi(imin[2 * tp], imin[2 * tp + 1])};
                _Pragma("GCC unroll 2") for (int rp = 0; rp < 2; rp++)
                    acc[m][rp][tp] = vfmsq_f32(acc[m][rp][tp], vcvtq_f32_s32(mins[rp]), vmulq_f32(mr[rp], da[tp]));
            }
        }
    }
    rpm_store(TP, acc, out, os);
}

/* Token pairs in tiles of two, then one pair, then a last single token on
 * the dotprod kernel. */
RPM_INL void rpm_gemm(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                      int nt, float *out, int64_t os) {
    const bool super = plm_type_info_get(type)->block_size == QK_K;
    const int64_t nb = k / plm_type_info_get(type)->block_size;
    int t0 = 0;
    while (nt - t0 >= 2) {
        const int TP = nt - t0 >= 2 * RPM_TP ? RPM_TP : 1;
        const char *at = (const char *)act + (size_t)t0 * as;
        for (int64_t r = 0; r < nr; r += RPM_R) {
            const uint8_t *grp = (const uint8_t *)w + (size_t)r * ws;
            float *o = out + (int64_t)t0 * os + r;
            if (super) {
                if (TP == RPM_TP) rpm_tile_k(type, RPM_TP, grp, nb, at, as, o, os);
                else rpm_tile_k(type, 1, grp, nb, at, as, o, os);
            } else if (TP == RPM_TP) rpm_tile32(type, RPM_TP, grp, nb, at, as, o, os);
            else rpm_tile32(type, 1, grp, nb, at, as, o, os);
        }
        t0 += 2 * TP;
    }
    if (t0 < nt) one_token[type](k, w, ws, nr, (const char *)act + (size_t)t0 * as, as, 1, out + (int64_t)t0 * os, os);
}

PLM_TARGET_I8MM static void gemm_repacked_q4_0_i8mm(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                    size_t as, int nt, float *out, int64_t os) {
    rpm_gemm(PLM_TYPE_Q4_0, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_repacked_q5_0_i8mm(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                    size_t as, int nt, float *out, int64_t os) {
    rpm_gemm(PLM_TYPE_Q5_0, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_repacked_q8_0_i8mm(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                    size_t as, int nt, float *out, int64_t os) {
    rpm_gemm(PLM_TYPE_Q8_0, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_repacked_iq4_nl_i8mm(int64_t k, const void *w, size_t ws, int64_t nr,
                                                      const void *act, size_t as, int nt, float *out, int64_t os) {
    rpm_gemm(PLM_TYPE_IQ4_NL, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_repacked_q4_K_i8mm(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                    size_t as, int nt, float *out, int64_t os) {
    rpm_gemm(PLM_TYPE_Q4_K, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_repacked_q5_K_i8mm(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                    size_t as, int nt, float *out, int64_t os) {
    rpm_gemm(PLM_TYPE_Q5_K, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_repacked_q6_K_i8mm(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                    size_t as, int nt, float *out, int64_t os) {
    rpm_gemm(PLM_TYPE_Q6_K, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_I8MM static void gemm_repacked_iq4_xs_i8mm(int64_t k, const void *w, size_t ws, int64_t nr,
                                                      const void *act, size_t as, int nt, float *out, int64_t os) {
    rpm_gemm(PLM_TYPE_IQ4_XS, k, w, ws, nr, act, as, nt, out, os);
}

void plm_arm_fill_repacked_i8mm(plm_kernels *t) {
    static const plm_type types[] = {PLM_TYPE_Q4_0, PLM_TYPE_Q5_0, PLM_TYPE_Q8_0, PLM_TYPE_IQ4_NL,
                                     PLM_TYPE_Q4_K, PLM_TYPE_Q5_K, PLM_TYPE_Q6_K, PLM_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) one_token[types[i]] = t->gemm_repacked[types[i]];
    t->gemm_repacked[PLM_TYPE_Q4_0] = gemm_repacked_q4_0_i8mm;
    t->gemm_repacked[PLM_TYPE_Q5_0] = gemm_repacked_q5_0_i8mm;
    t->gemm_repacked[PLM_TYPE_Q8_0] = gemm_repacked_q8_0_i8mm;
    t->gemm_repacked[PLM_TYPE_IQ4_NL] = gemm_repacked_iq4_nl_i8mm;
    t->gemm_repacked[PLM_TYPE_Q4_K] = gemm_repacked_q4_K_i8mm;
    t->gemm_repacked[PLM_TYPE_Q5_K] = gemm_repacked_q5_K_i8mm;
    t->gemm_repacked[PLM_TYPE_Q6_K] = gemm_repacked_q6_K_i8mm;
    t->gemm_repacked[PLM_TYPE_IQ4_XS] = gemm_repacked_iq4_xs_i8mm;
}

#else
typedef int plm_arm_repacked_i8mm_unused; /* ISO C: no empty translation unit */
#endif
