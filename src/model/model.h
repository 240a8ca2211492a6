/*
 * The loaded model: hyperparameters read from GGUF metadata and pointers to
 * the weights, which stay in their GGUF layout inside the file image
 * (mmap'd by default).  Immutable after load, so any number of contexts may
 * share it across threads.  What goes where is the architecture
 * descriptor's tensor table (model/arch.h).
 */
#ifndef PLM_MODEL_H
#define PLM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "model/arch.h"
#include "pocketlm.h"
#include "pocketlm_gguf.h"
#include "quant/types.h"
#include "tokenizer/vocab.h"

/* A matrix [rows x cols] in its stored format: each of `rows` rows holds
 * `cols` elements in `row_bytes` bytes.  A vector has rows == 1.  data is
 * NULL for an optional matrix the file does not have. */
typedef struct plm_weight {
    const void *data;
    plm_type type;
    int64_t cols, rows;
    size_t row_bytes;
    /* A 3-D tensor (MoE experts) holds `experts` matrices of rows x cols one
     * after another: expert e's starts e x rows x row_bytes into data
     * (plm_weight_expert).  0 for a plain matrix. */
    int64_t experts;
    bool repacked;  /* data is row-interleaved (quant/repack.h), in plm_model.repack_mem */
} plm_weight;

/* Expert e of a 3-D weight, as a plain matrix. */
static inline plm_weight plm_weight_expert(const plm_weight *w, int e) {
    plm_weight m = *w;
    m.data = (const char *)w->data + (size_t)e * (size_t)w->rows * w->row_bytes;
    m.experts = 0;
    return m;
}

/* One block's weights.  Vectors are f32 (NULL when optional and absent). */
typedef struct plm_layer {
    const float *attn_norm, *ffn_norm;          /* [n_embd] */
    const float *bq, *bk, *bv;                  /* biases or NULL */
    const float *q_norm, *k_norm;               /* [head_dim]: plm_arch.qk_norm */
    const float *post_attn_norm, *post_ffn_norm;/* [n_embd]: plm_arch.post_*_norm */
    plm_weight wq, wk, wv, wo;
    plm_weight w_gate, w_up, w_down;
    /* Mixture-of-Experts (plm_arch.ffn == PLM_FFN_MOE): the router
     * [n_embd -> n_expert] and the experts' 3-D gate, up, down. */
    plm_weight ffn_gate_inp, ffn_gate_exps, ffn_up_exps, ffn_down_exps;
} plm_layer;

struct plm_model {
    plm_gguf_file *file;
    plm_vocab *vocab;
    const plm_arch *arch;
    plm_hparams hp;
    plm_weight tok_embd, output;  /* output may alias tok_embd (tied) */
    const float *output_norm;
    const float *rope_freqs;      /* [n_rot / 2] or NULL: RoPE frequency i is divided by rope_freqs[i] */
    const float *rope_long, *rope_short; /* [n_rot / 2] or NULL: LongRoPE's factors (phi3), by context length */
    plm_layer *layers;
    float *owned_f32;  /* norms/biases converted to f32 at load, if stored otherwise */
    /* Copy f32 vectors into owned_f32 too: set when repacking drops the
     * file's pages, so that the forward pass reads nothing from the file
     * but embedding rows (a read maps the page cache's whole folio, up to
     * 2 MiB on some kernels: a few norms would map tens of MiB). */
    bool own_vectors;
    uint64_t n_params, weight_bytes;
    /* Read per generated token: all of it but the share of the experts a
     * token does not select (n_expert - n_expert_used of n_expert). */
    uint64_t n_params_active, weight_bytes_active;
    void *repack_mem;       /* anonymous mapping of the repacked matrices, or NULL */
    uint64_t repack_bytes;  /* its size */
};

/* Reads hyperparameters and binds every weight of m->arch's tables; fills
 * err on failure, naming the tensor. */
plm_status plm_model_bind(plm_model *m, plm_error *err);

/* Floats of m->owned_f32: one slot per vector of the tables, each as long as
 * the longest vector (what the memory plan counts). */
uint64_t plm_model_owned_f32_floats(const plm_arch *arch, const plm_hparams *hp);

/* Anonymous bytes plm_model_repack would allocate (each repackable matrix
 * page-rounded); 0 when nothing can be repacked. */
uint64_t plm_model_repack_bytes(plm_model *m);

/* Rewrites every repackable matrix of m into the row-interleaved layout in
 * one anonymous mapping, releasing the file pages it copied (model/repack.c). */
plm_status plm_model_repack(plm_model *m, plm_error *err);

#endif
