/*
 * Speculative decoding (the API is in pocketlm.h): propose, verify in one
 * target batch, keep the agreeing prefix and the target's own next token.
 *
 * State between steps: the target context holds hist[0..n_hist); `last`,
 * the newest token, is sampled but not decoded.  The draft context holds a
 * prefix of hist (it lags after a pause or a rejection) and catches up at
 * the start of the next step that drafts.  A step:
 *
 *   1. appends `last` to hist, proposes d[0..k) continuing it;
 *   2. decodes [last, d0 .. d(k-1)] in the target with the logits of all
 *      k+1 positions: row i is the target's distribution after d(i-1);
 *   3. walks the rows: greedy keeps d(i) while it is the target's own pick,
 *      and the first disagreement is replaced by that pick; with temperature,
 *      d(i) survives with probability min(1, p/q) and a rejection draws from
 *      max(0, p - q) normalised (q: the draft's distribution, one-hot for a
 *      lookup proposal, which is then "keep with probability p(d(i))");
 *      when every proposal survives, row k gives one more token;
 *   4. truncates both caches after last + the kept proposals.
 *
 * Every token returned went through plm_sampler_accept in order, so the
 * penalties at row i see exactly the history plain decoding would.
 *
 * A decoder follows one sequence of the target context and one of the
 * draft's (a server's slot: its own sequences of contexts every slot
 * shares).  The step runs in phases (runtime/spec.h) so that gen_step.c
 * can verify the steps of several sequences in one target pass; the draft
 * passes of decoders sharing a draft context are batched the same way.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "runtime/context.h"
#include "runtime/lookup.h"
#include "runtime/sampler.h"
#include "runtime/spec.h"
#include "runtime/spec_adapt.h"
#include "tokenizer/internal.h"

/* llama.cpp's speculative example: vocabularies may differ in size by this
 * much, and ids below this are not compared (their special tokens). */
#define VOCAB_MAX_SIZE_DIFF 128
#define VOCAB_CHECK_START 5
#define DRAFT_MAX_LIMIT 64

struct plm_spec {
    plm_context *tgt, *dft;
    plm_seq_id tseq, dseq;  /* the sequences followed in each */
    plm_spec_params p;
    int n_vocab;
    plm_token *hist;  /* tokens the target holds (+ `last` during a step) */
    int n_hist, cap_hist;
    plm_ngram_cache *cache;
    bool cache_owned; /* false: another decoder's, shared (plm_spec_new_seq) */
    int n_learned;    /* hist tokens the cache has counted */
    plm_sampler *dsmp;/* the draft model's sampler, when the target samples with temperature */
    float *q;         /* [draft_max][n_vocab] the draft's distributions (temperature) */
    float *pbuf;      /* [n_vocab] the target's distribution, then the residual */
    plm_token *batch; /* [draft_max + 1] last + proposals */
    plm_seq_id *seqs; /* [draft_max + 1] tseq, for a target pass */
    /* the step in progress (spec_prepare .. spec_accept) */
    int n0, k, n_d;   /* hist before `last`, proposals wanted, proposals made */
    bool greedy, want_draft, draft_timed;
    double t_draft;
    spec_adapt adapt;
    plm_spec_stats st;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

plm_spec_params plm_spec_default_params(void) {
    return (plm_spec_params){.draft_max = 16, .draft_min = 0, .draft_p_min = 0.6f, .lookup_ngram = 0,
                             .lookup_cache = NULL, .adaptive = true, .seed = 42};
}

/* ---- vocabulary compatibility ---------------------------------------------- */

plm_status plm_spec_vocab_compatible(const plm_model *target, const plm_model *draft, plm_error *err) {
    const plm_vocab *a = target->vocab, *b = draft->vocab;
    if (a->type != b->type)
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "draft model: its tokenizer type differs from the target's");
    if (a->add_bos != b->add_bos || a->add_eos != b->add_eos || a->bos != b->bos || a->eos != b->eos)
        return plm_fail(err, PLM_ERR_UNSUPPORTED,
                        "draft model: special tokens differ from the target's (BOS %d/%d, EOS %d/%d, add BOS %d/%d, "
                        "add EOS %d/%d)",
                        a->bos, b->bos, a->eos, b->eos, a->add_bos, b->add_bos, a->add_eos, b->add_eos);
    const int diff = abs(a->n_tokens - b->n_tokens);
    if (diff > VOCAB_MAX_SIZE_DIFF)
        return plm_fail(err, PLM_ERR_UNSUPPORTED,
                        "draft model: vocabulary of %d tokens, the target's %d: more than %d apart", b->n_tokens,
                        a->n_tokens, VOCAB_MAX_SIZE_DIFF);
    const int n = a->n_tokens < b->n_tokens ? a->n_tokens : b->n_tokens;
    for (int i = VOCAB_CHECK_START; i < n; i++) {
        size_t la, lb;
        const char *ta = vocab_text(a, i, &la), *tb = vocab_text(b, i, &lb);
        if (la != lb || memcmp(ta, tb, la) != 0)
            return plm_fail(err, PLM_ERR_UNSUPPORTED, "draft model: token %d is '%.*s' there but '%.*s' in the target", i,
                            (int)(lb < 40 ? lb : 40), tb, (int)(la < 40 ? la : 40), ta);
    }
    return PLM_OK;
}

/* ---- the two sequences -------------------------------------------------------- */

static uint32_t tgt_n_past(const plm_spec *s) { return plm_seq_n_past(s->tgt, s->tseq); }
static uint32_t dft_n_past(const plm_spec *s) { return plm_seq_n_past(s->dft, s->dseq); }
static void tgt_truncate(plm_spec *s, uint32_t pos) { plm_seq_truncate(s->tgt, s->tseq, pos); }
static void dft_truncate(plm_spec *s, uint32_t pos) {
    if (dft_n_past(s) > pos) plm_seq_truncate(s->dft, s->dseq, pos);
}

/* ---- creation ------------------------------------------------------------------ */

static bool reserve_hist(plm_spec *s, int n) {
    if (n <= s->cap_hist) return true;
    int cap = s->cap_hist ? s->cap_hist : 256;
    while (cap < n) cap *= 2;
    plm_token *h = realloc(s->hist, (size_t)cap * sizeof *h);
    if (!h) return false;
    s->hist = h;
    s->cap_hist = cap;
    return true;
}

static plm_status open_cache(plm_spec *s, plm_error *err) {
    s->cache = plm_ngram_cache_new(s->n_vocab);
    if (!s->cache) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for the n-gram cache");
    s->cache_owned = true;
    if (access(s->p.lookup_cache, F_OK) != 0) return PLM_OK;  /* a new cache starts there */
    return plm_ngram_cache_load(s->cache, s->p.lookup_cache, err);
}

static plm_status check_new(plm_context *target, plm_seq_id seq, plm_context *draft, plm_seq_id draft_seq,
                            const plm_spec_params *p, plm_error *err) {
    if (!target) return plm_fail(err, PLM_ERR_INVALID_ARG, "speculative decoding needs a target context");
    if (!draft && p->lookup_ngram <= 0 && !p->lookup_cache)
        return plm_fail(err, PLM_ERR_INVALID_ARG,
                        "speculative decoding needs a proposer: a draft model, prompt lookup or an n-gram cache");
    if (p->draft_max < 1 || p->draft_max > DRAFT_MAX_LIMIT || p->draft_min < 0 || p->draft_min > p->draft_max)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "draft lengths: need 0 <= draft-min <= draft-max and 1 <= draft-max <= %d",
                        DRAFT_MAX_LIMIT);
    if (p->lookup_ngram < 0 || p->lookup_ngram > 64)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "--lookup takes an n-gram length of 1..64");
    if (seq < 0 || seq >= plm_context_n_seq(target))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "sequence %d: the target context has %d", seq,
                        plm_context_n_seq(target));
    if (draft) {
        plm_status st = plm_spec_vocab_compatible(target->model, draft->model, err);
        if (st) return st;
        if (plm_context_n_ctx(draft) < plm_context_n_ctx(target))
            return plm_fail(err, PLM_ERR_INVALID_ARG, "the draft context (%u tokens) is shorter than the target's (%u)",
                            plm_context_n_ctx(draft), plm_context_n_ctx(target));
        if (draft_seq < 0 || draft_seq >= plm_context_n_seq(draft))
            return plm_fail(err, PLM_ERR_INVALID_ARG, "sequence %d: the draft context has %d", draft_seq,
                            plm_context_n_seq(draft));
    }
    return PLM_OK;
}

plm_status plm_spec_new_seq(plm_context *target, plm_seq_id seq, plm_context *draft, plm_seq_id draft_seq,
                            const plm_spec_params *params, plm_spec *cache_of, plm_spec **out, plm_error *err) {
    *out = NULL;
    const plm_spec_params p = params ? *params : plm_spec_default_params();
    plm_status st = check_new(target, seq, draft, draft_seq, &p, err);
    if (st) return st;
    plm_spec *s = calloc(1, sizeof *s);
    if (!s) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    s->tgt = target;
    s->dft = draft;
    s->tseq = seq;
    s->dseq = draft_seq;
    s->p = p;
    s->n_vocab = plm_model_n_vocab(target->model);
    const int dv = draft ? plm_model_n_vocab(draft->model) : 0;
    const int vmax = dv > s->n_vocab ? dv : s->n_vocab;
    s->pbuf = malloc((size_t)vmax * sizeof *s->pbuf);
    s->batch = malloc((size_t)(p.draft_max + 1) * sizeof *s->batch);
    s->seqs = malloc((size_t)(p.draft_max + 1) * sizeof *s->seqs);
    if (draft) s->q = malloc((size_t)p.draft_max * vmax * sizeof *s->q);
    st = (!s->pbuf || !s->batch || !s->seqs || (draft && !s->q) || !reserve_hist(s, 256))
             ? plm_fail(err, PLM_ERR_NOMEM, "out of memory")
             : PLM_OK;
    if (!st && cache_of) s->cache = cache_of->cache;  /* shared: learned by all, freed by its owner */
    else if (!st && p.lookup_cache) st = open_cache(s, err);
    if (st) {
        plm_spec_free(s);
        return st;
    }
    for (int i = 0; i <= p.draft_max; i++) s->seqs[i] = seq;
    spec_adapt_init(&s->adapt, p.draft_max);
    if (cache_of) spec_adapt_share_costs(&s->adapt, &cache_of->adapt);  /* one server's slots: the same passes */
    if (!p.adaptive) s->adapt.pause_left = 0;
    *out = s;
    return PLM_OK;
}

plm_status plm_spec_new(plm_context *target, plm_context *draft, const plm_spec_params *params, plm_spec **out,
                        plm_error *err) {
    return plm_spec_new_seq(target, 0, draft, 0, params, NULL, out, err);
}

void plm_spec_free(plm_spec *s) {
    if (!s) return;
    if (s->cache_owned) plm_ngram_cache_free(s->cache);
    plm_sampler_free(s->dsmp);
    free(s->hist);
    free(s->q);
    free(s->pbuf);
    free(s->batch);
    free(s->seqs);
    free(s);
}

void spec_restart(plm_spec *s) {
    if (s->p.adaptive) spec_adapt_new_request(&s->adapt);
    plm_sampler_free(s->dsmp);
    s->dsmp = NULL;
}

plm_context *spec_target(const plm_spec *s, plm_seq_id *seq) {
    *seq = s->tseq;
    return s->tgt;
}

/* The cache counts every hist token it has not seen yet. */
static void learn(plm_spec *s) {
    if (!s->cache) return;
    for (int i = s->n_learned + 1; i <= s->n_hist; i++) plm_ngram_cache_add(s->cache, s->hist, i);
    s->n_learned = s->n_hist;
}

/* tokens may be only the newest of what the target holds, after the first
 * n_past - n: those are the ones this decoder followed before (a chat's
 * next turn keeps a prefix of the conversation cached and evaluates the
 * rest), so its own record of them stands in. */
plm_status plm_spec_begin(plm_spec *s, const plm_token *tokens, int n, plm_error *err) {
    const uint32_t n_past = tgt_n_past(s);
    if (n < 0 || (uint32_t)n > n_past)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_spec_begin: %d tokens given, the target context holds %u", n,
                        n_past);
    const int head = (int)n_past - n;
    if (head > s->n_hist)
        return plm_fail(err, PLM_ERR_INVALID_ARG,
                        "plm_spec_begin: %d tokens given, the target context holds %u and this decoder followed only "
                        "%d: give all of them", n, n_past, s->n_hist);
    if (!reserve_hist(s, (int)n_past + 1)) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    /* The draft keeps what it shares with the new sequence (a chat's earlier turns). */
    int same = head;
    while (same < (int)n_past && same < s->n_hist && s->hist[same] == tokens[same - head]) same++;
    if (s->dft) dft_truncate(s, (uint32_t)same);
    if (n) memcpy(s->hist + head, tokens, (size_t)n * sizeof *tokens);
    s->n_hist = (int)n_past;
    s->n_learned = same < s->n_learned ? same : s->n_learned;
    learn(s);
    return PLM_OK;
}

/* ---- proposers ----------------------------------------------------------------- */

/* Probability of the most likely token under softmax(logits). */
static float top_probability(const float *logits, int n) {
    float max = logits[0];
    for (int i = 1; i < n; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp((double)logits[i] - max);
    return (float)(1.0 / sum);
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* The draft's next proposal from its logits row: greedily when the target
 * is greedy, else sampled from its own distribution (kept in s->q for the
 * acceptance rule).  -1: it stops (unsure, or a token only the draft has). */
static plm_token draft_pick(plm_spec *s, const float *logits) {
    const int dv = plm_model_n_vocab(s->dft->model);
    plm_token t;
    if (s->greedy) {
        if (top_probability(logits, dv) < s->p.draft_p_min) return -1;
        t = argmax(logits, dv);
    } else {
        float *q = s->q + (size_t)s->n_d * dv;
        plm_token best = plm_sampler_dist(s->dsmp, logits, q);
        if (q[best] < s->p.draft_p_min) return -1;
        t = plm_sampler_draw(s->dsmp, q, dv);
    }
    return t < 0 || t >= s->n_vocab ? -1 : t;
}

typedef struct draft_batch {
    plm_token *tok;
    plm_seq_id *seq;
    int *row;     /* [m]: each decoder's logits row in the last pass; -1 when it stopped */
} draft_batch;

/* The catch-up pass: each decoder's draft sequence reads the history it
 * lacks (after a rejection: nothing but `last`; a new prompt: all of it),
 * the tokens with logits (each one's `last`) at the end.  *timed: false
 * when one read a whole prompt (its prefill, paid once); catching up after
 * a pause is timed, as part of what drafting costs. */
static plm_status draft_catch_up(plm_spec *const *g, int m, draft_batch *b, bool *timed, plm_error *err) {
    int total = 0;
    *timed = true;
    for (int i = 0; i < m; i++) {
        plm_spec *s = g[i];
        dft_truncate(s, (uint32_t)s->n_hist - 1);
        const int from = (int)dft_n_past(s);
        if (from == 0) *timed = false;
        total += s->n_hist - from;
    }
    b->tok = malloc((size_t)total * sizeof *b->tok);
    b->seq = malloc((size_t)total * sizeof *b->seq);
    b->row = malloc((size_t)m * sizeof *b->row);
    if (!b->tok || !b->seq || !b->row) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for the draft's batch");
    int n = 0;
    for (int i = 0; i < m; i++)
        for (int t = (int)dft_n_past(g[i]); t < g[i]->n_hist - 1; t++) b->tok[n] = g[i]->hist[t], b->seq[n++] = g[i]->dseq;
    for (int i = 0; i < m; i++) {
        b->row[i] = n;
        b->tok[n] = g[i]->hist[g[i]->n_hist - 1];
        b->seq[n++] = g[i]->dseq;
    }
    return plm_decode_seqs(g[0]->dft, b->tok, b->seq, n, m, err);
}

/* The draft model runs ahead for decoders g[0..m) of one draft context: a
 * catch-up pass, then one pass per proposal with the next token of every
 * decoder still drafting. */
static plm_status draft_group(plm_spec *const *g, int m, plm_error *err) {
    plm_context *dctx = g[0]->dft;
    const double t0 = now_s();
    draft_batch b = {0};
    bool timed;
    plm_status st = draft_catch_up(g, m, &b, &timed, err);
    while (!st) {
        int n = 0;
        for (int i = 0; i < m; i++) {
            plm_spec *s = g[i];
            if (b.row[i] < 0) continue;
            const plm_token t = draft_pick(s, plm_get_logits(dctx, b.row[i]));
            b.row[i] = -1;
            if (t < 0) continue;
            s->batch[1 + s->n_d++] = t;
            if (s->n_d == s->k) continue;
            b.row[i] = n;
            b.tok[n] = t;
            b.seq[n++] = s->dseq;
        }
        if (n == 0) break;
        st = plm_decode_seqs(dctx, b.tok, b.seq, n, n, err);
    }
    /* Each decoder is charged its share of the passes, by proposals made:
     * what one more drafted token costs when the passes are shared. */
    const double t = now_s() - t0;
    int made = 0;
    for (int i = 0; i < m; i++) made += g[i]->n_d;
    for (int i = 0; i < m; i++) {
        g[i]->want_draft = false;
        g[i]->t_draft = made ? t * g[i]->n_d / made : t;
        g[i]->draft_timed = timed;
        if (st || g[i]->n_d < g[i]->p.draft_min) g[i]->n_d = 0;
    }
    free(b.tok);
    free(b.seq);
    free(b.row);
    return st;
}

plm_status spec_draft_all(plm_spec *const *v, int n, plm_error *err) {
    plm_spec **g = malloc((size_t)(n > 0 ? n : 1) * sizeof *g);
    if (!g) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for the draft's batch");
    plm_status st = PLM_OK;
    for (int i = 0; i < n && !st; i++) {  /* one group per draft context */
        if (!v[i]->want_draft) continue;
        int m = 0;
        for (int j = i; j < n; j++)
            if (v[j]->want_draft && v[j]->dft == v[i]->dft) g[m++] = v[j];
        st = draft_group(g, m, err);
    }
    for (int i = 0; i < n && st; i++) v[i]->want_draft = false, v[i]->n_d = 0;
    free(g);
    return st;
}

static int lookup_propose(plm_spec *s, int k, plm_token *d) {
    int n = 0;
    if (s->p.lookup_ngram > 0) n = plm_lookup_propose(s->hist, s->n_hist, 1, s->p.lookup_ngram, d, k);
    if (n == 0 && s->cache) n = plm_ngram_cache_propose(s->cache, s->hist, s->n_hist, d, k);
    return n;
}

/* A sampler for the draft with the target's settings but no penalties (the
 * acceptance rule holds for any q the proposals are really drawn from). */
static plm_status ensure_draft_sampler(plm_spec *s, const plm_sampler *smp, plm_error *err) {
    if (s->dsmp) return PLM_OK;
    plm_sampler_params sp = *plm_sampler_params_of(smp);
    sp.repeat_penalty = 1.0f;
    sp.presence_penalty = sp.frequency_penalty = 0.0f;
    sp.seed = s->p.seed ^ (sp.seed * 0x9E3779B97F4A7C15ull);  /* differs with the target's seed */
    s->dsmp = plm_sampler_new(s->dft->model, &sp);
    return s->dsmp ? PLM_OK : plm_fail(err, PLM_ERR_NOMEM, "out of memory");
}

/* ---- verification ------------------------------------------------------------ */

/* Whether the target keeps proposal d at row `logits`; if not, *t is the
 * token it takes instead.  `q`: the draft's distribution, NULL for one-hot. */
static bool keep_proposal(plm_spec *s, plm_sampler *smp, bool greedy, const float *logits, plm_token d,
                          const float *q, int q_len, plm_token *t) {
    if (greedy) {
        *t = plm_sampler_sample(smp, logits);
        return *t == d;
    }
    float *p = s->pbuf;
    plm_sampler_dist(smp, logits, p);
    const double u = plm_sampler_uniform(smp);
    const double qd = q ? q[d] : 1.0;
    if (u * qd < p[d]) {
        *t = d;
        return true;
    }
    /* The residual max(0, p - q), drawn from (plm_sampler_draw normalises). */
    if (q)
        for (int v = 0; v < s->n_vocab && v < q_len; v++) p[v] = p[v] > q[v] ? p[v] - q[v] : 0.0f;
    else
        p[d] = 0.0f;
    *t = plm_sampler_draw(smp, p, s->n_vocab);
    if (*t < 0) *t = plm_sampler_sample(smp, logits);  /* p == q: cannot reject, but rounding did */
    return false;
}

static plm_status check_in_step(const plm_spec *s, plm_error *err) {
    if (tgt_n_past(s) != (uint32_t)s->n_hist)
        return plm_fail(err, PLM_ERR_INVALID_ARG,
                        "the target context holds %u tokens but the speculative decoder followed %d: call "
                        "plm_spec_begin after changing the context yourself",
                        tgt_n_past(s), s->n_hist);
    return PLM_OK;
}

plm_status spec_prepare(plm_spec *s, plm_sampler *smp, plm_token last, int max_out, int n_seqs, plm_error *err) {
    s->k = s->n_d = 0;
    s->want_draft = false;
    if (!smp || max_out < 1) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_spec_step needs a sampler and room for a token");
    plm_status st = check_in_step(s, err);
    if (st) return st;
    if (last < 0 || last >= s->n_vocab)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "token %d is outside the vocabulary", last);
    const uint32_t n_ctx = plm_context_n_ctx(s->tgt);
    if ((uint32_t)s->n_hist >= n_ctx)
        return plm_fail(err, PLM_ERR_CONTEXT_FULL, "context full: %d tokens cached of %u", s->n_hist, n_ctx);
    if (!reserve_hist(s, s->n_hist + 1 + s->p.draft_max)) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    s->greedy = plm_sampler_params_of(smp)->temperature <= 0.0f;
    if (s->dft && !s->greedy && (st = ensure_draft_sampler(s, smp, err))) return st;

    s->n0 = s->n_hist;
    s->hist[s->n_hist++] = last;
    s->batch[0] = last;
    int k = s->p.adaptive ? spec_adapt_next_k(&s->adapt, n_seqs) : s->p.draft_max;
    if (k > s->p.draft_max) k = s->p.draft_max;
    if (k > (int)(n_ctx - (uint32_t)s->n0 - 1)) k = (int)(n_ctx - (uint32_t)s->n0 - 1);
    if (k > max_out - 1) k = max_out - 1;
    s->k = k > 0 ? k : 0;
    s->draft_timed = true;
    s->t_draft = 0.0;
    if (s->k > 0 && s->dft) {
        s->want_draft = true;
    } else if (s->k > 0) {
        const double t0 = now_s();
        s->n_d = lookup_propose(s, s->k, s->batch + 1);
        if (s->n_d < s->p.draft_min) s->n_d = 0;
        s->t_draft = now_s() - t0;
    }
    return PLM_OK;
}

const plm_token *spec_rows(const plm_spec *s, int *n) {
    *n = s->n_d + 1;
    return s->batch;
}

/* Greedy output must be plain decoding's token for token: the verified rows
 * then get the single-token kernel's logits bit for bit.  Sampling only
 * needs the distribution, which 1e-6 of rounding does not move, so it keeps
 * the faster batched kernel. */
bool spec_rows_exact(const plm_spec *s) { return s->greedy && s->n_d > 0; }

void spec_abandon(plm_spec *s) {
    s->n_hist = s->n0;
    tgt_truncate(s, (uint32_t)s->n0);
    if (s->dft) dft_truncate(s, (uint32_t)s->n0);
    s->k = s->n_d = 0;
    s->want_draft = false;
}

void spec_accept(plm_spec *s, plm_sampler *smp, int first_row, const spec_pass *pass, plm_token *out, int *n_out) {
    const double t1 = now_s();
    *n_out = 0;
    int n_acc = 0;
    const plm_token *d = s->batch + 1;
    const int n_d = s->n_d;
    const int dv = s->dft ? plm_model_n_vocab(s->dft->model) : 0;
    for (;;) {
        const float *logits = plm_get_logits(s->tgt, first_row + n_acc);
        plm_token t;
        if (n_acc == n_d) {
            t = plm_sampler_sample(smp, logits);
        } else if (keep_proposal(s, smp, s->greedy, logits, d[n_acc],
                                 s->q && !s->greedy ? s->q + (size_t)n_acc * dv : NULL, dv, &t)) {
            plm_sampler_accept(smp, t);
            out[(*n_out)++] = t;
            s->hist[s->n_hist++] = t;
            n_acc++;
            continue;
        }
        plm_sampler_accept(smp, t);
        out[(*n_out)++] = t;
        break;
    }
    spec_pass timed = *pass;
    if (timed.seconds >= 0.0) timed.seconds += now_s() - t1;

    /* drop what was not kept */
    tgt_truncate(s, (uint32_t)s->n_hist);
    if (s->dft) dft_truncate(s, (uint32_t)s->n_hist);
    learn(s);
    s->st.steps++;
    s->st.generated += (uint64_t)*n_out;
    if (n_d > 0) {
        s->st.verifications++;
        s->st.proposed += (uint64_t)n_d;
        s->st.accepted += (uint64_t)n_acc;
    }
    if (s->k == 0) s->st.paused_steps++;
    if (s->p.adaptive) spec_adapt_record(&s->adapt, n_d, n_acc, s->t_draft, s->draft_timed, &timed);
    s->st.draft_len = s->p.adaptive ? s->adapt.k : s->p.draft_max;
    s->k = s->n_d = 0;
}

plm_status plm_spec_step(plm_spec *s, plm_sampler *smp, plm_token last, plm_token *out, int max_out, int *n_out,
                         plm_error *err) {
    *n_out = 0;
    plm_status st = spec_prepare(s, smp, last, max_out, 1, err);
    if (st) return st;
    if (s->want_draft && (st = spec_draft_all(&s, 1, err))) {
        spec_abandon(s);
        return st;
    }
    int n;
    const plm_token *rows = spec_rows(s, &n);
    const double t0 = now_s();
    s->tgt->fwd.rowwise_matmul = spec_rows_exact(s);
    st = plm_decode_seqs(s->tgt, rows, s->tseq ? s->seqs : NULL, n, n, err);
    s->tgt->fwd.rowwise_matmul = false;
    if (st) {
        spec_abandon(s);
        return st;
    }
    const spec_pass pass = {.n_seqs = 1, .n_proposed = n - 1, .seconds = now_s() - t0, .first = true,
                            .first_proposer = true};
    spec_accept(s, smp, 0, &pass, out, n_out);
    return PLM_OK;
}

/* ---- the rest -------------------------------------------------------------------- */

plm_status plm_spec_kv_shift(plm_spec *s, uint32_t n_keep, uint32_t n_discard, plm_error *err) {
    plm_status st = check_in_step(s, err);
    if (st || (st = plm_kv_seq_shift(&s->tgt->fwd.kv, s->tseq, n_keep, n_discard, plm_forward_rerotate, &s->tgt->fwd,
                                     err)))
        return st;
    if (s->dft) {
        const uint32_t have = dft_n_past(s);
        if (have >= n_keep + n_discard)
            st = plm_kv_seq_shift(&s->dft->fwd.kv, s->dseq, n_keep, n_discard, plm_forward_rerotate, &s->dft->fwd, err);
        else dft_truncate(s, n_keep);
        if (st) plm_seq_truncate(s->dft, s->dseq, 0);
    }
    memmove(s->hist + n_keep, s->hist + n_keep + n_discard, (size_t)(s->n_hist - (int)(n_keep + n_discard)) * sizeof *s->hist);
    s->n_hist -= (int)n_discard;
    s->n_learned = s->n_hist;  /* the seam is no phrase anyone wrote */
    return PLM_OK;
}

plm_status plm_spec_save_cache(plm_spec *s, plm_error *err) {
    if (!s->cache || !s->cache_owned) return PLM_OK;
    return plm_ngram_cache_save(s->cache, s->p.lookup_cache, err);
}

void plm_spec_get_stats(const plm_spec *s, plm_spec_stats *out) {
    *out = s->st;
    out->draft_len = s->p.adaptive ? s->adapt.k : s->p.draft_max;
}
