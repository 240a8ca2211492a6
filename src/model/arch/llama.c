/*
 * llama (Llama 1-3, TinyLlama, Mistral's GGUFs, and every file converted
 * with "llama" as its architecture): pre-norm blocks with RMSNorm, RoPE in
 * adjacent pairs, grouped-query attention, a SwiGLU FFN; optional Q/K/V
 * biases; the output matrix may be tied to the token embedding.  Llama 3.1+
 * carry their "llama3" RoPE scaling as rope_freqs.weight, one divisor per
 * frequency, which the converter computes from config.json's rope_scaling.
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

const plm_arch plm_arch_llama = {
    .name = "llama",
    .hparams = hparams,
    .globals = plm_arch_llama_globals,
    .layer = plm_arch_llama_layer,
    .norm = PLM_NORM_RMS,
    .act = PLM_ACT_SILU,
    .rope = PLM_ROPE_NORM,
    .ffn = PLM_FFN_DENSE,
};
