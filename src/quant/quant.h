/*
 * Row conversions between f32 and ggml's tensor types (scalar reference).
 *
 * All functions take untyped row pointers so they fit the kernel table
 * (plm_quantize_row_fn / plm_dequantize_row_fn); n is the element count and
 * must be a whole number of blocks of the type.  Rows are little-endian, as
 * in GGUF; a big-endian host is not supported.
 */
#ifndef PLM_QUANT_QUANT_H
#define PLM_QUANT_QUANT_H

#include <stdint.h>

#include "quant/types.h"

/* ---- dequantize: row of blocks -> n floats ------------------------------ */
void plm_dequantize_row_f32(const void *x, float *y, int64_t n);
void plm_dequantize_row_f16(const void *x, float *y, int64_t n);
void plm_dequantize_row_bf16(const void *x, float *y, int64_t n);
void plm_dequantize_row_q4_0(const void *x, float *y, int64_t n);
void plm_dequantize_row_q4_1(const void *x, float *y, int64_t n);
void plm_dequantize_row_q5_0(const void *x, float *y, int64_t n);
void plm_dequantize_row_q5_1(const void *x, float *y, int64_t n);
void plm_dequantize_row_q8_0(const void *x, float *y, int64_t n);
void plm_dequantize_row_q8_1(const void *x, float *y, int64_t n);
void plm_dequantize_row_q2_K(const void *x, float *y, int64_t n);
void plm_dequantize_row_q3_K(const void *x, float *y, int64_t n);
void plm_dequantize_row_q4_K(const void *x, float *y, int64_t n);
void plm_dequantize_row_q5_K(const void *x, float *y, int64_t n);
void plm_dequantize_row_q6_K(const void *x, float *y, int64_t n);
void plm_dequantize_row_q8_K(const void *x, float *y, int64_t n);
void plm_dequantize_row_iq4_nl(const void *x, float *y, int64_t n);
void plm_dequantize_row_iq4_xs(const void *x, float *y, int64_t n);
/* the codebook formats and MXFP4 (dequantize_iq.c) */
void plm_dequantize_row_iq2_xxs(const void *x, float *y, int64_t n);
void plm_dequantize_row_iq2_xs(const void *x, float *y, int64_t n);
void plm_dequantize_row_iq2_s(const void *x, float *y, int64_t n);
void plm_dequantize_row_iq3_xxs(const void *x, float *y, int64_t n);
void plm_dequantize_row_iq3_s(const void *x, float *y, int64_t n);
void plm_dequantize_row_iq1_s(const void *x, float *y, int64_t n);
void plm_dequantize_row_iq1_m(const void *x, float *y, int64_t n);
void plm_dequantize_row_tq1_0(const void *x, float *y, int64_t n);
void plm_dequantize_row_tq2_0(const void *x, float *y, int64_t n);
void plm_dequantize_row_mxfp4(const void *x, float *y, int64_t n);

/* ---- quantize: n floats -> row of blocks ---------------------------------
 * Bit-identical to ggml's reference quantizers without an importance matrix,
 * i.e. to what llama-quantize writes for these types. */
void plm_quantize_row_f32(const float *x, void *y, int64_t n);   /* copy */
void plm_quantize_row_f16(const float *x, void *y, int64_t n);
void plm_quantize_row_bf16(const float *x, void *y, int64_t n);
void plm_quantize_row_q4_0(const float *x, void *y, int64_t n);
void plm_quantize_row_q4_1(const float *x, void *y, int64_t n);
void plm_quantize_row_q5_0(const float *x, void *y, int64_t n);
void plm_quantize_row_q5_1(const float *x, void *y, int64_t n);
void plm_quantize_row_q8_0(const float *x, void *y, int64_t n);
void plm_quantize_row_q8_1(const float *x, void *y, int64_t n);
void plm_quantize_row_q8_K(const float *x, void *y, int64_t n);
/* llama-quantize's IQ4_NL (scale search, 7 tries each way, x^2 weights). */
void plm_quantize_row_iq4_nl(const float *x, void *y, int64_t n);
/* K-quants (quantize_k.c): ggml's quantize_row_qN_K_ref, scale searches and all. */
void plm_quantize_row_q2_K(const float *x, void *y, int64_t n);
void plm_quantize_row_q3_K(const float *x, void *y, int64_t n);
void plm_quantize_row_q4_K(const float *x, void *y, int64_t n);
void plm_quantize_row_q5_K(const float *x, void *y, int64_t n);
void plm_quantize_row_q6_K(const float *x, void *y, int64_t n);

/* IQ4_XS (quantize_weighted.c): IQ4_NL's fit on 8 sub-blocks of 32 with
 * 6-bit sub-block scales, as llama-quantize writes it. */
void plm_quantize_row_iq4_xs(const float *x, void *y, int64_t n);

/* Ternary and MXFP4 (quantize_ternary.c): no scale search, so importances
 * change nothing; what llama-quantize writes with or without them. */
void plm_quantize_row_tq1_0(const float *x, void *y, int64_t n);
void plm_quantize_row_tq2_0(const float *x, void *y, int64_t n);
void plm_quantize_row_mxfp4(const float *x, void *y, int64_t n);

/* The codebook formats without importances (quantize_iq.c): what ggml's
 * quantize_iq* write given none.  IQ2_XXS, IQ2_XS and IQ1_S have no such
 * quantizer (ggml refuses them without importances: the _w functions). */
void plm_quantize_row_iq3_xxs(const float *x, void *y, int64_t n);
void plm_quantize_row_iq3_s(const float *x, void *y, int64_t n);
void plm_quantize_row_iq2_s(const float *x, void *y, int64_t n);
void plm_quantize_row_iq1_m(const float *x, void *y, int64_t n);

/* ---- importance-weighted quantizers (quantize_weighted.c) ----------------
 * What llama-quantize --imatrix writes: qw holds one importance per column
 * (n of them; an importance matrix row, see model/imatrix.h).  qw NULL
 * gives what llama-quantize writes without one.  x must be exactly one row:
 * the 32-element formats take their scale of spread from the whole row. */
typedef void (*plm_quantize_weighted_fn)(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_q4_0_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_q4_1_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_q5_0_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_q5_1_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_q2_K_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_q3_K_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_q4_K_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_q5_K_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_q6_K_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_iq4_nl_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_iq4_xs_w(const float *x, void *y, int64_t n, const float *qw);
/* The codebook formats (quantize_iq.c): search the format's lattice
 * (quant/iq_lattice.h, built on first use).  ggml refuses IQ2_XXS, IQ2_XS
 * and IQ1_S without importances; given qw NULL these weigh by x^2. */
void plm_quantize_row_iq3_xxs_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_iq3_s_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_iq2_xxs_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_iq2_xs_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_iq2_s_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_iq1_s_w(const float *x, void *y, int64_t n, const float *qw);
void plm_quantize_row_iq1_m_w(const float *x, void *y, int64_t n, const float *qw);
/* The weighted quantizer of a type; NULL where importances change nothing
 * (Q8_0, F16, ...) or the type has no quantizer. */
plm_quantize_weighted_fn plm_get_quantize_weighted(plm_type type);

/* The reference functions of a type (its plm_type_info entry); NULL when
 * the type has no such function or is unknown. */
plm_dequantize_fn plm_get_dequantize(plm_type type);
plm_quantize_fn plm_get_quantize(plm_type type);

#endif
