/*
 * phi3 (Phi-3, Phi-3.5, Phi-4-mini): the llama block with NeoX RoPE and two
 * fused matrices, bound as row ranges: attn_qkv holds Q, K and V one after
 * the other; ffn_up holds gate then up (2 x n_ff rows).  llama.cpp ignores
 * the sliding window the converter writes (it disables SWA for phi3), and
 * so does this.  LongRoPE files (the 128k models, rope_factors_long/short
 * with an attention factor) are refused.
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
    {"attention.layer_norm_rms_epsilon", PLM_HP_F32, HP(rms_eps), true, 0},
    {"rope.freq_base", PLM_HP_F32, HP(rope_freq_base), false, 10000.0f},
    {NULL, 0, 0, false, 0},
};

static const plm_tensor_spec globals[] = {
    {"token_embd.weight", PLM_T_EMBEDDING, PLM_DIM_EMBD, PLM_DIM_VOCAB, MODEL(tok_embd), PLM_REQUIRED, NULL, PLM_STEP_NONE},
    {"output_norm.weight", PLM_T_NORM, PLM_DIM_EMBD, PLM_DIM_NONE, MODEL(output_norm), PLM_REQUIRED, NULL, PLM_STEP_NONE},
    {"output.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_VOCAB, MODEL(output), PLM_TIED, "token_embd.weight", PLM_STEP_OUTPUT},
    {NULL, 0, 0, 0, 0, 0, NULL, 0},
};

static const plm_tensor_spec layer[] = {
    {"blk.%d.attn_norm.weight", PLM_T_NORM, PLM_DIM_EMBD, PLM_DIM_NONE, LAYER(attn_norm), PLM_REQUIRED, NULL, PLM_STEP_NONE},
    {"blk.%d.attn_qkv.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_QKV, LAYER(wq), PLM_REQUIRED, NULL, PLM_STEP_QKV},
    {"blk.%d.attn_output.weight", PLM_T_MATRIX, PLM_DIM_Q, PLM_DIM_EMBD, LAYER(wo), PLM_REQUIRED, NULL, PLM_STEP_ATTN_OUT},
    {"blk.%d.ffn_norm.weight", PLM_T_NORM, PLM_DIM_EMBD, PLM_DIM_NONE, LAYER(ffn_norm), PLM_REQUIRED, NULL, PLM_STEP_NONE},
    {"blk.%d.ffn_up.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_FF2, LAYER(w_gate), PLM_REQUIRED, NULL, PLM_STEP_FFN_IN},
    {"blk.%d.ffn_down.weight", PLM_T_MATRIX, PLM_DIM_FF, PLM_DIM_EMBD, LAYER(w_down), PLM_REQUIRED, NULL, PLM_STEP_FFN_OUT},
    {NULL, 0, 0, 0, 0, 0, NULL, 0},
};

static const char *const refused[] = {"rope_factors_long.weight", "rope_factors_short.weight", NULL};

const plm_arch plm_arch_phi3 = {
    .name = "phi3",
    .hparams = hparams,
    .globals = globals,
    .layer = layer,
    .refused_tensors = refused,
    .refused_why = "LongRoPE (rope_factors_long/short)",
    .norm = PLM_NORM_RMS,
    .act = PLM_ACT_SILU,
    .rope = PLM_ROPE_NEOX,
    .ffn = PLM_FFN_DENSE,
};
