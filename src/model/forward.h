/*
 * The forward pass, and the plain struct it runs on.
 *
 * Layering: the forward pass is a function of a model, a KV cache, scratch
 * buffers, a kernel table and a thread pool; it does not know what a
 * context, a plan or an API handle is.  runtime/ (contexts, the memory plan)
 * builds a plm_forward_state and calls in; nothing in model/ includes
 * runtime/.  So the dependencies run one way:
 *     core, quant, kernels  <-  model (descriptors, binding, KV cache, forward)
 *                           <-  runtime (context, plan)  <-  the API
 * which keeps the forward pass testable on its own and lets a server hold
 * many caches on one model without the model knowing.
 */
#ifndef PLM_MODEL_FORWARD_H
#define PLM_MODEL_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "kernels/kernels.h"
#include "model/kv_cache.h"
#include "model/model.h"

/* Buffers of one forward pass over up to n_batch tokens (sizes: the memory
 * plan's plm_plan_buffers, so prediction and allocation cannot drift). */
typedef struct plm_scratch {
    float *x;       /* [n_batch][n_embd] residual stream */
    float *xn;      /* [n_batch][max(n_embd, q_dim)] normed input / attention output */
    float *q;       /* [n_batch][q_dim] */
    float *k, *v;   /* [n_batch][kv_dim] */
    float *gate, *up; /* [n_batch][n_ff] */
    void *act[3];   /* [n_batch] input rows quantized for the dot products, one
                       slot per activation format a step needs (Q8_0/Q8_1/Q8_K) */
    size_t act_row_cap; /* bytes per row of an act slot */
    void *moe;          /* the MoE step's buffers (model/moe.h), NULL for a dense model */
    void *attn_split;   /* plm_attn_split_bytes: a decoding token's runs of keys (forward.c) */
    uint32_t moe_batch; /* ... sized for batches of this many tokens */
} plm_scratch;

/* Sees the f32 input rows of every matrix product ([n][w->cols], x_stride
 * floats apart; normalized where a norm precedes it) before the product:
 * how plm_imatrix collects activations.  Fused matrices (attn_qkv, phi3's
 * ffn_up) report each row range with the same input. */
typedef void (*plm_matmul_observer)(void *user, const plm_weight *w, const float *x, int n, int64_t x_stride);

typedef struct plm_forward_state {
    const plm_model *model;
    const plm_kernels *kt;
    plm_pool *pool;
    plm_kv_cache kv;
    plm_scratch s;
    bool flash_attn;   /* attention in one pass (online softmax with f32 weights) */
    int split_runs;    /* most runs a token's keys split into (plm_attn_split_max_runs; < 2: never) */
    bool rowwise_matmul; /* each token of a batch with the single-token kernel's arithmetic
                            (plm_matmul_exact), so its logits are bit-identical to decoding it
                            alone (the batched gemm sums in another order): speculative
                            verification sets it */
    int rowwise_from;    /* with rowwise_matmul: the rows before this one keep the batched gemm
                            (a server round's plain tokens in the pass that verifies others' drafts) */
    bool coarse_prefill; /* large batches may multiply K-quants in coarse int8 (kernels/coarse.h) */
    bool (*abort)(void *user); /* polled before each layer; true = stop (optional) */
    void *abort_user;
    plm_matmul_observer observe; /* NULL: none */
    void *observe_user;
} plm_forward_state;

/* Most runs of keys one token's attention splits into over the threads on
 * this model (forward.c; 0: never), over an f16 or a quantized cache, and
 * the scratch bytes the runs of a token over n_keys keys take (the plan's
 * attn_split: with the cache's n_ctx, the most).  A run holds
 * PLM_ATTN_SPLIT_KEYS keys at the least: a token splits from twice that. */
#define PLM_ATTN_SPLIT_KEYS 256
int plm_attn_split_max_runs(const plm_hparams *hp);
uint64_t plm_attn_split_bytes(const plm_hparams *hp, uint32_t n_keys);

/* Fails, naming the choice, when arch selects a step or option this forward
 * pass does not implement yet (so a descriptor cannot silently compute
 * something else). */
plm_status plm_forward_check(const plm_arch *arch, plm_error *err);

/* Runs the model over the batch's tokens (n <= n_batch; each appending to
 * its sequence: plm_kv_check_batch), storing their keys and values in the
 * cache; each token attends causally to its own sequence.  Writes logits
 * for tokens from `first_logit` on into out_logits ([n - first_logit][n_vocab]).
 * The caller then commits the batch to the cache (plm_kv_commit).
 * Returns false, with no logits and nothing to commit, when `abort` asked
 * to stop. */
bool plm_forward(plm_forward_state *st, const plm_ubatch *b, int first_logit, float *out_logits);

/* The cache's re-rotation hook (plm_kv_rerotate_fn; user = the state):
 * rotates sequence seq's cached keys at positions [first, first + n) of
 * every layer by `delta` positions (RoPE angles add), after a context shift
 * moved them. */
void plm_forward_rerotate(void *state, plm_kv_cache *kv, plm_kv_seq seq, uint32_t first, uint32_t n, int delta);

#endif
