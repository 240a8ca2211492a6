/*
 * Importance matrices (imatrix.c): the entries behind the opaque
 * plm_imatrix of the API, for the collector (runtime/imatrix_collect.c) and
 * the quantizer (quantize.c).
 */
#ifndef PLM_MODEL_IMATRIX_H
#define PLM_MODEL_IMATRIX_H

#include <stdbool.h>
#include <stdint.h>

#include "pocketlm.h"
#include "pocketlm_eval.h"

typedef struct plm_imatrix_entry {
    char *name;         /* the weight tensor's name, "blk.0.attn_q.weight" */
    int64_t n_cols;     /* input columns of one matrix */
    int64_t n_mat;      /* matrices (experts); one count each */
    float *sums;        /* [n_mat][n_cols]: sum of x^2 (legacy files: (sum / count) * ncall) */
    int64_t *counts;    /* [n_mat]: tokens seen (legacy files: counts[0] = ncall) */
} plm_imatrix_entry;

struct plm_imatrix {
    plm_imatrix_entry *e;
    int n, cap;
    char **datasets;
    int n_datasets;
    uint32_t chunk_count, chunk_size;
    bool legacy;        /* read from a .dat file: sums are already means * ncall */
};

plm_imatrix_entry *plm_imatrix_find(const plm_imatrix *im, const char *name);
/* The entry `name`, created zeroed if new; NULL if it exists with another
 * shape, or out of memory. */
plm_imatrix_entry *plm_imatrix_add(plm_imatrix *im, const char *name, int64_t n_cols, int64_t n_mat);
/* What llama-quantize hands its quantizers for e: per matrix, sums / count
 * (1 where a matrix saw no token); n_cols * n_mat floats into out.  False if
 * any is not finite (llama-quantize refuses such a file). */
bool plm_imatrix_importances(const plm_imatrix *im, const plm_imatrix_entry *e, float *out);
/* llama-quantize's --include-weights / --exclude-weights: drops entries whose
 * name contains an excluded part, or (with includes) none of the included. */
void plm_imatrix_filter(plm_imatrix *im, const char *const *include, int n_include, const char *const *exclude,
                        int n_exclude);

#endif
