/*
 * pocketlm file tools: quantize a GGUF as llama-quantize does, and write
 * synthetic random-weight models with real shapes for benchmarks and planning.
 * The GGUF reader/writer itself is pocketlm_gguf.h.
 */
#ifndef POCKETLM_TOOLS_H
#define POCKETLM_TOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pocketlm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- quantization -------------------------------------------------------
 * Writes `in_path` re-encoded as llama.cpp's llama-quantize does without an
 * importance matrix, bit-identical to it.  `type` is a llama-quantize file
 * type (case-insensitive):
 *   - the K-quant mixtures "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S",
 *     "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K" ("Q3_K", "Q4_K", "Q5_K" are
 *     aliases of the _M ones): each weight matrix's type by llama.cpp's rules
 *     (the output in Q6_K, some attn_v/ffn_down layers with more bits...);
 *   - "Q8_0", "Q5_1", "Q5_0", "Q4_1", "Q4_0", "IQ4_NL", "F16", "BF16",
 *     "F32": every 2-D weight matrix in that type, as with --pure.
 * A matrix whose rows are not whole blocks of its type falls back as in
 * llama.cpp (Q4_K -> Q5_0, Q6_K -> Q8_0, ..., else F16).  Norms and biases
 * are copied as they are.  The file appears under out_path only when
 * complete (written to out_path.tmp, then renamed). */
typedef struct plm_quantize_params {
    bool pure;      /* every 2-D weight matrix in the type's base format
                       (Q4_K for "Q4_K_M"), as llama-quantize --pure */
    int n_threads;  /* 0 = every online core; the output does not depend on it */
    /* llama-quantize's options (see `pocketlm quantize --help`) */
    const char *imatrix;                 /* importance matrix file (GGUF or legacy .dat) or NULL */
    const char *const *include_weights;  /* use the imatrix only for tensors whose name contains one */
    int n_include_weights;
    const char *const *exclude_weights;  /* ... or not for those */
    int n_exclude_weights;
    const char *output_tensor_type;      /* "Q8_0", ...: output.weight's type, NULL = the rules' */
    const char *token_embedding_type;    /* token_embd.weight's type, NULL = the rules' */
    const char *const *tensor_types;     /* "REGEX=TYPE": the first match sets a matrix's type */
    int n_tensor_types;
    bool allow_requantize;               /* accept quantized input (else refused) */
    bool dry_run;                        /* choose types and sizes, write nothing */
    bool progress;                       /* tensor i/n, MB/s and ETA on stderr */
    uint64_t *out_bytes;                 /* if set: the output's tensor bytes */
    uint64_t *out_weights;               /* if set: the elements of the quantized matrices */
} plm_quantize_params;

PLM_API plm_quantize_params plm_quantize_default_params(void);
PLM_API plm_status plm_quantize_ex(const char *in_path, const char *out_path, const char *type,
                           const plm_quantize_params *params, plm_error *err);  /* params NULL: defaults */
/* plm_quantize_ex with the default parameters. */
PLM_API plm_status plm_quantize(const char *in_path, const char *out_path, const char *type, plm_error *err);

/* ---- synthetic models ---------------------------------------------------
 * A random-weight GGUF with the exact tensor shapes of a real model, for
 * benchmarks and memory planning: norm weights 1, other weights N(0, 0.02),
 * token embeddings N(0, 0.1).  The vocabulary is copied from `vocab_path`. */

typedef struct plm_synth_params {
    const char *shape;       /* "tinyllama-1.1b", "qwen2.5-0.5b", ... */
    const char *vocab_path;  /* GGUF whose tokenizer.* keys are copied */
    const char *out_path;
    bool f32;                /* default F16 */
    uint64_t seed;
} plm_synth_params;

/* NULL-terminated list of the shape names plm_synth knows. */
PLM_API const char *const *plm_synth_shapes(void);
PLM_API plm_status plm_synth(const plm_synth_params *params, plm_error *err);

/* plm_synth with two knobs for speculative-decoding pairs.  Two files written
 * with the same seed share token_embd and output exactly (a tensor's values
 * depend on the seed and its place in the table, and those come before the
 * layers).  n_layer: 0 = the shape's; fewer makes a shallow draft of the same
 * model.  layer_scale: 0 = 1; scales the layer matrices' N(0, 0.02), so small
 * values leave the residual stream to the embeddings and deep and shallow
 * copies agree on most tokens. */
PLM_API plm_status plm_synth_ex(const plm_synth_params *params, uint32_t n_layer, float layer_scale, plm_error *err);

/* plm_synth without the weights: the header and tensor table as plm_synth
 * writes them, the tensor data a hole in a sparse file of the full size (it
 * reads as zeros and takes no disk).  For plans and `quantize --dry-run` of
 * shapes too big to write; running it computes nothing meaningful. */
PLM_API plm_status plm_synth_sparse(const plm_synth_params *params, plm_error *err);

#ifdef __cplusplus
}
#endif
#endif
