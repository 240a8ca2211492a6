/*
 * Fits shared between the importance-weighted quantizers (quantize_weighted.c)
 * and the codebook ones (quantize_iq.c).
 */
#ifndef PLM_QUANT_FIT_H
#define PLM_QUANT_FIT_H

#include <stdint.h>

/* Non-negative levels 0..nmax of n values x under weights w, returning the
 * scale (ggml's make_qp_quants). */
float plm_qp_fit(int n, int nmax, const float *x, uint8_t *L, const float *w);

#endif
