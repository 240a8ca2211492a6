/*
 * llama (Llama 1-3, TinyLlama, Mistral's GGUFs, and every file converted
 * with "llama" as its architecture): pre-norm blocks with RMSNorm, RoPE in
 * adjacent pairs, grouped-query attention, a SwiGLU FFN; optional Q/K/V
 * biases; the output matrix may be tied to the token embedding.  Llama 3.1+
 * carry their "llama3" RoPE scaling as rope_freqs.weight, one divisor per
 * frequency, which the converter computes from config.json's rope_scaling.
 */
#include <math.h>

#include "model/model.h"

#define HP(field) offsetof(plm_hparams, field)
#define LAYER(field) offsetof(plm_layer, field)
#define MODEL(field) offsetof(plm_model, field)

static const plm_hp_key hparams[] = {
    {"embedding_length", PLM_HP_U32, HP(n_embd), true, 0},
    {"block_count", PLM_HP_U32, HP(n_layer), true, 0},
    {"feed_forward_length", PLM_HP_U32, HP(n_ff), true, 0},
    {"attention.head_count", PLM_HP_U32, HP(n_head), true, 0},
    {"attention.head_count_kv", PLM_HP_U32, HP(n_head_kv), false, NAN},
    {"attention.key_length", PLM_HP_U32, HP(head_dim), false, NAN},
    {"rope.dimension_count", PLM_HP_U32, HP(n_rot), false, NAN},
    {"context_length", PLM_HP_U32, HP(n_ctx_train), false, 2048},
    {"attention.layer_norm_rms_epsilon", PLM_HP_F32, HP(rms_eps), false, 1e-5f},
    {"rope.freq_base", PLM_HP_F32, HP(rope_freq_base), false, 10000.0f},
    {NULL, 0, 0, false, 0},
};

/* rope_freqs first, where the converter writes it (Llama 3.1+ only). */
static const plm_tensor_spec globals[] = {
    {"rope_freqs.weight", PLM_T_ROPE_FACTORS, PLM_DIM_ROPE, PLM_DIM_NONE, MODEL(rope_freqs), PLM_OPTIONAL, NULL, PLM_STEP_NONE},
    {"token_embd.weight", PLM_T_EMBEDDING, PLM_DIM_EMBD, PLM_DIM_VOCAB, MODEL(tok_embd), PLM_REQUIRED, NULL, PLM_STEP_NONE},
    {"output_norm.weight", PLM_T_NORM, PLM_DIM_EMBD, PLM_DIM_NONE, MODEL(output_norm), PLM_REQUIRED, NULL, PLM_STEP_NONE},
    {"output.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_VOCAB, MODEL(output), PLM_TIED, "token_embd.weight", PLM_STEP_OUTPUT},
    {NULL, 0, 0, 0, 0, 0, NULL, 0},
};

static const plm_tensor_spec layer[] = {
    {"blk.%d.attn_norm.weight", PLM_T_NORM, PLM_DIM_EMBD, PLM_DIM_NONE, LAYER(attn_norm), PLM_REQUIRED, NULL, PLM_STEP_NONE},
    {"blk.%d.attn_q.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_Q, LAYER(wq), PLM_REQUIRED, NULL, PLM_STEP_QKV},
    {"blk.%d.attn_k.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_KV, LAYER(wk), PLM_REQUIRED, NULL, PLM_STEP_QKV},
    {"blk.%d.attn_v.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_KV, LAYER(wv), PLM_REQUIRED, NULL, PLM_STEP_QKV},
    {"blk.%d.attn_q.bias", PLM_T_BIAS, PLM_DIM_Q, PLM_DIM_NONE, LAYER(bq), PLM_OPTIONAL, NULL, PLM_STEP_NONE},
    {"blk.%d.attn_k.bias", PLM_T_BIAS, PLM_DIM_KV, PLM_DIM_NONE, LAYER(bk), PLM_OPTIONAL, NULL, PLM_STEP_NONE},
    {"blk.%d.attn_v.bias", PLM_T_BIAS, PLM_DIM_KV, PLM_DIM_NONE, LAYER(bv), PLM_OPTIONAL, NULL, PLM_STEP_NONE},
    {"blk.%d.attn_output.weight", PLM_T_MATRIX, PLM_DIM_Q, PLM_DIM_EMBD, LAYER(wo), PLM_REQUIRED, NULL, PLM_STEP_ATTN_OUT},
    {"blk.%d.ffn_norm.weight", PLM_T_NORM, PLM_DIM_EMBD, PLM_DIM_NONE, LAYER(ffn_norm), PLM_REQUIRED, NULL, PLM_STEP_NONE},
    {"blk.%d.ffn_gate.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_FF, LAYER(w_gate), PLM_REQUIRED, NULL, PLM_STEP_FFN_IN},
    {"blk.%d.ffn_up.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_FF, LAYER(w_up), PLM_REQUIRED, NULL, PLM_STEP_FFN_IN},
    {"blk.%d.ffn_down.weight", PLM_T_MATRIX, PLM_DIM_FF, PLM_DIM_EMBD, LAYER(w_down), PLM_REQUIRED, NULL, PLM_STEP_FFN_OUT},
    {NULL, 0, 0, 0, 0, 0, NULL, 0},
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
