/*
 * Which type each tensor of a quantized model gets: llama-quantize's rules
 * (llama_tensor_get_type) for its file types, or one type for every
 * weight matrix (--pure).
 */
#ifndef PLM_MODEL_QUANTIZE_RULES_H
#define PLM_MODEL_QUANTIZE_RULES_H

#include <stdbool.h>
#include <stdint.h>

#include "pocketlm.h"
#include "pocketlm_gguf.h"
#include "quant/types.h"

/* general.file_type values (llama_ftype) of the K-quant mixtures. */
enum {
    PLM_FTYPE_Q2_K = 10,
    PLM_FTYPE_Q3_K_S = 11,
    PLM_FTYPE_Q3_K_M = 12,
    PLM_FTYPE_Q3_K_L = 13,
    PLM_FTYPE_Q4_K_S = 14,
    PLM_FTYPE_Q4_K_M = 15,
    PLM_FTYPE_Q5_K_S = 16,
    PLM_FTYPE_Q5_K_M = 17,
    PLM_FTYPE_Q6_K = 18,
    PLM_FTYPE_Q4_0 = 2,
    PLM_FTYPE_Q5_0 = 8,
    PLM_FTYPE_IQ4_NL = 25,
    PLM_FTYPE_IQ4_XS = 30,
    /* the codebook, ternary and MXFP4 file types */
    PLM_FTYPE_IQ2_XXS = 19,
    PLM_FTYPE_IQ2_XS = 20,
    PLM_FTYPE_IQ3_XS = 22,
    PLM_FTYPE_IQ3_XXS = 23,
    PLM_FTYPE_IQ1_S = 24,
    PLM_FTYPE_IQ3_S = 26,
    PLM_FTYPE_IQ3_M = 27,
    PLM_FTYPE_IQ2_S = 28,
    PLM_FTYPE_IQ2_M = 29,
    PLM_FTYPE_IQ1_M = 31,
    PLM_FTYPE_TQ1_0 = 36,
    PLM_FTYPE_TQ2_0 = 37,
    PLM_FTYPE_MXFP4_MOE = 38,
};

/* What picks the types: the file type's base type and rules, and
 * llama-quantize's options that override them. */
typedef struct plm_type_choice {
    plm_type base;
    uint32_t ftype;          /* a llama_ftype (PLM_FTYPE_* or the older ones) */
    bool pure;               /* every weight matrix in `base` (still overridable) */
    bool has_imatrix;        /* some rules differ with an importance matrix */
    int output_type;         /* plm_type of output.weight (or the tied token_embd), -1 = the rules' */
    int token_embd_type;     /* plm_type of token_embd.weight, -1 = the rules' */
    const char *const *tensor_types;  /* "REGEX=TYPE", first match wins (--tensor-type) */
    int n_tensor_types;
} plm_type_choice;

/* A weight matrix: 2-D, named *.weight.  Everything else (norms, biases)
 * is copied as it is. */
bool plm_is_weight_matrix(const plm_gguf_tensor *t);

/* Fills out_type[i] for every tensor of `in`, as llama_tensor_get_type:
 * token_embd_type / output_type if set; else the first --tensor-type
 * pattern matching the name; else with pure `base`, otherwise `ftype`'s
 * mixture (`base` for most matrices, more bits for the output, some
 * attn_v/ffn_down layers and the like).  A matrix whose rows are not whole
 * blocks of its type then falls back to a 32-element type of similar size
 * (Q4_K -> Q5_0, ...), or to F16.  A bad pattern or type fails, named. */
/* Whether llama-quantize refuses to write tensor `name` in `type` without
 * importances (the IQ1/IQ2 types and IQ3_XXS; never token_embd/output). */
bool plm_type_needs_imatrix(const char *name, plm_type type);

plm_status plm_choose_tensor_types(const plm_gguf_file *in, const plm_type_choice *choice, uint32_t *out_type,
                                   plm_error *err);

#endif
