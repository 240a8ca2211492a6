/*
 * Internal to src/kernels/arm/: weight blocks decoded to int8, shared by the
 * vec_dots of quants_tmpl.h and the prefill gemms of all three ARM tables.
 *
 * A gemm decodes a weight block (or K super-block) once and dots it with
 * several tokens' activations, so decoding is written once here, in plain
 * ARMv8 NEON (no target attribute: these inline into functions of any of the
 * three levels).  The decoded values are the exact integers the reference
 * multiplies, so block sums stay exact.
 */
#ifndef PLM_KERNELS_ARM_UNPACK_H
#define PLM_KERNELS_ARM_UNPACK_H

#include "kernels/arm/arm.h"

#if defined(PLM_ARM)

/* The gemms' blocking: rows in bands of PLM_ARM_GEMM_RB, whose weights stay
 * in L2 while every tile of PLM_ARM_GEMM_T tokens' activations (T x k bytes,
 * in L1) passes over them. */
enum { PLM_ARM_GEMM_RB = 16, PLM_ARM_GEMM_T = 4 };

/* ---- 32-element formats ------------------------------------------------- */

/* The 32 nibbles of qs: low nibbles are elements 0..15, high 16..31. */
PLM_ARM_INL void plm_arm_nibbles(const uint8_t *qs, uint8x16_t *lo, uint8x16_t *hi) {
    const uint8x16_t q = vld1q_u8(qs);
    *lo = vandq_u8(q, vdupq_n_u8(0x0f));
    *hi = vshrq_n_u8(q, 4);
}

/* Fifth bits of a Q5 block: qh is a little-endian u32 whose bit j belongs to
 * element j; returns 0x10 in the bytes whose bit is set, for elements 0..15
 * (lo) and 16..31 (hi). */
PLM_ARM_INL void plm_arm_q5_high(const uint8_t qh[4], uint8x16_t *lo, uint8x16_t *hi) {
    static const uint8_t bit_of_byte[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bit = vld1q_u8(bit_of_byte);
    const uint8x16_t b01 = vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1]));
    const uint8x16_t b23 = vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3]));
    *lo = vandq_u8(vtstq_u8(b01, bit), vdupq_n_u8(0x10));
    *hi = vandq_u8(vtstq_u8(b23, bit), vdupq_n_u8(0x10));
}

/* Q4_1/Q5_1 pair with Q8_1 activations (which carry s = d * sum(q) for the
 * min term); the other 32-element formats with Q8_0. */
PLM_ARM_INL int plm_arm_has_min32(plm_type type) {
    return type == PLM_TYPE_Q4_1 || type == PLM_TYPE_Q5_1;
}

/* Block b of a weight row as the integers the reference multiplies
 * (elements 0..15 in *e0, 16..31 in *e1: signed for Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4,
 * 0..15 or 0..31 for Q4_1/Q5_1); returns the scale d and sets *m to the min
 * (0 where the format has none).  `type` is a constant at every call, so
 * each caller gets straight-line code for its format. */
PLM_ARM_INL float plm_arm_unpack32(plm_type type, const void *row, int64_t b, int8x16_t *e0, int8x16_t *e1,
                                   float *m) {
    uint8x16_t lo, hi, hlo, hhi;
    *m = 0.0f;
    switch (type) {
    case PLM_TYPE_Q8_0: {
        const block_q8_0 *x = (const block_q8_0 *)row + b;
        *e0 = vld1q_s8(x->qs);
        *e1 = vld1q_s8(x->qs + 16);
        return plm_arm_h2f(x->d);
    }
    case PLM_TYPE_Q4_0: {
        const block_q4_0 *x = (const block_q4_0 *)row + b;
        plm_arm_nibbles(x->qs, &lo, &hi);
        *e0 = vsubq_s8(vreinterpretq_s8_u8(lo), vdupq_n_s8(8));
        *e1 = vsubq_s8(vreinterpretq_s8_u8(hi), vdupq_n_s8(8));
        return plm_arm_h2f(x->d);
    }
    case PLM_TYPE_Q4_1: {
        const block_q4_1 *x = (const block_q4_1 *)row + b;
        plm_arm_nibbles(x->qs, &lo, &hi);
        *e0 = vreinterpretq_s8_u8(lo);
        *e1 = vreinterpretq_s8_u8(hi);
        *m = plm_arm_h2f(x->m);
        return plm_arm_h2f(x->d);
    }
    case PLM_TYPE_Q5_0: {
        const block_q5_0 *x = (const block_q5_0 *)row + b;
        plm_arm_nibbles(x->qs, &lo, &hi);
        plm_arm_q5_high(x->qh, &hlo, &hhi);
        *e0 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hlo)), vdupq_n_s8(16));
        *e1 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(hi, hhi)), vdupq_n_s8(16));
        return plm_arm_h2f(x->d);
    }
    case PLM_TYPE_Q5_1: {
        const block_q5_1 *x = (const block_q5_1 *)row + b;
        plm_arm_nibbles(x->qs, &lo, &hi);
        plm_arm_q5_high(x->qh, &hlo, &hhi);
        *e0 = vreinterpretq_s8_u8(vorrq_u8(lo, hlo));
        *e1 = vreinterpretq_s8_u8(vorrq_u8(hi, hhi));
        *m = plm_arm_h2f(x->m);
        return plm_arm_h2f(x->d);
    }
    case PLM_TYPE_MXFP4: { /* IQ4_NL's layout: nibbles index the doubled E2M1 levels, an E8M0 scale */
        const block_mxfp4 *x = (const block_mxfp4 *)row + b;
        const int8x16_t levels = vld1q_s8(kvalues_mxfp4);
        plm_arm_nibbles(x->qs, &lo, &hi);
        *e0 = vqtbl1q_s8(levels, lo);
        *e1 = vqtbl1q_s8(levels, hi);
        return plm_e8m0_half(x->e);
    }
    default: { /* IQ4_NL: nibbles index the 16 non-linear levels */
        const block_iq4_nl *x = (const block_iq4_nl *)row + b;
        const int8x16_t levels = vld1q_s8(kvalues_iq4nl);
        plm_arm_nibbles(x->qs, &lo, &hi);
        *e0 = vqtbl1q_s8(levels, lo);
        *e1 = vqtbl1q_s8(levels, hi);
        return plm_arm_h2f(x->d);
    }
    }
}

/* Activation block b of token row `a` (Q8_1 for Q4_1/Q5_1, else Q8_0): its
 * 32 quants, and pointers to its f16 scale d and (Q8_1) sum s. */
PLM_ARM_INL const int8_t *plm_arm_act32(plm_type type, const void *a, int64_t b, const plm_fp16_t **d,
                                        const plm_fp16_t **s) {
    if (plm_arm_has_min32(type)) {
        const block_q8_1 *y = (const block_q8_1 *)a + b;
        *d = &y->d;
        *s = &y->s;
        return y->qs;
    }
    const block_q8_0 *y = (const block_q8_0 *)a + b;
    *d = *s = &y->d;
    return y->qs;
}

/* Four f16 values from four places, as one float vector (FCVTL, exact). */
PLM_ARM_INL float32x4_t plm_arm_h2f4(const plm_fp16_t *const p[4]) {
    uint16x4_t v = vld1_dup_u16(p[0]);
    v = vld1_lane_u16(p[1], v, 1);
    v = vld1_lane_u16(p[2], v, 2);
    v = vld1_lane_u16(p[3], v, 3);
    return vcvt_f32_f16(vreinterpret_f16_u16(v));
}

/* ---- K-quants: a 256-element super-block decoded once -------------------
 * q holds the codes in element order, minus their offset (Q3_K -4 where the
 * hmask bit is clear, Q6_K -32) so they are the reference's integers; sc the
 * integer scale of each sub-block, mn the min of each 16 elements (dotted
 * with Q8_K's bsums).  The super-block's integer sum is
 *   isum = sum_j sc[j] * dot(q of sub-block j, a),  summ = sum_i mn[i] * bsums[i]
 * and it adds d * d_a * isum - dmin * d_a * summ, as the reference.
 *
 * Q2_K is stored pre-scaled: its codes (0..3) times their 4-bit scale (0..15)
 * still fit int8 (<= 45), so q = sc * code and the whole super-block is one
 * "sub-block" with scale 1: the dot needs no per-sub-block multiply and gives
 * the same integer isum. */
typedef struct {
    int8_t q[QK_K];
    int32_t sc[16];   /* scale of sub-block j (plm_arm_k_sub elements each) */
    int16_t mn[16];   /* min per 16 elements (Q2_K, Q4_K, Q5_K), else unused */
    float d, dmin;
} plm_arm_kdec;

PLM_ARM_INL int plm_arm_is_k(plm_type type) {
    return type == PLM_TYPE_Q2_K || type == PLM_TYPE_Q3_K || type == PLM_TYPE_Q4_K || type == PLM_TYPE_Q5_K ||
           type == PLM_TYPE_Q6_K || type == PLM_TYPE_IQ4_XS;
}

/* Elements per integer scale (QK_K: pre-scaled, one sum per super-block). */
PLM_ARM_INL int plm_arm_k_sub(plm_type type) {
    if (type == PLM_TYPE_Q2_K) return QK_K;
    return type == PLM_TYPE_Q3_K || type == PLM_TYPE_Q6_K ? 16 : 32;
}

PLM_ARM_INL int plm_arm_k_has_min(plm_type type) {
    return type == PLM_TYPE_Q2_K || type == PLM_TYPE_Q4_K || type == PLM_TYPE_Q5_K;
}

/* Q4_K/Q5_K scales: 8 six-bit scales and mins in 12 bytes.  Bytes 0..3 hold
 * scales 0..3 and bytes 4..7 mins 0..3 in their low 6 bits; scales/mins 4..7
 * take their low 4 bits from the low/high nibbles of bytes 8..11 and their
 * top 2 bits from the top bits of bytes 0..3 / 4..7.  Four bytes at a time:
 * out[0..7] = scales, out[8..15] = mins. */
PLM_ARM_INL void plm_arm_k4_scales(const uint8_t *s12, uint8_t out[16]) {
    uint32_t w0, w1, w2, o[4];
    memcpy(&w0, s12, 4);
    memcpy(&w1, s12 + 4, 4);
    memcpy(&w2, s12 + 8, 4);
    o[0] = w0 & 0x3f3f3f3fu;
    o[1] = (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u);
    o[2] = w1 & 0x3f3f3f3fu;
    o[3] = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u);
    memcpy(out, o, 16);
}

/* Q3_K's 16 scales (6 bits, biased by 32): low 4 bits from the nibbles of
 * bytes 0..7 (low nibbles are scales 0..7, high nibbles 8..15), top 2 bits
 * from bytes 8..11, byte 8 + (j & 3) at shift 2 * (j >> 2); four at a time. */
PLM_ARM_INL int8x16_t plm_arm_q3_K_scales(const uint8_t *s12) {
    uint32_t a, b, c, w[4];
    memcpy(&a, s12, 4);
    memcpy(&b, s12 + 4, 4);
    memcpy(&c, s12 + 8, 4);
    w[0] = (a & 0x0f0f0f0fu) | ((c & 0x03030303u) << 4);
    w[1] = (b & 0x0f0f0f0fu) | (((c >> 2) & 0x03030303u) << 4);
    w[2] = ((a >> 4) & 0x0f0f0f0fu) | (((c >> 4) & 0x03030303u) << 4);
    w[3] = ((b >> 4) & 0x0f0f0f0fu) | (((c >> 6) & 0x03030303u) << 4);
    return vsubq_s8(vreinterpretq_s8_u32(vld1q_u32(w)), vdupq_n_s8(32));
}

/* Q3_K's codes of 16 elements: the two bits of q (bits 0-1), minus 4
 * where the element's hmask bit (bit 0 of h) is clear: (q | hbit << 2) - 4. */
PLM_ARM_INL int8x16_t plm_arm_q3_K_codes(uint8x16_t q, uint8x16_t h) {
    const uint8x16_t q2 = vandq_u8(q, vdupq_n_u8(3)), hb = vshlq_n_u8(vandq_u8(h, vdupq_n_u8(1)), 2);
    return vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(q2, hb)), vdupq_n_s8(4));
}

/* Q4_K/Q5_K: sub-block 2j is the low nibbles of qs[32j .. 32j+31], 2j+1 the
 * high nibbles; Q5_K's fifth bits are bit 2j / 2j+1 of qh[0..31].  Sets
 * c[0], c[1] to sub-block 2j's elements 0..15, 16..31 and c[2], c[3] to
 * 2j+1's, from qs + 32j; with has_qh, ORs in bits 0 and 1 of *h0, *h1 (qh[0..15],
 * qh[16..31] shifted right 2j times) and shifts them on for the next j. */
PLM_ARM_INL void plm_arm_q45_K_pair(const uint8_t *qs, bool has_qh, uint8x16_t *h0, uint8x16_t *h1,
                                    uint8x16_t c[4]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), one = vdupq_n_u8(1), two = vdupq_n_u8(2);
    const uint8x16_t a = vld1q_u8(qs), b = vld1q_u8(qs + 16);
    c[0] = vandq_u8(a, m4);
    c[1] = vandq_u8(b, m4);
    c[2] = vshrq_n_u8(a, 4);
    c[3] = vshrq_n_u8(b, 4);
    if (has_qh) {
        c[0] = vorrq_u8(c[0], vshlq_n_u8(vandq_u8(*h0, one), 4));
        c[1] = vorrq_u8(c[1], vshlq_n_u8(vandq_u8(*h1, one), 4));
        c[2] = vorrq_u8(c[2], vshlq_n_u8(vandq_u8(*h0, two), 3));
        c[3] = vorrq_u8(c[3], vshlq_n_u8(vandq_u8(*h1, two), 3));
        *h0 = vshrq_n_u8(*h0, 2);
        *h1 = vshrq_n_u8(*h1, 2);
    }
}

/* Q6_K: per 128 elements (half), ql[0..63] and qh[0..31]; element l (0..31)
 * of each quarter: quarter 0 = low nibble of ql[l] | bits 0-1 of qh[l] << 4,
 * quarter 1 = low nibble of ql[32+l] | bits 2-3, quarter 2 = high nibble of
 * ql[l] | bits 4-5, quarter 3 = high nibble of ql[32+l] | bits 6-7; minus 32.
 * q[k] gets elements 16k..16k+15 of the half (sub-block 8 * half + k). */
PLM_ARM_INL void plm_arm_q6_K_half(const uint8_t *ql, const uint8_t *qh, int8x16_t q[8]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m30 = vdupq_n_u8(0x30);
    const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16);
    const uint8x16_t l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
    const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
    uint8x16_t v[8];
    v[0] = vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(h0, 4), m30));
    v[1] = vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8(h1, 4), m30));
    v[2] = vorrq_u8(vandq_u8(l2, m4), vandq_u8(vshlq_n_u8(h0, 2), m30));
    v[3] = vorrq_u8(vandq_u8(l3, m4), vandq_u8(vshlq_n_u8(h1, 2), m30));
    v[4] = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(h0, m30));
    v[5] = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(h1, m30));
    v[6] = vorrq_u8(vshrq_n_u8(l2, 4), vandq_u8(vshrq_n_u8(h0, 2), m30));
    v[7] = vorrq_u8(vshrq_n_u8(l3, 4), vandq_u8(vshrq_n_u8(h1, 2), m30));
    for (int k = 0; k < 8; k++) q[k] = vsubq_s8(vreinterpretq_s8_u8(v[k]), vdupq_n_s8(32));
}

/* 16 int8 scales to the int32 sc[16]. */
PLM_ARM_INL void plm_arm_store_sc16(int32_t *sc, int8x16_t s) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(s)), hi = vmovl_high_s8(s);
    vst1q_s32(sc, vmovl_s16(vget_low_s16(lo)));
    vst1q_s32(sc + 4, vmovl_high_s16(lo));
    vst1q_s32(sc + 8, vmovl_s16(vget_low_s16(hi)));
    vst1q_s32(sc + 12, vmovl_high_s16(hi));
}

/* Q2_K: per 128 elements, bit-plane p (bits 2p, 2p+1) of qs[l] is element
 * 32p + l; sub-block j of 16 has scale scales[j] & 15 and min scales[j] >> 4. */
PLM_ARM_INL void plm_arm_unpack_q2_K(const block_q2_K *x, plm_arm_kdec *u) {
    const uint8x16_t s = vld1q_u8(x->scales), m3 = vdupq_n_u8(3);
    const uint8x16_t mn = vshrq_n_u8(s, 4);
    uint8_t sc[16];
    vst1q_u8(sc, vandq_u8(s, vdupq_n_u8(0x0f)));
    vst1q_s16(u->mn, vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn))));
    vst1q_s16(u->mn + 8, vreinterpretq_s16_u16(vmovl_high_u8(mn)));
    uint8_t *q = (uint8_t *)u->q;
    for (int half = 0; half < 2; half++) {
        uint8x16_t q0 = vld1q_u8(x->qs + 32 * half), q1 = vld1q_u8(x->qs + 32 * half + 16);
        for (int p = 0; p < 4; p++) {
            const int j = 8 * half + 2 * p; /* elements 16j.. (q0) and 16(j+1).. (q1) */
            vst1q_u8(q + 16 * j, vmulq_u8(vandq_u8(q0, m3), vdupq_n_u8(sc[j])));
            vst1q_u8(q + 16 * j + 16, vmulq_u8(vandq_u8(q1, m3), vdupq_n_u8(sc[j + 1])));
            q0 = vshrq_n_u8(q0, 2);
            q1 = vshrq_n_u8(q1, 2);
        }
    }
    u->d = plm_arm_h2f(x->d);
    u->dmin = plm_arm_h2f(x->dmin);
}

/* Q3_K: Q2_K's planes, minus 4 where the element's hmask bit is clear (bit
 * 4*half + p of hmask[l]); 16 signed scales. */
PLM_ARM_INL void plm_arm_unpack_q3_K(const block_q3_K *x, plm_arm_kdec *u) {
    plm_arm_store_sc16(u->sc, plm_arm_q3_K_scales(x->scales));
    uint8x16_t h0 = vld1q_u8(x->hmask), h1 = vld1q_u8(x->hmask + 16);
    for (int half = 0; half < 2; half++) {
        uint8x16_t q0 = vld1q_u8(x->qs + 32 * half), q1 = vld1q_u8(x->qs + 32 * half + 16);
        for (int p = 0; p < 4; p++) {
            int8_t *o = u->q + 128 * half + 32 * p;
            vst1q_s8(o, plm_arm_q3_K_codes(q0, h0));
            vst1q_s8(o + 16, plm_arm_q3_K_codes(q1, h1));
            q0 = vshrq_n_u8(q0, 2);
            q1 = vshrq_n_u8(q1, 2);
            h0 = vshrq_n_u8(h0, 1);
            h1 = vshrq_n_u8(h1, 1);
        }
    }
    u->d = plm_arm_h2f(x->d);
    u->dmin = 0.0f;
}

/* Q4_K/Q5_K (plm_arm_q45_K_pair; qh NULL for Q4_K).  A min per 32 elements
 * is stored twice, once per 16. */
PLM_ARM_INL void plm_arm_unpack_q45_K(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                                      plm_arm_kdec *u) {
    uint8_t sm[16];
    plm_arm_k4_scales(scales, sm);
    const uint8x8_t s8 = vld1_u8(sm);
    vst1q_s32(u->sc, vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(s8)))));
    vst1q_s32(u->sc + 4, vreinterpretq_s32_u32(vmovl_high_u16(vmovl_u8(s8))));
    const uint8x8x2_t mm = vzip_u8(vld1_u8(sm + 8), vld1_u8(sm + 8)); /* m0 m0 m1 m1 ... */
    vst1q_s16(u->mn, vreinterpretq_s16_u16(vmovl_u8(mm.val[0])));
    vst1q_s16(u->mn + 8, vreinterpretq_s16_u16(vmovl_u8(mm.val[1])));

    uint8x16_t h0 = vdupq_n_u8(0), h1 = vdupq_n_u8(0);
    if (qh) {
        h0 = vld1q_u8(qh);
        h1 = vld1q_u8(qh + 16);
    }
    uint8_t *q = (uint8_t *)u->q;
    for (int j = 0; j < 4; j++, qs += 32, q += 64) {
        uint8x16_t c[4];
        plm_arm_q45_K_pair(qs, qh != NULL, &h0, &h1, c);
        for (int i = 0; i < 4; i++) vst1q_u8(q + 16 * i, c[i]);
    }
}

/* Q6_K (plm_arm_q6_K_half): sub-blocks of 16 with signed 8-bit scales. */
PLM_ARM_INL void plm_arm_unpack_q6_K(const block_q6_K *x, plm_arm_kdec *u) {
    plm_arm_store_sc16(u->sc, vld1q_s8(x->scales));
    for (int half = 0; half < 2; half++) {
        int8x16_t q[8];
        plm_arm_q6_K_half(x->ql + 64 * half, x->qh + 32 * half, q);
        for (int k = 0; k < 8; k++) vst1q_s8(u->q + 128 * half + 16 * k, q[k]);
    }
    u->d = plm_arm_h2f(x->d);
    u->dmin = 0.0f;
}

/* IQ4_XS: 8 sub-blocks of 32 nibbles through the IQ4_NL levels, 6-bit scales
 * biased by 32 (see plm_iq4_xs_scale). */
PLM_ARM_INL void plm_arm_unpack_iq4_xs(const block_iq4_xs *x, plm_arm_kdec *u) {
    const int8x16_t levels = vld1q_s8(kvalues_iq4nl);
    for (int ib = 0; ib < QK_K / 32; ib++) {
        uint8x16_t lo, hi;
        plm_arm_nibbles(x->qs + 16 * ib, &lo, &hi);
        vst1q_s8(u->q + 32 * ib, vqtbl1q_s8(levels, lo));
        vst1q_s8(u->q + 32 * ib + 16, vqtbl1q_s8(levels, hi));
        u->sc[ib] = plm_iq4_xs_scale(x, ib) - 32;
    }
    u->d = plm_arm_h2f(x->d);
    u->dmin = 0.0f;
}

/* Super-block b of a weight row of a K format (a constant at every call). */
PLM_ARM_INL void plm_arm_unpack_k(plm_type type, const void *row, int64_t b, plm_arm_kdec *u) {
    switch (type) {
    case PLM_TYPE_Q2_K: plm_arm_unpack_q2_K((const block_q2_K *)row + b, u); break;
    case PLM_TYPE_Q3_K: plm_arm_unpack_q3_K((const block_q3_K *)row + b, u); break;
    case PLM_TYPE_Q4_K: {
        const block_q4_K *x = (const block_q4_K *)row + b;
        plm_arm_unpack_q45_K(x->scales, x->qs, NULL, u);
        u->d = plm_arm_h2f(x->d);
        u->dmin = plm_arm_h2f(x->dmin);
        break;
    }
    case PLM_TYPE_Q5_K: {
        const block_q5_K *x = (const block_q5_K *)row + b;
        plm_arm_unpack_q45_K(x->scales, x->qs, x->qh, u);
        u->d = plm_arm_h2f(x->d);
        u->dmin = plm_arm_h2f(x->dmin);
        break;
    }
    case PLM_TYPE_Q6_K: plm_arm_unpack_q6_K((const block_q6_K *)row + b, u); break;
    default: plm_arm_unpack_iq4_xs((const block_iq4_xs *)row + b, u); break;
    }
}

/* sum_i m[i] * bsums[i] over 16 int16 pairs (m[0..7] in m0, m[8..15] in
 * m1), spread over four lanes. */
PLM_ARM_INL int32x4_t plm_arm_mins_dot16(int16x8_t m0, int16x8_t m1, const int16_t *bsums) {
    const int16x8_t b0 = vld1q_s16(bsums), b1 = vld1q_s16(bsums + 8);
    int32x4_t acc = vmull_s16(vget_low_s16(m0), vget_low_s16(b0));
    acc = vmlal_high_s16(acc, m0, b0);
    acc = vmlal_s16(acc, vget_low_s16(m1), vget_low_s16(b1));
    return vmlal_high_s16(acc, m1, b1);
}

/* The same with mn[16] in memory. */
PLM_ARM_INL int32x4_t plm_arm_mins_dot(const int16_t *mn, const int16_t *bsums) {
    return plm_arm_mins_dot16(vld1q_s16(mn), vld1q_s16(mn + 8), bsums);
}

/* acc + a super-block's float term, four lanes at a time, in the reference's
 * expression: (d_w d_a) isum - (dmin_w d_a) summ (dd and dm hold the scale
 * products).  The K-quant vec_dots use the same expression, so prefill
 * (gemm) and decode (vec_dot) give the same K-quant dots to the bit. */
PLM_ARM_INL float32x4_t plm_arm_k_accum(float32x4_t acc, int32x4_t isum, float32x4_t dd, int has_min,
                                        int32x4_t summ, float32x4_t dm) {
    float32x4_t v = vmulq_f32(vcvtq_f32_s32(isum), dd);
    if (has_min) v = vsubq_f32(v, vmulq_f32(vcvtq_f32_s32(summ), dm));
    return vaddq_f32(acc, v);
}

/* [sum(s0), sum(s1), sum(s2), sum(s3)]: three pairwise adds. */
PLM_ARM_INL int32x4_t plm_arm_reduce4(const int32x4_t s[4]) {
    return vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
}

#endif /* PLM_ARM */
#endif
