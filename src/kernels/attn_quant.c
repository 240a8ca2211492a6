/*
 * Attention over a quantized KV cache: the loop of every table and the
 * reference's block functions (attn_quant.h).
 */
#include "kernels/attn_quant.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Floats of one staged block of value rows (16 KiB), as the f16 kernels. */
enum { STAGE = 4096 };

size_t plm_attn_quant_query_row(plm_type type_k, int hd) {
    return plm_row_size(plm_type_info_get(type_k)->vec_dot_type, hd);
}

void plm_attn_quant_query(const plm_kernels *kt, plm_type type_k, const float *q, int n_q, int hd, void *qbuf) {
    const plm_type qt = plm_type_info_get(type_k)->vec_dot_type;
    const size_t row = plm_attn_quant_query_row(type_k, hd);
    for (int i = 0; i < n_q; i++) kt->quantize_row[qt](q + (size_t)i * hd, (char *)qbuf + (size_t)i * row, hd);
}

/* s[j] = scale * q . k_j for nb key rows. */
static void block_scores(const plm_kernels *kt, plm_type type_k, float *s, const void *q, const char *k, size_t ks,
                         int nb, int hd, float scale) {
    if (kt->gemv[type_k]) {
        kt->gemv[type_k](hd, k, ks, nb, q, s);
    } else {
        const plm_vec_dot_fn dot = kt->vec_dot[type_k];
        for (int j = 0; j < nb; j++) dot(hd, &s[j], k + (size_t)j * ks, q);
    }
    for (int j = 0; j < nb; j++) s[j] *= scale;
}

static void stage_values(const plm_attn_blocks *blk, const plm_kernels *kt, plm_type type_v, float *dst,
                         const char *v, size_t vs, int n, int hd) {
    if (blk->stage_values) {
        blk->stage_values(kt, type_v, dst, v, vs, n, hd);
        return;
    }
    for (int j = 0; j < n; j++) kt->dequantize_row[type_v](v + (size_t)j * vs, dst + (size_t)j * hd, hd);
}

/* Pass 0 is flash's only pass, 1 and 2 the exact mode's (max and sum, then
 * values), as in ops.h. */
void plm_attn_quant_pass(const plm_attn_blocks *blk, const plm_kernels *kt, float *o, const void *q, int n_q,
                         plm_type type_k, const char *k, size_t ks, plm_type type_v, const char *v, size_t vs,
                         int n_keys, int hd, float scale, plm_softmax_run *run, int pass, float *kept) {
    float s[PLM_ATTN_BLOCK], vst[STAGE];
    const bool values = pass != 1;
    const bool keys = !(kept && pass == 2); /* the second pass of kept scores reads no keys */
    const int bk = STAGE / hd < PLM_ATTN_BLOCK ? STAGE / hd : PLM_ATTN_BLOCK; /* >= 4: hd <= 1024 */
    const size_t q_row = plm_attn_quant_query_row(type_k, hd);
    const size_t k_bytes = plm_row_size(type_k, hd), v_bytes = plm_row_size(type_v, hd);
    for (int j0 = 0; j0 < n_keys; j0 += bk) {
        const int nb = n_keys - j0 < bk ? n_keys - j0 : bk;
        const int nn = n_keys - j0 - nb < bk ? n_keys - j0 - nb : bk;
        if (keys) plm_attn_prefetch_rows(k + (size_t)(j0 + nb) * ks, ks, nn, k_bytes);
        if (values) plm_attn_prefetch_rows(v + (size_t)(j0 + nb) * vs, vs, nn, v_bytes);
        if (values) stage_values(blk, kt, type_v, vst, v + (size_t)j0 * vs, vs, nb, hd);
        for (int i = 0; i < n_q; i++) {
            float *oi = o + (size_t)i * hd, *ki = kept ? kept + (size_t)i * n_keys + j0 : NULL;
            if (keys) block_scores(kt, type_k, s, (const char *)q + (size_t)i * q_row, k + (size_t)j0 * ks, ks, nb,
                                   hd, scale);
            else memcpy(s, ki, sizeof(float) * (size_t)nb);
            if (ki && pass == 1) memcpy(ki, s, sizeof(float) * (size_t)nb);
            if (pass == 2) blk->weights(s, nb, run[i].max, (float)(1.0 / run[i].sum));
            else blk->softmax(&run[i], s, nb, oi, pass == 0 ? hd : 0);
            if (values) blk->values(oi, s, vst, nb, hd);
        }
    }
}

void plm_attn_quant_run(const plm_attn_blocks *blk, const plm_kernels *kt, float *o, const float *q, int n_q,
                        plm_type type_k, const void *k, size_t k_stride, plm_type type_v, const void *v,
                        size_t v_stride, int n_keys, int hd, float scale, bool flash) {
    /* room for PLM_ATTN_QUANT_MAX values in any vec_dot format (F32 the widest) */
    _Alignas(64) uint8_t qbuf[PLM_ATTN_QUANT_MAX * sizeof(float)];
    plm_attn_quant_query(kt, type_k, q, n_q, hd, qbuf);
    plm_softmax_run run[PLM_ATTN_MAX_Q];
    for (int i = 0; i < n_q; i++) run[i] = (plm_softmax_run){-INFINITY, 0.0};
    for (int i = 0; i < n_q * hd; i++) o[i] = 0.0f;
    for (int pass = flash ? 0 : 1; pass <= (flash ? 0 : 2); pass++)
        plm_attn_quant_pass(blk, kt, o, qbuf, n_q, type_k, k, k_stride, type_v, v, v_stride, n_keys, hd, scale, run,
                            pass, NULL);
    for (int i = 0; flash && i < n_q; i++) plm_scale(o + (size_t)i * hd, (float)(1.0 / run[i].sum), hd);
}

/* ---- the reference's block functions ------------------------------------- */

static void ref_weights(float *s, int n, float max, float inv_sum) {
    for (int j = 0; j < n; j++) s[j] = plm_softmax_weight(s[j], max, inv_sum);
}

/* Value row by value row, as llama.cpp's non-flash path adds them. */
static void ref_values(float *o, const float *w, const float *vb, int n, int hd) {
    for (int j = 0; j < n; j++)
        for (int i = 0; i < hd; i++) o[i] += w[j] * vb[(size_t)j * hd + i];
}

static const plm_attn_blocks ref_blocks = {plm_softmax_run_block, ref_weights, ref_values, NULL};

void plm_attn_quant_ref_pass(const plm_kernels *kt, float *o, const void *q, int n_q, plm_type type_k, const char *k,
                             size_t k_stride, plm_type type_v, const char *v, size_t v_stride, int n_keys, int hd,
                             float scale, plm_softmax_run *run, int pass, float *kept) {
    plm_attn_quant_pass(&ref_blocks, kt, o, q, n_q, type_k, k, k_stride, type_v, v, v_stride, n_keys, hd, scale, run,
                        pass, kept);
}

void plm_attn_quant(const plm_kernels *kt, float *o, const float *q, int n_q, plm_type type_k, const void *k,
                    size_t k_stride, plm_type type_v, const void *v, size_t v_stride, int n_keys, int hd, float scale,
                    bool flash) {
    plm_attn_quant_run(&ref_blocks, kt, o, q, n_q, type_k, k, k_stride, type_v, v, v_stride, n_keys, hd, scale,
                       flash);
}
