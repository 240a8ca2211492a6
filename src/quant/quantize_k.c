/*
 * K-quant reference quantizers: floats -> rows of 256-element super-blocks
 * (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K).
 *
 * These must write the very bytes llama-quantize writes without an
 * importance matrix (ggml's quantize_row_qN_K_ref).  Each sub-block's scale
 * comes from a search that keeps the best of many candidate scales by a
 * float error, so one rounding done differently anywhere flips a choice:
 * every sum runs in ggml's element order with float intermediates, and
 * nothing is contracted into a fused multiply-add (see quantize.c).
 *
 * Speed: the searches are nearly all the time of quantizing a model (16 to
 * 21 candidate scales per sub-block, each a pass over its elements), so 8
 * sub-blocks are searched at once in SIMD lanes (see "lanes" below): ~4x
 * faster than one at a time, and not one rounding different.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/rounding.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define GROUP_MAX_EPS 1e-15f /* ggml: a group below this magnitude is all zero */

static inline int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

/* The element of largest magnitude, sign kept (the first one on ties). */
static float signed_absmax(const float *x, int n, float *amax_out) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    *amax_out = amax;
    return max;
}

/* ---- lanes ---------------------------------------------------------------
 * The scale searches run 8 sub-blocks side by side, sub-block k in lane k of
 * two 4-float GCC/clang vectors (SSE2 or NEON registers), each lane taking
 * its own branches by masks.  Vector arithmetic is IEEE per lane: exactly
 * the scalar operations, in the same order, so the bytes do not change. */

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
#define NH 2 /* vectors per 8 lanes */

static inline v4f v4_bits_f(v4i v) {
    v4f f;
    memcpy(&f, &v, sizeof f);
    return f;
}

static inline v4i v4_bits_i(v4f v) {
    v4i i;
    memcpy(&i, &v, sizeof i);
    return i;
}

/* mask ? a : b, per lane; mask lanes all ones or zeros, as comparisons give */
static inline v4f v4_select(v4i mask, v4f a, v4f b) {
    return v4_bits_f((v4_bits_i(a) & mask) | (v4_bits_i(b) & ~mask));
}

static inline v4f v4_abs(v4f v) { return v4_bits_f(v4_bits_i(v) & 0x7fffffff); }

/* plm_nearest_int per lane, clamped to lo..hi, as a float.  The clamp is on
 * the integer, as ggml's: a search can scale far out of range (a min fit
 * next to the max), and ggml's level is then whatever nearest_int's bits
 * give, clamped. */
static inline v4f v4_level(v4f v, int lo, int hi) {
    v4i l = (v4_bits_i(v + 12582912.0f) & 0x007fffff) - 0x00400000;
    const v4i under = l < lo, over = l > hi;
    l = (l & ~under) | (lo & under);
    return __builtin_convertvector((l & ~over) | (hi & over), v4f);
}

/* ---- asymmetric fit: x ~ scale * L + min, L in 0..nmax (make_qkx2_quants)
 * Used by Q2_K, Q4_K and Q5_K.  A first guess spans [min(0, lo), hi]; then
 * nstep + 1 candidate scales around nmax / range each get their L by
 * rounding and a weighted least-squares refit of scale and min (min kept
 * <= 0); a candidate with a smaller weighted error (|e| or e^2) than the
 * best so far replaces it.  The candidates are not independent — each
 * rounds against the min of the best fit so far — hence lanes across
 * sub-blocks, not across candidates. */

typedef struct lane_fit {
    int n, nmax;              /* elements per sub-block, top level */
    v4f x[32][NH], w[32][NH]; /* element i of the 8 sub-blocks */
    v4f sum_w[NH], sum_x[NH]; /* per sub-block, summed from element 0 up */
} lane_fit;

/* min (never above 0) and max of each sub-block, and its weight sums */
static void lanes_range(lane_fit *f, v4f *min, v4f *max) {
    for (int h = 0; h < NH; h++) {
        v4f lo = f->x[0][h], hi = f->x[0][h], sw = f->w[0][h], sx = sw * f->x[0][h];
        for (int i = 1; i < f->n; i++) {
            const v4f x = f->x[i][h], w = f->w[i][h];
            lo = v4_select(x < lo, x, lo);
            hi = v4_select(x > hi, x, hi);
            sw += w;
            sx += w * x;
        }
        min[h] = v4_select(lo > 0, (v4f){0}, lo);
        max[h] = hi;
        f->sum_w[h] = sw;
        f->sum_x[h] = sx;
    }
}

static void lanes_round(const lane_fit *f, const v4f *iscale, const v4f *min, v4f (*L)[NH]) {
    for (int i = 0; i < f->n; i++)
        for (int h = 0; h < NH; h++) L[i][h] = v4_level(iscale[h] * (f->x[i][h] - min[h]), 0, f->nmax);
}

/* Weighted error of scale * L + min against x. */
static void lanes_error(const lane_fit *f, v4f (*L)[NH], const v4f *scale, const v4f *min, bool use_mad, v4f *err) {
    v4f e[NH] = {{0}};
    for (int i = 0; i < f->n; i++)
        for (int h = 0; h < NH; h++) {
            const v4f diff = scale[h] * L[i][h] + min[h] - f->x[i][h];
            e[h] += f->w[i][h] * (use_mad ? v4_abs(diff) : diff * diff);
        }
    memcpy(err, e, sizeof e);
}

/* The running best of each lane.  Its L is not kept: the scale and min that
 * rounded the winning candidate give it back at the end. */
typedef struct lane_best {
    v4f err[NH], scale[NH], min[NH];
    v4f round_iscale[NH], round_min[NH];
} lane_best;

/* Least-squares scale and min of a rounding; `solvable` false where ggml
 * skips the candidate (singular system). */
static void lanes_refit(const lane_fit *f, v4f (*L)[NH], v4f *scale, v4f *min, v4i *solvable) {
    v4f sum_l[NH] = {{0}}, sum_l2[NH] = {{0}}, sum_xl[NH] = {{0}};
    for (int i = 0; i < f->n; i++)
        for (int h = 0; h < NH; h++) {
            const v4f l = L[i][h], w = f->w[i][h];
            sum_l[h] += w * l;
            sum_l2[h] += w * l * l;
            sum_xl[h] += w * l * f->x[i][h];
        }
    const v4f one = {1, 1, 1, 1}, zero = {0};
    for (int h = 0; h < NH; h++) {
        const v4f D = f->sum_w[h] * sum_l2[h] - sum_l[h] * sum_l[h];
        solvable[h] = D > 0;
        /* (skipped lanes divide by 1: finite, and discarded) */
        const v4f Ds = v4_select(solvable[h], D, one), l2s = v4_select(sum_l2[h] > 0, sum_l2[h], one);
        const v4f s = (f->sum_w[h] * sum_xl[h] - f->sum_x[h] * sum_l[h]) / Ds;
        const v4f m = (sum_l2[h] * f->sum_x[h] - sum_l[h] * sum_xl[h]) / Ds;
        const v4i positive = m > 0;  /* the min must not be positive: refit the scale alone */
        scale[h] = v4_select(positive, sum_xl[h] / l2s, s);
        min[h] = v4_select(positive, zero, m);
    }
}

/* One candidate: iscale = steps / (max - min), with each lane's current
 * min; keep the lanes where the refit beats the best. */
static void lanes_try(const lane_fit *f, float steps, const v4f *max, bool use_mad, lane_best *b) {
    v4f iscale[NH], L[32][NH], scale[NH], min[NH], err[NH];
    v4i solvable[NH];
    for (int h = 0; h < NH; h++) iscale[h] = steps / (max[h] - b->min[h]);
    lanes_round(f, iscale, b->min, L);
    lanes_refit(f, L, scale, min, solvable);
    lanes_error(f, L, scale, min, use_mad, err);
    for (int h = 0; h < NH; h++) {
        const v4i take = solvable[h] & (err[h] < b->err[h]);
        b->err[h] = v4_select(take, err[h], b->err[h]);
        b->scale[h] = v4_select(take, scale[h], b->scale[h]);
        b->round_iscale[h] = v4_select(take, iscale[h], b->round_iscale[h]);
        b->round_min[h] = v4_select(take, b->min[h], b->round_min[h]);
        b->min[h] = v4_select(take, min[h], b->min[h]);
    }
}

/* Fits 8 consecutive sub-blocks of n elements (x, weights w): scales[k],
 * neg_min[k] = -min and the levels L (n per sub-block, in order). */
static void fit_scale_min(const float *x, const float *w, int n, int nmax, float rmin, float rdelta, int nstep,
                          bool use_mad, uint8_t *L, float *scales, float *neg_min) {
    lane_fit f = {.n = n, .nmax = nmax};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 4 * NH; k++) {
            f.x[i][k / 4][k % 4] = x[k * n + i];
            f.w[i][k / 4][k % 4] = w[k * n + i];
        }
    v4f min[NH], max[NH], Lf[32][NH];
    v4i flat[NH];
    lane_best b;
    lanes_range(&f, min, max);
    for (int h = 0; h < NH; h++) {
        /* all equal (and <= 0): ggml returns at once with scale 0 and L 0;
         * here the lane searches a made-up range and is reset at the end */
        flat[h] = max[h] == min[h];
        max[h] = v4_select(flat[h], min[h] + 1, max[h]);
        b.min[h] = b.round_min[h] = min[h];
        b.round_iscale[h] = (float)nmax / (max[h] - min[h]);
        b.scale[h] = 1 / b.round_iscale[h];
    }
    lanes_round(&f, b.round_iscale, min, Lf);
    lanes_error(&f, Lf, b.scale, min, use_mad, b.err);
    for (int is = 0; is <= nstep; is++) lanes_try(&f, rmin + rdelta * is + nmax, max, use_mad, &b);
    lanes_round(&f, b.round_iscale, b.round_min, Lf);
    for (int k = 0; k < 4 * NH; k++) {
        const int h = k / 4, j = k % 4;
        scales[k] = flat[h][j] ? 0.0f : b.scale[h][j];
        neg_min[k] = -(flat[h][j] ? min[h][j] : b.min[h][j]);
        for (int i = 0; i < n; i++) L[k * n + i] = flat[h][j] ? 0 : (uint8_t)Lf[i][h][j];
    }
}

/* ---- symmetric fit: x ~ scale * (L - nmax), L in 0..2*nmax-1
 * (make_qx_quants with x^2 weights, used by Q6_K).  The scale that maps the
 * extreme to -nmax, then 18 scales mapping it to -(nmax +- 0.1k), each judged
 * by the weighted least-squares gain (sum w x l)^2 / (sum w l^2) against the
 * best so far.  Done for 8 sub-blocks at once, in lanes. */

/* sum w*x*l and sum w*l*l, w = x^2, of one candidate in every lane */
static void sym_sums(v4f (*x)[NH], int n, int nmax, const v4f *iscale, v4f *sumlx, v4f *suml2) {
    for (int h = 0; h < NH; h++) sumlx[h] = suml2[h] = (v4f){0};
    for (int i = 0; i < n; i++)
        for (int h = 0; h < NH; h++) {
            const v4f w = x[i][h] * x[i][h], l = v4_level(iscale[h] * x[i][h], -nmax, nmax - 1);
            sumlx[h] += w * x[i][h] * l;
            suml2[h] += w * l * l;
        }
}

/* The signed extreme of each lane, and a mask of the all-zero lanes. */
static void sym_extreme(v4f (*x)[NH], int n, v4f *max, v4i *zero) {
    for (int h = 0; h < NH; h++) {
        v4f amax = {0}, m = {0};
        for (int i = 0; i < n; i++) {
            const v4f ax = v4_abs(x[i][h]);
            const v4i bigger = ax > amax;  /* the first on ties */
            amax = v4_select(bigger, ax, amax);
            m = v4_select(bigger, x[i][h], m);
        }
        zero[h] = amax < GROUP_MAX_EPS;
        max[h] = v4_select(zero[h], (v4f){1, 1, 1, 1}, m);  /* finite arithmetic; reset below */
    }
}

/* Fits 8 consecutive sub-blocks of n elements: scales[k] and the levels L
 * (n per sub-block, in order). */
static void fit_scale_sym(const float *xs, int n, int nmax, int8_t *L, float *scales) {
    v4f x[16][NH], max[NH], scale[NH], best[NH], pick[NH], sumlx[NH], suml2[NH];
    v4i zero[NH];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 4 * NH; k++) x[i][k / 4][k % 4] = xs[k * n + i];
    sym_extreme(x, n, max, zero);
    for (int h = 0; h < NH; h++) pick[h] = (float)-nmax / max[h];
    sym_sums(x, n, nmax, pick, sumlx, suml2);
    for (int h = 0; h < NH; h++) {
        const v4i some = suml2[h] != 0;
        scale[h] = v4_select(some, sumlx[h] / v4_select(some, suml2[h], (v4f){1, 1, 1, 1}), (v4f){0});
        best[h] = scale[h] * sumlx[h];
    }
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        v4f iscale[NH];
        for (int h = 0; h < NH; h++) iscale[h] = -(nmax + 0.1f * is) / max[h];
        sym_sums(x, n, nmax, iscale, sumlx, suml2);
        for (int h = 0; h < NH; h++) {
            const v4i take = (suml2[h] > 0) & (sumlx[h] * sumlx[h] > best[h] * suml2[h]);
            const v4f s = sumlx[h] / v4_select(take, suml2[h], (v4f){1, 1, 1, 1});
            scale[h] = v4_select(take, s, scale[h]);
            best[h] = v4_select(take, s * sumlx[h], best[h]);
            pick[h] = v4_select(take, iscale[h], pick[h]);
        }
    }
    for (int k = 0; k < 4 * NH; k++) {
        const int h = k / 4, j = k % 4;
        scales[k] = zero[h][j] ? 0.0f : scale[h][j];
        for (int i = 0; i < n; i++)
            L[k * n + i] = zero[h][j] ? 0 : (int8_t)(nmax + (int)v4_level(pick[h] * x[i][h], -nmax, nmax - 1)[j]);
    }
}

/* ---- Q3_K's fit (make_q3_quants): levels -nmax..nmax-1 from the extreme,
 * then up to 5 rounds of coordinate descent, moving one element's level at a
 * time when that raises the x^3-weighted gain.  Inherently sequential. */
static float fit_q3(const float *x, int n, int nmax, int8_t *L) {
    float amax;
    const float max = signed_absmax(x, n, &amax);
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(plm_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        const float w = x[i] * x[i];
        L[i] = (int8_t)l;
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * L[i] * L[i];
            const int new_l = clamp_int(plm_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (new_l == L[i]) continue;
            slx += w * x[i] * new_l;
            sl2 += w * new_l * new_l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)new_l;
                sumlx = slx;
                suml2 = sl2;
                n_changed++;
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- packing ------------------------------------------------------------ */

/* 2-bit levels of 256 elements: per 128, byte l holds elements l, l+32,
 * l+64, l+96 in bit pairs 0, 2, 4, 6 (Q2_K and the low bits of Q3_K). */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

/* 6-bit scale and min of Q4_K/Q5_K sub-block j, the layout
 * plm_get_scale_min_k4 reads back. */
static void put_scale_min_k4(uint8_t *s, int j, uint8_t ls, uint8_t lm) {
    if (j < 4) {
        s[j] = ls;
        s[j + 4] = lm;
    } else {
        s[j + 4] = (uint8_t)((ls & 0xf) | (lm & 0xf) << 4);
        s[j - 4] |= (uint8_t)((ls >> 4) << 6);
        s[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

/* ---- Q2_K --------------------------------------------------------------- */

void plm_quantize_row_q2_K(const float *x, void *vy, int64_t n) {
    block_q2_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        float scales[QK_K / 16], mins[QK_K / 16], max_scale = 0, max_min = 0;
        float w[QK_K];
        for (int l = 0; l < QK_K; l++) w[l] = fabsf(x[l]);
        for (int j = 0; j < QK_K / 16; j += 8)
            fit_scale_min(x + 16 * j, w + 16 * j, 16, 3, -0.5f, 0.1f, 15, true, L + 16 * j, scales + j, mins + j);
        for (int j = 0; j < QK_K / 16; j++) {
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        /* 4-bit scales and mins relative to the block's largest */
        memset(y[i].scales, 0, sizeof y[i].scales);
        y[i].d = y[i].dmin = plm_fp32_to_fp16(0.0f);
        if (max_scale > 0) {
            const float iscale = 15.f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) y[i].scales[j] = (uint8_t)plm_nearest_int(iscale * scales[j]);
            y[i].d = plm_fp32_to_fp16(max_scale / 15.f);
        }
        if (max_min > 0) {
            const float iscale = 15.f / max_min;
            for (int j = 0; j < QK_K / 16; j++)
                y[i].scales[j] |= (uint8_t)((unsigned)plm_nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = plm_fp32_to_fp16(max_min / 15.f);
        }
        /* requantize against the rounded scales; a zero scale keeps the fit's L */
        const float d_all = plm_fp16_to_fp32(y[i].d), m_all = plm_fp16_to_fp32(y[i].dmin);
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = d_all * (y[i].scales[j] & 0xf);
            if (!d) continue;
            const float dm = m_all * (y[i].scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)clamp_int(plm_nearest_int((x[16 * j + l] + dm) / d), 0, 3);
        }
        pack_2bit(L, y[i].qs);
    }
}

/* ---- Q3_K --------------------------------------------------------------- */

/* 6-bit scale of sub-block j (0..63, bias 32): low nibble in bytes 0..7,
 * top 2 bits in bytes 8..11 (plm_q3_K_scale reads it back). */
static void put_q3_scale(uint8_t *s, int j, int l) {
    if (j < 8) s[j] = (uint8_t)(l & 0xf);
    else s[j - 8] |= (uint8_t)((l & 0xf) << 4);
    s[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
}

/* Levels 0..7: bit 2 goes to hmask (element j sets bit j/32 of byte j%32),
 * bits 0..1 to qs. */
static void pack_q3(uint8_t *L, block_q3_K *y) {
    memset(y->hmask, 0, sizeof y->hmask);
    for (int j = 0; j < QK_K; j++) {
        if (L[j] > 3) {
            y->hmask[j % (QK_K / 8)] |= (uint8_t)(1u << (j / (QK_K / 8)));
            L[j] -= 4;
        }
    }
    pack_2bit(L, y->qs);
}

void plm_quantize_row_q3_K(const float *x, void *vy, int64_t n) {
    block_q3_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        int8_t L[QK_K];
        float scales[QK_K / 16], max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            scales[j] = fit_q3(x + 16 * j, 16, 4, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        /* signed 6-bit scales: the largest in magnitude maps to -32 */
        memset(y[i].scales, 0, sizeof y[i].scales);
        y[i].d = plm_fp32_to_fp16(0.0f);
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) {
                /* ggml keeps the rounded value in an int8_t before clamping */
                const int8_t l = (int8_t)plm_nearest_int(iscale * scales[j]);
                put_q3_scale(y[i].scales, j, clamp_int(l, -32, 31) + 32);
            }
            y[i].d = plm_fp32_to_fp16(1 / iscale);
        }
        const float d_all = plm_fp16_to_fp32(y[i].d);
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = d_all * (int8_t)(plm_q3_K_scale(j, y[i].scales) - 32);
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clamp_int(plm_nearest_int(x[16 * j + l] / d), -4, 3) + 4);
        }
        pack_q3((uint8_t *)L, &y[i]);
    }
}

/* ---- Q4_K and Q5_K -----------------------------------------------------
 * Eight sub-blocks of 32, each fit with weights rms(sub-block) + |x|; their
 * scales and mins become 6-bit multiples of the block's largest. */

static void fit_sub_blocks_32(const float *x, int nmax, float rmin, int nstep, uint8_t *L, float *scales,
                              float *mins, float *max_scale, float *max_min) {
    float w[QK_K];
    for (int j = 0; j < QK_K / 32; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[32 * j + l] = av_x + fabsf(xs[l]);
    }
    fit_scale_min(x, w, 32, nmax, rmin, 0.1f, nstep, false, L, scales, mins);
    *max_scale = *max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        if (scales[j] > *max_scale) *max_scale = scales[j];
        if (mins[j] > *max_min) *max_min = mins[j];
    }
}

/* Writes d, dmin and the packed scales; then requantizes L (0..nmax)
 * against them, keeping the fit's L where a sub-block's scale is zero. */
static void set_scales_k4(const float *x, int nmax, const float *scales, const float *mins, float max_scale,
                          float max_min, uint8_t *s12, plm_fp16_t *d16, plm_fp16_t *dmin16, uint8_t *L) {
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; j++) {
        /* ggml stores the rounded values in uint8_t, then caps them at 63 */
        uint8_t ls = (uint8_t)plm_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)plm_nearest_int(inv_min * mins[j]);
        put_scale_min_k4(s12, j, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
    }
    *d16 = plm_fp32_to_fp16(max_scale / 63.f);
    *dmin16 = plm_fp32_to_fp16(max_min / 63.f);
    const float d_all = plm_fp16_to_fp32(*d16), m_all = plm_fp16_to_fp32(*dmin16);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        plm_get_scale_min_k4(j, s12, &sc, &m);
        const float d = d_all * sc;
        if (!d) continue;
        const float dm = m_all * m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)clamp_int(plm_nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
    }
}

void plm_quantize_row_q4_K(const float *x, void *vy, int64_t n) {
    block_q4_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        float scales[QK_K / 32], mins[QK_K / 32], max_scale, max_min;
        fit_sub_blocks_32(x, 15, -1.f, 20, L, scales, mins, &max_scale, &max_min);
        memset(y[i].scales, 0, sizeof y[i].scales);
        set_scales_k4(x, 15, scales, mins, max_scale, max_min, y[i].scales, &y[i].d, &y[i].dmin, L);
        /* per 64 elements: low nibbles the first 32, high nibbles the next */
        for (int j = 0; j < QK_K; j += 64)
            for (int l = 0; l < 32; l++) y[i].qs[j / 2 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    }
}

void plm_quantize_row_q5_K(const float *x, void *vy, int64_t n) {
    block_q5_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        float scales[QK_K / 32], mins[QK_K / 32], max_scale, max_min;
        fit_sub_blocks_32(x, 31, -0.5f, 15, L, scales, mins, &max_scale, &max_min);
        memset(y[i].scales, 0, sizeof y[i].scales);
        set_scales_k4(x, 31, scales, mins, max_scale, max_min, y[i].scales, &y[i].d, &y[i].dmin, L);
        /* as Q4_K for the low 4 bits; bit 4 of element l of sub-block 2p+h
         * (h = 0, 1) is bit 2p+h of qh[l] */
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int p = 0; p < QK_K / 64; p++) {
            for (int l = 0; l < 32; l++) {
                const int l1 = L[64 * p + l], l2 = L[64 * p + l + 32];
                y[i].qh[l] |= (uint8_t)((l1 >> 4) << (2 * p) | (l2 >> 4) << (2 * p + 1));
                y[i].qs[32 * p + l] = (uint8_t)((l1 & 0xf) | (l2 & 0xf) << 4);
            }
        }
    }
}

/* ---- Q6_K --------------------------------------------------------------- */

/* Levels 0..63 of 256 elements: per 128, element l + 32p (p = 0..3) puts its
 * low nibble in ql[l + 32*(p%2)] (p/2 picks the nibble) and its top two
 * bits in bits 2p..2p+1 of qh[l]. */
static void pack_q6(const int8_t *L, block_q6_K *y) {
    uint8_t *ql = y->ql, *qh = y->qh;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; l++) {
            const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
            ql[l] = (uint8_t)((q1 & 0xf) | (q3 & 0xf) << 4);
            ql[l + 32] = (uint8_t)((q2 & 0xf) | (q4 & 0xf) << 4);
            qh[l] = (uint8_t)(q1 >> 4 | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
        }
    }
}

void plm_quantize_row_q6_K(const float *x, void *vy, int64_t n) {
    block_q6_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        int8_t L[QK_K];
        float scales[QK_K / 16], max_scale = 0, max_abs = 0;
        for (int j = 0; j < QK_K / 16; j += 8) fit_scale_sym(x + 16 * j, 16, 32, L + 16 * j, scales + j);
        for (int j = 0; j < QK_K / 16; j++) {
            if (fabsf(scales[j]) > max_abs) {
                max_abs = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        if (max_abs < GROUP_MAX_EPS) {  /* all zero */
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* signed 8-bit scales: the largest in magnitude maps to -128 */
        const float iscale = -128.f / max_scale;
        y[i].d = plm_fp32_to_fp16(1 / iscale);
        for (int j = 0; j < QK_K / 16; j++) {
            const int s = plm_nearest_int(iscale * scales[j]);
            y[i].scales[j] = (int8_t)(s < 127 ? s : 127);
        }
        const float d_all = plm_fp16_to_fp32(y[i].d);
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = d_all * y[i].scales[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clamp_int(plm_nearest_int(x[16 * j + l] / d), -32, 31) + 32);
        }
        pack_q6(L, &y[i]);
    }
}
