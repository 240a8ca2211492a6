/*
 * Integer dots of the codebook formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S, IQ1_S, IQ1_M), the ternary ones (TQ1_0, TQ2_0) against Q8_K and
 * MXFP4 against Q8_0.  Part of quants_tmpl.h (compiled once per PLM_DOT);
 * no include guard on purpose.
 *
 * A super-block is read 32 elements at a time as two int8x16 halves: grid
 * rows fetched by index, the signs of a 16-bit mask applied as (g ^ m) - m,
 * IQ1's 8 * grid +- 1 as a shift and an add (iq_unpack.h has the same
 * numbers in scalar form).  Each half is dotted with its 16 activations and
 * weighted by its integer scale, so the block total is the reference's
 * exact integer; TQ1_0's base-3 bytes go through the scalar decoder.
 */

#include "quant/iq_unpack.h"

/* 16 magnitudes g with the signs of bits 0..15 of `signs`. */
PLM_ARM_INL PLM_FN_ATTR int8x16_t FN(cb_signed)(int8x16_t g, unsigned signs) {
    const uint8x16_t bit = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ULL));
    const uint8x16_t s = vcombine_u8(vdup_n_u8((uint8_t)signs), vdup_n_u8((uint8_t)(signs >> 8)));
    const int8x16_t m = vreinterpretq_s8_u8(vtstq_u8(s, bit));
    return vsubq_s8(veorq_s8(g, m), m);
}

PLM_ARM_INL PLM_FN_ATTR int8x16_t FN(cb_grid8)(const uint64_t *grid, int i0, int i1) {
    return vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(grid[i0]), vcreate_u64(grid[i1])));
}

PLM_ARM_INL PLM_FN_ATTR int8x16_t FN(cb_grid4)(const uint32_t *grid, const uint8_t *i, int hi) {
    const uint32_t g[4] = {grid[i[0] | (hi & 1) << 8], grid[i[1] | (hi & 2) << 7], grid[i[2] | (hi & 4) << 6],
                           grid[i[3] | (hi & 8) << 5]};
    return vreinterpretq_s8_u32(vld1q_u32(g));
}

/* IQ1: 8 * grid (-1, 0, 1) + shift, s0 for the first 8 bytes, s1 the next. */
PLM_ARM_INL PLM_FN_ATTR int8x16_t FN(cb_iq1)(int i0, int i1, int s0, int s1) {
    const int8x16_t g = FN(cb_grid8)(plm_iq1s_grid, i0, i1);
    return vaddq_s8(vshlq_n_s8(g, 3), vcombine_s8(vdup_n_s8((int8_t)s0), vdup_n_s8((int8_t)s1)));
}

/* Sub-block j (elements 32j..32j+31) of super-block blk: its halves in w[0]
 * and w[1], their integer scales in ls[0] and ls[1]. */
PLM_ARM_INL PLM_FN_ATTR void FN(cb_weights32)(plm_type type, const void *blk, int j, int8x16_t w[2], int ls[2]) {
    switch (type) {
    case PLM_TYPE_IQ2_XXS: {
        const uint8_t *q = (const uint8_t *)((const block_iq2_xxs *)blk)->qs + 8 * j;
        const uint32_t aux = iq_u32(q + 4);
        ls[0] = ls[1] = (int)(2 * (aux >> 28) + 1);
        const unsigned s01 = plm_iq2_signs[aux & 127] | plm_iq2_signs[(aux >> 7) & 127] << 8;
        const unsigned s23 = plm_iq2_signs[(aux >> 14) & 127] | plm_iq2_signs[(aux >> 21) & 127] << 8;
        w[0] = FN(cb_signed)(FN(cb_grid8)(plm_iq2xxs_grid, q[0], q[1]), s01);
        w[1] = FN(cb_signed)(FN(cb_grid8)(plm_iq2xxs_grid, q[2], q[3]), s23);
        break;
    }
    case PLM_TYPE_IQ2_XS: {
        const block_iq2_xs *b = blk;
        const uint16_t *q = b->qs + 4 * j;
        ls[0] = 2 * (b->scales[j] & 15) + 1;
        ls[1] = 2 * (b->scales[j] >> 4) + 1;
        for (int h = 0; h < 2; h++) {
            const unsigned s = plm_iq2_signs[q[2 * h] >> 9] | plm_iq2_signs[q[2 * h + 1] >> 9] << 8;
            w[h] = FN(cb_signed)(FN(cb_grid8)(plm_iq2xs_grid, q[2 * h] & 511, q[2 * h + 1] & 511), s);
        }
        break;
    }
    case PLM_TYPE_IQ2_S: {
        const block_iq2_s *b = blk;
        const uint8_t *q = b->qs + 4 * j, *sg = b->qs + QK_K / 8 + 4 * j;
        const int h = b->qh[j];
        ls[0] = 2 * (b->scales[j] & 15) + 1;
        ls[1] = 2 * (b->scales[j] >> 4) + 1;
        w[0] = FN(cb_signed)(FN(cb_grid8)(plm_iq2s_grid, q[0] | (h << 8 & 0x300), q[1] | (h << 6 & 0x300)),
                             sg[0] | sg[1] << 8);
        w[1] = FN(cb_signed)(FN(cb_grid8)(plm_iq2s_grid, q[2] | (h << 4 & 0x300), q[3] | (h << 2 & 0x300)),
                             sg[2] | sg[3] << 8);
        break;
    }
    case PLM_TYPE_IQ3_XXS: {
        const block_iq3_xxs *b = blk;
        const uint8_t *q = b->qs + 8 * j;
        const uint32_t aux = iq_u32(b->qs + QK_K / 4 + 4 * j);
        ls[0] = ls[1] = (int)(2 * (aux >> 28) + 1);
        const unsigned s01 = plm_iq2_signs[aux & 127] | plm_iq2_signs[(aux >> 7) & 127] << 8;
        const unsigned s23 = plm_iq2_signs[(aux >> 14) & 127] | plm_iq2_signs[(aux >> 21) & 127] << 8;
        w[0] = FN(cb_signed)(FN(cb_grid4)(plm_iq3xxs_grid, q, 0), s01);
        w[1] = FN(cb_signed)(FN(cb_grid4)(plm_iq3xxs_grid, q + 4, 0), s23);
        break;
    }
    case PLM_TYPE_IQ3_S: {
        const block_iq3_s *b = blk;
        const uint8_t *q = b->qs + 8 * j, *sg = b->signs + 4 * j;
        const int h = b->qh[j];  /* bit i: ninth bit of index i */
        ls[0] = ls[1] = 2 * ((b->scales[j / 2] >> (4 * (j % 2))) & 15) + 1;
        w[0] = FN(cb_signed)(FN(cb_grid4)(plm_iq3s_grid, q, h), sg[0] | sg[1] << 8);
        w[1] = FN(cb_signed)(FN(cb_grid4)(plm_iq3s_grid, q + 4, h >> 4), sg[2] | sg[3] << 8);
        break;
    }
    case PLM_TYPE_IQ1_S: {
        const block_iq1_s *b = blk;
        const uint8_t *q = b->qs + 4 * j;
        const int h = b->qh[j], s = h & 0x8000 ? -1 : 1;
        ls[0] = ls[1] = 2 * ((h >> 12) & 7) + 1;
        w[0] = FN(cb_iq1)(q[0] | (h << 8 & 0x700), q[1] | (h << 5 & 0x700), s, s);
        w[1] = FN(cb_iq1)(q[2] | (h << 2 & 0x700), q[3] | (h >> 1 & 0x700), s, s);
        break;
    }
    case PLM_TYPE_IQ1_M: {
        const block_iq1_m *b = blk;
        const uint8_t *q = b->qs + 4 * j, h0 = b->qh[2 * j], h1 = b->qh[2 * j + 1];
        uint16_t s16[4];
        memcpy(s16, b->scales, sizeof s16);
        const int s = s16[j / 2] >> (6 * (j % 2));
        ls[0] = 2 * (s & 7) + 1;
        ls[1] = 2 * ((s >> 3) & 7) + 1;
        w[0] = FN(cb_iq1)(q[0] | (h0 << 8 & 0x700), q[1] | (h0 << 4 & 0x700), h0 & 0x08 ? -1 : 1, h0 & 0x80 ? -1 : 1);
        w[1] = FN(cb_iq1)(q[2] | (h1 << 8 & 0x700), q[3] | (h1 << 4 & 0x700), h1 & 0x08 ? -1 : 1, h1 & 0x80 ? -1 : 1);
        break;
    }
    default: { /* TQ2_0: element 128h + 32l + m is bits 2l of qs[32h + m] */
        const block_tq2_0 *b = blk;
        const uint8_t *q = b->qs + 32 * (j / 4);
        const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * (j % 4)));
        const uint8x16_t three = vdupq_n_u8(3);
        ls[0] = ls[1] = 1;
        for (int h = 0; h < 2; h++) {
            const uint8x16_t v = vandq_u8(vshlq_u8(vld1q_u8(q + 16 * h), sh), three);
            w[h] = vsubq_s8(vreinterpretq_s8_u8(v), vdupq_n_s8(1));
        }
        break;
    }
    }
}

/* The block scale d (f16; IQ1_M's spread over its sub-block scales). */
PLM_ARM_INL float FN(cb_d)(plm_type type, const void *blk) {
    switch (type) {
    case PLM_TYPE_IQ1_M: {
        uint16_t sc[4];
        memcpy(sc, ((const block_iq1_m *)blk)->scales, sizeof sc);
        return plm_arm_h2f((plm_fp16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                        (sc[3] & 0xf000)));
    }
    case PLM_TYPE_TQ2_0: return plm_arm_h2f(((const block_tq2_0 *)blk)->d);
    default: {
        plm_fp16_t h;
        memcpy(&h, blk, sizeof h);  /* the IQ2/IQ3/IQ1_S blocks lead with d */
        return plm_arm_h2f(h);
    }
    }
}

/* vec_dot of a codebook format: per super-block sum_j ls_j * dot_j exact in
 * int32 lanes, scaled once; the format's power of two at the end. */
PLM_ARM_INL PLM_FN_ATTR void FN(vec_dot_cb)(plm_type type, int64_t n, float *s, const void *vw, const void *va) {
    const size_t bx = plm_type_info_get(type)->type_size;
    const uint8_t *x = vw;
    const block_q8_K *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const void *blk = x + (size_t)i * bx;
        int32x4_t isum = vdupq_n_s32(0);
        float d;
        if (type == PLM_TYPE_TQ1_0) {
            plm_iq_codes c;
            d = plm_unpack_tq1_0(blk, &c);
            for (int j = 0; j < QK_K / 16; j++)
                isum = PLM_DOT(isum, vld1q_s8(c.q + 16 * j), vld1q_s8(y[i].qs + 16 * j));
        } else {
            d = FN(cb_d)(type, blk);
            for (int j = 0; j < QK_K / 32; j++) {
                int8x16_t w[2];
                int ls[2];
                FN(cb_weights32)(type, blk, j, w, ls);
                const int8_t *a = y[i].qs + 32 * j;
                isum = vmlaq_n_s32(isum, PLM_DOT(vdupq_n_s32(0), w[0], vld1q_s8(a)), ls[0]);
                isum = vmlaq_n_s32(isum, PLM_DOT(vdupq_n_s32(0), w[1], vld1q_s8(a + 16)), ls[1]);
            }
        }
        sum += d * y[i].d * vaddvq_s32(isum);
    }
    *s = sum * plm_iq_post(type);
}

PLM_FN_ATTR static void FN(vec_dot_iq2_xxs)(int64_t n, float *s, const void *w, const void *a) {
    FN(vec_dot_cb)(PLM_TYPE_IQ2_XXS, n, s, w, a);
}

PLM_FN_ATTR static void FN(vec_dot_iq2_xs)(int64_t n, float *s, const void *w, const void *a) {
    FN(vec_dot_cb)(PLM_TYPE_IQ2_XS, n, s, w, a);
}

PLM_FN_ATTR static void FN(vec_dot_iq2_s)(int64_t n, float *s, const void *w, const void *a) {
    FN(vec_dot_cb)(PLM_TYPE_IQ2_S, n, s, w, a);
}

PLM_FN_ATTR static void FN(vec_dot_iq3_xxs)(int64_t n, float *s, const void *w, const void *a) {
    FN(vec_dot_cb)(PLM_TYPE_IQ3_XXS, n, s, w, a);
}

PLM_FN_ATTR static void FN(vec_dot_iq3_s)(int64_t n, float *s, const void *w, const void *a) {
    FN(vec_dot_cb)(PLM_TYPE_IQ3_S, n, s, w, a);
}

PLM_FN_ATTR static void FN(vec_dot_iq1_s)(int64_t n, float *s, const void *w, const void *a) {
    FN(vec_dot_cb)(PLM_TYPE_IQ1_S, n, s, w, a);
}

PLM_FN_ATTR static void FN(vec_dot_iq1_m)(int64_t n, float *s, const void *w, const void *a) {
    FN(vec_dot_cb)(PLM_TYPE_IQ1_M, n, s, w, a);
}

PLM_FN_ATTR static void FN(vec_dot_tq1_0)(int64_t n, float *s, const void *w, const void *a) {
    FN(vec_dot_cb)(PLM_TYPE_TQ1_0, n, s, w, a);
}

PLM_FN_ATTR static void FN(vec_dot_tq2_0)(int64_t n, float *s, const void *w, const void *a) {
    FN(vec_dot_cb)(PLM_TYPE_TQ2_0, n, s, w, a);
}

/* MXFP4: IQ4_NL's shape with the doubled E2M1 levels and an E8M0 scale. */
PLM_FN_ATTR static void FN(vec_dot_mxfp4)(int64_t n, float *s, const void *vw, const void *va) {
    *s = FN(dot_row32)(PLM_TYPE_MXFP4, n, vw, va);
}

static void FN(fill_codebooks)(plm_kernels *t) {
    t->vec_dot[PLM_TYPE_IQ2_XXS] = FN(vec_dot_iq2_xxs);
    t->vec_dot[PLM_TYPE_IQ2_XS] = FN(vec_dot_iq2_xs);
    t->vec_dot[PLM_TYPE_IQ2_S] = FN(vec_dot_iq2_s);
    t->vec_dot[PLM_TYPE_IQ3_XXS] = FN(vec_dot_iq3_xxs);
    t->vec_dot[PLM_TYPE_IQ3_S] = FN(vec_dot_iq3_s);
    t->vec_dot[PLM_TYPE_IQ1_S] = FN(vec_dot_iq1_s);
    t->vec_dot[PLM_TYPE_IQ1_M] = FN(vec_dot_iq1_m);
    t->vec_dot[PLM_TYPE_TQ1_0] = FN(vec_dot_tq1_0);
    t->vec_dot[PLM_TYPE_TQ2_0] = FN(vec_dot_tq2_0);
    t->vec_dot[PLM_TYPE_MXFP4] = FN(vec_dot_mxfp4);
}
