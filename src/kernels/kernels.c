/*
 * Kernel table selection and the matrix product built on the tables.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

/*
 * Every table this build knows, most capable first.  Each getter returns
 * NULL when the build or the CPU cannot run it (see kernels.h), so one
 * binary serves every CPU of its architecture.  A new table is one line.
 */
typedef const plm_kernels *(*kernels_getter)(void);

static const kernels_getter candidates[] = {
    plm_kernels_avx512,
    plm_kernels_avxvnni,  /* AVX-VNNI without AVX-512 (Alder Lake and later) */
    plm_kernels_avx2,
    plm_kernels_i8mm,     /* arm64: NEON + sdot + smmla */
    plm_kernels_dotprod,  /* arm64: NEON + sdot */
    plm_kernels_neon,     /* arm64: baseline NEON */
    plm_kernels_ref,  /* always last: always available */
};

enum { N_CANDIDATES = (int)(sizeof candidates / sizeof candidates[0]) };

void plm_kernels_fill_from(plm_kernels *t, const plm_kernels *base) {
    if (!t->attn_f16) t->attn_f16 = base->attn_f16, t->attn_f16_pass = base->attn_f16_pass;
    if (!t->attn_quant) t->attn_quant = base->attn_quant, t->attn_quant_pass = base->attn_quant_pass;
    if (!t->swiglu) t->swiglu = base->swiglu;
    if (!t->geglu) t->geglu = base->geglu;
    for (int i = 0; i < PLM_TYPE_COUNT; i++) {
        if (!t->vec_dot[i]) t->vec_dot[i] = base->vec_dot[i];
        if (!t->gemm[i]) t->gemm[i] = base->gemm[i];
        if (!t->gemm_repacked[i]) t->gemm_repacked[i] = base->gemm_repacked[i];
        if (!t->quantize_row[i]) t->quantize_row[i] = base->quantize_row[i];
        if (!t->dequantize_row[i]) t->dequantize_row[i] = base->dequantize_row[i];
        if (!t->gemm_coarse[i]) t->gemm_coarse[i] = base->gemm_coarse[i];
    }
}

int plm_kernels_list(const plm_kernels **out, int max) {
    int n = 0;
    for (int i = 0; i < N_CANDIDATES && n < max; i++) {
        const plm_kernels *kt = candidates[i]();
        if (kt) out[n++] = kt;
    }
    return n;
}

static const plm_kernels *kernels_by_name(const char *name) {
    for (int i = 0; i < N_CANDIDATES; i++) {
        const plm_kernels *kt = candidates[i]();
        if (kt && strcmp(kt->name, name) == 0) return kt;
    }
    return NULL;  /* unknown, or not runnable on this CPU */
}

const plm_kernels *plm_kernels_select(const char *force) {
    if (force) return kernels_by_name(force);
    const char *env = getenv("PLM_KERNELS");
    if (env && *env) return kernels_by_name(env);
    const plm_kernels *best = NULL;
    plm_kernels_list(&best, 1);
    return best;
}

/*
 * With several tokens and a tiled gemm for the weight type, the gemm does
 * the whole row range (it reads each weight block once per token tile).
 * Otherwise: row-outer, token-inner, so a weight row is read from memory
 * once and stays in cache while every token of the batch is dotted with it.
 * Either way the work depends only on [r0, r1), so threads may split rows.
 */
void plm_matmul(const plm_kernels *kt, plm_type wtype, const void *w, int64_t k,
                int64_t r0, int64_t r1, const void *act, size_t act_stride,
                int n_tok, float *out, int64_t out_stride) {
    const size_t row_bytes = plm_row_size(wtype, k);
    if (r1 <= r0 || n_tok <= 0) return;
    if (n_tok > 1 && kt->gemm[wtype]) {
        kt->gemm[wtype](k, (const char *)w + (size_t)r0 * row_bytes, row_bytes, r1 - r0, act,
                        act_stride, n_tok, out + r0, out_stride);
        return;
    }
    if (n_tok == 1 && kt->gemv[wtype]) {
        kt->gemv[wtype](k, (const char *)w + (size_t)r0 * row_bytes, row_bytes, r1 - r0, act, out + r0);
        return;
    }
    const plm_vec_dot_fn dot = kt->vec_dot[wtype];
    for (int64_t r = r0; r < r1; r++) {
        const char *wr = (const char *)w + (size_t)r * row_bytes;
        for (int t = 0; t < n_tok; t++)
            dot(k, &out[t * out_stride + r], wr, (const char *)act + (size_t)t * act_stride);
    }
}

void plm_matmul_exact(const plm_kernels *kt, plm_type wtype, const void *w, int64_t k, int64_t r0, int64_t r1,
                      const void *act, size_t act_stride, int n_tok, float *out, int64_t out_stride) {
    const size_t row_bytes = plm_row_size(wtype, k);
    if (r1 <= r0 || n_tok <= 0) return;
    if (n_tok > 1 && kt->gemm_exact[wtype]) {
        kt->gemm_exact[wtype](k, (const char *)w + (size_t)r0 * row_bytes, row_bytes, r1 - r0, act, act_stride,
                              n_tok, out + r0, out_stride);
        return;
    }
    for (int t = 0; t < n_tok; t++)
        plm_matmul(kt, wtype, w, k, r0, r1, (const char *)act + (size_t)t * act_stride, act_stride, 1,
                   out + (int64_t)t * out_stride, out_stride);
}

void plm_matmul_repacked(const plm_kernels *kt, plm_type wtype, const void *w, int64_t k, int64_t r0, int64_t r1,
                         const void *act, size_t act_stride, int n_tok, float *out, int64_t out_stride) {
    const size_t row_bytes = plm_row_size(wtype, k);
    if (r1 <= r0 || n_tok <= 0) return;
    kt->gemm_repacked[wtype](k, (const char *)w + (size_t)r0 * row_bytes, row_bytes, r1 - r0, act, act_stride, n_tok,
                             out + r0, out_stride);
}

bool plm_kernels_repacks(const plm_kernels *kt, plm_type type) {
    const plm_kernels *ref = plm_kernels_ref();
    return kt && kt->gemm_repacked[type] && (kt == ref || kt->gemm_repacked[type] != ref->gemm_repacked[type]);
}
