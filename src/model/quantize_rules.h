/*
 * Which type each tensor of a quantized model gets: llama-quantize's rules
 * (llama_tensor_get_type) for its K-quant file types, or one type for every
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
};

/* A weight matrix: 2-D, named *.weight.  Everything else (norms, biases)
 * is copied as it is. */
bool plm_is_weight_matrix(const plm_gguf_tensor *t);

/* Fills out_type[i] for every tensor of `in`.  pure: every weight matrix
 * becomes `base`.  Otherwise `ftype` (a PLM_FTYPE_*) picks llama.cpp's
 * mixture: `base` for most matrices, more bits for the output, some
 * attn_v/ffn_down layers and the like.  Either way, as in llama.cpp, a
 * matrix whose rows are not whole blocks of its type falls back to a
 * 32-element type of similar size (Q4_K -> Q5_0, ...), or to F16. */
plm_status plm_choose_tensor_types(const plm_gguf_file *in, plm_type base, uint32_t ftype, bool pure,
                                   uint32_t *out_type, plm_error *err);

#endif
