/*
 * phi3 (Phi-3, Phi-3.5, Phi-4-mini): the llama block with NeoX RoPE and two
 * fused matrices, bound as row ranges: attn_qkv holds Q, K and V one after
 * the other; ffn_up holds gate then up (2 x n_ff rows).  llama.cpp ignores
 * the sliding window the converter writes (it disables SWA for phi3), and
 * so does this.
 *
 * LongRoPE (the 128k models): rope_factors_long.weight divides RoPE's
 * frequencies when a sequence may hold more than the original context
 * (rope.scaling.original_context_length) positions, rope_factors_short
 * otherwise, as llama.cpp chooses by n_ctx_seq; and RoPE's cos and sin are
 * multiplied by rope.scaling.attn_factor (the converter's
 * sqrt(1 + ln(scale) / ln(original))), whichever factors apply.
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
    {"attention.layer_norm_rms_epsilon", PLM_HP_F32, HP(rms_eps), true, 0},
    HP_ROPE_BASE,
    {"rope.scaling.original_context_length", PLM_HP_U32, HP(n_ctx_orig), false, 0},
    {"rope.scaling.attn_factor", PLM_HP_F32, HP(rope_attn_factor), false, 1.0f},
    HP_END,
};

static const plm_tensor_spec globals[] = {
    T_ROPE_LONG,
    T_ROPE_SHORT,
    T_LLAMA_GLOBALS,
    T_END,
};

static const plm_tensor_spec layer[] = {
    T_ATTN_NORM,
    T_ATTN_QKV,
    T_ATTN_OUT,
    T_FFN_NORM,
    T_FFN_GATE_UP,
    T_FFN_DOWN,
    T_END,
};

const plm_arch plm_arch_phi3 = {
    .name = "phi3",
    .hparams = hparams,
    .globals = globals,
    .layer = layer,
    .norm = PLM_NORM_RMS,
    .act = PLM_ACT_SILU,
    .rope = PLM_ROPE_NEOX,
    .ffn = PLM_FFN_DENSE,
};
