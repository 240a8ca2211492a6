/*
 * Reference dequantizers of the codebook formats (IQ1/IQ2/IQ3, TQ1_0,
 * TQ2_0) and MXFP4.  Each value is rounded as ggml's dequantize_row_* rounds
 * it (the scales differ from ggml's expression only by powers of two, which
 * round exactly), so the floats are llama.cpp's bit for bit.
 */
#include "quant/iq_unpack.h"
#include "quant/quant.h"

static void dequantize_codes(plm_type t, const void *vx, float *y, int64_t n) {
    const plm_type_info *ti = plm_type_info_get(t);
    const plm_iq_unpack_fn unpack = plm_iq_unpacker(t);
    const float post = plm_iq_post(t);
    const uint8_t *x = vx;
    plm_iq_codes c;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = unpack(x + (size_t)i * ti->type_size, &c);
        for (int j = 0; j < QK_K; j++) y[j] = d * c.ls[j / 16] * c.q[j] * post;
    }
}

void plm_dequantize_row_iq2_xxs(const void *x, float *y, int64_t n) {
    dequantize_codes(PLM_TYPE_IQ2_XXS, x, y, n);
}

void plm_dequantize_row_iq2_xs(const void *x, float *y, int64_t n) {
    dequantize_codes(PLM_TYPE_IQ2_XS, x, y, n);
}

void plm_dequantize_row_iq2_s(const void *x, float *y, int64_t n) {
    dequantize_codes(PLM_TYPE_IQ2_S, x, y, n);
}

void plm_dequantize_row_iq3_xxs(const void *x, float *y, int64_t n) {
    dequantize_codes(PLM_TYPE_IQ3_XXS, x, y, n);
}

void plm_dequantize_row_iq3_s(const void *x, float *y, int64_t n) {
    dequantize_codes(PLM_TYPE_IQ3_S, x, y, n);
}

void plm_dequantize_row_iq1_s(const void *x, float *y, int64_t n) {
    dequantize_codes(PLM_TYPE_IQ1_S, x, y, n);
}

void plm_dequantize_row_iq1_m(const void *x, float *y, int64_t n) {
    dequantize_codes(PLM_TYPE_IQ1_M, x, y, n);
}

void plm_dequantize_row_tq1_0(const void *x, float *y, int64_t n) {
    dequantize_codes(PLM_TYPE_TQ1_0, x, y, n);
}

void plm_dequantize_row_tq2_0(const void *x, float *y, int64_t n) {
    dequantize_codes(PLM_TYPE_TQ2_0, x, y, n);
}

void plm_dequantize_row_mxfp4(const void *vx, float *y, int64_t n) {
    const block_mxfp4 *x = vx;
    for (int64_t i = 0; i < n / QK_MXFP4; i++, y += QK_MXFP4) {
        const float d = plm_e8m0_half(x[i].e);
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            y[j] = kvalues_mxfp4[x[i].qs[j] & 15] * d;
            y[j + QK_MXFP4 / 2] = kvalues_mxfp4[x[i].qs[j] >> 4] * d;
        }
    }
}
