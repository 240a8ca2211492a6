/*
 * NEON kernels for row-interleaved weights (quant/repack.h): Q4_0, Q5_0,
 * Q8_0 and IQ4_NL, then the super-block formats Q4_K, Q5_K, Q6_K and
 * IQ4_XS, in the dotprod table (the i8mm table takes them for single
 * tokens; its SMMLA kernels for batches are in repacked_i8mm.c).
 *
 * The layout's 64-byte run of 4-byte group g holds rows 0..15; its 16-byte
 * quarter m is rows 4m..4m+3, exactly what the by-element SDOT wants:
 * vdotq_laneq_s32(acc, w, a, g % 4) adds to lane i the dot of row 4m+i's
 * four codes with activation bytes 4g..4g+3, so one 16-byte activation load
 * serves four groups and one instruction does 16 multiply-adds for four
 * rows, with no horizontal sums: lane i is row 4m+i's block total.
 *
 * Per super-block the 16 rows are taken a quarter at a time: 8 code
 * registers (signed: Q4_0 nibble - 8, Q5_0 code - 16, Q8_0 code ^ 0x80,
 * IQ4_NL's level by one TBL; for one token Q4_0's and Q5_0's codes as they
 * are, the dot started at -o * sum(a)) serve every
 * token of the tile; a token's block is 8 SDOTs, a convert and a
 * multiply-add by the four rows' scales times its own.
 *
 * The layout's codes and scale planes are read by repacked_unpack.h, which
 * the SMMLA kernels (repacked_i8mm.c) share.
 */
#include "kernels/arm/arm.h"

#if defined(PLM_ARM)

#include "kernels/arm/repacked_unpack.h"

enum { RPA_R = PLM_REPACK_ROWS, RPA_C = 4 }; /* rows per group, tokens per tile */

#define RPA_INL PLM_ARM_INL PLM_TARGET_DOTPROD

/* Group g of rows 4m..4m+3 as signed weights (Q4_0, Q5_0 `as_stored`:
 * the unsigned code, its -o left to the dot's start). */
RPA_INL int8x16_t rpa_codes(plm_type type, const uint8_t *codes, int g, int m, bool as_stored) {
    const uint8x16_t u = plm_arm_rp_codes32(type, codes, g, m);
    if (type == PLM_TYPE_Q8_0) return vreinterpretq_s8_u8(veorq_u8(u, vdupq_n_u8(0x80)));
    if (type == PLM_TYPE_IQ4_NL) return vqtbl1q_s8(vld1q_s8(kvalues_iq4nl), u);
    const int8_t o = (int8_t)plm_arm_rp_offset32(type);
    return as_stored ? vreinterpretq_s8_u8(u) : vsubq_s8(vreinterpretq_s8_u8(u), vdupq_n_s8(o));
}

/* Integer block totals of rows 4m..4m+3 against one token's 32 bytes,
 * started at `init`. */
RPA_INL int32x4_t rpa_dot(const int8x16_t w[8], const int8_t *qs, int32_t init) {
    const int8x16_t a0 = vld1q_s8(qs), a1 = vld1q_s8(qs + 16);
    int32x4_t s0 = vdupq_n_s32(init), s1 = vdupq_n_s32(0);
    s0 = vdotq_laneq_s32(s0, w[0], a0, 0);
    s1 = vdotq_laneq_s32(s1, w[1], a0, 1);
    s0 = vdotq_laneq_s32(s0, w[2], a0, 2);
    s1 = vdotq_laneq_s32(s1, w[3], a0, 3);
    s0 = vdotq_laneq_s32(s0, w[4], a1, 0);
    s1 = vdotq_laneq_s32(s1, w[5], a1, 1);
    s0 = vdotq_laneq_s32(s0, w[6], a1, 2);
    s1 = vdotq_laneq_s32(s1, w[7], a1, 3);
    return vaddq_s32(s0, s1);
}

/* C tokens x 16 rows of one group, all blocks of a row. */
RPA_INL void rpa_tile(plm_type type, int C, const uint8_t *grp, int64_t nb, const char *act, size_t as, float *out,
                      int64_t os) {
    const size_t sb = plm_arm_rp_block32(type);
    float32x4_t acc[4][RPA_C];
    /* all RPA_C columns: GCC cannot see that only C are read */
    _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
        _Pragma("GCC unroll 4") for (int c = 0; c < RPA_C; c++) acc[m][c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = grp + (size_t)b * sb, *codes = blk + RPA_R * sizeof(plm_fp16_t);
        float da[RPA_C] = {0};
        /* Q4_0/Q5_0 decode: -o * sum(a) once for the four quarters saves a
         * SUB a code register (32 a block); with more tokens the sums cost more */
        const bool as_stored = (type == PLM_TYPE_Q4_0 || type == PLM_TYPE_Q5_0) && C == 1;
        int32_t init[RPA_C] = {0};
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) {
            const block_q8_0 *y = (const block_q8_0 *)(const void *)(act + (size_t)c * as) + b;
            da[c] = plm_arm_h2f(y->d);
            if (as_stored)
                init[c] = -plm_arm_rp_offset32(type) * (vaddlvq_s8(vld1q_s8(y->qs)) + vaddlvq_s8(vld1q_s8(y->qs + 16)));
        }
        /* fully unrolled (GCC left the loops rolled, with the codes and the
         * accumulators on the stack) */
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) {
            const float32x4_t dw = plm_arm_rp_f16x4(blk, m);
            int8x16_t w[8];
            _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) w[g] = rpa_codes(type, codes, g, m, as_stored);
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) {
                const int8_t *qs = ((const block_q8_0 *)(const void *)(act + (size_t)c * as))[b].qs;
                acc[m][c] = vfmaq_f32(acc[m][c], vcvtq_f32_s32(rpa_dot(w, qs, init[c])), vmulq_n_f32(dw, da[c]));
            }
        }
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) vst1q_f32(out + c * os + 4 * m, acc[m][c]);
}

/* ---- super-block formats: Q4_K, Q5_K, Q6_K, IQ4_XS ------------------------
 * As the x86 kernel (x86/repacked_k.h), a quarter of 4 rows at a time: per
 * super-block the 16 rows' sub-block scales are unpacked together into
 * int8; every element is a signed byte (the nibble with Q5_K's or Q6_K's
 * high bits OR'ed in at bit 4, or IQ4_XS's level by TBL); a sub-block is 8
 * by-element SDOTs a token, in two chains of 16 elements started at
 * -o * (the activation's 16-element sum) (o = 32 for Q6_K, else 0), times
 * the integer scale (MLA) into the row's integer total of the super-block;
 * only that total meets the floats:
 *   acc += d_a * (d * isum - dmin * sum_s m_s * bsum_s) */

/* Group g of sub-block s of rows 4m..4m+3 as signed bytes. */
RPA_INL int8x16_t rpk_codes(plm_type type, const uint8_t *blk, int s, int g, int m) {
    const uint8x16_t u = plm_arm_rp_codes_k(type, blk, s, g, m);
    if (type == PLM_TYPE_IQ4_XS) return vqtbl1q_s8(vld1q_s8(kvalues_iq4nl), u);
    return vreinterpretq_s8_u8(u);
}

/* C tokens x 16 rows of one group, all super-blocks of a row. */
RPA_INL void rpk_tile(plm_type type, int C, const uint8_t *grp, int64_t nb, const char *act, size_t as, float *out,
                      int64_t os) {
    const plm_repack_k_layout L = plm_repack_k(type);
    const size_t sb = RPA_R * plm_row_size(type, QK_K);
    const int o = type == PLM_TYPE_Q6_K ? 32 : 0;
    float32x4_t acc[4][RPA_C];
    _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
        _Pragma("GCC unroll 4") for (int c = 0; c < RPA_C; c++) acc[m][c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = grp + (size_t)b * sb;
        int8_t sc[8][16], mn[8][16];
        if (plm_arm_rp_mins(type)) plm_arm_rp_scales_k4(blk + L.scales, sc, mn);
        else if (type == PLM_TYPE_IQ4_XS) plm_arm_rp_scales_xs(blk + L.scales, sc);
        const int8_t *q6sc = (const int8_t *)(blk + L.scales); /* Q6_K: 16 planes of int8 scales */
        const block_q8_K *y[RPA_C];
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) y[c] = (const block_q8_K *)(const void *)(act + (size_t)c * as) + b;
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) {
            int32x4_t isum[RPA_C];
            _Pragma("GCC unroll 4") for (int c = 0; c < RPA_C; c++) isum[c] = vdupq_n_s32(0);
            _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) { /* constant shifts and offsets */
                int8x16_t w[8];
                _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) w[g] = rpk_codes(type, blk, s, g, m);
                /* Q6_K: a scale for each 16-element half */
                const int32x4_t scA = plm_arm_rp_i8x4((type == PLM_TYPE_Q6_K ? q6sc + 32 * s : sc[s]) + 4 * m);
                const int32x4_t scB = type == PLM_TYPE_Q6_K ? plm_arm_rp_i8x4(q6sc + 32 * s + 16 + 4 * m) : scA;
                _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) {
                    const int8_t *qs = y[c]->qs + 32 * s;
                    const int8x16_t a0 = vld1q_s8(qs), a1 = vld1q_s8(qs + 16);
                    int32x4_t s0 = vdupq_n_s32(-o * y[c]->bsums[2 * s]), s1 = vdupq_n_s32(-o * y[c]->bsums[2 * s + 1]);
                    s0 = vdotq_laneq_s32(s0, w[0], a0, 0);
                    s1 = vdotq_laneq_s32(s1, w[4], a1, 0);
                    s0 = vdotq_laneq_s32(s0, w[1], a0, 1);
                    s1 = vdotq_laneq_s32(s1, w[5], a1, 1);
                    s0 = vdotq_laneq_s32(s0, w[2], a0, 2);
                    s1 = vdotq_laneq_s32(s1, w[6], a1, 2);
                    s0 = vdotq_laneq_s32(s0, w[3], a0, 3);
                    s1 = vdotq_laneq_s32(s1, w[7], a1, 3);
                    if (type == PLM_TYPE_Q6_K) isum[c] = vmlaq_s32(vmlaq_s32(isum[c], s0, scA), s1, scB);
                    else isum[c] = vmlaq_s32(isum[c], vaddq_s32(s0, s1), scA);
                }
            }
            const float32x4_t dw = plm_arm_rp_f16x4(blk, m);
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) {
                acc[m][c] = vfmaq_f32(acc[m][c], vcvtq_f32_s32(isum[c]), vmulq_n_f32(dw, y[c]->d));
                if (!plm_arm_rp_mins(type)) continue;
                int32x4_t imin = vdupq_n_s32(0);
                _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++)
                    imin = vmlaq_n_s32(imin, plm_arm_rp_i8x4(mn[s] + 4 * m), y[c]->bsums[2 * s] + y[c]->bsums[2 * s + 1]);
                const float32x4_t dm = plm_arm_rp_f16x4(blk + L.dmin, m);
                acc[m][c] = vfmsq_f32(acc[m][c], vcvtq_f32_s32(imin), vmulq_n_f32(dm, y[c]->d));
            }
        }
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) vst1q_f32(out + c * os + 4 * m, acc[m][c]);
}

/* ---- the table's entries -------------------------------------------------- */

/* Tiles of RPA_C tokens (the last one 1 to RPA_C), each over every group. */
RPA_INL void rpa_gemm(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                      int nt, float *out, int64_t os) {
    const bool super =
        type == PLM_TYPE_Q4_K || type == PLM_TYPE_Q5_K || type == PLM_TYPE_Q6_K || type == PLM_TYPE_IQ4_XS;
    for (int t0 = 0; t0 < nt; t0 += RPA_C) {
        const int tn = nt - t0 < RPA_C ? nt - t0 : RPA_C;
        const char *at = (const char *)act + (size_t)t0 * as;
        for (int64_t r = 0; r < nr; r += RPA_R) {
            const uint8_t *grp = (const uint8_t *)w + (size_t)r * ws;
            float *o = out + (int64_t)t0 * os + r;
            if (super) {
                if (tn == RPA_C) rpk_tile(type, RPA_C, grp, k / QK_K, at, as, o, os);
                else if (tn == 1) rpk_tile(type, 1, grp, k / QK_K, at, as, o, os);
                else rpk_tile(type, tn, grp, k / QK_K, at, as, o, os);
            } else if (tn == RPA_C) rpa_tile(type, RPA_C, grp, k / 32, at, as, o, os);
            else if (tn == 1) rpa_tile(type, 1, grp, k / 32, at, as, o, os);
            else rpa_tile(type, tn, grp, k / 32, at, as, o, os);
        }
    }
}

PLM_TARGET_DOTPROD static void gemm_repacked_q4_0_dotprod(int64_t k, const void *w, size_t ws, int64_t nr,
                                                          const void *act, size_t as, int nt, float *out, int64_t os) {
    rpa_gemm(PLM_TYPE_Q4_0, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_DOTPROD static void gemm_repacked_q5_0_dotprod(int64_t k, const void *w, size_t ws, int64_t nr,
                                                          const void *act, size_t as, int nt, float *out, int64_t os) {
    rpa_gemm(PLM_TYPE_Q5_0, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_DOTPROD static void gemm_repacked_q8_0_dotprod(int64_t k, const void *w, size_t ws, int64_t nr,
                                                          const void *act, size_t as, int nt, float *out, int64_t os) {
    rpa_gemm(PLM_TYPE_Q8_0, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_DOTPROD static void gemm_repacked_iq4_nl_dotprod(int64_t k, const void *w, size_t ws, int64_t nr,
                                                            const void *act, size_t as, int nt, float *out,
                                                            int64_t os) {
    rpa_gemm(PLM_TYPE_IQ4_NL, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_DOTPROD static void gemm_repacked_q4_K_dotprod(int64_t k, const void *w, size_t ws, int64_t nr,
                                                          const void *act, size_t as, int nt, float *out, int64_t os) {
    rpa_gemm(PLM_TYPE_Q4_K, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_DOTPROD static void gemm_repacked_q5_K_dotprod(int64_t k, const void *w, size_t ws, int64_t nr,
                                                          const void *act, size_t as, int nt, float *out, int64_t os) {
    rpa_gemm(PLM_TYPE_Q5_K, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_DOTPROD static void gemm_repacked_q6_K_dotprod(int64_t k, const void *w, size_t ws, int64_t nr,
                                                          const void *act, size_t as, int nt, float *out, int64_t os) {
    rpa_gemm(PLM_TYPE_Q6_K, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_DOTPROD static void gemm_repacked_iq4_xs_dotprod(int64_t k, const void *w, size_t ws, int64_t nr,
                                                            const void *act, size_t as, int nt, float *out,
                                                            int64_t os) {
    rpa_gemm(PLM_TYPE_IQ4_XS, k, w, ws, nr, act, as, nt, out, os);
}

void plm_arm_fill_repacked(plm_kernels *t) {
    t->gemm_repacked[PLM_TYPE_Q4_0] = gemm_repacked_q4_0_dotprod;
    t->gemm_repacked[PLM_TYPE_Q5_0] = gemm_repacked_q5_0_dotprod;
    t->gemm_repacked[PLM_TYPE_Q8_0] = gemm_repacked_q8_0_dotprod;
    t->gemm_repacked[PLM_TYPE_IQ4_NL] = gemm_repacked_iq4_nl_dotprod;
    t->gemm_repacked[PLM_TYPE_Q4_K] = gemm_repacked_q4_K_dotprod;
    t->gemm_repacked[PLM_TYPE_Q5_K] = gemm_repacked_q5_K_dotprod;
    t->gemm_repacked[PLM_TYPE_Q6_K] = gemm_repacked_q6_K_dotprod;
    t->gemm_repacked[PLM_TYPE_IQ4_XS] = gemm_repacked_iq4_xs_dotprod;
}

#else
typedef int plm_arm_repacked_unused; /* ISO C: no empty translation unit */
#endif
