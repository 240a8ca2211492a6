/*
 * llama (Llama 1-3, TinyLlama, Mistral's GGUFs, and every file converted
 * with "llama" as its architecture): pre-norm blocks with RMSNorm, RoPE in
 * adjacent pairs, grouped-query attention, a SwiGLU FFN; optional Q/K/V
 * biases; the output matrix may be tied to the token embedding.  Llama 3.1+
 * carry their "llama3" RoPE scaling as rope_freqs.weight, one divisor per
 * frequency, which the converter computes from config.json's rope_scaling.
 *
 * Mixtral's GGUFs are "llama" files with llama.expert_count > 0: the same
 * block with a Mixture-of-Experts FFN (plm_arch_llama_moe, chosen by
 * plm_arch_for_file): a router, then 3-D gate/up/down tensors holding every
 * expert's matrices, each expert as wide as feed_forward_length.
 */
#include "model/arch/rows.h"

static const plm_hp_key hparams[] = {
    HP_LLAMA,
    HP_END,
};

/* rope_freqs first, where the converter writes it (Llama 3.1+ only). */
const plm_tensor_spec plm_arch_llama_globals[] = {
    T_ROPE_FREQS,
    T_LLAMA_GLOBALS,
    T_END,
};

const plm_tensor_spec plm_arch_llama_layer[] = {
    T_LLAMA_QKV,
    T_QKV_BIASES(PLM_OPTIONAL),
    T_ATTN_OUT,
    T_LLAMA_FFN,
    T_END,
};

static const plm_hp_key moe_hparams[] = {
    HP_LLAMA,
    HP_EXPERTS,
    HP_EXPERTS_USED,
    HP_END,
};

static const plm_tensor_spec moe_layer[] = {
    T_LLAMA_QKV,
    T_QKV_BIASES(PLM_OPTIONAL),
    T_ATTN_OUT,
    T_MOE_FFN,
    T_END,
};

/* llama.cpp's llama graph routes Mixtral as it does every MoE it builds
 * with softmax gating: top-k of the softmax, renormalized to sum 1. */
const plm_arch plm_arch_llama_moe = {
    .name = "llama",
    .hparams = moe_hparams,
    .globals = plm_arch_llama_globals,
    .layer = moe_layer,
    .norm = PLM_NORM_RMS,
    .act = PLM_ACT_SILU,
    .rope = PLM_ROPE_NORM,
    .ffn = PLM_FFN_MOE,
    .moe_norm_topk = true,
};

const plm_arch plm_arch_llama = {
    .name = "llama",
    .hparams = hparams,
    .globals = plm_arch_llama_globals,
    .layer = plm_arch_llama_layer,
    .norm = PLM_NORM_RMS,
    .act = PLM_ACT_SILU,
    .rope = PLM_ROPE_NORM,
    .ffn = PLM_FFN_DENSE,
    .with_experts = &plm_arch_llama_moe,
};
