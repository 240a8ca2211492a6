/*
 * The loaded model: hyperparameters read from GGUF metadata and pointers to
 * the weights, which stay in their GGUF layout inside the file image
 * (mmap'd by default).  Immutable after load, so any number of contexts may
 * share it across threads.
 */
#ifndef PLM_MODEL_H
#define PLM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "pocketlm.h"
#include "pocketlm_gguf.h"
#include "quant/types.h"
#include "tokenizer/vocab.h"

typedef enum { PLM_ROPE_NORM, PLM_ROPE_NEOX } plm_rope_type;

/* A matrix [rows x cols] in its stored format: each of `rows` rows holds
 * `cols` elements in `row_bytes` bytes.  A vector has rows == 1. */
typedef struct plm_weight {
    const void *data;
    plm_type type;
    int64_t cols, rows;
    size_t row_bytes;
} plm_weight;

typedef struct plm_layer {
    const float *attn_norm, *ffn_norm;       /* [n_embd] */
    const float *bq, *bk, *bv;               /* biases or NULL */
    plm_weight wq, wk, wv, wo;
    plm_weight w_gate, w_up, w_down;
} plm_layer;

typedef struct plm_hparams {
    char arch[32];
    char name[128];
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int n_ctx_train, n_rot;
    float rms_eps, rope_freq_base, rope_freq_scale;
    plm_rope_type rope_type;
} plm_hparams;

/* What differs between members of the llama family. */
typedef struct plm_arch {
    const char *name;
    plm_rope_type rope_type;
    bool qkv_bias;  /* attn_q/k/v carry a bias (qwen2) */
} plm_arch;

const plm_arch *plm_arch_llama(void);
const plm_arch *plm_arch_qwen2(void);

struct plm_model {
    gguf_file *file;
    plm_vocab *vocab;
    const plm_arch *arch;
    plm_hparams hp;
    plm_weight tok_embd, output;  /* output may alias tok_embd (tied) */
    const float *output_norm;
    plm_layer *layers;
    float *owned_f32;  /* norms/biases converted to f32 at load, if stored otherwise */
    uint64_t n_params, weight_bytes;
};

/* Reads hyperparameters and binds every weight; fills err on failure. */
plm_status plm_model_bind(plm_model *m, plm_error *err);

#endif
