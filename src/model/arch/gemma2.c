/*
 * gemma2 (Gemma 2 2B/9B/27B): the llama block with
 *   - the embeddings multiplied by sqrt(n_embd);
 *   - a GELU (tanh) gated FFN instead of SwiGLU;
 *   - RMSNorms of each block's output (post_attention_norm, post_ffw_norm)
 *     before its residual add;
 *   - attention scores soft-capped, cap * tanh(s / cap), cap 50 by default,
 *     and the output logits too (cap 30);
 *   - a sliding window (4096 unless the file says otherwise) on every other
 *     layer, starting with layer 0, the odd layers attending globally
 *     (attention.sliding_window_pattern, 2 by default: llama.cpp reads it,
 *     though its converter does not write it for gemma2);
 *   - NeoX RoPE, head_dim 256 (attention.key_length), the output tied to
 *     token_embd (llama.cpp always uses token_embd for it).
 * The query scale is 1/sqrt(head_dim), except for the 27B (46 layers), where
 * it is 1/sqrt(n_embd / n_head) (config.json's query_pre_attn_scalar), as
 * llama.cpp derives it.  Norm weights are used as stored: the converter has
 * already added Gemma's +1.
 */
#include "model/arch/rows.h"

static const plm_hp_key hparams[] = {
    HP_LLAMA,
    HP_VALUE_LEN,
    HP_SWA(4096),
    HP_SWA_PATTERN(2),
    HP_ROPE_BASE_SWA(NAN),
    HP_ATTN_SOFTCAP(50.0f),
    HP_FINAL_SOFTCAP(30.0f),
    HP_END,
};

static const plm_tensor_spec globals[] = {
    T_LLAMA_GLOBALS,
    T_END,
};

static const plm_tensor_spec layer[] = {
    T_LLAMA_QKV,
    T_ATTN_OUT,
    T_POST_ATTN_NORM,
    T_LLAMA_FFN,
    T_POST_FFN_NORM,
    T_END,
};

/* The query scale of the 27B; the windowed layers' RoPE is the global one
 * unless rope.freq_base_swa says otherwise. */
static void derive(plm_hparams *hp) {
    if (hp->n_layer == 46) hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    if (isnan(hp->rope_freq_base_swa)) hp->rope_freq_base_swa = hp->rope_freq_base;
    hp->rope_freq_scale_swa = hp->rope_freq_scale;
}

const plm_arch plm_arch_gemma2 = {
    .name = "gemma2",
    .hparams = hparams,
    .globals = globals,
    .layer = layer,
    .norm = PLM_NORM_RMS,
    .act = PLM_ACT_GELU_TANH,
    .rope = PLM_ROPE_NEOX,
    .ffn = PLM_FFN_DENSE,
    .post_attn_norm = true,
    .post_ffn_norm = true,
    .embd_scale_sqrt = true,
    .derive = derive,
};
