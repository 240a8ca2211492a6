/*
 * Internal to src/kernels/arm/: the row-interleaved layout (quant/repack.h)
 * read into NEON registers, shared by the by-element SDOT kernels
 * (repacked.c) and the SMMLA ones (repacked_i8mm.c), so the two read the
 * same bytes the same way.
 *
 * A group holds 16 rows; the kernels take it a quarter m (rows 4m..4m+3)
 * at a time: the 16 bytes at 64 * g + 16 * m are run g of the quarter,
 * elements 4g..4g+3 of each of its four rows.  The codes come back
 * unsigned, as stored (Q8_0's w + 128, Q4_0's w + 8, Q5_0's w + 16, Q6_K's
 * w + 32, the IQ4 formats' level index): USMMLA takes them as they are, the SDOT
 * kernels make them signed.  The scale planes come back as int8, 16 rows a
 * vector.  Plain ARMv8 NEON (no target attribute, as unpack.h), and every
 * plm_type argument is a constant at its call, so each kernel gets
 * straight-line code for its format.
 */
#ifndef PLM_KERNELS_ARM_REPACKED_UNPACK_H
#define PLM_KERNELS_ARM_REPACKED_UNPACK_H

#include "kernels/arm/arm.h"

#if defined(PLM_ARM)

#include "quant/repack.h"

/* The f16 scales of rows 4m..4m+3 from a plane of 16 (d, or dmin). */
PLM_ARM_INL float32x4_t plm_arm_rp_f16x4(const uint8_t *plane, int m) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)plane + 4 * m)));
}

/* Four int8 values as int32 lanes. */
PLM_ARM_INL int32x4_t plm_arm_rp_i8x4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(v)))));
}

/* Shifts every byte left by n (right for n < 0). */
PLM_ARM_INL uint8x16_t plm_arm_rp_shift(uint8x16_t v, int n) { return vshlq_u8(v, vdupq_n_s8((int8_t)n)); }

/* ---- Q4_0, Q5_0, Q8_0, IQ4_NL ------------------------------------------ */

/* Bytes of a 32-element format's 16-row block. */
PLM_ARM_INL size_t plm_arm_rp_block32(plm_type type) {
    return PLM_REPACK_ROWS * (type == PLM_TYPE_Q8_0   ? sizeof(block_q8_0)
                              : type == PLM_TYPE_Q5_0 ? sizeof(block_q5_0)
                                                      : sizeof(block_q4_0)); /* = IQ4_NL's */
}

/* The code offset o (u = w + o) the kernels take the codes with: Q8_0's
 * 128, Q4_0's 8, Q5_0's 16; IQ4_NL's level index none. */
PLM_ARM_INL int plm_arm_rp_offset32(plm_type type) {
    return type == PLM_TYPE_Q8_0 ? 128 : type == PLM_TYPE_Q4_0 ? 8 : type == PLM_TYPE_Q5_0 ? 16 : 0;
}

/* Run g of quarter m of a 32-element block's codes (after the rows' d[16]):
 * Q8_0's byte, else the nibble (runs 0..3 low, 4..7 high), for Q5_0 with
 * its fifth bit from the bitmap after the codes (16 bits a quarter run,
 * each spread over its byte and tested). */
PLM_ARM_INL uint8x16_t plm_arm_rp_codes32(plm_type type, const uint8_t *codes, int g, int m) {
    if (type == PLM_TYPE_Q8_0) return vld1q_u8(codes + 64 * g + 16 * m);
    const uint8x16_t q = vld1q_u8(codes + 64 * (g & 3) + 16 * m);
    const uint8x16_t u = g < 4 ? vandq_u8(q, vdupq_n_u8(0x0f)) : vshrq_n_u8(q, 4);
    if (type != PLM_TYPE_Q5_0) return u;
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8_t *fifth = codes + 256 + 8 * g + 2 * m;
    const uint8x16_t spread = vcombine_u8(vdup_n_u8(fifth[0]), vdup_n_u8(fifth[1]));
    return vorrq_u8(u, vandq_u8(vtstq_u8(spread, vld1q_u8(bit)), vdupq_n_u8(0x10)));
}

/* ---- Q4_K, Q5_K, Q6_K, IQ4_XS ------------------------------------------ */

/* Q4_K and Q5_K: a min per sub-block, dotted with the activation's sums. */
PLM_ARM_INL bool plm_arm_rp_mins(plm_type type) { return type == PLM_TYPE_Q4_K || type == PLM_TYPE_Q5_K; }

/* Q4_K/Q5_K's 8 scales and mins of the 16 rows (plane p: byte p of every row). */
PLM_ARM_INL void plm_arm_rp_scales_k4(const uint8_t *planes, int8_t sc[8][16], int8_t mn[8][16]) {
    const uint8x16_t m63 = vdupq_n_u8(63), m0f = vdupq_n_u8(0x0f);
    uint8x16_t P[K_SCALE_SIZE];
    _Pragma("GCC unroll 12") for (int p = 0; p < K_SCALE_SIZE; p++) P[p] = vld1q_u8(planes + 16 * p);
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
        uint8x16_t s, m;
        if (j < 4) {
            s = vandq_u8(P[j], m63);
            m = vandq_u8(P[j + 4], m63);
        } else { /* the top two bits come from bits 6-7 of bytes j-4 and j */
            s = vorrq_u8(vandq_u8(P[j + 4], m0f), vshlq_n_u8(vshrq_n_u8(P[j - 4], 6), 4));
            m = vorrq_u8(vshrq_n_u8(P[j + 4], 4), vshlq_n_u8(vshrq_n_u8(P[j], 6), 4));
        }
        vst1q_s8(sc[j], vreinterpretq_s8_u8(s));
        vst1q_s8(mn[j], vreinterpretq_s8_u8(m));
    }
}

/* IQ4_XS's 8 scales of the 16 rows, unbiased (ls - 32). */
PLM_ARM_INL void plm_arm_rp_scales_xs(const uint8_t *planes, int8_t sc[8][16]) {
    _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
        const uint8x16_t lo =
            vandq_u8(plm_arm_rp_shift(vld1q_u8(planes + 16 * (s / 2)), -4 * (s % 2)), vdupq_n_u8(0x0f));
        const uint8x16_t hi =
            vandq_u8(plm_arm_rp_shift(vld1q_u8(planes + 16 * (4 + s / 4)), -2 * (s % 4)), vdupq_n_u8(3));
        vst1q_s8(sc[s], vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), vdupq_n_s8(32)));
    }
}

/* Run g of sub-block s, quarter m of super-block blk's codes: the nibble
 * with Q5_K's fifth bit or Q6_K's two high bits at bit 4 (Q6_K: w + 32),
 * IQ4_XS's level index. */
PLM_ARM_INL uint8x16_t plm_arm_rp_codes_k(plm_type type, const uint8_t *blk, int s, int g, int m) {
    const int at = 64 * g + 16 * m;
    const uint8x16_t v = vld1q_u8(blk + plm_repack_k_codes(type, s / 2) + at);
    const uint8x16_t u = s % 2 ? vshrq_n_u8(v, 4) : vandq_u8(v, vdupq_n_u8(0x0f));
    if (type == PLM_TYPE_Q5_K) { /* bit s of the high byte to bit 4 */
        const uint8x16_t hb = vld1q_u8(blk + plm_repack_k_high(type, 0) + at);
        return vorrq_u8(u, vandq_u8(plm_arm_rp_shift(hb, 4 - s), vdupq_n_u8(0x10)));
    }
    if (type == PLM_TYPE_Q6_K) { /* bits 2q, 2q + 1 of run s / 4 to bits 4, 5 */
        const uint8x16_t hb = vld1q_u8(blk + plm_repack_k_high(type, s / 4) + at);
        return vorrq_u8(u, vandq_u8(plm_arm_rp_shift(hb, 4 - 2 * (s % 4)), vdupq_n_u8(0x30)));
    }
    return u;
}

#endif /* PLM_ARM */
#endif
