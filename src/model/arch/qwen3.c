/*
 * qwen3 (Qwen3 dense models): the qwen2 block without biases, with a
 * per-head RMSNorm of Q and of K (attn_q_norm, attn_k_norm: [head_dim],
 * the same weights for every head) between the projection and RoPE.
 * head_dim is attention.key_length (128), not n_embd / n_head.
 */
#include "model/arch/rows.h"

static const plm_hp_key hparams[] = {
    HP_EMBD,
    HP_BLOCKS,
    HP_FF,
    HP_HEADS,
    HP_HEADS_KV,
    HP_KEY_LEN,
    HP_VALUE_LEN,
    HP_ROPE_DIMS,
    HP_CTX,
    HP_RMS_EPS,
    HP_ROPE_BASE,
    HP_END,
};

static const plm_tensor_spec globals[] = {
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
    T_ATTN_Q_NORM,
    T_ATTN_K_NORM,
    T_ATTN_OUT,
    T_FFN_NORM,
    T_FFN_GATE,
    T_FFN_UP,
    T_FFN_DOWN,
    T_END,
};

const plm_arch plm_arch_qwen3 = {
    .name = "qwen3",
    .hparams = hparams,
    .globals = globals,
    .layer = layer,
    .norm = PLM_NORM_RMS,
    .act = PLM_ACT_SILU,
    .rope = PLM_ROPE_NEOX,
    .ffn = PLM_FFN_DENSE,
    .qk_norm = true,
};
