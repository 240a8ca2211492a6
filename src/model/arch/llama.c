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

/* rope_freqs first, where the converter writes it (Llama 3.1+ only). */
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

const plm_arch plm_arch_llama = {
    .name = "llama",
    .hparams = hparams,
    .globals = globals,
    .layer = layer,
    .norm = PLM_NORM_RMS,
    .act = PLM_ACT_SILU,
    .rope = PLM_ROPE_NORM,
    .ffn = PLM_FFN_DENSE,
};
