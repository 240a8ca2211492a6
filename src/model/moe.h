/*
 * The Mixture-of-Experts FFN step (model/moe.c) and the size of its
 * buffers, which the memory plan counts and the context allocates.
 */
#ifndef PLM_MODEL_MOE_H
#define PLM_MODEL_MOE_H

#include <stdbool.h>
#include <stdint.h>

#include "model/forward.h"

/* Bytes of plm_scratch.moe for batches of up to n_batch tokens (0 for a
 * dense model).  With `one_input_format` (the experts' gate and up matrices
 * dot the same activation format, as in every file llama.cpp writes), the
 * last plm_moe_spare_bytes of the block are never touched. */
uint64_t plm_moe_scratch_bytes(const plm_hparams *hp, uint32_t n_batch);
uint64_t plm_moe_spare_bytes(const plm_hparams *hp, uint32_t n_batch);

/* x += the MoE FFN of the batch's n tokens (h = rmsnorm(x) * ffn_norm,
 * routed to the n_expert_used best experts of each token). */
void plm_moe_ffn_step(plm_forward_state *ctx, const plm_layer *L, int n);

#endif
