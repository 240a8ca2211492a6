/*
 * Memory planning internals shared with the runtime: the sizes of the buffers
 * a context allocates, computed in one place (plan.c) so that plm_context_new
 * can allocate exactly what plm_plan_* predicts.
 */
#ifndef PLM_RUNTIME_PLAN_H
#define PLM_RUNTIME_PLAN_H

#include <stdint.h>

#include "model/kv_cache.h"
#include "pocketlm.h"
#include "pocketlm_plan.h"

/* Fills `out` with the byte size of every buffer plm_context_new allocates
 * for this KV cache spec (its model's hyperparameters, resolved n_ctx and
 * n_batch; the cache's own size is plm_kv_size_of's, the one function the
 * allocator calls too).  Returns false when a quantized KV type cannot
 * store a row (head_dim not a multiple of 32). */
bool plm_plan_buffers_for(const plm_kv_spec *kv, bool logits_all, plm_plan_buffers *out);

/* Sequences one context may hold. */
#define PLM_MAX_SEQ 256

/* Logits rows a context keeps: every token of a batch with logits_all, else
 * one per sequence (a decode step of all of them). */
static inline int plm_plan_logits_rows(uint32_t n_batch, uint32_t n_seq, bool logits_all) {
    const uint32_t seqs = n_seq ? n_seq : 1;
    return (int)(logits_all ? n_batch : seqs < n_batch ? seqs : n_batch);
}

/* Measured baseline of the pocketlm process (see docs/MEMORY.md). */
#define PLM_PLAN_PAGE 4096u

#endif
