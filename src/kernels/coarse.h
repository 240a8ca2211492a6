/*
 * Coarse int8 prefill: a large batch multiplied by K-quant weights in int8
 * with one scale per row and 256 elements.
 *
 * Why.  A K-quant super-block carries a scale (and a min) per 16 or 32
 * elements, so its exact product pays float work (convert, scale,
 * accumulate) per 32 elements and token; on AVX-512 VNNI that bounds the
 * panel gemm (gemm_panel.h) well below the int8 peak.  Requantizing each
 * row's super-block to int8 under one float scale moves that work to once
 * per 256 elements: 64 vpdpbusd (16 rows x 256 elements) per token and one
 * convert-scale-accumulate.  The conversion is done on the fly, once per
 * 16-row panel and k slice, for every token of the batch (up to 512), so
 * it costs a few percent and no memory.  ik_llama.cpp's Q8_K_R8 prefill is
 * the same idea; this is our own layout and code.
 *
 * The arithmetic (the reference, coarse.c, is the definition):
 *   w      the super-block dequantized exactly as the format's reference
 *          dequantizer does (quant/dequantize.c)
 *   D      amax / 127, amax = max |w| over the 256 elements
 *   q      nearbyint(w * (127 / amax)) in [-127, 127] (0 when amax is 0)
 *   out    sum over super-blocks of (float)(sum q * a) * (D * d_a)
 * with a the Q8_K activation codes and d_a their scale.  Each weight moves
 * by at most D/2: about a sixteenth of a Q4_K step for a typical block, a
 * quarter of a Q6_K step, which `pocketlm kld` measures (docs/BENCHMARKS.md).
 *
 * Not bit-faithful to llama.cpp, so a context asks for it:
 * plm_context_params.coarse_prefill (`--coarse-prefill`); even then only
 * batches of at least PLM_COARSE_MIN_TOK tokens use it (decode, speculative
 * verification and --batch-invariant passes never do), and never for the
 * output matrix, whose error would reach the logits unaveraged.  Off by
 * default: on test_logits' random-weight fixtures it moves the logits by up
 * to 0.16 against llama.cpp's (the exact products: 0.11; the tolerance of
 * the K-quant fixtures is 0.15), though its KL divergence against f16 is
 * within the noise of the exact path's.
 */
#ifndef PLM_KERNELS_COARSE_H
#define PLM_KERNELS_COARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/types.h"

enum {
    /* Smallest batch worth converting weights for: the panel's conversion
     * is paid once for every token of the batch. */
    PLM_COARSE_MIN_TOK = 32,
};

/* Whether `type` has a coarse form (Q2_K..Q6_K, IQ4_XS). */
bool plm_coarse_type(plm_type type);

/* The reference (scalar) coarse product, the oracle of the SIMD kernels:
 * plm_gemm_fn's contract (kernels.h) for a weight of `type`, Q8_K
 * activations. */
void plm_gemm_coarse_ref(plm_type type, int64_t k, const void *w, size_t w_stride, int64_t n_rows, const void *act,
                         size_t act_stride, int n_tok, float *out, int64_t out_stride);

/* Lists the reference's gemm_coarse entries in the reference table t. */
struct plm_kernels;
void plm_kernels_coarse_ref(struct plm_kernels *t);

/* One super-block of 256 dequantized weights to int8 codes q; returns D. */
float plm_coarse_quantize_256(const float *w, int8_t *q);

#endif
