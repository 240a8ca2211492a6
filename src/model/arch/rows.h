/*
 * The rows descriptors are made of.  Most families are the llama block with
 * a few rows added or changed, so each row is spelled out once here and a
 * descriptor lists the ones it has: what differs between two families is
 * then visible as a difference of two lists.  (Included only by the descriptors in this folder.)
 */
#ifndef PLM_MODEL_ARCH_ROWS_H
#define PLM_MODEL_ARCH_ROWS_H

#include <math.h>

#include "model/model.h"

#define HP(field) offsetof(plm_hparams, field)
#define LAYER(field) offsetof(plm_layer, field)
#define MODEL(field) offsetof(plm_model, field)

/* ---- hyperparameter keys (after "ARCH.") ---------------------------------- */
/* NAN as a default: llama.cpp derives the value from others (arch.c). */
#define HP_EMBD          {"embedding_length", PLM_HP_U32, HP(n_embd), true, 0}
#define HP_BLOCKS        {"block_count", PLM_HP_U32, HP(n_layer), true, 0}
#define HP_FF            {"feed_forward_length", PLM_HP_U32, HP(n_ff), true, 0}
#define HP_HEADS         {"attention.head_count", PLM_HP_U32, HP(n_head), true, 0}
#define HP_HEADS_KV      {"attention.head_count_kv", PLM_HP_U32, HP(n_head_kv), false, NAN}
#define HP_KEY_LEN       {"attention.key_length", PLM_HP_U32, HP(head_dim), false, NAN}
#define HP_VALUE_LEN     {"attention.value_length", PLM_HP_U32, HP(head_dim_v), false, NAN}
#define HP_ROPE_DIMS     {"rope.dimension_count", PLM_HP_U32, HP(n_rot), false, NAN}
#define HP_CTX           {"context_length", PLM_HP_U32, HP(n_ctx_train), false, 2048}
#define HP_RMS_EPS       {"attention.layer_norm_rms_epsilon", PLM_HP_F32, HP(rms_eps), false, 1e-5f}
#define HP_ROPE_BASE     {"rope.freq_base", PLM_HP_F32, HP(rope_freq_base), false, 10000.0f}
#define HP_EXPERTS       {"expert_count", PLM_HP_U32, HP(n_expert), true, 0}
#define HP_EXPERTS_USED  {"expert_used_count", PLM_HP_U32, HP(n_expert_used), true, 0}
#define HP_FF_EXP        {"expert_feed_forward_length", PLM_HP_U32, HP(n_ff_expert), false, NAN}
/* Sliding window and soft-caps (gemma); dflt: the family's default. */
#define HP_SWA(dflt)     {"attention.sliding_window", PLM_HP_U32, HP(n_swa), false, dflt}
/* Which layers are windowed (arch.h: swa_pattern); llama.cpp reads it as a
 * number: an array in its place is ignored there, and so here. */
#define HP_SWA_PATTERN(dflt)   {"attention.sliding_window_pattern", PLM_HP_U32, HP(swa_pattern), false, dflt}
#define HP_ROPE_BASE_SWA(dflt) {"rope.freq_base_swa", PLM_HP_F32, HP(rope_freq_base_swa), false, dflt}
#define HP_ATTN_SOFTCAP(dflt)  {"attn_logit_softcapping", PLM_HP_F32, HP(attn_softcap), false, dflt}
#define HP_FINAL_SOFTCAP(dflt) {"final_logit_softcapping", PLM_HP_F32, HP(final_softcap), false, dflt}
#define HP_END           {NULL, 0, 0, false, 0}

/* ---- tensors outside the blocks ------------------------------------------- */
#define T_ROPE_FREQS     {"rope_freqs.weight", PLM_T_ROPE_FACTORS, PLM_DIM_ROPE, PLM_DIM_NONE, MODEL(rope_freqs), PLM_OPTIONAL, NULL, PLM_STEP_NONE}
/* LongRoPE (phi3 128k): factors for contexts beyond the original one, and within it. */
#define T_ROPE_LONG      {"rope_factors_long.weight", PLM_T_ROPE_FACTORS, PLM_DIM_ROPE, PLM_DIM_NONE, MODEL(rope_long), PLM_OPTIONAL, NULL, PLM_STEP_NONE}
#define T_ROPE_SHORT     {"rope_factors_short.weight", PLM_T_ROPE_FACTORS, PLM_DIM_ROPE, PLM_DIM_NONE, MODEL(rope_short), PLM_OPTIONAL, NULL, PLM_STEP_NONE}
#define T_TOKEN_EMBD     {"token_embd.weight", PLM_T_EMBEDDING, PLM_DIM_EMBD, PLM_DIM_VOCAB, MODEL(tok_embd), PLM_REQUIRED, NULL, PLM_STEP_NONE}
#define T_OUTPUT_NORM    {"output_norm.weight", PLM_T_NORM, PLM_DIM_EMBD, PLM_DIM_NONE, MODEL(output_norm), PLM_REQUIRED, NULL, PLM_STEP_NONE}
#define T_OUTPUT         {"output.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_VOCAB, MODEL(output), PLM_TIED, "token_embd.weight", PLM_STEP_OUTPUT}

/* ---- tensors of block %d --------------------------------------------------- */
#define T_ATTN_NORM      {"blk.%d.attn_norm.weight", PLM_T_NORM, PLM_DIM_EMBD, PLM_DIM_NONE, LAYER(attn_norm), PLM_REQUIRED, NULL, PLM_STEP_NONE}
#define T_ATTN_Q         {"blk.%d.attn_q.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_Q, LAYER(wq), PLM_REQUIRED, NULL, PLM_STEP_QKV}
#define T_ATTN_K         {"blk.%d.attn_k.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_KV, LAYER(wk), PLM_REQUIRED, NULL, PLM_STEP_QKV}
#define T_ATTN_V         {"blk.%d.attn_v.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_KV, LAYER(wv), PLM_REQUIRED, NULL, PLM_STEP_QKV}
/* Q, K and V in one matrix, bound as three row ranges into wq, wk, wv. */
#define T_ATTN_QKV       {"blk.%d.attn_qkv.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_QKV, LAYER(wq), PLM_REQUIRED, NULL, PLM_STEP_QKV}
/* need: PLM_OPTIONAL (llama) or PLM_REQUIRED (qwen2). */
#define T_ATTN_Q_BIAS(need) {"blk.%d.attn_q.bias", PLM_T_BIAS, PLM_DIM_Q, PLM_DIM_NONE, LAYER(bq), need, NULL, PLM_STEP_NONE}
#define T_ATTN_K_BIAS(need) {"blk.%d.attn_k.bias", PLM_T_BIAS, PLM_DIM_KV, PLM_DIM_NONE, LAYER(bk), need, NULL, PLM_STEP_NONE}
#define T_ATTN_V_BIAS(need) {"blk.%d.attn_v.bias", PLM_T_BIAS, PLM_DIM_KV, PLM_DIM_NONE, LAYER(bv), need, NULL, PLM_STEP_NONE}
#define T_ATTN_Q_NORM    {"blk.%d.attn_q_norm.weight", PLM_T_NORM, PLM_DIM_HEAD, PLM_DIM_NONE, LAYER(q_norm), PLM_REQUIRED, NULL, PLM_STEP_NONE}
#define T_ATTN_K_NORM    {"blk.%d.attn_k_norm.weight", PLM_T_NORM, PLM_DIM_HEAD, PLM_DIM_NONE, LAYER(k_norm), PLM_REQUIRED, NULL, PLM_STEP_NONE}
#define T_ATTN_OUT       {"blk.%d.attn_output.weight", PLM_T_MATRIX, PLM_DIM_Q, PLM_DIM_EMBD, LAYER(wo), PLM_REQUIRED, NULL, PLM_STEP_ATTN_OUT}
#define T_FFN_NORM       {"blk.%d.ffn_norm.weight", PLM_T_NORM, PLM_DIM_EMBD, PLM_DIM_NONE, LAYER(ffn_norm), PLM_REQUIRED, NULL, PLM_STEP_NONE}
#define T_FFN_GATE       {"blk.%d.ffn_gate.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_FF, LAYER(w_gate), PLM_REQUIRED, NULL, PLM_STEP_FFN_IN}
#define T_FFN_UP         {"blk.%d.ffn_up.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_FF, LAYER(w_up), PLM_REQUIRED, NULL, PLM_STEP_FFN_IN}
/* gate then up in one matrix of 2 x n_ff rows, bound into w_gate, w_up. */
#define T_FFN_GATE_UP    {"blk.%d.ffn_up.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_FF2, LAYER(w_gate), PLM_REQUIRED, NULL, PLM_STEP_FFN_IN}
#define T_POST_ATTN_NORM {"blk.%d.post_attention_norm.weight", PLM_T_NORM, PLM_DIM_EMBD, PLM_DIM_NONE, LAYER(post_attn_norm), PLM_REQUIRED, NULL, PLM_STEP_NONE}
#define T_POST_FFN_NORM  {"blk.%d.post_ffw_norm.weight", PLM_T_NORM, PLM_DIM_EMBD, PLM_DIM_NONE, LAYER(post_ffn_norm), PLM_REQUIRED, NULL, PLM_STEP_NONE}
#define T_FFN_DOWN       {"blk.%d.ffn_down.weight", PLM_T_MATRIX, PLM_DIM_FF, PLM_DIM_EMBD, LAYER(w_down), PLM_REQUIRED, NULL, PLM_STEP_FFN_OUT}
/* Mixture-of-Experts: the router, then one 3-D tensor per matrix kind with
 * a matrix per expert, in the order llama.cpp's converter writes them. */
#define T_FFN_GATE_INP   {"blk.%d.ffn_gate_inp.weight", PLM_T_ROUTER, PLM_DIM_EMBD, PLM_DIM_EXPERTS, LAYER(ffn_gate_inp), PLM_REQUIRED, NULL, PLM_STEP_FFN_IN}
#define T_FFN_GATE_EXPS  {"blk.%d.ffn_gate_exps.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_EXP_FF, LAYER(ffn_gate_exps), PLM_REQUIRED, NULL, PLM_STEP_FFN_IN}
#define T_FFN_DOWN_EXPS  {"blk.%d.ffn_down_exps.weight", PLM_T_MATRIX, PLM_DIM_FF_EXP, PLM_DIM_EXP_EMBD, LAYER(ffn_down_exps), PLM_REQUIRED, NULL, PLM_STEP_FFN_OUT}
#define T_FFN_UP_EXPS    {"blk.%d.ffn_up_exps.weight", PLM_T_MATRIX, PLM_DIM_EMBD, PLM_DIM_EXP_FF, LAYER(ffn_up_exps), PLM_REQUIRED, NULL, PLM_STEP_FFN_IN}
#define T_MOE_FFN        T_FFN_NORM, T_FFN_GATE_INP, T_FFN_GATE_EXPS, T_FFN_DOWN_EXPS, T_FFN_UP_EXPS
#define T_END            {NULL, 0, 0, 0, 0, 0, NULL, 0}

/* ---- the llama block, which most families start from ------------------------ */
#define HP_LLAMA         HP_EMBD, HP_BLOCKS, HP_FF, HP_HEADS, HP_HEADS_KV, HP_KEY_LEN, HP_ROPE_DIMS, HP_CTX, HP_RMS_EPS, HP_ROPE_BASE
#define T_LLAMA_GLOBALS  T_TOKEN_EMBD, T_OUTPUT_NORM, T_OUTPUT
#define T_LLAMA_QKV      T_ATTN_NORM, T_ATTN_Q, T_ATTN_K, T_ATTN_V
#define T_QKV_BIASES(need) T_ATTN_Q_BIAS(need), T_ATTN_K_BIAS(need), T_ATTN_V_BIAS(need)
#define T_LLAMA_FFN      T_FFN_NORM, T_FFN_GATE, T_FFN_UP, T_FFN_DOWN

/* llama's own tables (arch/llama.c), for families whose tensors are llama's. */
extern const plm_tensor_spec plm_arch_llama_globals[], plm_arch_llama_layer[];

#endif
