/* The non-matmul steps of the forward pass, scalar.  Small and memory-light
 * next to the matrix products, but they set the numerics: they follow ggml's
 * order of operations so our logits track llama.cpp's closely. */
#ifndef PLM_KERNELS_OPS_H
#define PLM_KERNELS_OPS_H

#include <stddef.h>
#include <stdint.h>

/* out = x / rms(x) * w  (w may be NULL: no scaling) */
void plm_rmsnorm(float *out, const float *x, const float *w, int n, float eps);

/* cos/sin of each rotated pair of a position: theta_i = pos * scale * base^(-2i/n_rot). */
void plm_rope_angles(float *cos_out, float *sin_out, int n_rot, float pos, float freq_base,
                     float freq_scale);

/* Rotates the first n_rot dims of each of n_heads heads (head_dim apart) in place.
 * neox: pairs (i, i + n_rot/2); otherwise adjacent pairs (2i, 2i+1). */
void plm_rope_apply(float *x, int n_heads, int head_dim, int n_rot, const float *cos_t,
                    const float *sin_t, int neox);

/* In-place softmax of x[0..n). */
void plm_softmax(float *x, int n);

/* g[i] = silu(g[i]) * u[i] */
void plm_swiglu(float *g, const float *u, int n);

/* sum of f16(a[i]) * f16(b[i]), accumulated in f32 */
float plm_dot_f16(const uint16_t *a, const uint16_t *b, int n);
/* y[i] += a * f16(x[i]) */
void plm_axpy_f16(float *y, float a, const uint16_t *x, int n);

/* Attention over an f16 cache, one query head against n_keys rows (k_stride
 * / v_stride bytes apart, hd values each):
 *   scores[j] = scale * plm_dot_f16(q, k_j)
 *   o[i]      = sum_j f16(w[j]) * v_j[i]   (the weights rounded to f16 first,
 *                                           as llama.cpp does before its f16
 *                                           product with the cache) */
void plm_attn_scores_f16(float *scores, const uint16_t *q, const void *k, size_t k_stride, int n_keys, int hd,
                         float scale);
void plm_attn_values_f16(float *o, const float *w, const void *v, size_t v_stride, int n_keys, int hd);

#endif
