/*
 * The generation loop shared by every front end (pocketlm run, the server,
 * an app through the library).
 *
 *   prefill:  the prompt in n_batch pieces, abort polled before each
 *   loop:     next_tokens()  -> the next token: sampled from the logits, or
 *                               the next of those a speculative step accepted
 *                               (plm_spec_step: drafted, verified in one
 *                               forward pass, all but the last evaluated)
 *             for each token: end-of-generation? limit? text out (UTF-8
 *                               holding, stop strings), abort?
 *             advance()      -> make room (context shift) and evaluate it, or
 *                               run the next speculative step from it
 *
 * Text goes out through two holding stages: first whole UTF-8 characters
 * (a byte-fallback token like <0xE2> begins a character the next tokens
 * finish), then the stop-string matcher (stop.c), which holds any tail that
 * could still become a stop string.  Characters are whole before the matcher
 * sees them, and a stop string is whole characters too, so whatever the
 * matcher releases ends on a character boundary.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/params.h"
#include "runtime/gen.h"

/* Bytes of the character a lead byte begins: 1..4, or 0 for a continuation
 * byte or a byte that never begins a character. */
static size_t utf8_char_len(unsigned char c) {
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) return 2;
    if ((c & 0xF0) == 0xE0) return 3;
    if ((c & 0xF8) == 0xF0) return 4;
    return 0;
}

/* How many of s[0..n) can be released now: everything except a trailing
 * character whose lead byte promises more bytes than have arrived.  Invalid
 * bytes are released as they are (holding them could never complete). */
static size_t utf8_releasable(const char *s, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xC0) == 0x80) continue;  /* continuation: look further back */
        size_t need = utf8_char_len(c);
        return need > back ? n - back : n;
    }
    return n;
}

double gen_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void gen_finish(gen *g, plm_finish_reason why) {
    if (g->done) return;
    g->r->finish = why;
    g->done = true;
}

bool gen_aborted(gen *g) {
    if (g->p->abort && g->p->abort(g->p->user)) gen_finish(g, PLM_FINISH_ABORT);
    return g->done;
}

/* Hands matcher output to the caller; notes a completed stop string. */
static void release(gen *g, plm_stop_out o) {
    if (o.len && g->on_piece && !g->on_piece(g->p->user, o.text, o.len)) gen_finish(g, PLM_FINISH_ABORT);
    if (o.stop >= 0) {  /* also when the held tail completes one at the end */
        g->r->stop_index = o.stop;
        g->r->finish = PLM_FINISH_STOP;
        g->done = true;
    }
}

static plm_status grow_work(gen *g, size_t need, plm_error *err) {
    if (need <= g->work_cap) return PLM_OK;
    char *w = realloc(g->work, need);
    if (!w) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for a token's text");
    g->work = w;
    g->work_cap = need;
    return PLM_OK;
}

/* One generated token's text: joined to the held bytes, cut after the last
 * whole character, the rest held for the next token. */
static plm_status emit_token_text(gen *g, plm_token t, plm_error *err) {
    plm_status st = grow_work(g, g->n_held + 256, err);
    if (st) return st;
    memcpy(g->work, g->held, g->n_held);
    int m = plm_token_to_piece(g->model, t, g->work + g->n_held, (int)(g->work_cap - g->n_held), false);
    if (m < 0) {
        if ((st = grow_work(g, g->n_held + (size_t)-m, err))) return st;
        m = plm_token_to_piece(g->model, t, g->work + g->n_held, -m, false);
    }
    if (m <= 0) return PLM_OK;
    size_t n = g->n_held + (size_t)m;
    size_t ok = utf8_releasable(g->work, n);
    g->n_held = n - ok;
    memcpy(g->held, g->work + ok, g->n_held);
    if (ok) release(g, plm_stop_feed(g->stop, g->work, ok));
    return PLM_OK;
}

/* The end: an incomplete character is released as it is, then whatever the
 * matcher still holds.  Nothing more goes out after a stop string or an
 * abort (the caller asked for no more text, or has gone). */
void gen_flush_text(gen *g) {
    if (g->r->finish == PLM_FINISH_STOP || g->r->finish == PLM_FINISH_ABORT) return;
    if (g->n_held) {
        size_t n = g->n_held;
        g->n_held = 0;
        release(g, plm_stop_feed(g->stop, g->held, n));
        if (g->r->finish == PLM_FINISH_STOP || g->r->finish == PLM_FINISH_ABORT) return;
    }
    plm_stop_out o = plm_stop_flush(g->stop);
    if (o.len && g->on_piece) g->on_piece(g->p->user, o.text, o.len);
}

plm_status gen_decode_prompt(gen *g, const plm_token *prompt, int n, plm_error *err) {
    plm_status st = plm_decode_in_seq(g->ctx, g->seq, prompt, n, err);
    if (!st) g->r->n_prompt += n;
    return st;
}

/* Evaluates the prompt n_batch tokens at a time so an abort lands between
 * forward passes even in a long prompt. */
static plm_status prefill(gen *g, const plm_token *prompt, int n, plm_error *err) {
    const int B = (int)g->ctx->params.n_batch > 0 ? (int)g->ctx->params.n_batch : n;
    for (int i = 0; i < n; i += B) {
        if (gen_aborted(g)) return PLM_OK;
        int m = n - i < B ? n - i : B;
        plm_status st = gen_decode_prompt(g, prompt + i, m, err);
        if (st) return st;
    }
    return PLM_OK;
}

/* THE STEP: the next token.  Sampled from the current logits, or, with
 * speculation, the next of the tokens the last step accepted (sampled and
 * accepted into the sampler by plm_spec_step; no single logits row). */
plm_token gen_next_token(gen *g) {
    const float *logits = NULL;
    plm_token t;
    if (g->q_at < g->n_queue) {
        t = g->queue[g->q_at++];
    } else {
        logits = g->logits ? g->logits : plm_get_logits(g->ctx, -1);
        t = plm_sampler_sample(g->smp, logits);
        plm_sampler_accept(g->smp, t);
    }
    if (g->p->on_token && !g->p->on_token(g->p->user, t, logits)) gen_finish(g, PLM_FINISH_ABORT);
    return t;
}

/* Makes room when the context is full: a context shift keeps the first
 * n_keep tokens and drops half of the rest, as llama.cpp's --context-shift. */
plm_status gen_make_room(gen *g, plm_error *err) {
    plm_context *ctx = g->ctx;
    const uint32_t n_ctx = plm_context_n_ctx(ctx), n_past = plm_seq_n_past(ctx, g->seq);
    if (n_past < n_ctx) return PLM_OK;
    if (!g->p->ctx_shift) {
        gen_finish(g, PLM_FINISH_CONTEXT);
        return PLM_OK;
    }
    uint32_t keep = (uint32_t)g->n_keep;
    if (keep >= n_ctx - 1) keep = 0;
    uint32_t drop = (n_past - keep) / 2;
    plm_spec *spec = g->p->spec;
    plm_status st = spec ? plm_spec_kv_shift(spec, keep, drop, err)
                         : plm_kv_seq_shift(&ctx->fwd.kv, g->seq, keep, drop, plm_forward_rerotate, &ctx->fwd, err);
    if (st == PLM_OK) g->r->n_shifts++;
    return st;
}

/* Evaluates a generated token so its logits give the next one; with
 * speculation, runs the next step from it once the queue is empty (the
 * queued tokens but the last are evaluated already). */
static plm_status advance(gen *g, plm_token t, plm_error *err) {
    plm_spec *spec = g->p->spec;
    if (spec && g->q_at < g->n_queue) return PLM_OK;
    plm_status st = gen_make_room(g, err);
    if (st || g->done || gen_aborted(g)) return st;
    if (!spec) return plm_decode(g->ctx, &t, 1, err);
    g->q_at = 0;
    return plm_spec_step(spec, g->smp, t, g->queue, SPEC_QUEUE, &g->n_queue, err);
}

/* Handles one produced token; false when generation ends with it. */
bool gen_take_token(gen *g, plm_token t, plm_status *st, plm_error *err) {
    if (!g->p->ignore_eos && plm_token_is_eog(g->model, t)) {
        gen_finish(g, PLM_FINISH_EOG);
        return false;
    }
    g->r->n_generated++;
    if ((*st = emit_token_text(g, t, err)) || g->done) return false;
    if (g->p->max_tokens >= 0 && g->r->n_generated >= g->p->max_tokens) {
        gen_finish(g, PLM_FINISH_LENGTH);
        return false;
    }
    return true;
}

static plm_status generate_loop(gen *g, plm_error *err) {
    plm_status st = PLM_OK;
    if (g->p->max_tokens == 0) {
        gen_finish(g, PLM_FINISH_LENGTH);
        return PLM_OK;
    }
    while (!g->done) {
        plm_token t = gen_next_token(g);
        if (g->done || !gen_take_token(g, t, &st, err)) break;
        if ((st = advance(g, t, err))) return st;
    }
    return st;
}

static plm_generate_params generate_defaults(void) {
    plm_generate_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.max_tokens = -1;
    p.n_keep = -1;
    return p;
}

void plm_generate_params_init(plm_generate_params *p, size_t struct_size) {
    plm_generate_params d = generate_defaults();
    plm_params_give(p, struct_size, &d, sizeof d);
}

plm_status gen_take_params(plm_generate_params *dst, const plm_generate_params *src, plm_error *err) {
    *dst = generate_defaults();
    return plm_params_take(dst, sizeof *dst, src, "plm_generate_params", err);
}

const char *plm_finish_reason_name(plm_finish_reason r) {
    switch (r) {
    case PLM_FINISH_LENGTH: return "length";
    case PLM_FINISH_EOG: return "eog";
    case PLM_FINISH_STOP: return "stop";
    case PLM_FINISH_ABORT: return "abort";
    case PLM_FINISH_CONTEXT: return "context";
    }
    return "?";
}

static plm_status check_args(plm_context *ctx, plm_seq_id seq, const plm_token *prompt, int n_prompt,
                             plm_sampler *sampler, plm_generate_result *result, plm_error *err) {
    if (!ctx || !sampler || !result || (!prompt && n_prompt))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_generate: context, sampler and result are required");
    if (n_prompt < 1) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_generate: the prompt has no tokens");
    if (seq < 0 || seq >= plm_context_n_seq(ctx))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "sequence %d: the context has %d", seq, plm_context_n_seq(ctx));
    const int n_vocab = plm_model_n_vocab(ctx->model);
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= n_vocab)
            return plm_fail(err, PLM_ERR_INVALID_ARG, "prompt token %d at index %d is outside the vocabulary (0..%d)",
                            prompt[i], i, n_vocab - 1);
    const uint32_t n_past = plm_seq_n_past(ctx, seq);
    if ((uint64_t)n_past + (uint64_t)n_prompt + 1 > plm_context_n_ctx(ctx))
        return plm_fail(err, PLM_ERR_CONTEXT_FULL,
                        "the prompt has %d tokens (%u more cached) but the context holds %u, with one left to generate",
                        n_prompt, n_past, plm_context_n_ctx(ctx));
    return PLM_OK;
}

plm_status gen_begin(gen *g, plm_context *ctx, plm_seq_id seq, const plm_token *prompt, int n_prompt,
                     plm_sampler *sampler, const plm_generate_params *params, plm_piece_cb on_piece,
                     plm_generate_result *result, plm_error *err) {
    memset(g, 0, sizeof *g);
    plm_status st = check_args(ctx, seq, prompt, n_prompt, sampler, result, err);
    if (st) return st;
    memset(result, 0, sizeof *result);
    result->stop_index = -1;
    *g = (gen){.ctx = ctx, .model = ctx->model, .seq = seq, .smp = sampler, .p = params, .on_piece = on_piece,
               .r = result};
    if ((st = plm_stop_create(params->stops, params->stops ? params->n_stops : 0, &g->stop, err))) return st;
    g->n_keep = params->n_keep >= 0 ? params->n_keep : (int)plm_seq_n_past(ctx, seq) + n_prompt;
    for (int i = 0; i < n_prompt; i++) plm_sampler_accept(sampler, prompt[i]);
    return PLM_OK;
}

void gen_end(gen *g) {
    free(g->work);
    plm_stop_free(g->stop);
    g->work = NULL;
    g->stop = NULL;
}

plm_status plm_generate(plm_context *ctx, const plm_token *prompt, int n_prompt, plm_sampler *sampler,
                        const plm_generate_params *params, plm_piece_cb on_piece, plm_generate_result *result,
                        plm_error *err) {
    plm_generate_params p;
    gen g;
    memset(&g, 0, sizeof g);
    plm_status st = gen_take_params(&p, params, err);
    if (!st) st = gen_begin(&g, ctx, 0, prompt, n_prompt, sampler, &p, on_piece, result, err);
    if (st) {
        gen_end(&g);
        return st;
    }
    double t0 = gen_now();
    st = prefill(&g, prompt, n_prompt, err);
    if (st == PLM_OK && !g.done && g.p->spec) st = plm_spec_begin(g.p->spec, prompt, n_prompt, err);
    result->t_prompt_s = gen_now() - t0;
    if (st == PLM_OK && !g.done) {
        t0 = gen_now();
        st = generate_loop(&g, err);
        if (st == PLM_OK) gen_flush_text(&g);
        result->t_gen_s = gen_now() - t0;
    }
    gen_end(&g);
    return st;
}
