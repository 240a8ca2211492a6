/*
 * qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B): the qwen3 block (per-head Q/K
 * norms, NeoX RoPE, no biases) with a Mixture-of-Experts FFN in every layer
 * and no shared expert.  The router (ffn_gate_inp, [n_embd -> n_expert])
 * scores the experts; the n_expert_used best of its softmax run, each an
 * ordinary SwiGLU FFN of expert_feed_forward_length rows stored as one
 * expert of the 3-D ffn_gate/up/down_exps tensors, and their outputs are
 * summed weighted by their probabilities renormalized to sum 1 (llama.cpp's
 * qwen3moe graph always renormalizes: Qwen3's norm_topk_prob is true).
 * feed_forward_length is written by the converter but used by no layer.
 */
#include "model/arch/rows.h"

static const plm_hp_key hparams[] = {
    HP_LLAMA,
    HP_VALUE_LEN,
    HP_EXPERTS,
    HP_EXPERTS_USED,
    HP_FF_EXP,
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
    T_MOE_FFN,
    T_END,
};

const plm_arch plm_arch_qwen3moe = {
    .name = "qwen3moe",
    .hparams = hparams,
    .globals = globals,
    .layer = layer,
    .norm = PLM_NORM_RMS,
    .act = PLM_ACT_SILU,
    .rope = PLM_ROPE_NEOX,
    .ffn = PLM_FFN_MOE,
    .qk_norm = true,
    .moe_norm_topk = true,
};
