/*
 * The smoke test's measurements (include/pocketlm_smoke.h): a base model's
 * greedy answer with the top of its distribution at every position, and a
 * candidate scored against it, teacher-forced through the same tokens.
 *
 * Every position is evaluated as a single-token decode on both sides (the
 * prompt as one plm_decode), so a model scored against its own answer runs
 * exactly the same computations and gets KLD 0 and full agreement.
 */
#include "pocketlm_smoke.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/context.h"
#include "runtime/quality.h"

void plm_smoke_answer_free(plm_smoke_answer *a) {
    if (!a) return;
    free(a->prompt);
    free(a->tokens);
    free(a->top_ids);
    free(a->top_lp);
    memset(a, 0, sizeof *a);
}

void plm_smoke_score_free(plm_smoke_score *s) {
    if (!s) return;
    free(s->kld);
    free(s->answer);
    memset(s, 0, sizeof *s);
}

uint64_t plm_smoke_vocab_fingerprint(const plm_model *model) { return plm_vocab_fingerprint(model); }

/* The k largest logits, largest first (ties: the lower id first, as
 * plm_argmax), as float ln p.  Insertion into a short sorted list: most
 * logits fall below its last entry and cost one comparison. */
static void top_k(const float *logits, int n_vocab, int k, plm_token *ids, float *lp) {
    int n = 0;
    for (int t = 0; t < n_vocab; t++) {
        const float x = logits[t];
        if (n == k && x <= lp[k - 1]) continue;
        int i = n < k ? n++ : k - 1;
        while (i > 0 && lp[i - 1] < x) {
            lp[i] = lp[i - 1];
            ids[i] = ids[i - 1];
            i--;
        }
        lp[i] = x;
        ids[i] = t;
    }
    const double lse = plm_logsumexp(logits, n_vocab);
    for (int i = 0; i < k; i++) lp[i] = (float)((double)lp[i] - lse);
}

double plm_smoke_kld(const plm_token *top_ids, const float *top_lp, int k, const float *logits, int n_vocab) {
    const double lse = plm_logsumexp(logits, n_vocab);
    double kld = 0, p_top = 0, q_top = 0;
    for (int i = 0; i < k; i++) {
        /* the candidate's ln q rounded to float, as the base's ln p was */
        const float lq = (float)((double)logits[top_ids[i]] - lse);
        const double p = exp((double)top_lp[i]);
        kld += p * ((double)top_lp[i] - (double)lq);
        p_top += p;
        q_top += exp((double)lq);
    }
    const double p_rest = 1 - p_top, q_rest = 1 - q_top;
    if (p_rest > 1e-12) kld += p_rest * log(p_rest / (q_rest > 1e-30 ? q_rest : 1e-30));
    return kld > 0 ? kld : 0;
}

static plm_status check_room(plm_context *ctx, int n_prompt, int max_tokens, plm_error *err) {
    if (n_prompt <= 0 || max_tokens <= 0)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "a smoke prompt needs tokens and max_tokens > 0");
    const uint32_t n_ctx = plm_context_n_ctx(ctx);
    if ((uint64_t)n_prompt + (uint64_t)max_tokens > n_ctx)
        return plm_fail(err, PLM_ERR_CONTEXT_FULL, "a prompt of %d tokens and an answer of %d do not fit a context of %u",
                        n_prompt, max_tokens, n_ctx);
    return PLM_OK;
}

static plm_status start(plm_context *ctx, const plm_token *prompt, int n_prompt, plm_error *err) {
    plm_kv_truncate(ctx, 0);
    return plm_decode(ctx, prompt, n_prompt, err);
}

plm_status plm_smoke_generate(plm_context *ctx, const plm_token *prompt, int n_prompt, int max_tokens,
                              plm_smoke_answer *out, plm_error *err) {
    memset(out, 0, sizeof *out);
    plm_status st = check_room(ctx, n_prompt, max_tokens, err);
    if (st) return st;
    const plm_model *model = ctx->model;
    const int n_vocab = plm_model_n_vocab(model), k = n_vocab < PLM_SMOKE_TOP_K ? n_vocab : PLM_SMOKE_TOP_K;
    out->top_k = k;
    out->prompt = malloc((size_t)n_prompt * sizeof *out->prompt);
    out->tokens = malloc((size_t)max_tokens * sizeof *out->tokens);
    out->top_ids = malloc((size_t)max_tokens * (size_t)k * sizeof *out->top_ids);
    out->top_lp = malloc((size_t)max_tokens * (size_t)k * sizeof *out->top_lp);
    if (!out->prompt || !out->tokens || !out->top_ids || !out->top_lp)
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    memcpy(out->prompt, prompt, (size_t)n_prompt * sizeof *prompt);
    out->n_prompt = n_prompt;
    if ((st = start(ctx, prompt, n_prompt, err))) return st;
    for (int i = 0; i < max_tokens; i++) {
        plm_token *ids = out->top_ids + (size_t)i * k;
        top_k(plm_get_logits(ctx, -1), n_vocab, k, ids, out->top_lp + (size_t)i * k);
        const plm_token t = ids[0];
        out->tokens[out->n_tokens++] = t;
        if (plm_token_is_eog(model, t) || i + 1 == max_tokens) break;
        if ((st = plm_decode(ctx, &t, 1, err))) return st;
    }
    return PLM_OK;
}

/* The candidate's own answer: the base's up to the divergence, its own
 * token there, then greedy on from it (the cache is rewound to the
 * divergence first, so nothing teacher-forced after it is seen). */
static plm_status answer_from(plm_context *ctx, const plm_smoke_answer *base, int div, plm_token first,
                              int max_tokens, plm_smoke_score *s, plm_error *err) {
    const plm_model *model = ctx->model;
    const int n_vocab = plm_model_n_vocab(model);
    memcpy(s->answer, base->tokens, (size_t)div * sizeof *s->answer);
    s->n_answer = div;
    plm_kv_truncate(ctx, (uint32_t)(base->n_prompt + div));
    plm_token t = first;
    for (;;) {
        s->answer[s->n_answer++] = t;
        if (plm_token_is_eog(model, t) || s->n_answer == max_tokens) return PLM_OK;
        plm_status st = plm_decode(ctx, &t, 1, err);
        if (st) return st;
        t = plm_argmax(plm_get_logits(ctx, -1), n_vocab);
    }
}

plm_status plm_smoke_score_answer(plm_context *ctx, const plm_smoke_answer *base, int max_tokens,
                                  plm_smoke_score *out, plm_error *err) {
    memset(out, 0, sizeof *out);
    out->first_divergence = -1;
    if (max_tokens < base->n_tokens) max_tokens = base->n_tokens;
    plm_status st = check_room(ctx, base->n_prompt, max_tokens, err);
    if (st) return st;
    const int n_vocab = plm_model_n_vocab(ctx->model);
    if (base->top_k <= 0 || base->top_k > n_vocab)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "the base answer's distributions do not fit this vocabulary");
    for (int i = 0; i < base->n_prompt; i++)
        if (base->prompt[i] < 0 || base->prompt[i] >= n_vocab)
            return plm_fail(err, PLM_ERR_INVALID_ARG, "prompt token %d is outside the vocabulary", base->prompt[i]);
    for (int i = 0; i < base->n_tokens * base->top_k; i++)
        if (base->top_ids[i] < 0 || base->top_ids[i] >= n_vocab)
            return plm_fail(err, PLM_ERR_INVALID_ARG, "token %d is outside the vocabulary", base->top_ids[i]);
    out->kld = malloc(((size_t)base->n_tokens + 1) * sizeof *out->kld);
    out->answer = malloc((size_t)max_tokens * sizeof *out->answer);
    if (!out->kld || !out->answer) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    if ((st = start(ctx, base->prompt, base->n_prompt, err))) return st;
    plm_token diverged_to = -1;
    for (int i = 0; i < base->n_tokens; i++) {
        const float *logits = plm_get_logits(ctx, -1);
        const size_t row = (size_t)i * (size_t)base->top_k;
        const double kld = plm_smoke_kld(base->top_ids + row, base->top_lp + row, base->top_k, logits, n_vocab);
        out->kld[i] = (float)kld;
        out->kld_sum += kld;
        if (kld > out->kld_max) out->kld_max = kld;
        const plm_token mine = plm_argmax(logits, n_vocab);
        if (mine == base->tokens[i]) out->n_same_top++;
        else if (out->first_divergence < 0) out->first_divergence = i, diverged_to = mine;
        out->n_positions++;
        if (i + 1 < base->n_tokens && (st = plm_decode(ctx, &base->tokens[i], 1, err))) return st;
    }
    if (out->first_divergence < 0) {  /* agreed everywhere: the same answer */
        memcpy(out->answer, base->tokens, (size_t)base->n_tokens * sizeof *out->answer);
        out->n_answer = base->n_tokens;
        return PLM_OK;
    }
    return answer_from(ctx, base, out->first_divergence, diverged_to, max_tokens, out, err);
}
