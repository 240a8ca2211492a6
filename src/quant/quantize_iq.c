/*
 * Quantizers of the codebook formats IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS,
 * IQ2_S, IQ1_S and IQ1_M, writing the bytes of ggml's quantize_iq*
 * (llama-quantize, with or without --imatrix).
 *
 * IQ2/IQ3: per sub-block, fold the signs out (|x| and a sign byte, which
 * the XXS/XS formats store in 7 bits by forcing an even count of
 * negatives), then try a range of scales: round every |x| / scale to a
 * level, snap each group of 4 or 8 levels to the lattice (a lattice point,
 * or the best of its nearest points under the weighted error) and keep the
 * scale with the best weighted gain; refit the scale on the final points.
 * The sub-block scales become 4-bit multiples of the block's.
 *
 * IQ1: levels -1, 0, 1 shifted by +-1/8: sorting a sub-block by value makes
 * the exact weighted optimum a pair of split points, found exhaustively;
 * off-lattice groups are then snapped as above.
 *
 * Weights: an importance (imatrix column) times sqrt(sigma2 + x^2), or
 * without importances x^2 (IQ2_S: sigma2/4 + x^2).  ggml refuses IQ2_XXS,
 * IQ2_XS and IQ1_S without importances; given none, these use x^2 too.
 *
 * As in quantize.c: ggml's operation order and float intermediates, no
 * fused multiply-add, and ggml's quirks (IQ3_S's stored indices skip the
 * all-zero sub-blocks) or the bytes differ.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "quant/blocks.h"
#include "quant/fit.h"
#include "quant/iq_lattice.h"
#include "quant/quant.h"
#include "quant/rounding.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define GROUP_MAX_EPS 1e-15f
#define GROUP_MAX_EPS_IQ3_XXS 1e-8f
#define GROUP_MAX_EPS_IQ2_S 1e-8f
#define GROUP_MAX_EPS_IQ1_M 1e-7f
#define GROUP_MAX_EPS_IQ1_S 1e-12f

static inline int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }
static inline float maxf(float a, float b) { return a > b ? a : b; }

/* ---- shared steps ---------------------------------------------------------- */

static float sum_squares(const float *x, int n) {
    float s = 0;
    for (int i = 0; i < n; ++i) s += x[i] * x[i];
    return s;
}

typedef enum { PLAIN_X2, PLAIN_X2_PLUS_SIGMA } plain_weights;

static void element_weights(const float *xb, const float *qw, float sigma2, int n, plain_weights plain, float *w) {
    if (qw)
        for (int i = 0; i < n; ++i) w[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    else if (plain == PLAIN_X2_PLUS_SIGMA)
        for (int i = 0; i < n; ++i) w[i] = 0.25f * sigma2 + xb[i] * xb[i];
    else
        for (int i = 0; i < n; ++i) w[i] = xb[i] * xb[i];
}

/* |x| of a group of 8 into xval and the sign bits; with even_parity the
 * count of negatives is made even (7 bits then store all 8) by flipping the
 * element whose error costs least, and only the 7 low bits come back. */
static uint8_t fold_signs(const float *xb, const float *w, float *xval, bool even_parity) {
    int nflip = 0;
    uint8_t s = 0;
    for (int i = 0; i < 8; ++i) {
        if (xb[i] >= 0) {
            xval[i] = xb[i];
        } else {
            xval[i] = -xb[i];
            ++nflip;
            s |= (uint8_t)(1 << i);
        }
    }
    if (!even_parity) return s;
    if (nflip % 2) {
        int imin = 0;
        float min = w[0] * xb[0] * xb[0];
        for (int i = 1; i < 8; ++i) {
            const float ax = w[i] * xb[i] * xb[i];
            if (ax < min) {
                min = ax;
                imin = i;
            }
        }
        xval[imin] = -xval[imin];
        s ^= (uint8_t)(1 << imin);
    }
    return s & 127;
}

static float max_of(const float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; ++i) max = maxf(max, x[i]);
    return max;
}

static int key_of(const plm_iq_lattice *lat, const int8_t *L) {
    int key = 0;
    const int mask = (1 << lat->key_bits) - 1;  /* levels are in range; a NaN row must not index out */
    for (int i = 0; i < lat->group; ++i) key |= (L[i] & mask) << (lat->key_bits * i);
    return key;
}

/* The lattice point of levels already on the lattice. */
static int point_of(const plm_iq_lattice *lat, const int8_t *L) {
    const int p = lat->map[key_of(lat, L)];
    return p >= 0 ? p : 0;  /* cannot happen: the search only leaves lattice points */
}

/* The nearest point under the weighted squared error of scale * (2l+1)
 * against xval; its levels go to L. */
static int best_near(const plm_iq_lattice *lat, const uint16_t *near, const float *xval, const float *w, float scale,
                     int8_t *L) {
    const int g = lat->group;
    float best_d2 = FLT_MAX;
    int best = near[1];  /* kept only when every error is NaN or inf */
    for (int j = 1; j <= near[0]; ++j) {
        const int8_t *pg = lat->odd + near[j] * g;
        float d2 = 0;
        for (int i = 0; i < g; ++i) {
            const float q = pg[i];
            const float diff = scale * q - xval[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = near[j];
        }
    }
    const int8_t *pg = lat->odd + best * g;
    for (int i = 0; i < g; ++i) L[i] = (int8_t)((pg[i] - 1) / 2);
    return best;
}

/* Rounds a group to levels at inverse scale id and snaps it to the lattice
 * (judging neighbours at scale); true when it was already a lattice point. */
static bool snap_group(const plm_iq_lattice *lat, const float *xval, const float *waux, float id, float scale,
                       int max_q, int8_t *L) {
    for (int i = 0; i < lat->group; ++i) L[i] = (int8_t)clamp(plm_nearest_int(0.5f * (id * xval[i] - 1)), 0, max_q - 1);
    const int key = key_of(lat, L);
    if (lat->map[key] >= 0) return true;
    best_near(lat, plm_iq_lattice_near(lat, key), xval, waux, scale, L);
    return false;
}

static void level_sums(const int8_t *L, const float *xval, const float *w, int n, float *sumqx, float *sumq2) {
    float a = 0, b = 0;
    for (int i = 0; i < n; ++i) {
        const float q = 2 * L[i] + 1;
        a += w[i] * xval[i] * q;
        b += w[i] * q * q;
    }
    *sumqx = a;
    *sumq2 = b;
}

/* Which groups the final refit snaps again at the chosen scale. */
typedef enum {
    REFIT_OFF_LATTICE,  /* only groups the best try had to move (IQ3_XXS, IQ2_XS, IQ2_S) */
    REFIT_ALL_IF_ANY,   /* every group, if any had to move (IQ3_S) */
    REFIT_ALL,          /* every group (IQ2_XXS) */
} refit_rule;

typedef struct {
    int n;          /* weights in a sub-block */
    int max_q;      /* levels 0 .. max_q-1 */
    int tries;      /* scales tried: top / (2 max_q - 1 + is * step), is = -tries..tries */
    float step;
    refit_rule refit;
} lattice_search;

static const lattice_search IQ3_XXS_SEARCH = {32, 8, 15, 0.2f, REFIT_OFF_LATTICE};
static const lattice_search IQ3_S_SEARCH = {32, 8, 9, 0.2f, REFIT_ALL_IF_ANY};
static const lattice_search IQ2_XXS_SEARCH = {32, 3, 6, 0.1f, REFIT_ALL};
static const lattice_search IQ2_XS_SEARCH = {16, 3, 9, 0.1f, REFIT_OFF_LATTICE};

/* The scale search of one sub-block (xval >= 0, its largest top > 0):
 * L holds the levels on entry (what stays if no try gains) and the chosen
 * lattice levels on return; returns the scale. */
static float lattice_fit(const plm_iq_lattice *lat, const lattice_search *s, const float *xval, const float *weight,
                         const float *waux, float top, float scale, int8_t *L) {
    const int g = lat->group, n_groups = s->n / g;
    bool on[8], on_aux[8] = {false};
    int8_t Laux[32];
    for (int k = 0; k < n_groups; ++k) on[k] = s->refit != REFIT_ALL_IF_ANY;
    float best = 0;
    for (int is = -s->tries; is <= s->tries; ++is) {
        const float id = (2 * s->max_q - 1 + is * s->step) / top;
        const float this_scale = 1 / id;
        for (int k = 0; k < n_groups; ++k)
            on_aux[k] = snap_group(lat, xval + g * k, waux + g * k, id, this_scale, s->max_q, Laux + g * k);
        float sumqx, sumq2;
        level_sums(Laux, xval, weight, s->n, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, (size_t)s->n);
            memcpy(on, on_aux, sizeof on);
        }
    }
    int n_off = 0;
    for (int k = 0; k < n_groups; ++k) n_off += !on[k];
    const bool refit = s->refit == REFIT_ALL ? scale > 0 : n_off > 0 && scale > 0;
    if (!refit) return scale;
    const float id = 1 / scale;
    for (int k = 0; k < n_groups; ++k) {
        if (s->refit == REFIT_OFF_LATTICE && on[k]) continue;
        snap_group(lat, xval + g * k, waux + g * k, id, scale, s->max_q, L + g * k);
    }
    float sumqx, sumq2;
    level_sums(L, xval, weight, s->n, &sumqx, &sumq2);
    return sumq2 > 0 ? sumqx / sumq2 : scale;
}

/* 4-bit sub-block scale l: scale ~ d (2l + 1) */
static int scale_level(float id, float scale, int max_l) {
    return clamp(plm_nearest_int(0.5f * (id * scale - 1)), 0, max_l);
}

static void sqrt_of(const float *w, int n, float *out) {
    for (int i = 0; i < n; ++i) out[i] = sqrtf(w[i]);
}

/* ---- IQ3 -------------------------------------------------------------------- */

static void iq3_xxs_block(const plm_iq_lattice *lat, const float *xbl, block_iq3_xxs *y, const float *qw) {
    float scales[QK_K / 32], weight[32], waux[32], xval[32];
    int8_t L[32];
    uint32_t signs_scales[QK_K / 32] = {0};
    memset(y->qs, 0, sizeof y->qs);
    y->d = plm_fp32_to_fp16(0.f);
    const float sigma2 = 2 * sum_squares(xbl, QK_K) / QK_K;
    float max_scale = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        const float *xb = xbl + 32 * ib;
        element_weights(xb, qw ? qw + 32 * ib : NULL, sigma2, 32, PLAIN_X2, weight);
        sqrt_of(weight, 32, waux);
        uint8_t signs[4];
        for (int k = 0; k < 4; ++k) signs[k] = fold_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k, true);
        const float max = max_of(xval, 32);
        memset(L, 0, sizeof L);
        if (max < GROUP_MAX_EPS_IQ3_XXS) {
            scales[ib] = 0;
            continue;
        }
        float scale = lattice_fit(lat, &IQ3_XXS_SEARCH, xval, weight, waux, max, max / 15, L);
        if (scale < 0) {  /* never in practice; ggml keeps the scale unsigned by flipping signs */
            scale = -scale;
            for (int k = 0; k < 4; ++k) signs[k] = (uint8_t)(~signs[k] & 127);
        }
        for (int k = 0; k < 8; ++k) y->qs[8 * ib + k] = (uint8_t)point_of(lat, L + 4 * k);
        signs_scales[ib] = signs[0] | (uint32_t)signs[1] << 7 | (uint32_t)signs[2] << 14 | (uint32_t)signs[3] << 21;
        scales[ib] = scale;
        max_scale = maxf(max_scale, scale);
    }
    if (!max_scale) {
        memset(y->qs, 0, sizeof y->qs);
        return;
    }
    const float d = max_scale / 31;
    y->d = plm_fp32_to_fp16(d * 1.0125f);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 32; ++ib) signs_scales[ib] |= (uint32_t)scale_level(id, scales[ib], 15) << 28;
    memcpy(y->qs + QK_K / 4, signs_scales, sizeof signs_scales);
}

static void iq3_s_block(const plm_iq_lattice *lat, const float *xbl, block_iq3_s *y, const float *qw) {
    float scales[QK_K / 32], weight[32], waux[32], xval[32];
    int8_t L[32];
    memset(y, 0, sizeof *y);
    /* ggml advances these only past sub-blocks it quantizes: after an
     * all-zero sub-block the later ones' indices and signs sit early */
    uint8_t *qs = y->qs, *signs = y->signs;
    const float sigma2 = 2 * sum_squares(xbl, QK_K) / QK_K;
    float max_scale = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        const float *xb = xbl + 32 * ib;
        element_weights(xb, qw ? qw + 32 * ib : NULL, sigma2, 32, PLAIN_X2, weight);
        sqrt_of(weight, 32, waux);
        uint8_t block_signs[4];
        for (int k = 0; k < 4; ++k) block_signs[k] = fold_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k, false);
        const float max = max_of(xval, 32);
        memset(L, 0, sizeof L);
        if (!max) {
            scales[ib] = 0;
            continue;
        }
        float scale = lattice_fit(lat, &IQ3_S_SEARCH, xval, weight, waux, max, max / 15, L);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 4; ++k) block_signs[k] = (uint8_t)~block_signs[k];
        }
        for (int k = 0; k < 8; ++k) {
            const int p = point_of(lat, L + 4 * k);
            qs[k] = (uint8_t)(p & 255);
            y->qh[ib] |= (uint8_t)((p >> 8) << k);
        }
        qs += 8;
        memcpy(signs, block_signs, 4);
        signs += 4;
        scales[ib] = scale;
        max_scale = maxf(max_scale, scale);
    }
    if (!max_scale) return;
    const float d = max_scale / 31;
    y->d = plm_fp32_to_fp16(d * 1.033f);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 32; ib += 2)
        y->scales[ib / 2] = (uint8_t)(scale_level(id, scales[ib], 15) | scale_level(id, scales[ib + 1], 15) << 4);
}

/* ---- IQ2 -------------------------------------------------------------------- */

static void iq2_xxs_block(const plm_iq_lattice *lat, const float *xbl, block_iq2_xxs *y, const float *qw) {
    float scales[QK_K / 32], weight[32], waux[32], xval[32];
    int8_t L[32];
    uint32_t q2[2 * (QK_K / 32)] = {0};
    y->d = plm_fp32_to_fp16(0.f);
    const float sigma2 = sum_squares(xbl, QK_K) / QK_K;
    float max_scale = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        const float *xb = xbl + 32 * ib;
        element_weights(xb, qw ? qw + 32 * ib : NULL, sigma2, 32, PLAIN_X2, weight);
        sqrt_of(weight, 32, waux);
        uint8_t signs[4];
        for (int k = 0; k < 4; ++k) signs[k] = fold_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k, true);
        const float max = max_of(xval, 32);
        if (max < GROUP_MAX_EPS) {
            scales[ib] = 0;
            continue;
        }
        /* the scale of the plain 4-level fit sets the range the search tries */
        float scale = plm_qp_fit(32, 4, xval, (uint8_t *)L, weight);
        const float eff_max = scale * 3;
        if (eff_max <= 0) {
            scales[ib] = 0;
            continue;
        }
        scale = lattice_fit(lat, &IQ2_XXS_SEARCH, xval, weight, waux, eff_max, scale, L);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 4; ++k) signs[k] = (uint8_t)(~signs[k] & 127);
        }
        for (int k = 0; k < 4; ++k) {
            q2[2 * ib + 0] |= (uint32_t)point_of(lat, L + 8 * k) << 8 * k;
            q2[2 * ib + 1] |= (uint32_t)signs[k] << 7 * k;
        }
        scales[ib] = scale;
        max_scale = maxf(max_scale, scale);
    }
    if (!max_scale) {
        memset(y->qs, 0, sizeof y->qs);
        return;
    }
    const float d = max_scale / 31;
    y->d = plm_fp32_to_fp16(d);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 32; ++ib) q2[2 * ib + 1] |= (uint32_t)scale_level(id, scales[ib], 15) << 28;
    memcpy(y->qs, q2, sizeof q2);
}

/* IQ2_XS and IQ2_S: the same search on sub-blocks of 16; XS stores 9-bit
 * indices with 7 sign bits, S 10-bit ones with a whole sign byte. */
static float iq2_16_fit(const plm_iq_lattice *lat, const float *xb, const float *weight, float eps, bool even_parity,
                        uint8_t signs[2], int points[2]) {
    float waux[16], xval[16];
    int8_t L[16];
    sqrt_of(weight, 16, waux);
    for (int k = 0; k < 2; ++k) signs[k] = fold_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k, even_parity);
    const float max = max_of(xval, 16);
    memset(L, 0, sizeof L);
    if (max < eps) return -1;
    float scale = lattice_fit(lat, &IQ2_XS_SEARCH, xval, weight, waux, max, max / 5, L);
    if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 2; ++k) signs[k] = (uint8_t)(even_parity ? ~signs[k] & 127 : ~signs[k]);
    }
    for (int k = 0; k < 2; ++k) points[k] = point_of(lat, L + 8 * k);
    return scale;
}

static void put_nibble_scales(float max_scale, const float *scales, uint8_t *out) {
    const float id = 1 / (max_scale / 31);
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        const int l = scale_level(id, scales[ib], 15);
        out[ib / 2] = ib % 2 == 0 ? (uint8_t)l : (uint8_t)(out[ib / 2] | l << 4);
    }
}

static void iq2_xs_block(const plm_iq_lattice *lat, const float *xbl, block_iq2_xs *y, const float *qw) {
    float scales[QK_K / 16], weight[16];
    uint16_t q2[2 * (QK_K / 16)] = {0};
    y->d = plm_fp32_to_fp16(0.f);
    memset(y->scales, 0, sizeof y->scales);
    const float sigma2 = sum_squares(xbl, QK_K) / QK_K;
    float max_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        const float *xb = xbl + 16 * ib;
        element_weights(xb, qw ? qw + 16 * ib : NULL, sigma2, 16, PLAIN_X2, weight);
        uint8_t signs[2];
        int points[2];
        const float scale = iq2_16_fit(lat, xb, weight, GROUP_MAX_EPS, true, signs, points);
        if (scale < 0) {
            scales[ib] = 0;
            continue;
        }
        for (int k = 0; k < 2; ++k) q2[2 * ib + k] = (uint16_t)(points[k] | signs[k] << 9);
        scales[ib] = scale;
        max_scale = maxf(max_scale, scale);
    }
    if (!max_scale) {
        memset(y->qs, 0, sizeof y->qs);
        return;
    }
    y->d = plm_fp32_to_fp16(max_scale / 31);
    put_nibble_scales(max_scale, scales, y->scales);
    memcpy(y->qs, q2, sizeof q2);
}

static void iq2_s_block(const plm_iq_lattice *lat, const float *xbl, block_iq2_s *y, const float *qw) {
    float scales[QK_K / 16], weight[16];
    memset(y, 0, sizeof *y);
    const float sigma2 = 2 * sum_squares(xbl, QK_K) / QK_K;
    float max_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        const float *xb = xbl + 16 * ib;
        element_weights(xb, qw ? qw + 16 * ib : NULL, sigma2, 16, PLAIN_X2_PLUS_SIGMA, weight);
        uint8_t signs[2];
        int points[2];
        const float scale = iq2_16_fit(lat, xb, weight, GROUP_MAX_EPS_IQ2_S, false, signs, points);
        if (scale < 0) {
            scales[ib] = 0;
            continue;
        }
        for (int k = 0; k < 2; ++k) {
            const int i8 = 2 * ib + k;
            y->qs[i8] = (uint8_t)(points[k] & 255);
            y->qh[i8 / 4] |= (uint8_t)((points[k] >> 8) << 2 * (i8 % 4));
            y->qs[QK_K / 8 + i8] = signs[k];
        }
        scales[ib] = scale;
        max_scale = maxf(max_scale, scale);
    }
    if (!max_scale) return;
    y->d = plm_fp32_to_fp16(max_scale / 31 * 0.9875f);
    put_nibble_scales(max_scale, scales, y->scales);
}

/* ---- IQ1 -------------------------------------------------------------------- */

/* The two level sets of a shifted sub-block: -1, 0, 1 moved up or down by
 * IQ1_DELTA. */
static const float IQ1_UP[3] = {-1 + IQ1_DELTA, IQ1_DELTA, 1 + IQ1_DELTA};
static const float IQ1_DOWN[3] = {-1 - IQ1_DELTA, -IQ1_DELTA, 1 - IQ1_DELTA};

/* A value and its position, sorted by value with the C library's qsort
 * exactly as ggml sorts its (float, int) pairs: ties (equal values) come
 * out in whatever order that qsort leaves them, the same in both. */
typedef struct {
    float value;
    int index;
} sorted_value;

static int by_value(const void *a, const void *b) {
    const float l = ((const sorted_value *)a)->value, r = ((const sorted_value *)b)->value;
    return l < r ? -1 : l > r ? 1 : 0;
}

static void sort_values(const float *xb, int n, sorted_value *out) {
    for (int j = 0; j < n; ++j) out[j] = (sorted_value){xb[j], j};
    qsort(out, (size_t)n, sizeof *out, by_value);
}

/* IQ1's snap of an off-lattice group: the nearest point under the weighted
 * error of scale * levels[l] against the signed values x. */
static int iq1_best_near(const plm_iq_lattice *lat, const uint16_t *near, const float *x, const float *w, float scale,
                         const float *levels, int8_t *L) {
    float best_d2 = FLT_MAX;
    int best = near[1];  /* kept only when every error is NaN or inf */
    for (int j = 1; j <= near[0]; ++j) {
        const int8_t *pg = lat->odd + near[j] * 8;
        float d2 = 0;
        for (int i = 0; i < 8; ++i) {
            const float q = levels[(pg[i] - 1) / 2];
            const float diff = scale * q - x[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best = near[j];
        }
    }
    const int8_t *pg = lat->odd + best * 8;
    for (int i = 0; i < 8; ++i) L[i] = (int8_t)((pg[i] - 1) / 2);
    return best;
}

/* Snaps the groups of L to lattice points; when any had to move, refits
 * the scale on the points (the level set of group k is levels[k]). */
static float iq1_snap(const plm_iq_lattice *lat, const float *xb, const float *weight, int n_groups,
                      const float *const *levels, int8_t *L, float scale, uint16_t *points) {
    bool all_on = true;
    for (int k = 0; k < n_groups; ++k) {
        const int key = key_of(lat, L + 8 * k);
        int p = lat->map[key];
        if (p < 0) {
            all_on = false;
            p = iq1_best_near(lat, plm_iq_lattice_near(lat, key), xb + 8 * k, weight + 8 * k, scale, levels[k],
                              L + 8 * k);
        }
        points[k] = (uint16_t)p;
    }
    if (all_on) return scale;
    float sumqx = 0, sumq2 = 0;
    for (int k = 0; k < n_groups; ++k) {
        const int8_t *pg = lat->odd + points[k] * 8;
        for (int j = 0; j < 8; ++j) {
            const float w = weight[8 * k + j];
            const float q = levels[k][(pg[j] - 1) / 2];
            sumqx += w * q * xb[8 * k + j];
            sumq2 += w * q * q;
        }
    }
    return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

/* Levels 0, 1, 2 by the two split points of the sorted order. */
static void split_levels(const sorted_value *sorted, int n, int i1, int i2, int8_t *L) {
    for (int j = 0; j < n; ++j) L[sorted[j].index] = (int8_t)(j < i1 ? 0 : j < i2 ? 1 : 2);
}

/* IQ1_S's sub-block of 32: the best split for either shift from prefix
 * sums of the sorted values.  False when the sub-block is left empty
 * (zero scale, shift +1, no points); else the scale, shift and points. */
static bool iq1_s_sub_block(const plm_iq_lattice *lat, const float *xb, const float *weight, float *scale_out,
                            int *shift, uint16_t points[4]) {
    enum { N = 32 };
    sorted_value sorted[N];
    float sumx[N + 1], sumw[N + 1];
    int8_t L[N];
    float max = fabsf(xb[0]);
    for (int i = 1; i < N; ++i) max = maxf(max, fabsf(xb[i]));
    if (max < GROUP_MAX_EPS_IQ1_S) return false;
    sort_values(xb, N, sorted);
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < N; ++j) {
        const int i = sorted[j].index;
        sumx[j + 1] = sumx[j] + weight[i] * xb[i];
        sumw[j + 1] = sumw[j] + weight[i];
    }
    float best_score = -FLT_MAX, scale = max;
    int besti1 = -1, besti2 = -1, best_shift = 0;
    for (int i1 = 0; i1 <= N; ++i1) {
        for (int i2 = i1; i2 <= N; ++i2) {
            for (int s = 0; s < 2; ++s) {
                const float *v = s == 0 ? IQ1_UP : IQ1_DOWN;
                const float sumqx = (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] + (sumx[N] - sumx[i2]) * v[2];
                const float sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] + (sumw[i2] - sumw[i1]) * v[1] * v[1] +
                                    (sumw[N] - sumw[i2]) * v[2] * v[2];
                if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                    scale = sumqx / sumq2;
                    best_score = scale * sumqx;
                    besti1 = i1;
                    besti2 = i2;
                    best_shift = s == 0 ? 1 : -1;
                }
            }
        }
    }
    if (besti1 < 0 || besti2 < 0 || best_shift == 0) return false;
    split_levels(sorted, N, besti1, besti2, L);
    if (scale < 0) {
        for (int j = 0; j < N; ++j) L[j] = (int8_t)(2 - L[j]);
        scale = -scale;
        best_shift = -best_shift;
    }
    const float *v = best_shift == 1 ? IQ1_UP : IQ1_DOWN;
    const float *const levels[4] = {v, v, v, v};
    *shift = best_shift;
    *scale_out = iq1_snap(lat, xb, weight, 4, levels, L, scale, points);
    return true;
}

static void iq1_s_block(const plm_iq_lattice *lat, const float *xbl, block_iq1_s *y, const float *qw) {
    float scales[QK_K / 32], weight[32];
    int shifts[QK_K / 32];
    y->d = plm_fp32_to_fp16(0.f);
    memset(y->qs, 0, sizeof y->qs);
    memset(y->qh, 0, sizeof y->qh);
    const float sigma2 = 2 * sum_squares(xbl, QK_K) / QK_K;
    float max_scale = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        const float *xb = xbl + 32 * ib;
        element_weights(xb, qw ? qw + 32 * ib : NULL, sigma2, 32, PLAIN_X2, weight);
        uint16_t points[4];
        scales[ib] = 0;
        shifts[ib] = 1;
        if (!iq1_s_sub_block(lat, xb, weight, &scales[ib], &shifts[ib], points)) continue;
        uint16_t h = 0;
        for (int k = 0; k < 4; ++k) {
            y->qs[4 * ib + k] = (uint8_t)(points[k] & 255);
            h |= (uint16_t)((points[k] >> 8) << 3 * k);
        }
        y->qh[ib] = h;
        max_scale = maxf(max_scale, scales[ib]);
    }
    if (!max_scale) return;
    const float d = max_scale / 15;
    y->d = plm_fp32_to_fp16(d * 1.125f);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
        int l = scale_level(id, scales[ib], 7);
        if (shifts[ib] == -1) l |= 8;
        y->qh[ib] |= (uint16_t)(l << 12);
    }
}

/* IQ1_M's shift is per group of 8: kind k = 2 * (first group shifted
 * down) + (second group shifted down). */
static const float *iq1_m_levels(int kind, int group) {
    const bool down = group == 0 ? kind >= 2 : kind % 2 == 1;
    return down ? IQ1_DOWN : IQ1_UP;
}

/* IQ1_M's sub-block of 16: as IQ1_S, but each of the four shift kinds is
 * summed element by element (ggml's order); false when left empty. */
static bool iq1_m_sub_block(const plm_iq_lattice *lat, const float *xb, const float *weight, float *scale_out,
                            int *kind_out, uint16_t points[2]) {
    enum { N = 16 };
    sorted_value sorted[N];
    int8_t L[N];
    float max = fabsf(xb[0]);
    for (int i = 1; i < N; ++i) max = maxf(max, fabsf(xb[i]));
    if (max < GROUP_MAX_EPS_IQ1_M) return false;
    sort_values(xb, N, sorted);
    float best_score = -FLT_MAX, scale = max;
    int besti1 = -1, besti2 = -1, best_k = -1;
    for (int i1 = 0; i1 <= N; ++i1) {
        for (int i2 = i1; i2 <= N; ++i2) {
            float sumqx[4] = {0}, sumq2[4] = {0};
            for (int j = 0; j < N; ++j) {
                const int i = sorted[j].index, level = j < i1 ? 0 : j < i2 ? 1 : 2;
                for (int k = 0; k < 4; ++k) {
                    const float v = iq1_m_levels(k, i >= N / 2)[level];
                    sumqx[k] += weight[i] * v * xb[i];
                    sumq2[k] += weight[i] * v * v;
                }
            }
            for (int k = 0; k < 4; ++k) {
                if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
                    scale = sumqx[k] / sumq2[k];
                    best_score = scale * sumqx[k];
                    besti1 = i1;
                    besti2 = i2;
                    best_k = k;
                }
            }
        }
    }
    if (besti1 < 0 || besti2 < 0 || best_k < 0) return false;
    split_levels(sorted, N, besti1, besti2, L);
    if (scale < 0) {
        for (int j = 0; j < N; ++j) L[j] = (int8_t)(2 - L[j]);
        scale = -scale;
        best_k = 3 - best_k;
    }
    const float *const levels[2] = {iq1_m_levels(best_k, 0), iq1_m_levels(best_k, 1)};
    *kind_out = best_k;
    *scale_out = iq1_snap(lat, xb, weight, 2, levels, L, scale, points);
    return true;
}

/* The block scale: a least-squares fit of d over every element as stored
 * (levels of the sub-block scales included), split into the top nibbles
 * of the four 16-bit scale words. */
static void iq1_m_block_scale(const plm_iq_lattice *lat, const float *xbl, const float *qw, float sigma2,
                              float max_scale, const float *scales, const int *kinds, block_iq1_m *y) {
    static const uint8_t shift_bits[4] = {0x00, 0x80, 0x08, 0x88};
    uint16_t sc[4] = {0};
    float d = max_scale / 15;
    const float id = 1 / d;
    float sumqx = 0, sumq2 = 0, weight[16];
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        const int l = scale_level(id, scales[ib], 7);
        sc[ib / 4] |= (uint16_t)(l << 3 * (ib % 4));
        y->qh[ib] |= shift_bits[kinds[ib]];
        const float *xb = xbl + 16 * ib;
        element_weights(xb, qw ? qw + 16 * ib : NULL, sigma2, 16, PLAIN_X2, weight);
        for (int k = 0; k < 2; ++k) {
            const float *levels = iq1_m_levels(kinds[ib], k);
            const int p = y->qs[2 * ib + k] + ((y->qh[ib] << (8 - 4 * k)) & 0x700);
            const int8_t *pg = lat->odd + p * 8;
            for (int j = 0; j < 8; ++j) {
                const float w = weight[8 * k + j];
                const float q = levels[(pg[j] - 1) / 2] * (2 * l + 1);
                sumqx += w * q * xb[8 * k + j];
                sumq2 += w * q * q;
            }
        }
    }
    if (sumq2 > 0) d = sumqx / sumq2;
    const plm_fp16_t s = plm_fp32_to_fp16(d * 1.1125f);
    sc[0] |= (uint16_t)((s & 0x000f) << 12);
    sc[1] |= (uint16_t)((s & 0x00f0) << 8);
    sc[2] |= (uint16_t)((s & 0x0f00) << 4);
    sc[3] |= (uint16_t)(s & 0xf000);
    memcpy(y->scales, sc, sizeof sc);
}

static void iq1_m_block(const plm_iq_lattice *lat, const float *xbl, block_iq1_m *y, const float *qw) {
    float scales[QK_K / 16], weight[16];
    int kinds[QK_K / 16];
    memset(y, 0, sizeof *y);
    const float sigma2 = 2 * sum_squares(xbl, QK_K) / QK_K;
    float max_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        const float *xb = xbl + 16 * ib;
        element_weights(xb, qw ? qw + 16 * ib : NULL, sigma2, 16, PLAIN_X2, weight);
        uint16_t points[2];
        scales[ib] = 0;
        kinds[ib] = 0;
        if (!iq1_m_sub_block(lat, xb, weight, &scales[ib], &kinds[ib], points)) continue;
        y->qs[2 * ib + 0] = (uint8_t)(points[0] & 255);
        y->qs[2 * ib + 1] = (uint8_t)(points[1] & 255);
        y->qh[ib] = (uint8_t)((points[0] >> 8) | ((points[1] >> 8) << 4));
        max_scale = maxf(max_scale, scales[ib]);
    }
    if (!max_scale) return;
    iq1_m_block_scale(lat, xbl, qw, sigma2, max_scale, scales, kinds, y);
}

/* ---- rows ------------------------------------------------------------------- */

typedef void (*iq_block_fn)(const plm_iq_lattice *lat, const float *xbl, void *y, const float *qw);

static void iq_row(plm_type type, const float *x, void *vy, int64_t n, const float *qw, size_t block_bytes,
                   iq_block_fn block) {
    const plm_iq_lattice *lat = plm_iq_lattice_of(type);
    char *y = vy;
    if (!lat) {  /* out of memory building the tables: a defined (zero) row */
        memset(y, 0, (size_t)(n / QK_K) * block_bytes);
        return;
    }
    for (int64_t i = 0; i < n / QK_K; i++)
        block(lat, x + QK_K * i, y + block_bytes * (size_t)i, qw ? qw + QK_K * i : NULL);
}

static void iq3_xxs_any(const plm_iq_lattice *l, const float *x, void *y, const float *qw) { iq3_xxs_block(l, x, y, qw); }
static void iq3_s_any(const plm_iq_lattice *l, const float *x, void *y, const float *qw) { iq3_s_block(l, x, y, qw); }
static void iq2_xxs_any(const plm_iq_lattice *l, const float *x, void *y, const float *qw) { iq2_xxs_block(l, x, y, qw); }
static void iq2_xs_any(const plm_iq_lattice *l, const float *x, void *y, const float *qw) { iq2_xs_block(l, x, y, qw); }
static void iq2_s_any(const plm_iq_lattice *l, const float *x, void *y, const float *qw) { iq2_s_block(l, x, y, qw); }
static void iq1_s_any(const plm_iq_lattice *l, const float *x, void *y, const float *qw) { iq1_s_block(l, x, y, qw); }
static void iq1_m_any(const plm_iq_lattice *l, const float *x, void *y, const float *qw) { iq1_m_block(l, x, y, qw); }

void plm_quantize_row_iq3_xxs_w(const float *x, void *y, int64_t n, const float *qw) {
    iq_row(PLM_TYPE_IQ3_XXS, x, y, n, qw, sizeof(block_iq3_xxs), iq3_xxs_any);
}
void plm_quantize_row_iq3_s_w(const float *x, void *y, int64_t n, const float *qw) {
    iq_row(PLM_TYPE_IQ3_S, x, y, n, qw, sizeof(block_iq3_s), iq3_s_any);
}
void plm_quantize_row_iq2_xxs_w(const float *x, void *y, int64_t n, const float *qw) {
    iq_row(PLM_TYPE_IQ2_XXS, x, y, n, qw, sizeof(block_iq2_xxs), iq2_xxs_any);
}
void plm_quantize_row_iq2_xs_w(const float *x, void *y, int64_t n, const float *qw) {
    iq_row(PLM_TYPE_IQ2_XS, x, y, n, qw, sizeof(block_iq2_xs), iq2_xs_any);
}
void plm_quantize_row_iq2_s_w(const float *x, void *y, int64_t n, const float *qw) {
    iq_row(PLM_TYPE_IQ2_S, x, y, n, qw, sizeof(block_iq2_s), iq2_s_any);
}
void plm_quantize_row_iq1_s_w(const float *x, void *y, int64_t n, const float *qw) {
    iq_row(PLM_TYPE_IQ1_S, x, y, n, qw, sizeof(block_iq1_s), iq1_s_any);
}
void plm_quantize_row_iq1_m_w(const float *x, void *y, int64_t n, const float *qw) {
    iq_row(PLM_TYPE_IQ1_M, x, y, n, qw, sizeof(block_iq1_m), iq1_m_any);
}

/* without importances: what ggml writes given none (it refuses IQ2_XXS,
 * IQ2_XS and IQ1_S) */
void plm_quantize_row_iq1_m(const float *x, void *y, int64_t n) { plm_quantize_row_iq1_m_w(x, y, n, NULL); }
void plm_quantize_row_iq3_xxs(const float *x, void *y, int64_t n) { plm_quantize_row_iq3_xxs_w(x, y, n, NULL); }
void plm_quantize_row_iq3_s(const float *x, void *y, int64_t n) { plm_quantize_row_iq3_s_w(x, y, n, NULL); }
void plm_quantize_row_iq2_s(const float *x, void *y, int64_t n) { plm_quantize_row_iq2_s_w(x, y, n, NULL); }
