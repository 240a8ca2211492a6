/*
 * A context: one conversation's state on a shared model.  What the forward
 * pass runs on (KV cache, scratch buffers sized once for n_batch tokens so
 * the token loop never allocates, kernels, thread pool) is a
 * plm_forward_state (model/forward.h); the context adds the API's side:
 * parameters, batching into n_batch chunks, the logits of the last decode.
 */
#ifndef PLM_RUNTIME_CONTEXT_H
#define PLM_RUNTIME_CONTEXT_H

#include <stdint.h>

#include "model/forward.h"

struct plm_context {
    plm_model *model;
    plm_context_params params;
    plm_forward_state fwd;
    float *logits;           /* [logits_cap][n_vocab] */
    int logits_cap, n_logits;/* rows allocated / rows valid from the last decode */
    int logits_first;        /* batch index of logits row 0 */
    bool batch_invariant;    /* every pass row by row (plm_context_set_batch_invariant) */
    char *poisoned;          /* set when a decode lost its weights (SIGBUS): why; no decode runs after */
};

/* plm_decode, keeping the logits of the last n_logits tokens (1..n): what a
 * speculative verification needs without logits_all's cost on the prompt.
 * plm_get_logits(ctx, i) then answers for i in [n - n_logits, n). */
plm_status plm_decode_tail(plm_context *ctx, const plm_token *tokens, int n, int n_logits,
                           plm_error *err);

/* plm_decode in sequence seq. */
plm_status plm_decode_in_seq(plm_context *ctx, plm_seq_id seq, const plm_token *tokens, int n, plm_error *err);

#endif
