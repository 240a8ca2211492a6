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
 * dense model). */
uint64_t plm_moe_scratch_bytes(const plm_hparams *hp, uint32_t n_batch);

/* Of those, the bytes batches of `rows` tokens write (about: each buffer's
 * share), for experts that dot `quantized` activations or f32 ones
 * (F16/F32 experts), with gate and up in one format. */
uint64_t plm_moe_scratch_touched(const plm_hparams *hp, uint32_t n_batch, uint32_t rows, bool quantized);

/* x += the MoE FFN of the batch's n tokens (h = rmsnorm(x) * ffn_norm,
 * routed to the n_expert_used best experts of each token). */
void plm_moe_ffn_step(plm_forward_state *ctx, const plm_layer *L, int n);

#endif
