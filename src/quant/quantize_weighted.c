/*
 * Importance-weighted quantizers: floats + per-column importances (an
 * importance matrix row, see model/imatrix.c) -> a row of ggml blocks,
 * writing the very bytes llama-quantize --imatrix writes (ggml's
 * quantize_qN_K / quantize_qN_0 / quantize_iq4_* with quant_weights).
 *
 * With importances, every format fits its scales by weighted least squares
 * where the weight of an element is its column's importance times
 * sqrt(sigma2 + x^2) — how much the element matters to the matmul output
 * times how large it is against the block's spread.  The searches differ
 * from the unweighted reference ones (quantize.c, quantize_k.c): the
 * K-quants search 37 candidate scales and then quantize the sub-block
 * scales themselves by a weighted fit (plm_qp_fit) instead of rounding them
 * against the largest.
 *
 * As in quantize.c: ggml's operation order, float intermediates, no fused
 * multiply-add, or one flipped comparison changes the bytes.
 *
 * IQ4_XS is here too, importances or not: it is IQ4_NL's fit on 8 sub-blocks
 * of 32 whose scales are then stored as 6-bit multiples of the block's.
 */
#include <math.h>
#include <string.h>

#include "quant/blocks.h"
#include "quant/fit.h"
#include "quant/quant.h"
#include "quant/rounding.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define GROUP_MAX_EPS 1e-15f

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

/* ---- the three fits ------------------------------------------------------- */

/* Symmetric levels -nmax..nmax-1 (stored + nmax) with weights w: the scale
 * mapping the extreme to -nmax, then 18 scales around it, keeping the best
 * weighted gain (sum w x l)^2 / sum w l^2 (ggml's make_qx_quants, type 1). */
static float qx_fit(int n, int nmax, const float *x, int8_t *L, const float *w) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = imax(-nmax, imin(nmax - 1, plm_nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = imax(-nmax, imin(nmax - 1, plm_nearest_int(iscale * x[i])));
            sumlx += w[i] * x[i] * l;
            suml2 += w[i] * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i)
                L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, plm_nearest_int(iscale * x[i]))));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Asymmetric levels 0..nmax: x ~ scale * L - the_min, min <= 0; 37
 * candidate scales each refit by weighted least squares, the one with the
 * smallest weighted squared error kept (ggml's make_qkx3_quants). */
static float qkx3_fit(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min) {
    const float rmin = -0.9f, rdelta = 0.05f;
    const int nstep = 36;
    uint8_t Laux[32];
    float min = x[0], max = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max <= min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_mad = 0;
    for (int i = 0; i < n; ++i) {
        L[i] = (uint8_t)imax(0, imin(nmax, plm_nearest_int(iscale * (x[i] - min))));
        const float diff = scale * L[i] + min - x[i];
        best_mad += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = imax(0, imin(nmax, plm_nearest_int(iscale * (x[i] - min))));
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float mad = 0;
        for (int i = 0; i < n; ++i) {
            const float diff = this_scale * Laux[i] + this_min - x[i];
            mad += w[i] * (diff * diff);
        }
        if (mad < best_mad) {
            memcpy(L, Laux, (size_t)n);
            best_mad = mad;
            scale = this_scale;
            min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

/* Non-negative levels 0..nmax of n positive values (sub-block scales or
 * mins): 9 scales by weighted squared error, then up to 5 rounds moving
 * one level at a time when the weighted gain grows (ggml's make_qp_quants). */
float plm_qp_fit(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float max = 0;
    for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
    if (max < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; ++i) L[i] = (uint8_t)plm_nearest_int(iscale * x[i]);
    const float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        const float diff = x[i] - scale * L[i];
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * is + nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            const int l = imin(nmax, plm_nearest_int(iscale_is * x[i]));
            const float diff = x[i] - scale_is * l;
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = imin(nmax, plm_nearest_int(iscale * x[i]));
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float slx = sumlx - w[i] * x[i] * L[i];
            float sl2 = suml2 - w[i] * L[i] * L[i];
            if (!(slx > 0 && sl2 > 0)) continue;
            const int new_l = imin(nmax, plm_nearest_int(x[i] * sl2 / slx));
            if (new_l == L[i]) continue;
            slx += w[i] * x[i] * new_l;
            sl2 += w[i] * new_l * new_l;
            if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (uint8_t)new_l;
                sumlx = slx;
                suml2 = sl2;
                ++n_changed;
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* weight[l] = importance * sqrt(sigma2 + x^2) for n elements */
static void element_weights(const float *x, const float *qw, float sigma2, int n, float *weight) {
    for (int l = 0; l < n; ++l) weight[l] = qw[l] * sqrtf(sigma2 + x[l] * x[l]);
}

static float sum_squares(const float *x, int64_t n) {
    float s = 0;
    for (int64_t j = 0; j < n; ++j) s += x[j] * x[j];
    return s;
}

static float sum_of(const float *w, int n) {
    float s = 0;
    for (int l = 0; l < n; ++l) s += w[l];
    return s;
}

/* ---- K-quants ------------------------------------------------------------- */

static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < QK_K; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

static void q2_K_block(const float *x, block_q2_K *y, const float *qw) {
    uint8_t L[QK_K], Ls[QK_K / 16], Lm[QK_K / 16];
    float mins[QK_K / 16], scales[QK_K / 16], sw[QK_K / 16], weight[16];
    const float sigma2 = sum_squares(x, QK_K) / QK_K;
    for (int j = 0; j < QK_K / 16; ++j) {
        element_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weight);
        sw[j] = sum_of(weight, 16);
        scales[j] = qkx3_fit(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j]);
    }
    y->d = plm_fp32_to_fp16(plm_qp_fit(QK_K / 16, 15, scales, Ls, sw));
    y->dmin = plm_fp32_to_fp16(plm_qp_fit(QK_K / 16, 15, mins, Lm, sw));
    const float dm = plm_fp16_to_fp32(y->d), mm = plm_fp16_to_fp32(y->dmin);
    for (int j = 0; j < QK_K / 16; ++j) y->scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = dm * (y->scales[j] & 0xF);
        if (!d) continue;
        const float m = mm * (y->scales[j] >> 4);
        for (int i = 0; i < 16; ++i) L[16 * j + i] = (uint8_t)imax(0, imin(3, plm_nearest_int((x[16 * j + i] + m) / d)));
    }
    pack_2bit(L, y->qs);
}

static void q3_K_block(const float *x, block_q3_K *y, const float *qw) {
    int8_t L[QK_K], Ls[QK_K / 16];
    float scales[QK_K / 16], weight[16], sw[QK_K / 16];
    const float sigma2 = 2 * sum_squares(x, QK_K) / QK_K;
    for (int j = 0; j < QK_K / 16; ++j) {
        element_weights(x + 16 * j, qw + 16 * j, sigma2, 16, weight);
        sw[j] = sum_of(weight, 16);
        scales[j] = qx_fit(16, 4, x + 16 * j, L + 16 * j, weight);
    }
    memset(y->scales, 0, sizeof y->scales);
    const float d_block = qx_fit(QK_K / 16, 32, scales, Ls, sw);
    for (int j = 0; j < QK_K / 16; ++j) {
        const int l = Ls[j];
        if (j < 8) y->scales[j] = (uint8_t)(l & 0xF);
        else y->scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
        y->scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
    }
    y->d = plm_fp32_to_fp16(d_block);
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = plm_fp16_to_fp32(y->d) * (int8_t)(plm_q3_K_scale(j, y->scales) - 32);
        if (!d) continue;
        for (int i = 0; i < 16; ++i)
            L[16 * j + i] = (int8_t)(imax(-4, imin(3, plm_nearest_int(x[16 * j + i] / d))) + 4);
    }
    memset(y->hmask, 0, sizeof y->hmask);
    for (int j = 0; j < QK_K; ++j) {
        if (L[j] > 3) {
            y->hmask[j % (QK_K / 8)] |= (uint8_t)(1u << (j / (QK_K / 8)));
            L[j] -= 4;
        }
    }
    pack_2bit((const uint8_t *)L, y->qs);
}

/* Q4_K and Q5_K: 8 sub-blocks of 32 fit by qkx3_fit; their scales and mins
 * become 6-bit levels by plm_qp_fit weighted by each sub-block's total weight.
 * Writes d, dmin and the packed scales; returns the requantized levels. */
static void k4_block(const float *x, const float *qw, int nmax, uint8_t *s12, plm_fp16_t *d16, plm_fp16_t *dmin16,
                     uint8_t *L) {
    uint8_t Ls[QK_K / 32], Lm[QK_K / 32];
    float weights[32], sw[QK_K / 32], mins[QK_K / 32], scales[QK_K / 32];
    const float sigma2 = 2 * sum_squares(x, QK_K) / QK_K;
    for (int j = 0; j < QK_K / 32; ++j) {
        element_weights(x + 32 * j, qw + 32 * j, sigma2, 32, weights);
        sw[j] = sum_of(weights, 32);
        scales[j] = qkx3_fit(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j]);
    }
    const float d_block = plm_qp_fit(QK_K / 32, 63, scales, Ls, sw);
    const float m_block = plm_qp_fit(QK_K / 32, 63, mins, Lm, sw);
    memset(s12, 0, 12);
    for (int j = 0; j < QK_K / 32; ++j) {
        /* Q5_K caps at 63; Q4_K does not, but plm_qp_fit never exceeds nmax */
        const uint8_t ls = Ls[j] < 63 ? Ls[j] : 63, lm = Lm[j] < 63 ? Lm[j] : 63;
        if (j < 4) {
            s12[j] = ls;
            s12[j + 4] = lm;
        } else {
            s12[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            s12[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s12[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d16 = plm_fp32_to_fp16(d_block);
    *dmin16 = plm_fp32_to_fp16(m_block);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t sc, m;
        plm_get_scale_min_k4(j, s12, &sc, &m);
        const float d = plm_fp16_to_fp32(*d16) * sc;
        if (!d) continue;
        const float dm = plm_fp16_to_fp32(*dmin16) * m;
        for (int i = 0; i < 32; ++i)
            L[32 * j + i] = (uint8_t)imax(0, imin(nmax, plm_nearest_int((x[32 * j + i] + dm) / d)));
    }
}

static void q4_K_block(const float *x, block_q4_K *y, const float *qw) {
    uint8_t L[QK_K];
    k4_block(x, qw, 15, y->scales, &y->d, &y->dmin, L);
    for (int j = 0; j < QK_K; j += 64)
        for (int l = 0; l < 32; ++l) y->qs[j / 2 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
}

static void q5_K_block(const float *x, block_q5_K *y, const float *qw) {
    uint8_t L[QK_K];
    k4_block(x, qw, 31, y->scales, &y->d, &y->dmin, L);
    memset(y->qh, 0, sizeof y->qh);
    for (int p = 0; p < QK_K / 64; p++) {
        for (int l = 0; l < 32; l++) {
            const int l1 = L[64 * p + l], l2 = L[64 * p + l + 32];
            y->qh[l] |= (uint8_t)((l1 >> 4) << (2 * p) | (l2 >> 4) << (2 * p + 1));
            y->qs[32 * p + l] = (uint8_t)((l1 & 0xf) | (l2 & 0xf) << 4);
        }
    }
}

static void q6_K_block(const float *x, block_q6_K *y, const float *qw) {
    int8_t L[QK_K];
    float scales[QK_K / 16], max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        /* the importances themselves, without the sqrt(sigma2 + x^2) factor */
        scales[ib] = qx_fit(16, 32, x + 16 * ib, L + 16 * ib, qw + 16 * ib);
        if (fabsf(scales[ib]) > max_abs_scale) {
            max_abs_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float iscale = -128.f / max_scale;
    y->d = plm_fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ++ib) y->scales[ib] = (int8_t)imin(127, plm_nearest_int(iscale * scales[ib]));
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = plm_fp16_to_fp32(y->d) * y->scales[j];
        if (!d) continue;
        for (int i = 0; i < 16; ++i)
            L[16 * j + i] = (int8_t)(imax(-32, imin(31, plm_nearest_int(x[16 * j + i] / d))) + 32);
    }
    uint8_t *ql = y->ql, *qh = y->qh;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; ++l) {
            const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
            ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
            ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
            qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
        }
    }
}

/* One row of super-blocks; without importances the reference quantizer,
 * as ggml does. */
typedef void (*block_fn)(const float *x, void *y, const float *qw);

static void k_row(const float *x, void *vy, int64_t n, const float *qw, size_t block_bytes, block_fn block) {
    for (int64_t i = 0; i < n / QK_K; i++) block((const float *)x + QK_K * i, (char *)vy + block_bytes * i, qw + QK_K * i);
}

static void q2_K_any(const float *x, void *y, const float *qw) { q2_K_block(x, y, qw); }
static void q3_K_any(const float *x, void *y, const float *qw) { q3_K_block(x, y, qw); }
static void q4_K_any(const float *x, void *y, const float *qw) { q4_K_block(x, y, qw); }
static void q5_K_any(const float *x, void *y, const float *qw) { q5_K_block(x, y, qw); }
static void q6_K_any(const float *x, void *y, const float *qw) { q6_K_block(x, y, qw); }

void plm_quantize_row_q2_K_w(const float *x, void *y, int64_t n, const float *qw) {
    if (qw) k_row(x, y, n, qw, sizeof(block_q2_K), q2_K_any);
    else plm_quantize_row_q2_K(x, y, n);
}

void plm_quantize_row_q3_K_w(const float *x, void *y, int64_t n, const float *qw) {
    if (qw) k_row(x, y, n, qw, sizeof(block_q3_K), q3_K_any);
    else plm_quantize_row_q3_K(x, y, n);
}

void plm_quantize_row_q4_K_w(const float *x, void *y, int64_t n, const float *qw) {
    if (qw) k_row(x, y, n, qw, sizeof(block_q4_K), q4_K_any);
    else plm_quantize_row_q4_K(x, y, n);
}

void plm_quantize_row_q5_K_w(const float *x, void *y, int64_t n, const float *qw) {
    if (qw) k_row(x, y, n, qw, sizeof(block_q5_K), q5_K_any);
    else plm_quantize_row_q5_K(x, y, n);
}

void plm_quantize_row_q6_K_w(const float *x, void *y, int64_t n, const float *qw) {
    if (qw) k_row(x, y, n, qw, sizeof(block_q6_K), q6_K_any);
    else plm_quantize_row_q6_K(x, y, n);
}

/* ---- 32-element formats --------------------------------------------------
 * The spread sigma2 is the mean square of the whole row here, not of a
 * block: these functions must be given exactly one row. */

static void put_q5_bits(const uint8_t *L, uint8_t *qs, uint8_t qh_out[4]) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        const uint8_t xi0 = L[j], xi1 = L[j + 16];
        qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
        qh |= ((xi0 & 0x10u) >> 4) << j;
        qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++) qh_out[k] = (uint8_t)(qh >> (8 * k));
}

void plm_quantize_row_q4_0_w(const float *x, void *vy, int64_t n, const float *qw) {
    if (!qw) {
        plm_quantize_row_q4_0(x, vy, n);
        return;
    }
    block_q4_0 *y = vy;
    const float sigma2 = sum_squares(x, n) / n;
    for (int64_t ib = 0; ib < n / QK4_0; ++ib) {
        float weight[QK4_0];
        int8_t L[QK4_0];
        element_weights(x + QK4_0 * ib, qw + QK4_0 * ib, sigma2, QK4_0, weight);
        y[ib].d = plm_fp32_to_fp16(qx_fit(QK4_0, 8, x + QK4_0 * ib, L, weight));
        for (int j = 0; j < 16; ++j) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

void plm_quantize_row_q4_1_w(const float *x, void *vy, int64_t n, const float *qw) {
    if (!qw) {
        plm_quantize_row_q4_1(x, vy, n);
        return;
    }
    block_q4_1 *y = vy;
    const float sigma2 = sum_squares(x, n) / n;
    for (int64_t ib = 0; ib < n / QK4_1; ++ib) {
        float weight[QK4_1], min;
        uint8_t L[QK4_1];
        element_weights(x + QK4_1 * ib, qw + QK4_1 * ib, sigma2, QK4_1, weight);
        y[ib].d = plm_fp32_to_fp16(qkx3_fit(QK4_1, 15, x + QK4_1 * ib, weight, L, &min));
        y[ib].m = plm_fp32_to_fp16(-min);
        for (int j = 0; j < 16; ++j) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

void plm_quantize_row_q5_0_w(const float *x, void *vy, int64_t n, const float *qw) {
    if (!qw) {
        plm_quantize_row_q5_0(x, vy, n);
        return;
    }
    block_q5_0 *y = vy;
    const float sigma2 = sum_squares(x, n) / n;
    for (int64_t ib = 0; ib < n / QK5_0; ++ib) {
        float weight[QK5_0];
        int8_t L[QK5_0];
        element_weights(x + QK5_0 * ib, qw + QK5_0 * ib, sigma2, QK5_0, weight);
        y[ib].d = plm_fp32_to_fp16(qx_fit(QK5_0, 16, x + QK5_0 * ib, L, weight));
        put_q5_bits((const uint8_t *)L, y[ib].qs, y[ib].qh);
    }
}

void plm_quantize_row_q5_1_w(const float *x, void *vy, int64_t n, const float *qw) {
    if (!qw) {
        plm_quantize_row_q5_1(x, vy, n);
        return;
    }
    block_q5_1 *y = vy;
    const float sigma2 = sum_squares(x, n) / n;
    for (int64_t ib = 0; ib < n / QK5_1; ++ib) {
        float weight[QK5_1], min;
        uint8_t L[QK5_1];
        element_weights(x + QK5_1 * ib, qw + QK5_1 * ib, sigma2, QK5_1, weight);
        y[ib].d = plm_fp32_to_fp16(qkx3_fit(QK5_1, 31, x + QK5_1 * ib, weight, L, &min));
        y[ib].m = plm_fp32_to_fp16(-min);
        put_q5_bits(L, y[ib].qs, y[ib].qh);
    }
}

/* ---- IQ4_NL and IQ4_XS ----------------------------------------------------
 * Each 32 elements get a scale by IQ4_NL's search (7 tries each way around
 * max/-127, weighted fit); IQ4_XS then stores the 8 scales of a super-block
 * as 6-bit multiples of max_scale/32 and requantizes against them. */

static int best_index_iq4(float v) {
    const int8_t *val = kvalues_iq4nl;
    if (v <= val[0]) return 0;
    if (v >= val[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < val[mid]) hi = mid; else lo = mid;
    }
    return v - val[hi - 1] < val[hi] - v ? hi - 1 : hi;
}

static void iq4_fit(const float *xb, const float *w, float id, float *sumqx, float *sumq2) {
    float sqx = 0, sq2 = 0;
    for (int j = 0; j < 32; ++j) {
        const float q = kvalues_iq4nl[best_index_iq4(id * xb[j])];
        sqx += w[j] * q * xb[j];
        sq2 += w[j] * q * q;
    }
    *sumqx = sqx;
    *sumq2 = sq2;
}

/* The scale of 32 elements (0 if all below GROUP_MAX_EPS). */
static float iq4_block_scale(const float *xb, const float *w) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        if (fabsf(xb[j]) > amax) {
            amax = fabsf(xb[j]);
            max = xb[j];
        }
    }
    if (amax < GROUP_MAX_EPS) return 0;
    const int ntry = 7;
    float sumqx, sumq2;
    iq4_fit(xb, w, 1 / (-max / kvalues_iq4nl[0]), &sumqx, &sumq2);
    float d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
        iq4_fit(xb, w, (itry + kvalues_iq4nl[0]) / max, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* Weights of one 32-element block: importances as above, else x^2. */
static void iq4_weights(const float *xb, const float *qw, float sigma2, float *w) {
    if (qw) element_weights(xb, qw, sigma2, 32, w);
    else for (int j = 0; j < 32; ++j) w[j] = xb[j] * xb[j];
}

static void pack_iq4(const uint8_t *L, int n, uint8_t *q4) {
    for (int i = 0; i < n / 32; ++i)
        for (int j = 0; j < 16; ++j) q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

void plm_quantize_row_iq4_nl_w(const float *x, void *vy, int64_t n, const float *qw) {
    if (!qw) {
        plm_quantize_row_iq4_nl(x, vy, n);
        return;
    }
    block_iq4_nl *y = vy;
    for (int64_t ib = 0; ib < n / QK4_NL; ib++, x += QK4_NL) {
        float w[32];
        uint8_t L[32];
        const float sigma2 = sum_squares(x, 32) * (2.f / 32);
        iq4_weights(x, qw + QK4_NL * ib, sigma2, w);
        const float d = iq4_block_scale(x, w);
        y[ib].d = plm_fp32_to_fp16(d);
        const float id = d ? 1 / d : 0;
        for (int j = 0; j < 32; ++j) L[j] = (uint8_t)best_index_iq4(id * x[j]);
        pack_iq4(L, 32, y[ib].qs);
    }
}

static void iq4_xs_block(const float *x, block_iq4_xs *y, const float *qw) {
    float w[32], scales[QK_K / 32], max_scale = 0, amax_scale = 0;
    uint8_t L[QK_K];
    const float sigma2 = sum_squares(x, QK_K) * (2.f / QK_K);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        iq4_weights(x + 32 * ib, qw ? qw + 32 * ib : NULL, sigma2, w);
        scales[ib] = iq4_block_scale(x + 32 * ib, w);
        if (fabsf(scales[ib]) > amax_scale) {
            amax_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    memset(y->scales_l, 0, sizeof y->scales_l);
    y->scales_h = 0;
    const float d = -max_scale / 32;
    y->d = plm_fp32_to_fp16(d);
    const float id = d ? 1 / d : 0.f;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        int l = imax(-32, imin(31, plm_nearest_int(id * scales[ib])));
        const float dl = d * l;
        const float idl = dl ? 1 / dl : 0.f;
        for (int j = 0; j < 32; ++j) L[32 * ib + j] = (uint8_t)best_index_iq4(idl * x[32 * ib + j]);
        l += 32;
        if (ib % 2 == 0) y->scales_l[ib / 2] = (uint8_t)(l & 0xf);
        else y->scales_l[ib / 2] |= (uint8_t)((l & 0xf) << 4);
        y->scales_h |= (uint16_t)((l >> 4) << (2 * ib));
    }
    pack_iq4(L, QK_K, y->qs);
}

void plm_quantize_row_iq4_xs_w(const float *x, void *vy, int64_t n, const float *qw) {
    block_iq4_xs *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) iq4_xs_block(x + QK_K * i, y + i, qw ? qw + QK_K * i : NULL);
}

void plm_quantize_row_iq4_xs(const float *x, void *vy, int64_t n) {
    plm_quantize_row_iq4_xs_w(x, vy, n, NULL);
}

plm_quantize_weighted_fn plm_get_quantize_weighted(plm_type type) {
    switch (type) {
    case PLM_TYPE_Q4_0: return plm_quantize_row_q4_0_w;
    case PLM_TYPE_Q4_1: return plm_quantize_row_q4_1_w;
    case PLM_TYPE_Q5_0: return plm_quantize_row_q5_0_w;
    case PLM_TYPE_Q5_1: return plm_quantize_row_q5_1_w;
    case PLM_TYPE_Q2_K: return plm_quantize_row_q2_K_w;
    case PLM_TYPE_Q3_K: return plm_quantize_row_q3_K_w;
    case PLM_TYPE_Q4_K: return plm_quantize_row_q4_K_w;
    case PLM_TYPE_Q5_K: return plm_quantize_row_q5_K_w;
    case PLM_TYPE_Q6_K: return plm_quantize_row_q6_K_w;
    case PLM_TYPE_IQ4_NL: return plm_quantize_row_iq4_nl_w;
    case PLM_TYPE_IQ4_XS: return plm_quantize_row_iq4_xs_w;
    case PLM_TYPE_IQ3_XXS: return plm_quantize_row_iq3_xxs_w;
    case PLM_TYPE_IQ3_S: return plm_quantize_row_iq3_s_w;
    case PLM_TYPE_IQ2_XXS: return plm_quantize_row_iq2_xxs_w;
    case PLM_TYPE_IQ2_XS: return plm_quantize_row_iq2_xs_w;
    case PLM_TYPE_IQ2_S: return plm_quantize_row_iq2_s_w;
    case PLM_TYPE_IQ1_S: return plm_quantize_row_iq1_s_w;
    case PLM_TYPE_IQ1_M: return plm_quantize_row_iq1_m_w;
    default: return NULL;  /* Q8_0, F16, TQ1_0, MXFP4, ...: importances change nothing */
    }
}
