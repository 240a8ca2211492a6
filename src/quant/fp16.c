/* Row versions of the half-precision conversions in fp16.h. */
#include "quant/fp16.h"

void plm_fp16_to_fp32_row(const plm_fp16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = plm_fp16_to_fp32(x[i]);
}

void plm_fp32_to_fp16_row(const float *x, plm_fp16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = plm_fp32_to_fp16(x[i]);
}

void plm_bf16_to_fp32_row(const plm_bf16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = plm_bf16_to_fp32(x[i]);
}

void plm_fp32_to_bf16_row(const float *x, plm_bf16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = plm_fp32_to_bf16(x[i]);
}
