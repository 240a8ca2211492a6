/*
 * qwen2 (Qwen2, Qwen2.5): the llama block with Q/K/V biases (required) and
 * RoPE rotating the two halves of each head (NeoX style).  Its converter
 * writes rms_eps 1e-6 and freq_base 1e6; absent keys default as for llama.
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
    T_ATTN_Q_BIAS(PLM_REQUIRED),
    T_ATTN_K_BIAS(PLM_REQUIRED),
    T_ATTN_V_BIAS(PLM_REQUIRED),
    T_ATTN_OUT,
    T_FFN_NORM,
    T_FFN_GATE,
    T_FFN_UP,
    T_FFN_DOWN,
    T_END,
};

const plm_arch plm_arch_qwen2 = {
    .name = "qwen2",
    .hparams = hparams,
    .globals = globals,
    .layer = layer,
    .norm = PLM_NORM_RMS,
    .act = PLM_ACT_SILU,
    .rope = PLM_ROPE_NEOX,
    .ffn = PLM_FFN_DENSE,
};
