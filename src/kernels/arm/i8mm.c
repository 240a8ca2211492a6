/*
 * The i8mm table: the dotprod table plus a tiled gemm built on SMMLA.
 *
 * SMMLA multiplies a 2x8 int8 matrix by the transpose of another 2x8 one
 * and adds the 2x2 int32 result to an accumulator: with the first operand
 * holding 8 quants of weight rows r and r+1 and the second 8 quants of
 * activation rows t and t+1, one instruction yields the four dot products
 * of a 2-row x 2-token tile, lanes [r.t, r.t+1, r+1.t, r+1.t+1].  Each
 * 32-element block takes four of them; block totals are then scaled by the
 * four products of block scales and summed in float, as vec_dot does.
 *
 * Formats whose activation is Q8_0 and whose weights unpack to one int8 per
 * element cheaply: Q4_0, Q8_0, IQ4_NL.  Odd last rows and tokens fall back
 * to the (dotprod) vec_dot of the table.
 */
#include "kernels/arm/arm.h"

#if defined(PLM_ARM)

/* vec_dot of the table below this one, for the rows and tokens outside
 * whole 2x2 tiles; written once while the tables are built. */
static plm_vec_dot_fn tail_dot[PLM_TYPE_COUNT];

/* The 64-bit halves: [a.lo, b.lo] and [a.hi, b.hi]. */
static inline int8x16_t zip_lo(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
static inline int8x16_t zip_hi(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

/* Block b of a weight row as int8 (elements 0..15 in *e0, 16..31 in *e1)
 * and its scale.  `type` is a constant at every call, so each gemm below
 * gets its own straight-line unpacking. */
static inline __attribute__((always_inline)) float unpack_block(plm_type type, const void *row, int64_t b,
                                                                int8x16_t *e0, int8x16_t *e1) {
    if (type == PLM_TYPE_Q8_0) {
        const block_q8_0 *x = (const block_q8_0 *)row + b;
        *e0 = vld1q_s8(x->qs);
        *e1 = vld1q_s8(x->qs + 16);
        return plm_arm_h2f(x->d);
    }
    /* Q4_0 and IQ4_NL: 32 nibbles, low ones first, mapped through a table */
    const block_q4_0 *x = (const block_q4_0 *)row + b;  /* same layout as block_iq4_nl */
    static const int8_t minus8[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};
    const int8x16_t levels = vld1q_s8(type == PLM_TYPE_IQ4_NL ? kvalues_iq4nl : minus8);
    const uint8x16_t q = vld1q_u8(x->qs);
    *e0 = vqtbl1q_s8(levels, vandq_u8(q, vdupq_n_u8(0x0f)));
    *e1 = vqtbl1q_s8(levels, vshrq_n_u8(q, 4));
    return plm_arm_h2f(x->d);
}

/* out[t][r], out[t+1][r], out[t][r+1], out[t+1][r+1] for k elements. */
static inline __attribute__((always_inline)) PLM_TARGET_I8MM float32x4_t
tile_2x2(plm_type type, int64_t nb, const void *w0, const void *w1, const block_q8_0 *a0,
         const block_q8_0 *a1) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        int8x16_t r0a, r0b, r1a, r1b;
        const float d0 = unpack_block(type, w0, b, &r0a, &r0b);
        const float d1 = unpack_block(type, w1, b, &r1a, &r1b);
        const int8x16_t t0a = vld1q_s8(a0[b].qs), t0b = vld1q_s8(a0[b].qs + 16);
        const int8x16_t t1a = vld1q_s8(a1[b].qs), t1b = vld1q_s8(a1[b].qs + 16);
        int32x4_t p = vmmlaq_s32(vdupq_n_s32(0), zip_lo(r0a, r1a), zip_lo(t0a, t1a));
        p = vmmlaq_s32(p, zip_hi(r0a, r1a), zip_hi(t0a, t1a));
        p = vmmlaq_s32(p, zip_lo(r0b, r1b), zip_lo(t0b, t1b));
        p = vmmlaq_s32(p, zip_hi(r0b, r1b), zip_hi(t0b, t1b));
        const float da0 = plm_arm_h2f(a0[b].d), da1 = plm_arm_h2f(a1[b].d);
        const float scale[4] = {d0 * da0, d0 * da1, d1 * da0, d1 * da1};
        acc = vmlaq_f32(acc, vcvtq_f32_s32(p), vld1q_f32(scale));
    }
    return acc;
}

static inline __attribute__((always_inline)) PLM_TARGET_I8MM void
gemm_tiles(plm_type type, int64_t k, const void *w, size_t w_stride, int64_t n_rows, const void *act,
           size_t act_stride, int n_tok, float *out, int64_t out_stride) {
    const int64_t nb = k / QK8_0;
    const plm_vec_dot_fn dot = tail_dot[type];
    const char *wc = w, *ac = act;
    int64_t r = 0;
    for (; r + 1 < n_rows; r += 2) {
        const char *w0 = wc + (size_t)r * w_stride, *w1 = w0 + w_stride;
        int t = 0;
        for (; t + 1 < n_tok; t += 2) {
            const block_q8_0 *a0 = (const block_q8_0 *)(ac + (size_t)t * act_stride);
            const block_q8_0 *a1 = (const block_q8_0 *)(ac + (size_t)(t + 1) * act_stride);
            const float32x4_t v = tile_2x2(type, nb, w0, w1, a0, a1);
            out[t * out_stride + r] = vgetq_lane_f32(v, 0);
            out[(t + 1) * out_stride + r] = vgetq_lane_f32(v, 1);
            out[t * out_stride + r + 1] = vgetq_lane_f32(v, 2);
            out[(t + 1) * out_stride + r + 1] = vgetq_lane_f32(v, 3);
        }
        if (t < n_tok) {
            const char *a = ac + (size_t)t * act_stride;
            dot(k, &out[t * out_stride + r], w0, a);
            dot(k, &out[t * out_stride + r + 1], w1, a);
        }
    }
    if (r < n_rows)
        for (int t = 0; t < n_tok; t++)
            dot(k, &out[t * out_stride + r], wc + (size_t)r * w_stride, ac + (size_t)t * act_stride);
}

PLM_TARGET_I8MM static void gemm_q4_0(int64_t k, const void *w, size_t w_stride, int64_t n_rows,
                                      const void *act, size_t act_stride, int n_tok, float *out,
                                      int64_t out_stride) {
    gemm_tiles(PLM_TYPE_Q4_0, k, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
}

PLM_TARGET_I8MM static void gemm_q8_0(int64_t k, const void *w, size_t w_stride, int64_t n_rows,
                                      const void *act, size_t act_stride, int n_tok, float *out,
                                      int64_t out_stride) {
    gemm_tiles(PLM_TYPE_Q8_0, k, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
}

PLM_TARGET_I8MM static void gemm_iq4_nl(int64_t k, const void *w, size_t w_stride, int64_t n_rows,
                                        const void *act, size_t act_stride, int n_tok, float *out,
                                        int64_t out_stride) {
    gemm_tiles(PLM_TYPE_IQ4_NL, k, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride);
}

void plm_arm_fill_i8mm(plm_kernels *t) {
    for (int i = 0; i < PLM_TYPE_COUNT; i++) tail_dot[i] = t->vec_dot[i];
    t->gemm[PLM_TYPE_Q4_0] = gemm_q4_0;
    t->gemm[PLM_TYPE_Q8_0] = gemm_q8_0;
    t->gemm[PLM_TYPE_IQ4_NL] = gemm_iq4_nl;
}

#else
typedef int plm_arm_i8mm_unused; /* ISO C: no empty translation unit */
#endif
