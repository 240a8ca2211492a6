/*
 * Reference quantizers: floats -> a row of ggml blocks.
 *
 * These must produce the very bytes llama-quantize writes (no importance
 * matrix), so every expression keeps ggml's operation order and its float
 * (not double) intermediates.  Fused multiply-add would change roundings:
 * gcc in ISO C mode never contracts, and clang is told not to below.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/rounding.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* Float -> int8 truncating toward zero like a C cast, but defined for every
 * input: ggml's casts never see out-of-range values from finite rows, and a
 * NaN or inf in the row must not become undefined behaviour here. */
static inline int8_t to_i8(float v) {
    if (!(v > -129.0f && v < 128.0f)) return v > 0 ? 127 : (v < 0 ? -128 : 0);
    return (int8_t)v;
}

void plm_quantize_row_f32(const float *x, void *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

void plm_quantize_row_f16(const float *x, void *y, int64_t n) {
    plm_fp32_to_fp16_row(x, y, n);
}

void plm_quantize_row_bf16(const float *x, void *y, int64_t n) {
    plm_fp32_to_bf16_row(x, y, n);
}

/* The element of largest magnitude, sign kept (the first one on ties). */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *min, float *max) {
    float lo = FLT_MAX, hi = -FLT_MAX;  /* as ggml starts */
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *min = lo;
    *max = hi;
}

/* Q4_0: the extreme value maps to -8 exactly, so its sign picks which end of
 * the asymmetric range -8..7 the block uses. */
void plm_quantize_row_q4_0(const float *x, void *vy, int64_t n) {
    block_q4_0 *y = vy;
    for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        const float d = signed_absmax(x, QK4_0) / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = plm_fp32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const float x0 = x[j] * id, x1 = x[j + QK4_0 / 2] * id;
            int q0 = to_i8(x0 + 8.5f), q1 = to_i8(x1 + 8.5f);
            q0 = q0 < 15 ? q0 : 15;
            q1 = q1 < 15 ? q1 : 15;
            y[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void plm_quantize_row_q4_1(const float *x, void *vy, int64_t n) {
    block_q4_1 *y = vy;
    for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
        float min, max;
        min_max(x, QK4_1, &min, &max);
        const float d = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = plm_fp32_to_fp16(d);
        y[i].m = plm_fp32_to_fp16(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const float x0 = (x[j] - min) * id, x1 = (x[j + QK4_1 / 2] - min) * id;
            int q0 = to_i8(x0 + 0.5f), q1 = to_i8(x1 + 0.5f);
            q0 = q0 < 15 ? q0 : 15;
            q1 = q1 < 15 ? q1 : 15;
            y[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

static void put_q5_high_bits(uint8_t qh[4], uint32_t bits) {
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t)(bits >> (8 * k));
}

void plm_quantize_row_q5_0(const float *x, void *vy, int64_t n) {
    block_q5_0 *y = vy;
    for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
        const float d = signed_absmax(x, QK5_0) / -16;
        const float id = d ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        y[i].d = plm_fp32_to_fp16(d);
        for (int j = 0; j < QK5_0 / 2; j++) {
            const float x0 = x[j] * id, x1 = x[j + QK5_0 / 2] * id;
            int q0 = to_i8(x0 + 16.5f), q1 = to_i8(x1 + 16.5f);
            q0 = q0 < 31 ? q0 : 31;
            q1 = q1 < 31 ? q1 : 31;
            y[i].qs[j] = (uint8_t)((q0 & 0xf) | (q1 & 0xf) << 4);
            qh |= (uint32_t)(q0 >> 4 & 1) << j | (uint32_t)(q1 >> 4 & 1) << (j + 16);
        }
        put_q5_high_bits(y[i].qh, qh);
    }
}

/* Q5_1: unlike Q4_1, ggml does not clamp to 31 here (x0 + 0.5 < 32 anyway). */
void plm_quantize_row_q5_1(const float *x, void *vy, int64_t n) {
    block_q5_1 *y = vy;
    for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
        float min, max;
        min_max(x, QK5_1, &min, &max);
        const float d = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        y[i].d = plm_fp32_to_fp16(d);
        y[i].m = plm_fp32_to_fp16(min);
        for (int j = 0; j < QK5_1 / 2; j++) {
            const float x0 = (x[j] - min) * id, x1 = (x[j + QK5_1 / 2] - min) * id;
            const int q0 = (uint8_t)to_i8(x0 + 0.5f), q1 = (uint8_t)to_i8(x1 + 0.5f);
            y[i].qs[j] = (uint8_t)((q0 & 0xf) | (q1 & 0xf) << 4);
            qh |= (uint32_t)(q0 >> 4 & 1) << j | (uint32_t)(q1 >> 4 & 1) << (j + 16);
        }
        put_q5_high_bits(y[i].qh, qh);
    }
}

static float absmax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    return amax;
}

void plm_quantize_row_q8_0(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        const float d = absmax(x, QK8_0) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = plm_fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) y[i].qs[j] = to_i8(roundf(x[j] * id));
    }
}

void plm_quantize_row_q8_1(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        const float d = absmax(x, QK8_1) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        int sum = 0;
        y[i].d = plm_fp32_to_fp16(d);
        for (int j = 0; j < QK8_1; j++) {
            y[i].qs[j] = to_i8(roundf(x[j] * id));
            sum += y[i].qs[j];
        }
        y[i].s = plm_fp32_to_fp16((float)sum * d);
    }
}

/* Q8_K: scale chosen so the extreme maps to -127 (symmetric range), d kept in
 * f32; bsums let K-quant dots apply their per-sub-block mins cheaply. */
void plm_quantize_row_q8_K(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        const float max = signed_absmax(x, QK_K);
        memset(&y[i], 0, sizeof y[i]);
        if (max == 0.0f || max != max) continue;  /* all zero (or garbage in) */
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) {
            const float v = iscale * x[j];
            const int q = fabsf(v) < 4194303.0f ? plm_nearest_int(v) : (v > 0 ? 127 : -128);
            y[i].qs[j] = (int8_t)(q < 127 ? (q > -128 ? q : -128) : 127);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

/* ---- IQ4_NL ---------------------------------------------------------------
 * Non-linear levels, so the scale is searched: start from max/127, then try
 * the 15 scales that map max onto -127+t (t = -7..7), keeping the one with
 * the best weighted least-squares fit (weights x^2), and finally requantize
 * every element against the winning f32 scale. */

/* Index of the level nearest to v in the sorted 16-entry table; on an exact
 * tie the upper one. */
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

/* Weighted fit of x to d * level(id * x): accumulates sum w*q*x and w*q*q. */
static void iq4_fit(const float *x, const float *w, float id, float *sumqx, float *sumq2) {
    float sqx = 0, sq2 = 0;
    for (int j = 0; j < QK4_NL; j++) {
        const float q = kvalues_iq4nl[best_index_iq4(id * x[j])];
        sqx += w[j] * q * x[j];
        sq2 += w[j] * q * q;
    }
    *sumqx = sqx;
    *sumq2 = sq2;
}

static float iq4_nl_scale(const float *x, const float *w) {
    float amax = 0, max = 0;
    for (int j = 0; j < QK4_NL; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (amax < 1e-15f) return 0.0f;
    const int ntry = 7;
    float sumqx, sumq2;
    iq4_fit(x, w, 1 / (-max / kvalues_iq4nl[0]), &sumqx, &sumq2);
    float d = sumqx / sumq2, best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; itry++) {
        iq4_fit(x, w, (itry + kvalues_iq4nl[0]) / max, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

void plm_quantize_row_iq4_nl(const float *x, void *vy, int64_t n) {
    block_iq4_nl *y = vy;
    for (int64_t i = 0; i < n / QK4_NL; i++, x += QK4_NL) {
        float w[QK4_NL];
        for (int j = 0; j < QK4_NL; j++) w[j] = x[j] * x[j];
        const float d = iq4_nl_scale(x, w);
        const float id = d ? 1 / d : 0;
        y[i].d = plm_fp32_to_fp16(d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            const int l0 = best_index_iq4(id * x[j]), l1 = best_index_iq4(id * x[j + 16]);
            y[i].qs[j] = (uint8_t)(l0 | l1 << 4);
        }
    }
}
