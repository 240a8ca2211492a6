/*
 * gemma3 (Gemma 3 text models, 270M-27B): gemma2's block (embeddings x
 * sqrt(n_embd), GELU-tanh gated FFN, post-attention and post-FFN norms)
 * with
 *   - per-head RMSNorms of Q and K before RoPE (as qwen3);
 *   - no attention soft-cap; a final logit soft-cap only when the file
 *     gives one (the converter writes none);
 *   - a sliding window (attention.sliding_window: 512 for the 1B, 1024 for
 *     the 4B) on five layers of every six, each sixth (5, 11, ...) global,
 *     or as attention.sliding_window_pattern says (llama.cpp reads it; its
 *     converter writes no such key for gemma3, and no window at all for a
 *     model whose config has sliding_window_pattern 1); no window key or 0:
 *     every layer global;
 *   - the windowed layers' RoPE with its own base (rope.freq_base_swa, or
 *     the 10000 llama.cpp uses when the file has none) and unscaled, while
 *     the global layers use rope.freq_base (1e6) and the file's linear
 *     scaling (8 for the 4B and larger).
 * Query scale: 1/sqrt(head_dim), or 1/sqrt(n_embd / n_head) for the 27B
 * (62 layers), as llama.cpp derives it.  The output is tied to token_embd
 * unless the file has output.weight.
 */
#include "model/arch/rows.h"

static const plm_hp_key hparams[] = {
    HP_LLAMA,
    HP_VALUE_LEN,
    HP_SWA(0),
    HP_SWA_PATTERN(6),
    HP_ROPE_BASE_SWA(10000.0f),
    HP_FINAL_SOFTCAP(0.0f),
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
    T_POST_ATTN_NORM,
    T_LLAMA_FFN,
    T_POST_FFN_NORM,
    T_END,
};

static void derive(plm_hparams *hp) {
    if (hp->n_layer == 62) hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
}

const plm_arch plm_arch_gemma3 = {
    .name = "gemma3",
    .hparams = hparams,
    .globals = globals,
    .layer = layer,
    .norm = PLM_NORM_RMS,
    .act = PLM_ACT_GELU_TANH,
    .rope = PLM_ROPE_NEOX,
    .ffn = PLM_FFN_DENSE,
    .qk_norm = true,
    .post_attn_norm = true,
    .post_ffn_norm = true,
    .embd_scale_sqrt = true,
    .derive = derive,
};
