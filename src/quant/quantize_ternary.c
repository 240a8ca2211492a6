/*
 * Reference quantizers of the formats without a scale search: the ternary
 * TQ1_0 / TQ2_0 (BitNet b1.58 and TriLM weights, which are already -1/0/+1
 * times a scale) and MXFP4 (OCP microscaling FP4).  Importances change
 * nothing in ggml for these, so llama-quantize writes exactly these bytes
 * with or without an importance matrix.
 */
#include <math.h>
#include <string.h>

#include "quant/blocks.h"
#include "quant/quant.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

static float abs_max(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
    return amax;
}

/* -1, 0, 1 (times d) -> trit 0, 1, 2; lroundf rounds halves away from zero
 * as ggml does. */
static int trit(float v, float id) {
    return (int)lroundf(v * id) + 1;
}

/* 5 trits (4 for qh, shifted up one) as base 3, most significant first,
 * then scaled to a byte by ceiling division so that the kernels can pull
 * the trits out by multiplying by 3 (q * 256 / 243, rounded up). */
static uint8_t pack_trits(const float *x, int stride, int count, float id) {
    uint8_t q = 0;
    for (int n = 0; n < count; n++) q = (uint8_t)(q * 3 + trit(x[n * stride], id));
    for (int n = count; n < 5; n++) q = (uint8_t)(q * 3);
    return (uint8_t)(((uint16_t)q * 256 + (243 - 1)) / 243);
}

void plm_quantize_row_tq1_0(const float *x, void *vy, int64_t n) {
    block_tq1_0 *y = vy;
    enum { QS_BIG = sizeof y->qs - sizeof y->qs % 32 };  /* 32 bytes of 5 trits */
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        const float d = abs_max(x, QK_K);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = plm_fp32_to_fp16(d);
        const float *xp = x;
        for (int j = 0; j < QS_BIG; j += 32, xp += 5 * 32)
            for (int m = 0; m < 32; m++) y[i].qs[j + m] = pack_trits(xp + m, 32, 5, id);
        for (int j = QS_BIG; j < (int)sizeof y->qs; j += 16, xp += 5 * 16)
            for (int m = 0; m < 16; m++) y[i].qs[j + m] = pack_trits(xp + m, 16, 5, id);
        for (int j = 0; j < (int)sizeof y->qh; j++) y[i].qh[j] = pack_trits(xp + j, sizeof y->qh, 4, id);
    }
}

void plm_quantize_row_tq2_0(const float *x, void *vy, int64_t n) {
    block_tq2_0 *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        const float d = abs_max(x, QK_K);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = plm_fp32_to_fp16(d);
        for (int j = 0; j < (int)sizeof y->qs; j += 32) {
            const float *xp = x + 4 * j;
            for (int m = 0; m < 32; m++) {
                uint8_t q = 0;
                for (int l = 0; l < 4; l++) q |= (uint8_t)((trit(xp[m + 32 * l], id) & 3) << (2 * l));
                y[i].qs[j + m] = q;
            }
        }
    }
}

/* The E2M1 level nearest to v / e (the first one on ties, as ggml). */
static uint8_t nearest_fp4(float v, float e) {
    int best = 0;
    float best_err = fabsf(kvalues_mxfp4[0] * e - v);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf(kvalues_mxfp4[i] * e - v);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return (uint8_t)best;
}

/* The shared exponent puts the largest magnitude in E2M1's top binade
 * (4..6): 2^(floor(log2 amax) - 2).  Out-of-range exponents wrap as the
 * x86 conversion ggml relies on does, through int. */
void plm_quantize_row_mxfp4(const float *x, void *vy, int64_t n) {
    block_mxfp4 *y = vy;
    for (int64_t i = 0; i < n / QK_MXFP4; i++, x += QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < QK_MXFP4; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        const uint8_t e = amax > 0.0f ? (uint8_t)(int)(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = plm_e8m0_half(e);
        y[i].e = e;
        for (int j = 0; j < QK_MXFP4 / 2; j++)
            y[i].qs[j] = (uint8_t)(nearest_fp4(x[j], d) | nearest_fp4(x[j + QK_MXFP4 / 2], d) << 4);
    }
}
