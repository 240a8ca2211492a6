/*
 * Coarse int8 prefill (coarse.h): the scalar reference, which defines the
 * arithmetic the SIMD kernels (x86/gemm_coarse.h) reproduce, and the entry
 * the forward pass calls.
 */
#include "kernels/coarse.h"

#include <math.h>

#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/quant.h"

bool plm_coarse_type(plm_type type) {
    switch (type) {
    case PLM_TYPE_Q2_K:
    case PLM_TYPE_Q3_K:
    case PLM_TYPE_Q4_K:
    case PLM_TYPE_Q5_K:
    case PLM_TYPE_Q6_K:
    case PLM_TYPE_IQ4_XS: return true;
    default: return false;
    }
}

float plm_coarse_quantize_256(const float *w, int8_t *q) {
    float amax = 0.0f;
    for (int i = 0; i < QK_K; i++) amax = fmaxf(amax, fabsf(w[i]));
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < QK_K; i++) q[i] = (int8_t)nearbyintf(w[i] * id);
    return amax / 127.0f;
}

void plm_gemm_coarse_ref(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                         int nt, float *out, int64_t os) {
    const plm_type_info *ti = plm_type_info_get(type);
    const size_t bb = ti->type_size;
    for (int64_t r = 0; r < nr; r++) {
        const char *row = (const char *)w + (size_t)r * ws;
        for (int t = 0; t < nt; t++) out[t * os + r] = 0.0f;
        for (int64_t b = 0; b < k / QK_K; b++) {
            float x[QK_K];
            int8_t q[QK_K];
            ti->dequantize_row(row + (size_t)b * bb, x, QK_K);
            const float d = plm_coarse_quantize_256(x, q);
            for (int t = 0; t < nt; t++) {
                const block_q8_K *y = (const block_q8_K *)(const void *)((const char *)act + (size_t)t * as) + b;
                int32_t sum = 0;
                for (int i = 0; i < QK_K; i++) sum += q[i] * y->qs[i];
                out[t * os + r] += (float)sum * (d * y->d);
            }
        }
    }
}

static void ref_coarse_q2_K(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as, int nt,
                            float *out, int64_t os) {
    plm_gemm_coarse_ref(PLM_TYPE_Q2_K, k, w, ws, nr, act, as, nt, out, os);
}

static void ref_coarse_q3_K(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as, int nt,
                            float *out, int64_t os) {
    plm_gemm_coarse_ref(PLM_TYPE_Q3_K, k, w, ws, nr, act, as, nt, out, os);
}

static void ref_coarse_q4_K(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as, int nt,
                            float *out, int64_t os) {
    plm_gemm_coarse_ref(PLM_TYPE_Q4_K, k, w, ws, nr, act, as, nt, out, os);
}

static void ref_coarse_q5_K(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as, int nt,
                            float *out, int64_t os) {
    plm_gemm_coarse_ref(PLM_TYPE_Q5_K, k, w, ws, nr, act, as, nt, out, os);
}

static void ref_coarse_q6_K(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as, int nt,
                            float *out, int64_t os) {
    plm_gemm_coarse_ref(PLM_TYPE_Q6_K, k, w, ws, nr, act, as, nt, out, os);
}

static void ref_coarse_iq4_xs(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as, int nt,
                              float *out, int64_t os) {
    plm_gemm_coarse_ref(PLM_TYPE_IQ4_XS, k, w, ws, nr, act, as, nt, out, os);
}

void plm_kernels_coarse_ref(plm_kernels *t) {
    t->gemm_coarse[PLM_TYPE_Q2_K] = ref_coarse_q2_K;
    t->gemm_coarse[PLM_TYPE_Q3_K] = ref_coarse_q3_K;
    t->gemm_coarse[PLM_TYPE_Q4_K] = ref_coarse_q4_K;
    t->gemm_coarse[PLM_TYPE_Q5_K] = ref_coarse_q5_K;
    t->gemm_coarse[PLM_TYPE_Q6_K] = ref_coarse_q6_K;
    t->gemm_coarse[PLM_TYPE_IQ4_XS] = ref_coarse_iq4_xs;
}

bool plm_coarse_applies(const plm_kernels *kt, plm_type wtype, int n_tok) {
    const plm_kernels *ref = plm_kernels_ref();
    return n_tok >= PLM_COARSE_MIN_TOK && kt != ref && kt->gemm_coarse[wtype] &&
           kt->gemm_coarse[wtype] != ref->gemm_coarse[wtype];
}

void plm_matmul_coarse(const plm_kernels *kt, plm_type wtype, const void *w, int64_t k, int64_t r0, int64_t r1,
                       const void *act, size_t act_stride, int n_tok, float *out, int64_t out_stride) {
    const size_t row_bytes = plm_row_size(wtype, k);
    if (r1 <= r0 || n_tok <= 0) return;
    kt->gemm_coarse[wtype](k, (const char *)w + (size_t)r0 * row_bytes, row_bytes, r1 - r0, act, act_stride, n_tok,
                           out + r0, out_stride);
}
