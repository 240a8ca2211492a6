/*
 * Attention over a quantized KV cache: the loop of every table and the
 * reference's block functions (attn_quant.h).
 */
#include "kernels/attn_quant.h"

#include <math.h>
#include <stdint.h>

/* Floats of one staged block of value rows (16 KiB), as the f16 kernels. */
enum { STAGE = 4096 };

typedef struct attn_quant_args {
    const plm_attn_blocks *blk;
    const plm_kernels *kt;
    const uint8_t *qbuf;  /* the queries in the keys' vec_dot format */
    size_t q_row;         /* bytes of one query there */
    plm_type type_k, type_v;
    const char *k, *v;
    size_t ks, vs;
    int n_q, n_keys, hd;
    float scale;
} attn_quant_args;

/* One pass over every key for every query head: pass 0 is flash's only
 * pass, 1 and 2 the exact mode's (max and sum, then values), as in ops.h. */
static void attn_quant_pass(const attn_quant_args *a, float *o, plm_softmax_run *run, int pass) {
    float s[PLM_ATTN_BLOCK], vst[STAGE];
    const bool values = pass != 1;
    const int hd = a->hd;
    const int bk = STAGE / hd < PLM_ATTN_BLOCK ? STAGE / hd : PLM_ATTN_BLOCK; /* >= 4: hd <= 1024 */
    const plm_vec_dot_fn dot = a->kt->vec_dot[a->type_k];
    const plm_dequantize_row_fn dequantize = a->kt->dequantize_row[a->type_v];
    for (int j0 = 0; j0 < a->n_keys; j0 += bk) {
        const int nb = a->n_keys - j0 < bk ? a->n_keys - j0 : bk;
        if (values)
            for (int j = 0; j < nb; j++) dequantize(a->v + (size_t)(j0 + j) * a->vs, vst + (size_t)j * hd, hd);
        for (int i = 0; i < a->n_q; i++) {
            float *oi = o + (size_t)i * hd;
            for (int j = 0; j < nb; j++) {
                dot(hd, &s[j], a->k + (size_t)(j0 + j) * a->ks, a->qbuf + (size_t)i * a->q_row);
                s[j] *= a->scale;
            }
            if (pass == 2) a->blk->weights(s, nb, run[i].max, (float)(1.0 / run[i].sum));
            else a->blk->softmax(&run[i], s, nb, oi, pass == 0 ? hd : 0);
            if (values) a->blk->values(oi, s, vst, nb, hd);
        }
    }
}

void plm_attn_quant_run(const plm_attn_blocks *blk, const plm_kernels *kt, float *o, const float *q, int n_q,
                        plm_type type_k, const void *k, size_t k_stride, plm_type type_v, const void *v,
                        size_t v_stride, int n_keys, int hd, float scale, bool flash) {
    /* room for PLM_ATTN_QUANT_MAX values in any vec_dot format (F32 the widest) */
    _Alignas(64) uint8_t qbuf[PLM_ATTN_QUANT_MAX * sizeof(float)];
    const plm_type qt = plm_type_info_get(type_k)->vec_dot_type;
    const attn_quant_args a = {
        .blk = blk, .kt = kt, .qbuf = qbuf, .q_row = plm_row_size(qt, hd), .type_k = type_k, .type_v = type_v,
        .k = k, .v = v, .ks = k_stride, .vs = v_stride, .n_q = n_q, .n_keys = n_keys, .hd = hd, .scale = scale,
    };
    for (int i = 0; i < n_q; i++) kt->quantize_row[qt](q + (size_t)i * hd, qbuf + (size_t)i * a.q_row, hd);
    plm_softmax_run run[PLM_ATTN_MAX_Q];
    for (int i = 0; i < n_q; i++) run[i] = (plm_softmax_run){-INFINITY, 0.0};
    for (int i = 0; i < n_q * hd; i++) o[i] = 0.0f;
    if (flash) {
        attn_quant_pass(&a, o, run, 0);
        for (int i = 0; i < n_q; i++) plm_scale(o + (size_t)i * hd, (float)(1.0 / run[i].sum), hd);
        return;
    }
    attn_quant_pass(&a, o, run, 1);
    attn_quant_pass(&a, o, run, 2);
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

static const plm_attn_blocks ref_blocks = {plm_softmax_run_block, ref_weights, ref_values};

void plm_attn_quant(const plm_kernels *kt, float *o, const float *q, int n_q, plm_type type_k, const void *k,
                    size_t k_stride, plm_type type_v, const void *v, size_t v_stride, int n_keys, int hd, float scale,
                    bool flash) {
    plm_attn_quant_run(&ref_blocks, kt, o, q, n_q, type_k, k, k_stride, type_v, v, v_stride, n_keys, hd, scale,
                       flash);
}
