/*
 * Attention over a quantized KV cache (kernels.h, plm_attn_quant_fn): the
 * loop every table shares, and the reference's block functions.
 *
 * The cache is read a block of keys at a time, as the f16 kernels read it
 * (ops.h, attn_pass.h): the block's value rows are converted to f32 once
 * (the table's dequantize_row, or its bits inlined: the blocks'
 * stage_values) for every query head of the group, each
 * head's scores come from the table's vec_dot of the key rows with the
 * head's query in the keys' vec_dot format, and the softmax and the
 * weighted sum of the values are a table's block functions (the SIMD
 * tables' are those of their f16 attention).  A row of scores comes from
 * the table's gemv of the keys' type where it has one (bit for bit its
 * vec_dot, without a call and a horizontal sum per key).  As over the f16
 * cache, the exact mode's second pass may read the first one's scores
 * (kept) instead of the keys, and the next block's rows are prefetched.
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
    /* n value rows of type_v (stride bytes apart) -> n rows of hd floats, bit
     * for bit kt's dequantize_row of each, without a call a row (optional:
     * NULL calls it) */
    void (*stage_values)(const plm_kernels *kt, plm_type type_v, float *dst, const char *v, size_t stride, int n,
                         int hd);
} plm_attn_blocks;

/* Bytes of one query row in the vec_dot format of type_k's keys. */
size_t plm_attn_quant_query_row(plm_type type_k, int hd);

/* The n_q queries (rows of hd floats) in the keys' vec_dot format, into
 * qbuf (n_q rows of plm_attn_quant_query_row bytes): how every key meets
 * them. */
void plm_attn_quant_query(const plm_kernels *kt, plm_type type_k, const float *q, int n_q, int hd, void *qbuf);

/* One pass (plm_attn_quant_pass_fn) with the block functions of blk. */
void plm_attn_quant_pass(const plm_attn_blocks *blk, const plm_kernels *kt, float *o, const void *q, int n_q,
                         plm_type type_k, const char *k, size_t k_stride, plm_type type_v, const char *v,
                         size_t v_stride, int n_keys, int hd, float scale, plm_softmax_run *run, int pass,
                         float *kept);

/* plm_attn_quant_fn's arithmetic with the block functions of blk. */
void plm_attn_quant_run(const plm_attn_blocks *blk, const plm_kernels *kt, float *o, const float *q, int n_q,
                        plm_type type_k, const void *k, size_t k_stride, plm_type type_v, const void *v,
                        size_t v_stride, int n_keys, int hd, float scale, bool flash);

/* The reference's plm_attn_quant_pass_fn and plm_attn_quant_fn: plain C
 * block functions. */
void plm_attn_quant_ref_pass(const plm_kernels *kt, float *o, const void *q, int n_q, plm_type type_k, const char *k,
                             size_t k_stride, plm_type type_v, const char *v, size_t v_stride, int n_keys, int hd,
                             float scale, plm_softmax_run *run, int pass, float *kept);
void plm_attn_quant(const plm_kernels *kt, float *o, const float *q, int n_q, plm_type type_k, const void *k,
                    size_t k_stride, plm_type type_v, const void *v, size_t v_stride, int n_keys, int hd, float scale,
                    bool flash);

#endif
