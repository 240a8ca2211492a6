/*
 * What an architecture is, as data.  Each family is one descriptor in
 * model/arch/NAME.c: the hyperparameter keys llama.cpp's converter writes
 * (under "NAME."), the tensor table (GGUF name, shape, where it binds), and
 * the choices its forward pass makes.  Loading and binding (load.c), the
 * memory plan (runtime/plan.c), synthetic models (synth.c) and the forward
 * pass (forward.c) all read these tables; none of them names a family.
 *
 * Adding a family that needs no new kind of step is a new descriptor file
 * and one line in the registry (arch.c).
 */
#ifndef PLM_MODEL_ARCH_H
#define PLM_MODEL_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pocketlm.h"
#include "pocketlm_gguf.h"

/* ---- hyperparameters ------------------------------------------------------ */

typedef enum { PLM_ROPE_NORM, PLM_ROPE_NEOX } plm_rope_type;

/* Every hyperparameter any family has; a family leaves the ones it does not
 * use at their neutral value (1 for scales, 0 for caps, windows, experts). */
typedef struct plm_hparams {
    char arch[32];
    char name[128];
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int n_ctx_train, n_rot;
    int head_dim_v;              /* attention.value_length: must equal head_dim */
    float rms_eps, rope_freq_base, rope_freq_scale;
    plm_rope_type rope_type;
    /* Sliding-window attention: a windowed layer sees only the last n_swa
     * positions (0: none).  Which layers are windowed: swa_pattern. */
    int n_swa;
    float rope_freq_base_swa;    /* RoPE base of windowed layers (gemma3) */
    float attn_softcap;          /* tanh soft-cap of attention scores, 0 = none */
    float final_softcap;         /* ... of the output logits */
    float attn_scale;            /* query scale; 0 = 1/sqrt(head_dim) */
    float embd_scale;            /* embeddings are multiplied by this */
    float residual_scale;        /* each block's output, before the residual add */
    float logit_scale;           /* logits are divided by this (granite) */
    int n_expert, n_expert_used; /* Mixture-of-Experts; 0 = dense */
    int n_ff_expert;             /* rows of one expert's gate and up matrices */
    float rope_freq_scale_swa;   /* RoPE frequency scale of windowed layers (gemma3: 1) */
    /* LongRoPE (phi3): rope_factors_long applies when a sequence may hold
     * more than n_ctx_orig positions, rope_factors_short otherwise; the
     * RoPE'd q and k are multiplied by rope_attn_factor (1 = none). */
    int n_ctx_orig;              /* rope.scaling.original_context_length; 0 = n_ctx_train */
    float rope_attn_factor;
    /* attention.sliding_window_pattern, as llama.cpp's set_swa_pattern
     * reads it: layer il is windowed when il % swa_pattern < swa_pattern - 1
     * (gemma2's 2: the even layers; gemma3's 6: five of every six), every
     * layer when it is 0, none when it is 1.  Only when n_swa > 0. */
    int swa_pattern;
} plm_hparams;

/* llama.cpp's LLAMA_MAX_EXPERTS: bounds expert_count (and the router's
 * per-token buffers). */
#define PLM_MOE_MAX_EXPERTS 1024

typedef enum { PLM_HP_U32, PLM_HP_F32 } plm_hp_kind;

/* One metadata key, read into a field of plm_hparams.  An optional key that
 * is absent leaves the field at `dflt`, or, for the fields llama.cpp derives
 * from others (head_count_kv, key_length, rope.dimension_count), at the
 * derived value: NAN as dflt says so (hparams.c derives them). */
typedef struct plm_hp_key {
    const char *key;     /* after "ARCH.": "attention.head_count" */
    plm_hp_kind kind;
    size_t offset;       /* offsetof(plm_hparams, field) */
    bool required;
    float dflt;
} plm_hp_key;

/* ---- tensors -------------------------------------------------------------- */

/* A dimension of a tensor, in terms of the hyperparameters. */
typedef enum {
    PLM_DIM_NONE,   /* a vector's missing second dimension */
    PLM_DIM_EMBD,   /* n_embd */
    PLM_DIM_Q,      /* n_head x head_dim */
    PLM_DIM_KV,     /* n_head_kv x head_dim */
    PLM_DIM_FF,     /* n_ff */
    PLM_DIM_VOCAB,  /* rows of token_embd.weight */
    PLM_DIM_HEAD,   /* head_dim (per-head Q/K norms) */
    PLM_DIM_ROPE,   /* n_rot / 2: one factor per rotated pair */
    /* Fused matrices (phi3), bound as row ranges of one tensor into
     * consecutive fields: q, k, v from attn_qkv; gate, up from ffn_up. */
    PLM_DIM_QKV,    /* n_head x head_dim + 2 x n_head_kv x head_dim */
    PLM_DIM_FF2,    /* 2 x n_ff */
    /* Mixture-of-Experts */
    PLM_DIM_EXPERTS, /* n_expert (the router's rows) */
    PLM_DIM_FF_EXP,  /* n_ff_expert (the row length of an expert's down) */
    /* As ne1 of a 3-D tensor holding one matrix per expert: rows per
     * expert, and n_expert of them as ne2 (plm_dim_experts). */
    PLM_DIM_EXP_FF,   /* n_ff_expert rows x n_expert: gate_exps, up_exps */
    PLM_DIM_EXP_EMBD, /* n_embd rows x n_expert: down_exps */
} plm_dim;

/* What a tensor is: how it binds (a matrix in its stored format, or a vector
 * as f32) and how synth fills it. */
typedef enum {
    PLM_T_EMBEDDING, /* matrix, N(0, 0.1) in synth */
    PLM_T_MATRIX,    /* matrix, N(0, 0.02) */
    PLM_T_NORM,      /* vector, 1.0 */
    PLM_T_BIAS,      /* vector, N(0, 0.02) */
    PLM_T_ROPE_FACTORS, /* vector dividing RoPE's frequencies; synth: the llama3 scaling, or LongRoPE's */
    PLM_T_ROUTER,    /* MoE router (ffn_gate_inp): a matrix the converter writes in F32 and
                        llama.cpp's quantizer never converts; N(0, 0.02) in synth */
} plm_tensor_kind;

typedef enum {
    PLM_REQUIRED,
    PLM_OPTIONAL,    /* absent: the field stays NULL / empty */
    PLM_TIED,        /* absent: the field takes `tied_to`'s weight (output -> token_embd) */
} plm_need;

/* Which step of a layer reads a matrix, and so which input it multiplies:
 * matrices of one step share one (quantized) input.  The memory plan uses
 * it to count activation buffers as the forward pass fills them. */
typedef enum {
    PLM_STEP_NONE,      /* vectors, the embedding */
    PLM_STEP_QKV,       /* normed x -> q, k, v */
    PLM_STEP_ATTN_OUT,  /* attention output -> x */
    PLM_STEP_FFN_IN,    /* normed x -> gate, up */
    PLM_STEP_FFN_OUT,   /* gate * up -> x */
    PLM_STEP_OUTPUT,    /* normed x -> logits */
} plm_step;

typedef struct plm_tensor_spec {
    const char *name;       /* "blk.%d.attn_q.weight" in a layer table */
    plm_tensor_kind kind;
    plm_dim ne0, ne1;       /* ggml order: ne0 = row length (input), ne1 = rows */
    size_t offset;          /* in plm_layer (layer table) or plm_model (globals) */
    plm_need need;
    const char *tied_to;    /* PLM_TIED: the tensor standing in for it */
    plm_step step;
} plm_tensor_spec;

/* ---- the forward pass's choices --------------------------------------------- */

typedef enum { PLM_NORM_RMS } plm_norm_kind;
typedef enum { PLM_ACT_SILU, PLM_ACT_GELU_TANH } plm_act_kind;
typedef enum { PLM_FFN_DENSE, PLM_FFN_MOE } plm_ffn_kind;

typedef struct plm_arch {
    const char *name;                 /* general.architecture */
    const plm_hp_key *hparams;        /* terminated by a NULL key */
    const plm_tensor_spec *globals;   /* terminated by a NULL name */
    const plm_tensor_spec *layer;     /* names contain %d: the layer index */
    /* Tensors that mark a variant of the family not implemented (NULL-
     * terminated, may be NULL): a file with one is refused, naming why. */
    const char *const *refused_tensors;
    const char *refused_why;

    plm_norm_kind norm;
    plm_act_kind act;                 /* of the gated FFN: act(gate) * up */
    plm_rope_type rope;
    plm_ffn_kind ffn;
    bool qk_norm;                     /* per-head norm of Q and K before RoPE */
    bool post_attn_norm, post_ffn_norm; /* norms of each block's output (gemma2/3) */
    bool embd_scale_sqrt;             /* embeddings x sqrt(n_embd) (gemma) */
    /* (Which layers attend through a sliding window is data of the file:
     * the hyperparameters' n_swa and swa_pattern, with the family's
     * defaults in its key table.) */
    /* Mixture-of-Experts routing (ffn == PLM_FFN_MOE): softmax over the
     * experts, top n_expert_used, their weights renormalized to sum 1 or
     * not, as each model defines. */
    bool moe_norm_topk;
    /* The descriptor for a file of this architecture name whose
     * expert_count is above 0 (Mixtral's GGUFs say "llama"), or NULL. */
    const struct plm_arch *with_experts;
    /* Values llama.cpp derives in code rather than reading a key (gemma's
     * query scale, its windowed layers' RoPE base); NULL = none.  Runs after
     * the keys are read and the shared defaults derived. */
    void (*derive)(plm_hparams *hp);
} plm_arch;

/* The registry: every descriptor, in the order errors list them. */
const plm_arch *plm_arch_find(const char *name);
const plm_arch *const *plm_arch_all(int *n);
/* Writes "llama, qwen2" (every name, for error messages) into buf. */
void plm_arch_names(char *buf, size_t size);

extern const plm_arch plm_arch_llama, plm_arch_qwen2, plm_arch_qwen3, plm_arch_granite, plm_arch_phi3;
extern const plm_arch plm_arch_qwen3moe, plm_arch_llama_moe, plm_arch_gemma2, plm_arch_gemma3;

/* The descriptor for file f of architecture a: a->with_experts when the
 * file's ARCH.expert_count is above 0, else a. */
const plm_arch *plm_arch_for_file(const plm_arch *a, const plm_gguf_file *f);

/* Reads arch's hyperparameter keys from f into hp (hp->arch and name too,
 * n_vocab from token_embd.weight's rows when present), checks them, and
 * derives the defaults llama.cpp derives. */
plm_status plm_hparams_read(const plm_arch *arch, const plm_gguf_file *f, plm_hparams *hp, plm_error *err);

/* A dimension's size for these hyperparameters (1 for PLM_DIM_NONE). */
int64_t plm_dim_size(const plm_hparams *hp, plm_dim d);

/* The matrices of a tensor whose ne1 is `ne1`: n_expert for the 3-D expert
 * dims (PLM_DIM_EXP_*), 0 for a plain 2-D one. */
int64_t plm_dim_experts(const plm_hparams *hp, plm_dim ne1);

/* Vectors of one layer that may need an f32 copy (norms and biases). */
int plm_arch_layer_vectors(const plm_arch *arch);

/* Window of layer il in positions, 0 = it sees the whole context: n_swa on
 * the layers hp->swa_pattern makes windowed (arch: unused, kept for the
 * callers; the pattern is the file's, the family's default in its keys). */
uint32_t plm_arch_layer_window(const plm_arch *arch, const plm_hparams *hp, int il);

#endif
