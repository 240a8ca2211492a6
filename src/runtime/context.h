/*
 * A context: one conversation's state on a shared model — the KV cache, the
 * scratch buffers of the forward pass (sized once for n_batch tokens, so the
 * token loop never allocates) and the logits of the last decode.
 */
#ifndef PLM_RUNTIME_CONTEXT_H
#define PLM_RUNTIME_CONTEXT_H

#include <stdint.h>

#include "kernels/kernels.h"
#include "model/model.h"

/* Keys and values of every layer, [layer][position][kv_dim elements stored
 * as type_k / type_v: F16, Q8_0 or Q4_0 rows of k_row / v_row bytes]. */
typedef struct plm_kv_cache {
    uint8_t *k, *v;
    plm_type type_k, type_v;
    size_t k_row, v_row;
    uint32_t n_ctx;
    int kv_dim;
} plm_kv_cache;

/* Buffers of one forward pass over up to n_batch tokens. */
typedef struct plm_scratch {
    float *x;       /* [n_batch][n_embd] residual stream */
    float *xn;      /* [n_batch][max(n_embd, q_dim)] normed input / attention output */
    float *q;       /* [n_batch][q_dim] */
    float *k, *v;   /* [n_batch][kv_dim] */
    float *gate, *up; /* [n_batch][n_ff] */
    void *act[3];   /* [n_batch] input rows quantized for the dot products, one
                       slot per activation format a step needs (Q8_0/Q8_1/Q8_K) */
    size_t act_row_cap; /* bytes per row of an act slot */
} plm_scratch;

struct plm_context {
    plm_model *model;
    const plm_kernels *kt;
    struct plm_pool *pool;
    plm_context_params params;
    plm_kv_cache kv;
    plm_scratch s;
    uint32_t n_past;
    float *logits;           /* [logits_cap][n_vocab] */
    int logits_cap, n_logits;/* rows allocated / rows valid from the last decode */
    int logits_first;        /* batch index of logits row 0 */
    bool pool_borrowed;      /* pool belongs to another context (plm_context_share_pool) */
    bool rowwise_matmul;     /* compute each token of a batch with the single-token kernel, so
                                its logits are bit-identical to decoding it alone (the batched
                                gemm sums in another order): speculative verification sets it */
};

/* plm_decode, keeping the logits of the last n_logits tokens (1..n): what a
 * speculative verification needs without logits_all's cost on the prompt.
 * plm_get_logits(ctx, i) then answers for i in [n - n_logits, n). */
plm_status plm_decode_tail(plm_context *ctx, const plm_token *tokens, int n, int n_logits,
                           plm_error *err);

/* Makes `c` run its forward passes on `owner`'s thread pool (its own is
 * stopped): two contexts used one after the other, such as a draft and its
 * target, then never keep two pools of spinning workers on the same cores.
 * `c` must not decode after `owner` is freed. */
void plm_context_share_pool(plm_context *c, plm_context *owner);

/* Runs the forward pass of the model family over tokens[0..n) at positions
 * pos0.. (n <= n_batch, pos0 + n <= n_ctx).  Writes logits for tokens from
 * `first_logit` on into out_logits ([n - first_logit][n_vocab]). */
void plm_llama_forward(plm_context *ctx, const plm_token *tokens, int n,
                       uint32_t pos0, int first_logit, float *out_logits);

/* Rotates the cached keys at positions [first, first + n) of every layer by
 * `delta` positions (RoPE angles add), after a context shift moved them. */
void plm_llama_rerotate_keys(plm_context *ctx, uint32_t first, uint32_t n, int delta);

#endif
