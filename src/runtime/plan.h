/*
 * Memory planning internals shared with the runtime: the sizes of the buffers
 * a context allocates, computed in one place (plan.c) so that plm_context_new
 * can allocate exactly what plm_plan_* predicts.
 */
#ifndef PLM_RUNTIME_PLAN_H
#define PLM_RUNTIME_PLAN_H

#include <stdint.h>

#include "pocketlm.h"

/* The dimensions a context's buffers depend on. */
typedef struct plm_plan_dims {
    uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
} plm_plan_dims;

/* Fills `out` with the byte size of every buffer plm_context_new allocates
 * for these dims and resolved params (n_ctx, n_batch, n_threads non-zero).
 * Returns false when a quantized KV type cannot store a row of kv_dim
 * (head_dim not a multiple of 32). */
bool plm_plan_buffers_for(const plm_plan_dims *d, uint32_t n_ctx, uint32_t n_batch,
                          plm_kv_type type_k, plm_kv_type type_v, bool logits_all, plm_plan_buffers *out);

/* ggml type id of a KV cache type (F16, Q8_0, Q4_0). */
uint32_t plm_plan_kv_ggml_type(plm_kv_type t);

/* Measured baseline of the pocketlm process (see docs/MEMORY.md). */
#define PLM_PLAN_PAGE 4096u

#endif
