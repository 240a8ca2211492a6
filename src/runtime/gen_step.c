/*
 * plm_gen: plm_generate's loop a step at a time, so that several
 * generations, each in its own sequence of one context, share every forward
 * pass (a server's slots).  The pieces are generate.c's (runtime/gen.h); this
 * file only keeps each generation's own logits row between steps (another
 * generation's prefill overwrites the context's) and gathers the tokens of
 * a step into one batch.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/gen.h"

struct plm_gen {
    gen g;
    plm_generate_params params;  /* a copy: g.p points here */
    plm_token *prompt;
    int n_prompt, n_fed;         /* prompt tokens, and those evaluated */
    float *logits;               /* [n_vocab]: this sequence's last row */
    bool ready;                  /* prompt evaluated: logits hold its last row */
    bool stepped;                /* t0 set */
    double t0;                   /* first step */
};

static void gen_free_parts(plm_gen *x) {
    gen_end(&x->g);
    free(x->prompt);
    free(x->logits);
    free(x);
}

plm_status plm_gen_new(plm_context *ctx, plm_seq_id seq, const plm_token *prompt, int n_prompt,
                       plm_sampler *sampler, const plm_generate_params *params, plm_piece_cb on_piece,
                       plm_generate_result *result, plm_gen **out, plm_error *err) {
    *out = NULL;
    if (params && params->spec)
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "plm_gen: speculative decoding runs through plm_generate only");
    plm_gen *x = calloc(1, sizeof *x);
    if (!x) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for a generation");
    x->params = params ? *params : plm_generate_default_params();
    plm_status st = gen_begin(&x->g, ctx, seq, prompt, n_prompt, sampler, &x->params, on_piece, result, err);
    if (st) {
        gen_free_parts(x);
        return st;
    }
    x->prompt = malloc((size_t)n_prompt * sizeof *prompt);
    x->logits = malloc((size_t)plm_model_n_vocab(ctx->model) * sizeof *x->logits);
    if (!x->prompt || !x->logits) {
        gen_free_parts(x);
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory for a generation");
    }
    memcpy(x->prompt, prompt, (size_t)n_prompt * sizeof *prompt);
    x->n_prompt = n_prompt;
    *out = x;
    return PLM_OK;
}

void plm_gen_free(plm_gen *x) {
    if (x) gen_free_parts(x);
}

bool plm_gen_ready(const plm_gen *x) { return x->ready && !x->g.done; }
bool plm_gen_done(const plm_gen *x) { return x->g.done; }

static void keep_logits(plm_gen *x, int row) {
    const float *l = plm_get_logits(x->g.ctx, row);
    memcpy(x->logits, l, (size_t)plm_model_n_vocab(x->g.model) * sizeof *x->logits);
    x->g.logits = x->logits;
}

plm_status plm_gen_prefill(plm_gen *x, plm_error *err) {
    gen *g = &x->g;
    if (g->done || x->ready || gen_aborted(g)) return PLM_OK;
    const int B = (int)g->ctx->params.n_batch, left = x->n_prompt - x->n_fed, m = left < B ? left : B;
    const double t0 = gen_now();
    plm_status st = gen_decode_prompt(g, x->prompt + x->n_fed, m, err);
    g->r->t_prompt_s += gen_now() - t0;
    if (st) {
        g->done = true;
        return st;
    }
    x->n_fed += m;
    if (x->n_fed < x->n_prompt) return PLM_OK;
    keep_logits(x, -1);
    x->ready = true;
    if (x->params.max_tokens == 0) gen_finish(g, PLM_FINISH_LENGTH);
    return PLM_OK;
}

/* The generation ends here: what is held goes out, the clock stops. */
static void end_gen(plm_gen *x, plm_status st) {
    x->g.done = true;
    if (st == PLM_OK) gen_flush_text(&x->g);
    x->g.r->t_gen_s = gen_now() - x->t0;
}

/* Samples x's next token; true (and *t) when it goes on and needs *t
 * evaluated, false when the generation ended. */
static bool step_one(plm_gen *x, plm_token *t, plm_status *st, plm_error *err) {
    gen *g = &x->g;
    if (!x->stepped) x->t0 = gen_now(), x->stepped = true;
    *t = gen_next_token(g);
    if (g->done || !gen_take_token(g, *t, st, err) || (*st = gen_make_room(g, err)) || g->done ||
        gen_aborted(g)) {
        end_gen(x, *st);
        return false;
    }
    return true;
}

plm_status plm_gen_step(plm_gen *const *gens, int n, plm_error *err) {
    if (n <= 0) return PLM_OK;
    plm_token *tokens = malloc((size_t)n * sizeof *tokens);
    plm_seq_id *seqs = malloc((size_t)n * sizeof *seqs);
    plm_gen **who = malloc((size_t)n * sizeof *who);
    plm_status st = PLM_OK;
    if (!tokens || !seqs || !who) st = plm_fail(err, PLM_ERR_NOMEM, "out of memory for a step's batch");
    plm_context *ctx = NULL;
    int m = 0;
    for (int i = 0; i < n && !st; i++) {
        plm_gen *x = gens[i];
        if (!plm_gen_ready(x)) continue;
        if (ctx && x->g.ctx != ctx) st = plm_fail(err, PLM_ERR_INVALID_ARG, "plm_gen_step: generations of two contexts");
        else if (step_one(x, &tokens[m], &st, err)) ctx = x->g.ctx, seqs[m] = x->g.seq, who[m++] = x;
    }
    if (!st && m > 0) st = plm_decode_seqs(ctx, tokens, seqs, m, m, err);
    for (int k = 0; k < m; k++) {
        if (st) end_gen(who[k], st);
        else keep_logits(who[k], k);
    }
    if (st)
        for (int i = 0; i < n; i++)
            if (plm_gen_ready(gens[i])) end_gen(gens[i], st);
    free(tokens);
    free(seqs);
    free(who);
    return st;
}
