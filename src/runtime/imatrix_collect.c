/*
 * Collecting an importance matrix, as llama-imatrix does: the calibration
 * tokens are evaluated exactly as for perplexity (plm_perplexity: chunks of
 * chunk_size tokens, each from BOS in a cleared cache), while an observer on
 * the forward pass (plm_forward_state.observe) adds the square of every
 * input column of every matrix product to the matrix's entry, and the number
 * of rows to its count.
 *
 * llama.cpp's accounting, kept here: every token of a chunk counts (the
 * perplexity scores only the second half, the statistics use all);
 * products of fewer than 16 rows are skipped; only blk.* matrices, and
 * output.weight with process_output; a fused matrix (attn_qkv, phi3's
 * ffn_up) is one entry under its file name, counted once.  Sums are f32,
 * added row after row, as llama-imatrix adds them.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "model/arch.h"
#include "model/imatrix.h"
#include "runtime/context.h"

enum { MIN_ROWS = 16 };  /* llama-imatrix ignores smaller batches */

typedef struct collector {
    plm_imatrix *im;
    const plm_model *model;
    bool process_output;
    plm_status st;           /* first failure, reported after the pass */
    char why[400];
} collector;

/* The file name of the tensor behind w: the spec of the model's
 * architecture bound at w's place in its layer (NULL for the second and
 * third row ranges of a fused matrix: they share the first's input). */
static bool weight_name(const collector *c, const plm_weight *w, char *name, size_t size) {
    const plm_model *m = c->model;
    if (w == &m->output) {
        if (!c->process_output) return false;
        snprintf(name, size, "output.weight");
        return true;
    }
    for (int il = 0; il < m->hp.n_layer; il++) {
        const char *base = (const char *)&m->layers[il];
        if ((const char *)w < base || (const char *)w >= base + sizeof m->layers[il]) continue;
        for (const plm_tensor_spec *t = m->arch->layer; t->name; t++) {
            if (t->kind == PLM_T_MATRIX && base + t->offset == (const char *)w) {
                snprintf(name, size, t->name, il);
                return true;
            }
        }
        return false;
    }
    return false;
}

static void fail(collector *c, const char *fmt, const char *name) {
    if (c->st) return;
    c->st = PLM_ERR_INVALID_ARG;
    snprintf(c->why, sizeof c->why, fmt, name);
}

static void observe(void *user, const plm_weight *w, const float *x, int n, int64_t x_stride) {
    collector *c = user;
    char name[256];
    if (c->st || n < MIN_ROWS || !weight_name(c, w, name, sizeof name)) return;
    plm_imatrix_entry *e = plm_imatrix_add(c->im, name, w->cols, 1);
    if (!e) {
        fail(c, "%s: inconsistent size or out of memory", name);
        return;
    }
    for (int r = 0; r < n; r++) {
        const float *row = x + (int64_t)r * x_stride;
        for (int64_t j = 0; j < w->cols; j++) e->sums[j] += row[j] * row[j];
    }
    for (int64_t j = 0; j < w->cols; j++)
        if (!isfinite(e->sums[j])) {
            fail(c, "non-finite values detected in %s", name);
            return;
        }
    e->counts[0] += n;
    const uint32_t chunks = (uint32_t)(e->counts[0] / c->im->chunk_size);
    if (chunks > c->im->chunk_count) c->im->chunk_count = chunks;
}

plm_status plm_imatrix_collect(plm_context *ctx, plm_imatrix *im, const plm_token *tokens, int n_tokens,
                               const plm_imatrix_params *params, plm_ppl_result *ppl, plm_error *err) {
    plm_error_clear(err);
    const plm_imatrix_params p = params ? *params : (plm_imatrix_params){0};
    if (im->legacy || im->chunk_size == 0)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "collect into a new imatrix (plm_imatrix_new with a chunk size)");
    if (n_tokens < 2 * (int64_t)im->chunk_size)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "you need at least %u tokens for a context of %u tokens, got %d",
                        2 * im->chunk_size, im->chunk_size, n_tokens);
    collector c = {.im = im, .model = ctx->model, .process_output = p.process_output};
    plm_ppl_params pp = plm_ppl_default_params();
    pp.n_ctx = im->chunk_size;
    pp.n_chunks = p.n_chunks;
    pp.progress = p.progress;
    pp.user = p.user;
    ctx->fwd.observe = observe;
    ctx->fwd.observe_user = &c;
    plm_ppl_result r;
    plm_status st = plm_perplexity(ctx, tokens, n_tokens, &pp, ppl ? ppl : &r, err);
    ctx->fwd.observe = NULL;
    ctx->fwd.observe_user = NULL;
    if (!st && c.st) st = plm_fail(err, c.st, "%s", c.why);
    return st;
}
