/*
 * qwen3 (Qwen3 dense models): the qwen2 block without biases, with a
 * per-head RMSNorm of Q and of K (attn_q_norm, attn_k_norm: [head_dim],
 * the same weights for every head) between the projection and RoPE.
 * head_dim is attention.key_length (128), not n_embd / n_head.
 */
#include "model/arch/rows.h"

static const plm_hp_key hparams[] = {
    HP_LLAMA,
    HP_VALUE_LEN,
    HP_END,
};

static const plm_tensor_spec globals[] = {
    T_LLAMA_GLOBALS,
    T_END,
};

static const plm_tensor_spec layer[] = {
    T_LLAMA_QKV,
    T_ATTN_Q_NORM,
    T_ATTN_K_NORM,
    T_ATTN_OUT,
    T_LLAMA_FFN,
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
