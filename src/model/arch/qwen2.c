/*
 * qwen2 (Qwen2, Qwen2.5): the llama block with Q/K/V biases (required) and
 * RoPE rotating the two halves of each head (NeoX style).  Its converter
 * writes rms_eps 1e-6 and freq_base 1e6; absent keys default as for llama.
 */
#include "model/arch/rows.h"

static const plm_hp_key hparams[] = {
    HP_LLAMA,
    HP_END,
};

static const plm_tensor_spec globals[] = {
    T_LLAMA_GLOBALS,
    T_END,
};

static const plm_tensor_spec layer[] = {
    T_LLAMA_QKV,
    T_QKV_BIASES(PLM_REQUIRED),
    T_ATTN_OUT,
    T_LLAMA_FFN,
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
