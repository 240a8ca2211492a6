/*
 * Dequantization: a row of ggml blocks -> floats.  The arithmetic (f16 scale
 * widened to f32, then scale * integer, then minus the min) follows ggml's
 * dequantize_row_* so results are bit-identical to llama.cpp's.
 */
#include <string.h>

#include "quant/blocks.h"
#include "quant/quant.h"

void plm_dequantize_row_f32(const void *x, float *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

void plm_dequantize_row_f16(const void *x, float *y, int64_t n) {
    plm_fp16_to_fp32_row(x, y, n);
}

void plm_dequantize_row_bf16(const void *x, float *y, int64_t n) {
    plm_bf16_to_fp32_row(x, y, n);
}

void plm_dequantize_row_q4_0(const void *vx, float *y, int64_t n) {
    const block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
        const float d = plm_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = ((x[i].qs[j] & 0xf) - 8) * d;
            y[j + QK4_0 / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void plm_dequantize_row_q4_1(const void *vx, float *y, int64_t n) {
    const block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / QK4_1; i++, y += QK4_1) {
        const float d = plm_fp16_to_fp32(x[i].d), m = plm_fp16_to_fp32(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (x[i].qs[j] & 0xf) * d + m;
            y[j + QK4_1 / 2] = (x[i].qs[j] >> 4) * d + m;
        }
    }
}

/* The 32 fifth bits of a Q5 block, bit j for element j. */
static uint32_t q5_high_bits(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

void plm_dequantize_row_q5_0(const void *vx, float *y, int64_t n) {
    const block_q5_0 *x = vx;
    for (int64_t i = 0; i < n / QK5_0; i++, y += QK5_0) {
        const float d = plm_fp16_to_fp32(x[i].d);
        const uint32_t qh = q5_high_bits(x[i].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int q0 = (x[i].qs[j] & 0xf) | (int)((qh >> j) & 1) << 4;
            const int q1 = (x[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = (q0 - 16) * d;
            y[j + QK5_0 / 2] = (q1 - 16) * d;
        }
    }
}

void plm_dequantize_row_q5_1(const void *vx, float *y, int64_t n) {
    const block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / QK5_1; i++, y += QK5_1) {
        const float d = plm_fp16_to_fp32(x[i].d), m = plm_fp16_to_fp32(x[i].m);
        const uint32_t qh = q5_high_bits(x[i].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int q0 = (x[i].qs[j] & 0xf) | (int)((qh >> j) & 1) << 4;
            const int q1 = (x[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j] = q0 * d + m;
            y[j + QK5_1 / 2] = q1 * d + m;
        }
    }
}

void plm_dequantize_row_q8_0(const void *vx, float *y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / QK8_0; i++, y += QK8_0) {
        const float d = plm_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_0; j++) y[j] = x[i].qs[j] * d;
    }
}

void plm_dequantize_row_q8_1(const void *vx, float *y, int64_t n) {
    const block_q8_1 *x = vx;
    for (int64_t i = 0; i < n / QK8_1; i++, y += QK8_1) {
        const float d = plm_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_1; j++) y[j] = x[i].qs[j] * d;
    }
}

/* Q2_K: per 128 elements, 32 bytes of qs hold four 2-bit planes; plane p of
 * byte l is element 32*p + l.  Each 16 elements have their own scale/min. */
void plm_dequantize_row_q2_K(const void *vx, float *y, int64_t n) {
    const block_q2_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = plm_fp16_to_fp32(x[i].d), dmin = plm_fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int half = 0; half < QK_K / 128; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int k = 0; k < 2; k++) {  /* two 16-element sub-blocks */
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (sc & 0xf), ml = dmin * (sc >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * ((q[16 * k + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

/* Q3_K: same plane layout as Q2_K; the third bit comes from hmask, whose bit
 * b (one per 32-element plane) of byte l covers element 32*b + l. */
void plm_dequantize_row_q3_K(const void *vx, float *y, int64_t n) {
    const block_q3_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = plm_fp16_to_fp32(x[i].d);
        const uint8_t *q = x[i].qs;
        uint8_t m = 1;
        int is = 0;
        for (int half = 0; half < QK_K / 128; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int k = 0; k < 2; k++) {
                    const float dl = d * (plm_q3_K_scale(is++, x[i].scales) - 32);
                    for (int l = 16 * k; l < 16 * k + 16; l++) {
                        const int v = ((q[l] >> shift) & 3) - ((x[i].hmask[l] & m) ? 0 : 4);
                        *y++ = dl * v;
                    }
                }
            }
        }
    }
}

/* Q4_K: per 64 elements, 32 bytes of qs: low nibbles are the first 32
 * elements (sub-block 2j), high nibbles the next 32 (sub-block 2j+1). */
void plm_dequantize_row_q4_K(const void *vx, float *y, int64_t n) {
    const block_q4_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = plm_fp16_to_fp32(x[i].d), dmin = plm_fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int j = 0; j < QK_K / 64; j++, q += 32) {
            uint8_t sc, m;
            plm_get_scale_min_k4(2 * j, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            plm_get_scale_min_k4(2 * j + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xf) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

/* Q5_K: Q4_K plus qh, whose bits 2j and 2j+1 of byte l are the fifth bits of
 * element l of sub-blocks 2j and 2j+1. */
void plm_dequantize_row_q5_K(const void *vx, float *y, int64_t n) {
    const block_q5_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = plm_fp16_to_fp32(x[i].d), dmin = plm_fp16_to_fp32(x[i].dmin);
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        for (int j = 0; j < QK_K / 64; j++, ql += 32) {
            uint8_t sc, m;
            plm_get_scale_min_k4(2 * j, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            plm_get_scale_min_k4(2 * j + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            const uint8_t u1 = (uint8_t)(1u << (2 * j)), u2 = (uint8_t)(2u << (2 * j));
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xf) + ((qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        }
    }
}

/* Q6_K: per 128 elements, 64 bytes of ql and 32 of qh.  Element l + 32*p
 * (l < 32, p < 4) takes nibble p/2 of ql[l + 32*(p%2)] and bits 2p..2p+1 of
 * qh[l]; 16-element sub-block l/16 + 2p of this half has its own scale. */
void plm_dequantize_row_q6_K(const void *vx, float *y, int64_t n) {
    const block_q6_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = plm_fp16_to_fp32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int half = 0; half < QK_K / 128; half++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

void plm_dequantize_row_q8_K(const void *vx, float *y, int64_t n) {
    const block_q8_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++)
        for (int j = 0; j < QK_K; j++) *y++ = x[i].d * x[i].qs[j];
}

void plm_dequantize_row_iq4_nl(const void *vx, float *y, int64_t n) {
    const block_iq4_nl *x = vx;
    for (int64_t i = 0; i < n / QK4_NL; i++, y += QK4_NL) {
        const float d = plm_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[j] = d * kvalues_iq4nl[x[i].qs[j] & 0xf];
            y[j + QK4_NL / 2] = d * kvalues_iq4nl[x[i].qs[j] >> 4];
        }
    }
}

/* IQ4_XS: 8 IQ4_NL-style sub-blocks of 32 (same nibble order) under one f16. */
void plm_dequantize_row_iq4_xs(const void *vx, float *y, int64_t n) {
    const block_iq4_xs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = plm_fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < QK_K / 32; ib++, y += 32, qs += 16) {
            const float dl = d * (plm_iq4_xs_scale(&x[i], ib) - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * kvalues_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}
