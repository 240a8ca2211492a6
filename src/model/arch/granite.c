/*
 * granite (IBM Granite 3.x dense): the llama block with four multipliers
 * from its config.json, as llama.cpp applies them: the embeddings times
 * embedding_scale, each block's attention and FFN output times
 * residual_scale before its residual add, attention.scale as the query
 * scale (0: 1/sqrt(head_dim)), and the logits times 1/logit_scale (the one
 * key llama.cpp requires).  0 for an optional scale means "none", as there.
 */
#include "model/arch/rows.h"

static const plm_hp_key hparams[] = {
    HP_LLAMA,
    {"logit_scale", PLM_HP_F32, HP(logit_scale), true, 0},
    {"embedding_scale", PLM_HP_F32, HP(embd_scale), false, 1.0f},
    {"residual_scale", PLM_HP_F32, HP(residual_scale), false, 1.0f},
    {"attention.scale", PLM_HP_F32, HP(attn_scale), false, 0.0f},
    HP_END,
};

/* The tensors are llama's (model/arch/llama.c): only the hyperparameters differ. */
const plm_arch plm_arch_granite = {
    .name = "granite",
    .hparams = hparams,
    .globals = plm_arch_llama_globals,
    .layer = plm_arch_llama_layer,
    .norm = PLM_NORM_RMS,
    .act = PLM_ACT_SILU,
    .rope = PLM_ROPE_NORM,
    .ffn = PLM_FFN_DENSE,
};
