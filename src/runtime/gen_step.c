/*
 * plm_gen: plm_generate's loop a step at a time, so that several
 * generations, each in its own sequence of one context, share every forward
 * pass (a server's slots).  The pieces are generate.c's (runtime/gen.h); this
 * file gathers a step's tokens into one batch (the generating sequences'
 * next tokens and pieces of the prompts being read) and keeps each
 * generation's own logits row between steps.
 *
 * A speculating generation (params.spec) adds, instead of one token, its
 * pending token and its proposals (spec.h's phases): the proposals of all of
 * them are verified in the same pass, each against its own rows, and the
 * tokens a verification accepts are streamed at the start of the next step.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/gen.h"
#include "runtime/spec.h"

struct plm_gen {
    gen g;
    plm_generate_params params;  /* a copy: g.p points here */
    plm_spec *spec;              /* params.spec: speculating, or NULL */
    bool verifying;              /* its rows in the pass under way are a verification */
    int row0;                    /* ... starting at this batch index */
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
    plm_gen *x = calloc(1, sizeof *x);
    if (!x) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for a generation");
    plm_status st = gen_take_params(&x->params, params, err);
    if (!st && (x->spec = x->params.spec)) {
        plm_seq_id sseq;
        const plm_context *sctx = spec_target(x->spec, &sseq);
        if (sctx != ctx || sseq != seq)
            st = plm_fail(err, PLM_ERR_INVALID_ARG,
                          "plm_gen: the speculative decoder follows sequence %d of another context, not sequence %d "
                          "of this one", sseq, seq);
    }
    if (!st) st = gen_begin(&x->g, ctx, seq, prompt, n_prompt, sampler, &x->params, on_piece, result, err);
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

bool plm_gen_done(const plm_gen *x) { return x->g.done; }

static void keep_logits(plm_gen *x, int row) {
    const float *l = plm_get_logits(x->g.ctx, row);
    memcpy(x->logits, l, (size_t)plm_model_n_vocab(x->g.model) * sizeof *x->logits);
    x->g.logits = x->logits;
}

/* The generation ends here: what is held goes out, the clock stops.  The
 * tokens a verification accepted but the generation never took leave the
 * cache, which then holds what plain decoding leaves (all but the last
 * token taken). */
static void end_gen(plm_gen *x, plm_status st) {
    x->g.done = true;
    const int untaken = x->g.n_queue - x->g.q_at;
    if (x->spec && untaken > 0) {
        const uint32_t n_past = plm_seq_n_past(x->g.ctx, x->g.seq);
        plm_seq_truncate(x->g.ctx, x->g.seq, n_past > (uint32_t)untaken ? n_past - (uint32_t)untaken : 0);
        x->g.q_at = x->g.n_queue;
    }
    if (st == PLM_OK && x->ready) gen_flush_text(&x->g);
    if (x->stepped) x->g.r->t_gen_s = gen_now() - x->t0;
}

/* Samples x's next token; true (and *next) when it goes on and needs it
 * evaluated, false (*next untouched) when the generation ended. */
static bool next_of(plm_gen *x, plm_token *next, plm_status *st, plm_error *err) {
    gen *g = &x->g;
    if (!x->stepped) x->t0 = gen_now(), x->stepped = true;
    const plm_token t = gen_next_token(g);
    /* A token from the middle of a verification's queue is in the cache
     * already, and so are those after it: room is made (as generate.c
     * does) only at the queue's last, where the cache holds what plain
     * decoding's would. */
    const bool in_queue = g->q_at < g->n_queue;
    if (g->done || !gen_take_token(g, t, st, err) || (!in_queue && (*st = gen_make_room(g, err))) || g->done ||
        gen_aborted(g)) {
        end_gen(x, *st);
        return false;
    }
    *next = t;
    return true;
}

/* A speculating generation streams what its last verification accepted
 * (all evaluated but the last); the last of those, or at the start a token
 * sampled from the prompt's logits, is its pending token. */
static bool next_of_spec(plm_gen *x, plm_token *next, plm_status *st, plm_error *err) {
    plm_token t;
    do {
        if (!next_of(x, &t, st, err)) return false;
    } while (x->g.q_at < x->g.n_queue);
    *next = t;
    return true;
}

/* The most tokens a verification may hand back: what max_tokens leaves. */
static int spec_room(const plm_gen *x) {
    const int left = x->params.max_tokens < 0 ? SPEC_QUEUE : x->params.max_tokens - x->g.r->n_generated;
    return left < 1 ? 1 : left > SPEC_QUEUE ? SPEC_QUEUE : left;
}

/* One pass under construction.  Tokens that need logits go last (the pass
 * keeps the logits of its last rows): a prompt's final token, then the
 * generating sequences' tokens; each sequence's tokens stay in order. */
typedef struct pass {
    plm_token *tok;
    plm_seq_id *seq;
    plm_gen **who;    /* [i]: whose token i is, for the rows with logits */
    int n;
    int first_exact;  /* the rows from here on need the single-token kernel's logits */
} pass;

static void add(pass *p, plm_gen *x, plm_token t) {
    p->tok[p->n] = t;
    p->seq[p->n] = x->g.seq;
    p->who[p->n++] = x;
}

/* Whether x's rows in this pass are a greedy verification, which must give
 * the single-token kernel's logits bit for bit. */
static bool exact_rows(const plm_gen *x) { return x->verifying && spec_rows_exact(x->spec); }

/* x's rows: its next token, or its pending token and proposals. */
static void add_gen(pass *p, plm_gen *x, plm_token next) {
    x->row0 = p->n;
    if (!x->verifying) {
        add(p, x, next);
        return;
    }
    int m;
    const plm_token *rows = spec_rows(x->spec, &m);
    for (int k = 0; k < m; k++) add(p, x, rows[k]);
}

/* Prompt pieces first (all but each completing prompt's last token), then
 * those last tokens, then the generating sequences' tokens: those that any
 * kernel may compute, then the greedy verifications (so the rows before
 * them keep the batched gemm in the same pass). */
static void build(pass *p, plm_gen *const *gens, int n, const plm_token *next, int *piece) {
    for (int i = 0; i < n; i++)
        for (int k = 0; k < piece[i] - (gens[i]->n_fed + piece[i] == gens[i]->n_prompt); k++)
            add(p, gens[i], gens[i]->prompt[gens[i]->n_fed + k]);
    for (int i = 0; i < n; i++)
        if (piece[i] && gens[i]->n_fed + piece[i] == gens[i]->n_prompt)
            add(p, gens[i], gens[i]->prompt[gens[i]->n_prompt - 1]);
    for (int i = 0; i < n; i++)
        if (next[i] >= 0 && !exact_rows(gens[i])) add_gen(p, gens[i], next[i]);
    p->first_exact = p->n;
    for (int i = 0; i < n; i++)
        if (next[i] >= 0 && exact_rows(gens[i])) add_gen(p, gens[i], next[i]);
}

/* A prompt is whole: a speculating generation's decoder begins there. */
static plm_status become_ready(plm_gen *x, plm_error *err) {
    x->ready = true;
    if (x->params.max_tokens == 0) gen_finish(&x->g, PLM_FINISH_LENGTH);
    if (!x->spec) return PLM_OK;
    spec_restart(x->spec);
    return plm_spec_begin(x->spec, x->prompt, x->n_prompt, err);
}

/* After the pass (its rows from `off` on, when it ran in two parts): the
 * prompt pieces advance, the last n_final of the rows up to `end` (prompts'
 * final tokens) keep their logits and those prompts are ready. */
static plm_status absorb_prompts(pass *p, plm_gen *const *gens, int n, const int *piece, int end, int n_final, int off,
                                 double seconds, plm_error *err) {
    for (int i = 0; i < n; i++) {
        if (!piece[i]) continue;
        gens[i]->n_fed += piece[i];
        gens[i]->g.r->n_prompt += piece[i];
        gens[i]->g.r->t_prompt_s += seconds;
    }
    plm_status st = PLM_OK;
    for (int r = end - n_final; r < end && !st; r++) {
        keep_logits(p->who[r], r - off);
        st = become_ready(p->who[r], err);
    }
    return st;
}

/* ... and the generating sequences' rows, from `from`: verifications accept
 * from theirs, the others keep their row. */
static void absorb_gens(pass *p, plm_gen *const *gens, int n, int from, int off, const spec_pass *sp) {
    spec_pass mine = *sp;
    mine.first = mine.first_proposer = true;  /* the first decoder (proposing) records the pass (its drafting) */
    for (int i = 0; i < n; i++) {
        plm_gen *x = gens[i];
        if (!x->verifying) continue;
        x->verifying = false;
        x->g.q_at = 0;
        int rows;
        spec_rows(x->spec, &rows);
        const bool proposer = rows > 1 && mine.first_proposer;
        mine.first_proposer = proposer;
        spec_accept(x->spec, x->g.smp, x->row0 - off, &mine, x->g.queue, &x->g.n_queue);
        mine.first = false;
        if (proposer) mine.first_proposer = false;
    }
    for (int r = from; r < p->n; r++)
        if (!p->who[r]->spec) keep_logits(p->who[r], r - off);
}

/* Rows [from, to) of the pass in one forward pass, with the logits of the
 * last n_logits (a pass of unfinished prompt pieces still computes one);
 * `exact`: the rows from p->first_exact on by the single-token kernel. */
static plm_status decode_part(plm_context *ctx, const pass *p, int from, int to, int n_logits, bool exact,
                              plm_error *err) {
    const bool rowwise = ctx->fwd.rowwise_matmul;
    const int rowwise_from = ctx->fwd.rowwise_from;
    ctx->fwd.rowwise_matmul = rowwise || exact;
    ctx->fwd.rowwise_from = rowwise || !exact || p->first_exact < from ? 0 : p->first_exact - from;
    plm_status st = plm_decode_seqs(ctx, p->tok + from, p->seq + from, to - from, n_logits ? n_logits : 1, err);
    ctx->fwd.rowwise_matmul = rowwise;
    ctx->fwd.rowwise_from = rowwise_from;
    return st;
}

/* The speculating generations with a pending token prepare their steps
 * (their proposals join the pass); undone if anything fails. */
static plm_status prepare_specs(plm_gen *const *gens, int n, const plm_token *next, int *n_rows, bool *exact,
                                plm_error *err) {
    const int n_seqs = *n_rows;  /* the sequences with a token in the pass: the share of its cost */
    plm_spec **v = malloc((size_t)n * sizeof *v);
    if (!v) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for a step's batch");
    int m = 0;
    plm_status st = PLM_OK;
    for (int i = 0; i < n && !st; i++) {
        plm_gen *x = gens[i];
        if (next[i] < 0 || !x->spec) continue;
        if (!(st = spec_prepare(x->spec, x->g.smp, next[i], spec_room(x), n_seqs, err)))
            v[m++] = x->spec, x->verifying = true;
    }
    if (!st) st = spec_draft_all(v, m, err);
    for (int i = 0; i < n; i++) {
        plm_gen *x = gens[i];
        if (!x->verifying) continue;
        if (st) {
            spec_abandon(x->spec);
            x->verifying = false;
            continue;
        }
        int rows;
        spec_rows(x->spec, &rows);
        *n_rows += rows - 1;
        *exact |= spec_rows_exact(x->spec);
    }
    free(v);
    return st;
}

static void abandon_specs(plm_gen *const *gens, int n) {
    for (int i = 0; i < n; i++)
        if (gens[i]->verifying) spec_abandon(gens[i]->spec), gens[i]->verifying = false;
}

static plm_status run_pass(plm_gen *const *gens, int n, int *piece, plm_token *next, pass *p, plm_error *err) {
    plm_context *ctx = NULL;
    plm_status st = PLM_OK;
    int budget = 0, n_next = 0, n_final = 0;
    for (int i = 0; i < n; i++) next[i] = -1, piece[i] = 0;
    for (int i = 0; i < n && !st; i++) {  /* the generating ones first: their tokens always fit */
        plm_gen *x = gens[i];
        if (x->g.done) continue;
        if (ctx && x->g.ctx != ctx)
            return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_gen_step: generations of two contexts");
        ctx = x->g.ctx;
        budget = (int)ctx->params.n_batch;
        if (x->ready && (x->spec ? next_of_spec(x, &next[i], &st, err) : next_of(x, &next[i], &st, err))) n_next++;
    }
    if (st || !ctx) return st;
    bool exact = false;
    spec_pass sp = {.n_seqs = n_next};
    if ((st = prepare_specs(gens, n, next, &n_next, &exact, err))) return st;
    sp.n_proposed = n_next - sp.n_seqs;
    budget -= n_next;
    for (int i = 0; i < n && budget > 0; i++) {  /* then prompt pieces, in order, while they fit */
        plm_gen *x = gens[i];
        if (x->g.done || x->ready || gen_aborted(&x->g)) continue;
        const int left = x->n_prompt - x->n_fed;
        piece[i] = left < budget ? left : budget;
        budget -= piece[i];
        n_final += x->n_fed + piece[i] == x->n_prompt;
    }
    build(p, gens, n, next, piece);
    if (p->n == 0) return PLM_OK;
    /* Greedy verification takes the single-token kernel (speculative.c's
     * rule); prompt pieces would pay it too, so they then get a pass of
     * their own with the batched kernel. */
    const int n_prompt_rows = p->n - n_next;
    double t0 = gen_now();
    if (exact && n_prompt_rows > 0) {
        st = decode_part(ctx, p, 0, n_prompt_rows, n_final, false, err);
        if (!st) st = absorb_prompts(p, gens, n, piece, n_prompt_rows, n_final, 0, gen_now() - t0, err);
        t0 = gen_now();
        if (!st) st = decode_part(ctx, p, n_prompt_rows, p->n, n_next, true, err);
        sp.seconds = gen_now() - t0;
        if (!st) absorb_gens(p, gens, n, n_prompt_rows, n_prompt_rows, &sp);
    } else {
        st = decode_part(ctx, p, 0, p->n, n_final + n_next, exact, err);
        const double seconds = gen_now() - t0;
        sp.seconds = n_prompt_rows ? -1.0 : seconds;  /* prompt rows in it: no measure of decoding */
        if (!st) st = absorb_prompts(p, gens, n, piece, n_prompt_rows, n_final, 0, seconds, err);
        if (!st) absorb_gens(p, gens, n, n_prompt_rows, 0, &sp);
    }
    if (st) abandon_specs(gens, n);
    return st;
}

plm_status plm_gen_step(plm_gen *const *gens, int n, plm_error *err) {
    if (n <= 0) return PLM_OK;
    int cap = n * SPEC_QUEUE;  /* every generation's token (and proposals), and prompt pieces up to n_batch */
    for (int i = 0; i < n; i++)
        if ((int)gens[i]->g.ctx->params.n_batch + n * SPEC_QUEUE > cap)
            cap = (int)gens[i]->g.ctx->params.n_batch + n * SPEC_QUEUE;
    pass p = {.tok = malloc((size_t)cap * sizeof *p.tok), .seq = malloc((size_t)cap * sizeof *p.seq),
              .who = malloc((size_t)cap * sizeof *p.who)};
    int *piece = malloc((size_t)n * sizeof *piece);
    plm_token *next = malloc((size_t)n * sizeof *next);
    plm_status st = !p.tok || !p.seq || !p.who || !piece || !next
                        ? plm_fail(err, PLM_ERR_NOMEM, "out of memory for a step's batch")
                        : run_pass(gens, n, piece, next, &p, err);
    if (st)  /* the pass failed: every generation in it ends */
        for (int i = 0; i < n; i++)
            if (!gens[i]->g.done && next && piece && (next[i] >= 0 || piece[i] > 0)) end_gen(gens[i], st);
    free(p.tok);
    free(p.seq);
    free(p.who);
    free(piece);
    free(next);
    return st;
}
