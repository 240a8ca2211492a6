/*
 * NEON kernels for row-interleaved Q4_0/Q8_0 weights (quant/repack.h), in
 * the dotprod table (the i8mm table inherits them).
 *
 * The layout's 64-byte run of 4-byte group g holds rows 0..15; its 16-byte
 * quarter m is rows 4m..4m+3, exactly what the by-element SDOT wants:
 * vdotq_laneq_s32(acc, w, a, g % 4) adds to lane i the dot of row 4m+i's
 * four codes with activation bytes 4g..4g+3, so one 16-byte activation load
 * serves four groups and one instruction does 16 multiply-adds for four
 * rows, with no horizontal sums: lane i is row 4m+i's block total.
 *
 * Per super-block the 16 rows are taken a quarter at a time: 8 code
 * registers (made signed: Q4_0 nibble - 8, Q8_0 code ^ 0x80) serve every
 * token of the tile; a token's block is 8 SDOTs, a convert and a
 * multiply-add by the four rows' scales times its own.
 */
#include "kernels/arm/arm.h"

#if defined(PLM_ARM)

#include "quant/repack.h"

enum { RPA_R = 16, RPA_C = 4 }; /* rows per group, tokens per tile */

#define RPA_INL static inline __attribute__((always_inline)) PLM_TARGET_DOTPROD

/* Group g of rows 4m..4m+3 as signed weights. */
RPA_INL int8x16_t rpa_codes(plm_type type, const uint8_t *codes, int g, int m) {
    if (type == PLM_TYPE_Q8_0)
        return vreinterpretq_s8_u8(veorq_u8(vld1q_u8(codes + 64 * g + 16 * m), vdupq_n_u8(0x80)));
    const uint8x16_t q = vld1q_u8(codes + 64 * (g & 3) + 16 * m);
    const uint8x16_t u = g < 4 ? vandq_u8(q, vdupq_n_u8(0x0f)) : vshrq_n_u8(q, 4);
    return vsubq_s8(vreinterpretq_s8_u8(u), vdupq_n_s8(8));
}

/* Integer block totals of rows 4m..4m+3 against one token's 32 bytes. */
RPA_INL int32x4_t rpa_dot(const int8x16_t w[8], const int8_t *qs) {
    const int8x16_t a0 = vld1q_s8(qs), a1 = vld1q_s8(qs + 16);
    int32x4_t s0 = vdupq_n_s32(0), s1 = vdupq_n_s32(0);
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
    const size_t sb = RPA_R * (type == PLM_TYPE_Q8_0 ? sizeof(block_q8_0) : sizeof(block_q4_0));
    float32x4_t acc[4][RPA_C];
    /* all RPA_C columns: GCC cannot see that only C are read */
    _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++)
        _Pragma("GCC unroll 4") for (int c = 0; c < RPA_C; c++) acc[m][c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = grp + (size_t)b * sb, *codes = blk + RPA_R * sizeof(plm_fp16_t);
        float da[RPA_C] = {0};
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) da[c] = plm_arm_h2f(((const block_q8_0 *)(const void *)(act + (size_t)c * as))[b].d);
        /* fully unrolled (GCC left the loops rolled, with the codes and the
         * accumulators on the stack) */
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) {
            const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)blk + 4 * m)));
            int8x16_t w[8];
            _Pragma("GCC unroll 8") for (int g = 0; g < 8; g++) w[g] = rpa_codes(type, codes, g, m);
            _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) {
                const int8_t *qs = ((const block_q8_0 *)(const void *)(act + (size_t)c * as))[b].qs;
                acc[m][c] = vfmaq_f32(acc[m][c], vcvtq_f32_s32(rpa_dot(w, qs)), vmulq_n_f32(dw, da[c]));
            }
        }
    }
    _Pragma("GCC unroll 4") for (int c = 0; c < C; c++)
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) vst1q_f32(out + c * os + 4 * m, acc[m][c]);
}

RPA_INL void rpa_gemm(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                      int nt, float *out, int64_t os) {
    for (int t0 = 0; t0 < nt; t0 += RPA_C) {
        const int tn = nt - t0 < RPA_C ? nt - t0 : RPA_C;
        const char *at = (const char *)act + (size_t)t0 * as;
        for (int64_t r = 0; r < nr; r += RPA_R) {
            const uint8_t *grp = (const uint8_t *)w + (size_t)r * ws;
            float *o = out + (int64_t)t0 * os + r;
            if (tn == RPA_C) rpa_tile(type, RPA_C, grp, k / 32, at, as, o, os);
            else if (tn == 1) rpa_tile(type, 1, grp, k / 32, at, as, o, os);
            else rpa_tile(type, tn, grp, k / 32, at, as, o, os);
        }
    }
}

PLM_TARGET_DOTPROD static void gemm_repacked_q4_0_dotprod(int64_t k, const void *w, size_t ws, int64_t nr,
                                                          const void *act, size_t as, int nt, float *out, int64_t os) {
    rpa_gemm(PLM_TYPE_Q4_0, k, w, ws, nr, act, as, nt, out, os);
}

PLM_TARGET_DOTPROD static void gemm_repacked_q8_0_dotprod(int64_t k, const void *w, size_t ws, int64_t nr,
                                                          const void *act, size_t as, int nt, float *out, int64_t os) {
    rpa_gemm(PLM_TYPE_Q8_0, k, w, ws, nr, act, as, nt, out, os);
}

void plm_arm_fill_repacked(plm_kernels *t) {
    t->gemm_repacked[PLM_TYPE_Q4_0] = gemm_repacked_q4_0_dotprod;
    t->gemm_repacked[PLM_TYPE_Q8_0] = gemm_repacked_q8_0_dotprod;
}

#else
typedef int plm_arm_repacked_unused; /* ISO C: no empty translation unit */
#endif
