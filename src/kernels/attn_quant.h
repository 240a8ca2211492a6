/*
 * Attention over a quantized KV cache (kernels.h, plm_attn_quant_fn): the
 * loop every table shares, and the reference's block functions.
 *
 * The cache is read a block of keys at a time, as the f16 kernels read it
 * (ops.h, attn_pass.h): the block's value rows are converted to f32 once
 * (the table's dequantize_row) for every query head of the group, each
 * head's scores come from the table's vec_dot of the key rows with the
 * head's query in the keys' vec_dot format, and the softmax and the
 * weighted sum of the values are a table's block functions (the SIMD
 * tables' are those of their f16 attention).
 */
#ifndef PLM_KERNELS_ATTN_QUANT_H
#define PLM_KERNELS_ATTN_QUANT_H

#include "kernels/kernels.h"
#include "kernels/ops.h"

/* Query values (n_q * hd) one call takes at most. */
#define PLM_ATTN_QUANT_MAX 4096

/* A table's block functions, over blocks of at most PLM_ATTN_BLOCK keys
 * (score buffers have room for PLM_ATTN_BLOCK, so they may be padded to
 * whole vectors). */
typedef struct plm_attn_blocks {
    /* as plm_softmax_run_block */
    void (*softmax)(plm_softmax_run *r, float *s, int n, float *o, int hd);
    /* s[j] = plm_softmax_weight(s[j], max, inv_sum) for j < n */
    void (*weights)(float *s, int n, float max, float inv_sum);
    /* o[i] += sum_j w[j] * vb[j * hd + i] */
    void (*values)(float *o, const float *w, const float *vb, int n, int hd);
} plm_attn_blocks;

/* plm_attn_quant_fn's arithmetic with the block functions of blk. */
void plm_attn_quant_run(const plm_attn_blocks *blk, const plm_kernels *kt, float *o, const float *q, int n_q,
                        plm_type type_k, const void *k, size_t k_stride, plm_type type_v, const void *v,
                        size_t v_stride, int n_keys, int hd, float scale, bool flash);

/* The reference's plm_attn_quant_fn: plain C block functions. */
void plm_attn_quant(const plm_kernels *kt, float *o, const float *q, int n_q, plm_type type_k, const void *k,
                    size_t k_stride, plm_type type_v, const void *v, size_t v_stride, int n_keys, int hd, float scale,
                    bool flash);

#endif
