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
    HP_EMBD,
    HP_BLOCKS,
    HP_FF,
    HP_HEADS,
    HP_HEADS_KV,
    HP_KEY_LEN,
    HP_ROPE_DIMS,
    HP_CTX,
    HP_RMS_EPS,
    HP_ROPE_BASE,
    {"logit_scale", PLM_HP_F32, HP(logit_scale), true, 0},
    {"embedding_scale", PLM_HP_F32, HP(embd_scale), false, 1.0f},
    {"residual_scale", PLM_HP_F32, HP(residual_scale), false, 1.0f},
    {"attention.scale", PLM_HP_F32, HP(attn_scale), false, 0.0f},
    HP_END,
};

static const plm_tensor_spec globals[] = {
    T_ROPE_FREQS,
    T_TOKEN_EMBD,
    T_OUTPUT_NORM,
    T_OUTPUT,
    T_END,
};

static const plm_tensor_spec layer[] = {
    T_ATTN_NORM,
    T_ATTN_Q,
    T_ATTN_K,
    T_ATTN_V,
    T_ATTN_Q_BIAS(PLM_OPTIONAL),
    T_ATTN_K_BIAS(PLM_OPTIONAL),
    T_ATTN_V_BIAS(PLM_OPTIONAL),
    T_ATTN_OUT,
    T_FFN_NORM,
    T_FFN_GATE,
    T_FFN_UP,
    T_FFN_DOWN,
    T_END,
};

const plm_arch plm_arch_granite = {
    .name = "granite",
    .hparams = hparams,
    .globals = globals,
    .layer = layer,
    .norm = PLM_NORM_RMS,
    .act = PLM_ACT_SILU,
    .rope = PLM_ROPE_NORM,
    .ffn = PLM_FFN_DENSE,
};
