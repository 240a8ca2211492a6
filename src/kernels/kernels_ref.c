/*
 * The scalar reference kernels: one vec_dot per weight type, against the
 * activation format types.c names for it.  As in ggml's generic code, each
 * block is reduced with exact integer arithmetic and only the block total is
 * scaled in float, so a SIMD kernel that sums the same integers in another
 * order gets the same block totals.  This table is the oracle every faster
 * table is tested against, so it favours clarity over speed.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn_quant.h"
#include "kernels/coarse.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "quant/blocks.h"
#include "quant/iq_unpack.h"
#include "quant/quant.h"
#include "quant/repack.h"

/* ---- float formats (activation stays f32) ------------------------------- */

/* Products in float, accumulated in double, as ggml's scalar f32/f16 dots. */
static void ref_vec_dot_f32(int64_t n, float *s, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(w[i] * a[i]);
    *s = (float)sum;
}

static void ref_vec_dot_f16(int64_t n, float *s, const void *vw, const void *va) {
    const plm_fp16_t *w = vw;
    const float *a = va;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(plm_fp16_to_fp32(w[i]) * a[i]);
    *s = (float)sum;
}

static void ref_vec_dot_bf16(int64_t n, float *s, const void *vw, const void *va) {
    const plm_bf16_t *w = vw;
    const float *a = va;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(plm_bf16_to_fp32(w[i]) * a[i]);
    *s = (float)sum;
}

/* ---- 32-element formats ------------------------------------------------- */

/* Integer dot of 16 nibble-coded weights (low or high nibbles of qs, mapped
 * through lut) with 16 int8 activations. */
static int dot_nibbles(const uint8_t *qs, int shift, const int8_t *lut, const int8_t *q8) {
    int sum = 0;
    for (int j = 0; j < 16; j++) sum += lut[(qs[j] >> shift) & 0xf] * q8[j];
    return sum;
}

static const int8_t lut_minus8[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};
static const int8_t lut_plain[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

static void ref_vec_dot_q4_0(int64_t n, float *s, const void *vw, const void *va) {
    const block_q4_0 *x = vw;
    const block_q8_0 *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        const int sumi = dot_nibbles(x[i].qs, 0, lut_minus8, y[i].qs) +
                         dot_nibbles(x[i].qs, 4, lut_minus8, y[i].qs + 16);
        sum += sumi * plm_fp16_to_fp32(x[i].d) * plm_fp16_to_fp32(y[i].d);
    }
    *s = sum;
}

/* The min term m * sum(a) comes from Q8_1's precomputed s = d_a * sum(q_a). */
static void ref_vec_dot_q4_1(int64_t n, float *s, const void *vw, const void *va) {
    const block_q4_1 *x = vw;
    const block_q8_1 *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        const int sumi = dot_nibbles(x[i].qs, 0, lut_plain, y[i].qs) +
                         dot_nibbles(x[i].qs, 4, lut_plain, y[i].qs + 16);
        sum += (plm_fp16_to_fp32(x[i].d) * plm_fp16_to_fp32(y[i].d)) * sumi +
               plm_fp16_to_fp32(x[i].m) * plm_fp16_to_fp32(y[i].s);
    }
    *s = sum;
}

/* Integer dot of one Q5 block's 32 unsigned 5-bit values with q8. */
static int dot_q5(const uint8_t qs[16], const uint8_t qh[4], int bias, const int8_t *q8) {
    const uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
                       (uint32_t)qh[3] << 24;
    int sum = 0;
    for (int j = 0; j < 16; j++) {
        const int v0 = ((qs[j] & 0xf) | (int)((h >> j) & 1) << 4) - bias;
        const int v1 = ((qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4) - bias;
        sum += v0 * q8[j] + v1 * q8[j + 16];
    }
    return sum;
}

static void ref_vec_dot_q5_0(int64_t n, float *s, const void *vw, const void *va) {
    const block_q5_0 *x = vw;
    const block_q8_0 *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        const int sumi = dot_q5(x[i].qs, x[i].qh, 16, y[i].qs);
        sum += sumi * plm_fp16_to_fp32(x[i].d) * plm_fp16_to_fp32(y[i].d);
    }
    *s = sum;
}

static void ref_vec_dot_q5_1(int64_t n, float *s, const void *vw, const void *va) {
    const block_q5_1 *x = vw;
    const block_q8_1 *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        const int sumi = dot_q5(x[i].qs, x[i].qh, 0, y[i].qs);
        sum += (plm_fp16_to_fp32(x[i].d) * plm_fp16_to_fp32(y[i].d)) * sumi +
               plm_fp16_to_fp32(x[i].m) * plm_fp16_to_fp32(y[i].s);
    }
    *s = sum;
}

static void ref_vec_dot_q8_0(int64_t n, float *s, const void *vw, const void *va) {
    const block_q8_0 *x = vw;
    const block_q8_0 *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; j++) sumi += x[i].qs[j] * y[i].qs[j];
        sum += sumi * (plm_fp16_to_fp32(x[i].d) * plm_fp16_to_fp32(y[i].d));
    }
    *s = sum;
}

static void ref_vec_dot_iq4_nl(int64_t n, float *s, const void *vw, const void *va) {
    const block_iq4_nl *x = vw;
    const block_q8_0 *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_NL; i++) {
        const int sumi = dot_nibbles(x[i].qs, 0, kvalues_iq4nl, y[i].qs) +
                         dot_nibbles(x[i].qs, 4, kvalues_iq4nl, y[i].qs + 16);
        sum += plm_fp16_to_fp32(x[i].d) * plm_fp16_to_fp32(y[i].d) * sumi;
    }
    *s = sum;
}

/* ---- K-quants: unpack a 256-element super-block to small ints, then sum
 * sub-block dots times their integer scales ------------------------------- */

static int dot_i8(const int8_t *a, const int8_t *b, int n) {
    int sum = 0;
    for (int j = 0; j < n; j++) sum += a[j] * b[j];
    return sum;
}

/* Q2_K/Q3_K share the plane layout: per 128 elements, plane p (bits 2p..2p+1)
 * of qs byte l is element 32*p + l. */
static void unpack_2bit_planes(const uint8_t *qs, int8_t q[QK_K]) {
    for (int half = 0; half < 2; half++)
        for (int p = 0; p < 4; p++)
            for (int l = 0; l < 32; l++)
                q[128 * half + 32 * p + l] = (int8_t)((qs[32 * half + l] >> (2 * p)) & 3);
}

/* Sum over the super-block of bsums * mins: the dot of the per-sub-block
 * offsets with the activation, without touching the quants. */
static void ref_vec_dot_q2_K(int64_t n, float *s, const void *vw, const void *va) {
    const block_q2_K *x = vw;
    const block_q8_K *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t q[QK_K];
        unpack_2bit_planes(x[i].qs, q);
        int isum = 0, summ = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            isum += (x[i].scales[j] & 0xf) * dot_i8(q + 16 * j, y[i].qs + 16 * j, 16);
            summ += (x[i].scales[j] >> 4) * y[i].bsums[j];
        }
        const float dall = y[i].d * plm_fp16_to_fp32(x[i].d);
        const float dmin = y[i].d * plm_fp16_to_fp32(x[i].dmin);
        sum += dall * isum - dmin * summ;
    }
    *s = sum;
}

static void ref_vec_dot_q3_K(int64_t n, float *s, const void *vw, const void *va) {
    const block_q3_K *x = vw;
    const block_q8_K *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t q[QK_K];
        unpack_2bit_planes(x[i].qs, q);
        /* hmask bit b of byte l belongs to element 32*b + l; clear = minus 4 */
        for (int b = 0; b < 8; b++)
            for (int l = 0; l < 32; l++)
                if (!(x[i].hmask[l] & (1u << b))) q[32 * b + l] -= 4;
        int isum = 0;
        for (int j = 0; j < QK_K / 16; j++)
            isum += (plm_q3_K_scale(j, x[i].scales) - 32) * dot_i8(q + 16 * j, y[i].qs + 16 * j, 16);
        sum += plm_fp16_to_fp32(x[i].d) * y[i].d * isum;
    }
    *s = sum;
}

/* Q4_K/Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins.  qh is NULL for
 * Q4_K; for Q5_K bit 2j (2j+1) of qh[l] is the fifth bit of element l of
 * sub-block 2j (2j+1). */
static float dot_q45_K(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                       float d, float dmin, const block_q8_K *y) {
    int8_t q[QK_K];
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            const uint8_t b = qs[32 * j + l];
            q[64 * j + l] = (int8_t)((b & 0xf) | (qh ? ((qh[l] >> (2 * j)) & 1) << 4 : 0));
            q[64 * j + 32 + l] = (int8_t)((b >> 4) | (qh ? ((qh[l] >> (2 * j + 1)) & 1) << 4 : 0));
        }
    int isum = 0, summ = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        plm_get_scale_min_k4(j, scales, &sc, &m);
        isum += sc * dot_i8(q + 32 * j, y->qs + 32 * j, 32);
        summ += m * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
    }
    return d * y->d * isum - dmin * y->d * summ;
}

static void ref_vec_dot_q4_K(int64_t n, float *s, const void *vw, const void *va) {
    const block_q4_K *x = vw;
    const block_q8_K *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++)
        sum += dot_q45_K(x[i].scales, x[i].qs, NULL, plm_fp16_to_fp32(x[i].d),
                         plm_fp16_to_fp32(x[i].dmin), &y[i]);
    *s = sum;
}

static void ref_vec_dot_q5_K(int64_t n, float *s, const void *vw, const void *va) {
    const block_q5_K *x = vw;
    const block_q8_K *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++)
        sum += dot_q45_K(x[i].scales, x[i].qs, x[i].qh, plm_fp16_to_fp32(x[i].d),
                         plm_fp16_to_fp32(x[i].dmin), &y[i]);
    *s = sum;
}

/* Q6_K: see dequantize.c for the ql/qh layout. */
static void ref_vec_dot_q6_K(int64_t n, float *s, const void *vw, const void *va) {
    const block_q6_K *x = vw;
    const block_q8_K *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t q[QK_K];
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = x[i].ql + 64 * half, *qh = x[i].qh + 32 * half;
            int8_t *o = q + 128 * half;
            for (int l = 0; l < 32; l++) {
                o[l] = (int8_t)(((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32);
                o[l + 32] = (int8_t)(((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32);
                o[l + 64] = (int8_t)(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
                o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
            }
        }
        int isum = 0;
        for (int j = 0; j < QK_K / 16; j++)
            isum += x[i].scales[j] * dot_i8(q + 16 * j, y[i].qs + 16 * j, 16);
        sum += plm_fp16_to_fp32(x[i].d) * y[i].d * isum;
    }
    *s = sum;
}

static void ref_vec_dot_iq4_xs(int64_t n, float *s, const void *vw, const void *va) {
    const block_iq4_xs *x = vw;
    const block_q8_K *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint8_t *qs = x[i].qs + 16 * ib;
            const int8_t *q8 = y[i].qs + 32 * ib;
            const int sumi = dot_nibbles(qs, 0, kvalues_iq4nl, q8) +
                             dot_nibbles(qs, 4, kvalues_iq4nl, q8 + 16);
            isum += (plm_iq4_xs_scale(&x[i], ib) - 32) * sumi;
        }
        sum += plm_fp16_to_fp32(x[i].d) * y[i].d * isum;
    }
    *s = sum;
}

/* ---- codebook formats (IQ1/IQ2/IQ3, ternary) and MXFP4 ------------------ */

/* Every codebook format through its decoder (iq_unpack.h): per block the
 * exact integer sum(ls * sum(q * a)) over sub-blocks of 16, scaled once. */
static void ref_vec_dot_codes(plm_type t, int64_t n, float *s, const void *vw, const void *va) {
    const plm_type_info *ti = plm_type_info_get(t);
    const plm_iq_unpack_fn unpack = plm_iq_unpacker(t);
    const uint8_t *x = vw;
    const block_q8_K *y = va;
    plm_iq_codes c;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = unpack(x + (size_t)i * ti->type_size, &c);
        int isum = 0;
        for (int j = 0; j < QK_K / 16; j++) isum += c.ls[j] * dot_i8(c.q + 16 * j, y[i].qs + 16 * j, 16);
        sum += d * y[i].d * isum;
    }
    *s = sum * plm_iq_post(t);
}

static void ref_vec_dot_iq2_xxs(int64_t n, float *s, const void *w, const void *a) {
    ref_vec_dot_codes(PLM_TYPE_IQ2_XXS, n, s, w, a);
}

static void ref_vec_dot_iq2_xs(int64_t n, float *s, const void *w, const void *a) {
    ref_vec_dot_codes(PLM_TYPE_IQ2_XS, n, s, w, a);
}

static void ref_vec_dot_iq2_s(int64_t n, float *s, const void *w, const void *a) {
    ref_vec_dot_codes(PLM_TYPE_IQ2_S, n, s, w, a);
}

static void ref_vec_dot_iq3_xxs(int64_t n, float *s, const void *w, const void *a) {
    ref_vec_dot_codes(PLM_TYPE_IQ3_XXS, n, s, w, a);
}

static void ref_vec_dot_iq3_s(int64_t n, float *s, const void *w, const void *a) {
    ref_vec_dot_codes(PLM_TYPE_IQ3_S, n, s, w, a);
}

static void ref_vec_dot_iq1_s(int64_t n, float *s, const void *w, const void *a) {
    ref_vec_dot_codes(PLM_TYPE_IQ1_S, n, s, w, a);
}

static void ref_vec_dot_iq1_m(int64_t n, float *s, const void *w, const void *a) {
    ref_vec_dot_codes(PLM_TYPE_IQ1_M, n, s, w, a);
}

static void ref_vec_dot_tq1_0(int64_t n, float *s, const void *w, const void *a) {
    ref_vec_dot_codes(PLM_TYPE_TQ1_0, n, s, w, a);
}

static void ref_vec_dot_tq2_0(int64_t n, float *s, const void *w, const void *a) {
    ref_vec_dot_codes(PLM_TYPE_TQ2_0, n, s, w, a);
}

/* MXFP4 against Q8_0: the doubled E2M1 values are integers, the E8M0 scale
 * (halved to undo the doubling) a power of two. */
static void ref_vec_dot_mxfp4(int64_t n, float *s, const void *vw, const void *va) {
    const block_mxfp4 *x = vw;
    const block_q8_0 *y = va;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_MXFP4; i++) {
        const int sumi = dot_nibbles(x[i].qs, 0, kvalues_mxfp4, y[i].qs) +
                         dot_nibbles(x[i].qs, 4, kvalues_mxfp4, y[i].qs + 16);
        sum += plm_fp16_to_fp32(y[i].d) * plm_e8m0_half(x[i].e) * sumi;
    }
    *s = sum;
}

/* ---- row-interleaved weights (quant/repack.h) ---------------------------
 * Row by row and block by block, with the float arithmetic of the plain
 * row's vec_dot above, so a repacked row gives that row's result exactly:
 * the oracle of the SIMD versions and of the layout itself. */
static void ref_gemm_repacked(plm_type type, int64_t k, const void *w, size_t row_bytes, int64_t nr,
                              const void *act, size_t as, int nt, float *out, int64_t os) {
    const size_t bb = plm_row_size(type, 32), sb = PLM_REPACK_ROWS * bb;
    const int o = plm_repack_offset(type);
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *g = (const uint8_t *)w + (size_t)(r / PLM_REPACK_ROWS) * PLM_REPACK_ROWS * row_bytes;
        const int j = (int)(r % PLM_REPACK_ROWS);
        for (int t = 0; t < nt; t++) {
            const block_q8_0 *y = (const void *)((const char *)act + (size_t)t * as);
            float sum = 0.0f;
            for (int64_t b = 0; b < k / 32; b++) {
                const uint8_t *blk = g + (size_t)b * sb;
                plm_fp16_t d;
                memcpy(&d, blk + j * sizeof d, sizeof d);
                int sumi = 0;
                for (int e = 0; e < 32; e++)
                    sumi += (plm_repack_code(type, blk + PLM_REPACK_ROWS * sizeof d, j, e) - o) * y[b].qs[e];
                if (type == PLM_TYPE_Q8_0) sum += sumi * (plm_fp16_to_fp32(d) * plm_fp16_to_fp32(y[b].d));
                else sum += sumi * plm_fp16_to_fp32(d) * plm_fp16_to_fp32(y[b].d);
            }
            out[t * os + r] = sum;
        }
    }
}

static void ref_gemm_repacked_q4_0(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                   int nt, float *out, int64_t os) {
    ref_gemm_repacked(PLM_TYPE_Q4_0, k, w, ws, nr, act, as, nt, out, os);
}

static void ref_gemm_repacked_q5_0(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                   int nt, float *out, int64_t os) {
    ref_gemm_repacked(PLM_TYPE_Q5_0, k, w, ws, nr, act, as, nt, out, os);
}

static void ref_gemm_repacked_q8_0(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                   int nt, float *out, int64_t os) {
    ref_gemm_repacked(PLM_TYPE_Q8_0, k, w, ws, nr, act, as, nt, out, os);
}

/* Q4_K: each row's super-block gathered back from the layout, then the
 * plain row's dot_q45_K. */
static void ref_gemm_repacked_q4_K(int64_t k, const void *w, size_t row_bytes, int64_t nr, const void *act,
                                   size_t as, int nt, float *out, int64_t os) {
    const size_t sb = PLM_REPACK_ROWS * sizeof(block_q4_K);
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *g = (const uint8_t *)w + (size_t)(r / PLM_REPACK_ROWS) * PLM_REPACK_ROWS * row_bytes;
        const int j = (int)(r % PLM_REPACK_ROWS);
        for (int t = 0; t < nt; t++) {
            const block_q8_K *y = (const void *)((const char *)act + (size_t)t * as);
            float sum = 0.0f;
            for (int64_t b = 0; b < k / QK_K; b++) {
                const uint8_t *blk = g + (size_t)b * sb;
                plm_fp16_t d, dmin;
                uint8_t scales[K_SCALE_SIZE], qs[QK_K / 2];
                memcpy(&d, blk + 2 * j, 2);
                memcpy(&dmin, blk + PLM_RQ4K_DMIN + 2 * j, 2);
                for (int p = 0; p < K_SCALE_SIZE; p++) scales[p] = blk[PLM_RQ4K_PLANES + 16 * p + j];
                for (int i = 0; i < 4; i++)
                    for (int l = 0; l < 32; l++)
                        qs[32 * i + l] = blk[PLM_RQ4K_CODES + 512 * i + (l / 4) * 64 + 4 * j + l % 4];
                sum += dot_q45_K(scales, qs, NULL, plm_fp16_to_fp32(d), plm_fp16_to_fp32(dmin), &y[b]);
            }
            out[t * os + r] = sum;
        }
    }
}

/* Any repacked type: each row gathered back into ggml's layout
 * (plm_repack_gather), then the plain row's vec_dot, so the result is that
 * row's exactly. */
static plm_vec_dot_fn ref_vec_dot_of(plm_type type) {
    switch (type) {
    case PLM_TYPE_IQ4_NL: return ref_vec_dot_iq4_nl;
    case PLM_TYPE_Q5_K: return ref_vec_dot_q5_K;
    case PLM_TYPE_Q6_K: return ref_vec_dot_q6_K;
    default: return ref_vec_dot_iq4_xs;
    }
}

static void ref_gemm_repacked_gather(plm_type type, int64_t k, const void *w, size_t row_bytes, int64_t nr,
                                     const void *act, size_t as, int nt, float *out, int64_t os) {
    const plm_type_info *ti = plm_type_info_get(type);
    const int64_t nb = k / ti->block_size;
    uint8_t *row = malloc(row_bytes);
    if (!row) abort(); /* an oracle for tests: no way to report */
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t b = 0; b < nb; b++)
            plm_repack_row_block(type, w, row_bytes, r, b, row + (size_t)b * ti->type_size);
        for (int t = 0; t < nt; t++)
            ref_vec_dot_of(type)(k, &out[t * os + r], row, (const char *)act + (size_t)t * as);
    }
    free(row);
}

static void ref_gemm_repacked_iq4_nl(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    ref_gemm_repacked_gather(PLM_TYPE_IQ4_NL, k, w, ws, nr, act, as, nt, out, os);
}

static void ref_gemm_repacked_q5_K(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                   int nt, float *out, int64_t os) {
    ref_gemm_repacked_gather(PLM_TYPE_Q5_K, k, w, ws, nr, act, as, nt, out, os);
}

static void ref_gemm_repacked_q6_K(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                   int nt, float *out, int64_t os) {
    ref_gemm_repacked_gather(PLM_TYPE_Q6_K, k, w, ws, nr, act, as, nt, out, os);
}

static void ref_gemm_repacked_iq4_xs(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                     int nt, float *out, int64_t os) {
    ref_gemm_repacked_gather(PLM_TYPE_IQ4_XS, k, w, ws, nr, act, as, nt, out, os);
}

/* ---- the table ---------------------------------------------------------- */

/* Everything but the row conversions. */
static const plm_kernels ref_kernels = {
    .name = "ref",
    .attn_f16 = plm_attn_f16,
    .attn_f16_pass = plm_attn_f16_ref_pass,
    .attn_quant = plm_attn_quant,
    .attn_quant_pass = plm_attn_quant_ref_pass,
    .swiglu = plm_swiglu,
    .geglu = plm_geglu,
    .vec_dot = {
        [PLM_TYPE_F32] = ref_vec_dot_f32,
        [PLM_TYPE_F16] = ref_vec_dot_f16,
        [PLM_TYPE_BF16] = ref_vec_dot_bf16,
        [PLM_TYPE_Q4_0] = ref_vec_dot_q4_0,
        [PLM_TYPE_Q4_1] = ref_vec_dot_q4_1,
        [PLM_TYPE_Q5_0] = ref_vec_dot_q5_0,
        [PLM_TYPE_Q5_1] = ref_vec_dot_q5_1,
        [PLM_TYPE_Q8_0] = ref_vec_dot_q8_0,
        [PLM_TYPE_Q2_K] = ref_vec_dot_q2_K,
        [PLM_TYPE_Q3_K] = ref_vec_dot_q3_K,
        [PLM_TYPE_Q4_K] = ref_vec_dot_q4_K,
        [PLM_TYPE_Q5_K] = ref_vec_dot_q5_K,
        [PLM_TYPE_Q6_K] = ref_vec_dot_q6_K,
        [PLM_TYPE_IQ4_NL] = ref_vec_dot_iq4_nl,
        [PLM_TYPE_IQ4_XS] = ref_vec_dot_iq4_xs,
        [PLM_TYPE_IQ2_XXS] = ref_vec_dot_iq2_xxs,
        [PLM_TYPE_IQ2_XS] = ref_vec_dot_iq2_xs,
        [PLM_TYPE_IQ2_S] = ref_vec_dot_iq2_s,
        [PLM_TYPE_IQ3_XXS] = ref_vec_dot_iq3_xxs,
        [PLM_TYPE_IQ3_S] = ref_vec_dot_iq3_s,
        [PLM_TYPE_IQ1_S] = ref_vec_dot_iq1_s,
        [PLM_TYPE_IQ1_M] = ref_vec_dot_iq1_m,
        [PLM_TYPE_TQ1_0] = ref_vec_dot_tq1_0,
        [PLM_TYPE_TQ2_0] = ref_vec_dot_tq2_0,
        [PLM_TYPE_MXFP4] = ref_vec_dot_mxfp4,
    },
    .gemm_repacked = {
        [PLM_TYPE_Q4_0] = ref_gemm_repacked_q4_0,
        [PLM_TYPE_Q5_0] = ref_gemm_repacked_q5_0,
        [PLM_TYPE_Q8_0] = ref_gemm_repacked_q8_0,
        [PLM_TYPE_Q4_K] = ref_gemm_repacked_q4_K,
        [PLM_TYPE_IQ4_NL] = ref_gemm_repacked_iq4_nl,
        [PLM_TYPE_Q5_K] = ref_gemm_repacked_q5_K,
        [PLM_TYPE_Q6_K] = ref_gemm_repacked_q6_K,
        [PLM_TYPE_IQ4_XS] = ref_gemm_repacked_iq4_xs,
    },
};

/* The row conversions are the reference functions of the type table
 * (types.c), so every format it knows is here. */
static plm_kernels kernels_ref;
static pthread_once_t ref_once = PTHREAD_ONCE_INIT;

static void build_ref(void) {
    kernels_ref = ref_kernels;
    for (int t = 0; t < PLM_TYPE_COUNT; t++) {
        const plm_type_info *ti = plm_type_info_get((uint32_t)t);
        if (!ti) continue;
        kernels_ref.quantize_row[t] = ti->quantize_row;
        kernels_ref.dequantize_row[t] = ti->dequantize_row;
    }
    plm_kernels_coarse_ref(&kernels_ref);
}

const plm_kernels *plm_kernels_ref(void) {
    pthread_once(&ref_once, build_ref);
    return &kernels_ref;
}
