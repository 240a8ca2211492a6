/*
 * Kernel table selection and the matrix product built on vec_dot.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

/* Best table for this CPU.  Only the scalar reference exists so far; SIMD
 * tables will be probed here, most capable first. */
static const plm_kernels *kernels_best(void) { return plm_kernels_ref(); }

static const plm_kernels *kernels_by_name(const char *name) {
    if (strcmp(name, "ref") == 0) return plm_kernels_ref();
    return NULL;
}

const plm_kernels *plm_kernels_select(const char *force) {
    if (force) return kernels_by_name(force);
    const char *env = getenv("PLM_KERNELS");
    if (env && *env) return kernels_by_name(env);
    return kernels_best();
}

/* Row-outer, token-inner: a weight row is read from memory once and stays in
 * cache while every token of the batch is dotted with it, which is what
 * matters when the weights dwarf the activations. */
void plm_matmul(const plm_kernels *kt, plm_type wtype, const void *w, int64_t k,
                int64_t r0, int64_t r1, const void *act, size_t act_stride,
                int n_tok, float *out, int64_t out_stride) {
    const plm_vec_dot_fn dot = kt->vec_dot[wtype];
    const size_t row_bytes = plm_row_size(wtype, k);
    for (int64_t r = r0; r < r1; r++) {
        const char *wr = (const char *)w + (size_t)r * row_bytes;
        for (int t = 0; t < n_tok; t++)
            dot(k, &out[t * out_stride + r], wr, (const char *)act + (size_t)t * act_stride);
    }
}
