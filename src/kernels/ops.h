/* The non-matmul steps of the forward pass, scalar.  Small and memory-light
 * next to the matrix products, but they set the numerics: they follow ggml's
 * order of operations so our logits track llama.cpp's closely. */
#ifndef PLM_KERNELS_OPS_H
#define PLM_KERNELS_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/types.h"

/* out = x / rms(x) * w  (w may be NULL: no scaling) */
void plm_rmsnorm(float *out, const float *x, const float *w, int n, float eps);

/* cos/sin of each rotated pair of a position: theta_i = pos * scale * base^(-2i/n_rot). */
void plm_rope_angles(float *cos_out, float *sin_out, int n_rot, float pos, float freq_base,
                     float freq_scale);

/* Rotates the first n_rot dims of each of n_heads heads (head_dim apart) in place.
 * neox: pairs (i, i + n_rot/2); otherwise adjacent pairs (2i, 2i+1). */
void plm_rope_apply(float *x, int n_heads, int head_dim, int n_rot, const float *cos_t,
                    const float *sin_t, int neox);

/* g[i] = silu(g[i]) * u[i] */
void plm_swiglu(float *g, const float *u, int n);

/* g[i] = gelu(g[i]) * u[i], GELU's tanh form as ggml computes it (through
 * f16: x >= 10 passes through, x <= -10 gives 0) */
void plm_geglu(float *g, const float *u, int n);
/* That f16 -> f16 table, indexed by f16 bits (built on first use), for
 * SIMD versions of plm_geglu; one entry past the end is readable. */
const uint16_t *plm_gelu_table(void);

/* sum of f16(a[i]) * f16(b[i]), accumulated in f32 */
float plm_dot_f16(const uint16_t *a, const uint16_t *b, int n);
/* y[i] += a * f16(x[i]) */
void plm_axpy_f16(float *y, float a, const uint16_t *x, int n);
/* y[i] *= a */
void plm_scale(float *y, float a, int n);

/* Attention over the KV cache with an online softmax: keys are taken a
 * block of PLM_ATTN_BLOCK at a time and only that block's scores ever
 * exist, whatever the context; a running max and sum carry the softmax
 * from block to block.  Two ways to use it:
 *
 *   exact (default)  two passes over the keys, as in Milakov & Gimelshein's
 *                    online normalizer: the first finds the max and the
 *                    sum, the second recomputes each score and weighs its
 *                    value row by exp(s - max) / sum rounded to f16: what
 *                    llama.cpp's (non-flash) attention computes, to the
 *                    rounding.
 *   flash            one pass, as in FlashAttention: each block's values are
 *                    weighed by exp(s - running max) in f32, and the output
 *                    rescaled whenever the max rises.  Half the key reads;
 *                    no f16 rounding (closer to an exact softmax, further
 *                    from llama.cpp's non-flash logits). */
#define PLM_ATTN_BLOCK 64
/* Query heads one call takes at most (the heads sharing a KV head). */
#define PLM_ATTN_MAX_Q 16

typedef struct plm_softmax_run {
    float max;   /* largest score so far (-INFINITY before the first block) */
    double sum;  /* sum of exp(score - max) so far */
} plm_softmax_run;

/* One block of n scores: s[j] becomes exp(s[j] - max) under the new running
 * max; when the max rises, o[0..hd) and the sum are scaled down to match
 * (o may be NULL with hd 0). */
void plm_softmax_run_block(plm_softmax_run *r, float *s, int n, float *o, int hd);
/* Its rescaling step alone, for SIMD versions of it: the running max
 * becomes max if that is higher, scaling o[0..hd) and the sum down. */
void plm_softmax_run_raise(plm_softmax_run *r, float max, float *o, int hd);

/* The exact mode's weight of a score once the run is complete:
 * f16(exp(s - max) * inv_sum), inv_sum = (float)(1 / sum). */
float plm_softmax_weight(float s, float max, float inv_sum);

/* n_q query heads (q: n_q rows of hd f16 values, adjacent) against n_keys
 * rows of an f16 cache (k_stride / v_stride bytes apart):
 *   o_i = sum_j softmax_j(scale * q_i . k_j) v_j      (o: n_q rows of hd)
 * Each q_i . k_j is summed in f32, as plm_dot_f16 sums it.  n_q <= PLM_ATTN_MAX_Q. */
void plm_attn_f16(float *o, const uint16_t *q, int n_q, const void *k, const void *v, size_t k_stride,
                  size_t v_stride, int n_keys, int hd, float scale, bool flash);

/* n cache rows' first `bytes` (stride apart) asked for a line at a time:
 * an attention pass asks for the next block's rows while it computes this
 * one's (the cache sits in 4 KiB pages, at each of which the hardware
 * prefetcher stops). */
static inline void plm_attn_prefetch_rows(const char *p, size_t stride, int n, size_t bytes) {
    for (int j = 0; j < n; j++)
        for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(p + (size_t)j * stride + o);
}

/* A SIMD kernel's pass over every key for every query head: pass 0 is
 * flash's only pass, 1 and 2 the exact mode's (max and sum, then values).
 * kept (NULL: none) has room for n_q x n_keys floats: the exact mode's
 * pass 1 leaves head i's scores at kept + i * n_keys, and pass 2 reads them
 * there instead of reading the keys again (the same bits either way). */
typedef void (*plm_attn_pass_fn)(float *o, const uint16_t *q, int n_q, const char *k, const char *v, size_t ks,
                                 size_t vs, int n_keys, int hd, float scale, plm_softmax_run *run, int pass,
                                 float *kept);
/* The same pass over a quantized cache (a table's attn_quant_pass,
 * kernels.h): q holds the n_q queries already in the keys' vec_dot format
 * (plm_attn_quant_query, attn_quant.h), which meets every key through kt's
 * kernels. */
struct plm_kernels;
typedef void (*plm_attn_quant_pass_fn)(const struct plm_kernels *kt, float *o, const void *q, int n_q,
                                       plm_type type_k, const char *k, size_t k_stride, plm_type type_v,
                                       const char *v, size_t v_stride, int n_keys, int hd, float scale,
                                       plm_softmax_run *run, int pass, float *kept);
/* plm_attn_f16's arithmetic by a kernel's passes: sets up the runs, runs
 * the passes the mode needs and normalizes. */
void plm_attn_f16_passes(plm_attn_pass_fn pass, float *o, const uint16_t *q, int n_q, const void *k, const void *v,
                         size_t ks, size_t vs, int n_keys, int hd, float scale, bool flash);

/* The same attention over keys cut into runs, for threads to share one
 * token's keys (model/forward.c): run r is keys [n_keys r / n_runs,
 * n_keys (r + 1) / n_runs).  Stage 1 of each run (exact: its max and sum;
 * flash: those and its unnormalized output), then the runs merged in
 * order, then stage 2 of each run (exact: its values weighted under the
 * merged max and sum), then the outputs summed in run order: every step
 * is a function of its own run, so the runs may go to any threads in any
 * order and the result is the same bits (plm_attn_split_all does it all
 * in one thread).  Per head the numbers do not depend on n_q, so a caller
 * may take the heads in any groups.  runs: [n_runs][run_stride] (head i of
 * run r at r * run_stride + i), parts: [n_runs][part_stride] floats. */
typedef struct plm_attn_split {
    plm_attn_pass_fn pass;             /* over an f16 cache; NULL: */
    plm_attn_quant_pass_fn quant_pass; /* over a quantized one, with its table and row types */
    const struct plm_kernels *kt;
    plm_type type_k, type_v;
    int n_keys, n_runs, hd;
    float scale;
    bool flash;
    plm_softmax_run *runs;
    float *parts;
    size_t run_stride, part_stride;
    float *scores; /* NULL, or n_keys x run_stride floats: the exact mode's scores kept from stage 1 for stage 2
                      (run r's, from key j0 on, at scores + j0 * run_stride, head by head) */
} plm_attn_split;

/* Stage 1 (s = 1) or 2 (s = 2, exact only) of run r for heads h0..h0+n_q-1
 * (q: their rows, in f16 or the quantized keys' vec_dot format, as the pass
 * takes them; k / v: the first key's rows); stage 2 reads the merged runs
 * from `merged` ([n_q]). */
void plm_attn_split_stage(const plm_attn_split *sp, int stage, int r, int h0, int n_q, const void *q,
                          const void *k, const void *v, size_t ks, size_t vs, const plm_softmax_run *merged);
/* Head h's runs merged in order into *out. */
void plm_attn_split_merge(const plm_attn_split *sp, int h, plm_softmax_run *out);
/* Head h's output o[0..hd) from the runs' parts and the merged run. */
void plm_attn_split_finish(const plm_attn_split *sp, int h, const plm_softmax_run *merged, float *o);
/* All of it in this thread for heads 0..n_q-1 (sp->runs with room for
 * n_runs x n_q; sp->parts for every run's n_q x hd, part_stride apart, or
 * with part_stride 0 for one run's, at the cost of flash's stage 1 twice). */
void plm_attn_split_all(const plm_attn_split *sp, float *o, const void *q, int n_q, const void *k, const void *v,
                        size_t ks, size_t vs);
/* The reference kernel's pass (plm_attn_f16 is plm_attn_f16_passes of it). */
void plm_attn_f16_ref_pass(float *o, const uint16_t *q, int n_q, const char *k, const char *v, size_t ks, size_t vs,
                           int n_keys, int hd, float scale, plm_softmax_run *run, int pass, float *kept);

#endif
