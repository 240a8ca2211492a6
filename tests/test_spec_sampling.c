/*
 * Speculative sampling keeps the output distribution: on stories260K (512
 * tokens), the next two tokens after a fixed context, sampled over a fixed
 * set of seeds with speculation, must be distributed as plain sampling's.
 * Proposers: a different model of the same vocabulary (the random fixture:
 * its q is far from p, so the residual max(0, p - q) does most of the work),
 * stories260K itself (q close to p: mostly acceptances), and prompt lookup
 * (one-hot q).  Sampler settings: the full softmax at temperature 1, and the
 * default chain (top-k, top-p, min-p, temperature 0.8) with a repetition
 * penalty.
 *
 * The statistic is a two-sample chi-square per position over tokens seen at
 * least 10 times in both samples together (the rest pooled into one bin); the
 * bound df + 5 sqrt(2 df) + 5 is far in the tail (false alarm ~1e-5 per
 * comparison), and the seeds are fixed, so the test is deterministic.  That
 * the statistic can fail is shown on plain sampling at temperature 1 against
 * temperature 0.8: it must exceed the bound.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocketlm.h"
#include "test.h"

#define N_SEEDS 1500
#define N_POS 2
#define N_VOCAB 512
#define PROMPT "Lily and Tom went to the park. They saw a big dog. Lily and Tom went to the park. They saw"

typedef struct method {
    const char *name;
    plm_model *draft;  /* NULL: plain, or lookup when lookup > 0 */
    int lookup;
} method;

typedef struct counts {
    int n[N_POS][N_VOCAB];
} counts;

static plm_context *new_ctx(plm_model *m) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 1;
    plm_context *c = NULL;
    plm_error err;
    if (plm_context_new(m, &cp, &c, &err)) fprintf(stderr, "context: %s\n", err.message);
    return c;
}

/* Samples N_POS tokens after PROMPT + its greedy next token, once per seed. */
static bool sample_all(plm_model *m, const method *me, plm_sampler_params sp, counts *c, plm_spec_stats *stats) {
    memset(c, 0, sizeof *c);
    plm_error err;
    plm_context *ctx = new_ctx(m), *dctx = me->draft ? new_ctx(me->draft) : NULL;
    int n_prompt = 0;
    plm_token *toks = plm_tokenize_alloc(m, PROMPT, strlen(PROMPT), &n_prompt, true, false);
    plm_spec *spec = NULL;
    bool ok = ctx && toks && (!me->draft || dctx) && plm_decode(ctx, toks, n_prompt, &err) == PLM_OK;
    plm_token t0 = -1;
    if (ok) {
        const float *l = plm_get_logits(ctx, -1);
        t0 = 0;
        for (int v = 1; v < N_VOCAB; v++)
            if (l[v] > l[t0]) t0 = v;
    }
    if (ok && (me->draft || me->lookup)) {
        plm_spec_params p = plm_spec_default_params();
        p.draft_max = 3;
        p.draft_p_min = 0.0f;
        p.adaptive = false;
        p.lookup_ngram = me->lookup;
        ok = plm_spec_new(ctx, dctx, &p, &spec, &err) == PLM_OK;
        if (!ok) fprintf(stderr, "%s: %s\n", me->name, err.message);
    }
    for (uint64_t seed = 1; ok && seed <= N_SEEDS; seed++) {
        plm_kv_truncate(ctx, (uint32_t)n_prompt);
        sp.seed = seed * 7919;
        plm_sampler *smp = plm_sampler_new(m, &sp);
        for (int i = 0; i < n_prompt; i++) plm_sampler_accept(smp, toks[i]);
        plm_sampler_accept(smp, t0);
        plm_token out[N_POS + 4];
        int n = 0;
        if (spec) {
            ok = plm_spec_begin(spec, toks, n_prompt, &err) == PLM_OK;
            plm_token last = t0;
            while (ok && n < N_POS) {
                int m_out;
                ok = plm_spec_step(spec, smp, last, out + n, N_POS - n, &m_out, &err) == PLM_OK;
                n += m_out;
                last = out[n - 1];
            }
        } else {
            plm_token last = t0;
            for (; ok && n < N_POS; n++) {
                ok = plm_decode(ctx, &last, 1, &err) == PLM_OK;
                last = out[n] = plm_sampler_sample(smp, plm_get_logits(ctx, -1));
                plm_sampler_accept(smp, last);
            }
        }
        for (int i = 0; ok && i < N_POS; i++) c->n[i][out[i]]++;
        plm_sampler_free(smp);
    }
    if (spec && stats) plm_spec_get_stats(spec, stats);
    plm_spec_free(spec);
    plm_context_free(dctx);
    plm_context_free(ctx);
    free(toks);
    return ok;
}

/* Two-sample chi-square of position `pos`; *df gets its degrees of freedom. */
static double chi_square(const counts *a, const counts *b, int pos, int *df) {
    double chi = 0.0;
    int bins = 0, pooled_a = 0, pooled_b = 0;
    for (int v = 0; v < N_VOCAB; v++) {
        const int x = a->n[pos][v], y = b->n[pos][v];
        if (x + y >= 10) {
            chi += (double)(x - y) * (x - y) / (x + y);
            bins++;
        } else {
            pooled_a += x;
            pooled_b += y;
        }
    }
    if (pooled_a + pooled_b >= 10) {
        chi += (double)(pooled_a - pooled_b) * (pooled_a - pooled_b) / (pooled_a + pooled_b);
        bins++;
    }
    *df = bins > 1 ? bins - 1 : 1;
    return chi;
}

static double bound(int df) { return df + 5.0 * sqrt(2.0 * df) + 5.0; }

static void compare(const char *what, const counts *plain, const counts *spec) {
    for (int pos = 0; pos < N_POS; pos++) {
        int df;
        const double chi = chi_square(plain, spec, pos, &df);
        CHECK(chi < bound(df), "%s, token %d: chi-square %.1f with %d df exceeds %.1f", what, pos + 1, chi, df,
              bound(df));
        printf("%-40s token %d: chi-square %6.1f, df %3d, bound %6.1f\n", what, pos + 1, chi, df, bound(df));
    }
}

int main(void) {
    plm_error err;
    plm_model_params mp = plm_model_default_params();
    plm_model *stories = NULL, *fixture = NULL;
    REQUIRE(plm_model_load(SHARED("models/stories260K.gguf"), &mp, &stories, &err) == PLM_OK, "%s", err.message);
    REQUIRE(plm_model_load(SHARED("models/fixtures/fixture-llama-Q2_K.gguf"), &mp, &fixture, &err) == PLM_OK, "%s",
            err.message);

    plm_sampler_params full = plm_sampler_default_params();
    full.temperature = 1.0f;
    full.top_k = 0;
    full.top_p = 1.0f;
    full.min_p = 0.0f;
    plm_sampler_params chain = plm_sampler_default_params();
    chain.repeat_penalty = 1.3f;
    const plm_sampler_params settings[2] = {full, chain};
    const char *setting_names[2] = {"temp 1", "default chain + penalty"};

    static counts plain, spec, colder;
    const method plain_m = {"plain", NULL, 0};
    const method methods[3] = {{"other draft", fixture, 0}, {"self draft", stories, 0}, {"lookup", NULL, 2}};

    /* The statistic has power: temperature 1 against 0.8 must fail it. */
    plm_sampler_params cold = full;
    cold.temperature = 0.8f;
    REQUIRE(sample_all(stories, &plain_m, full, &plain, NULL) && sample_all(stories, &plain_m, cold, &colder, NULL),
            "plain sampling");
    int df;
    const double chi = chi_square(&plain, &colder, 0, &df);
    CHECK(chi > bound(df), "temperature 1 vs 0.8: chi-square %.1f (df %d) should exceed %.1f", chi, df, bound(df));
    printf("power check: temperature 1 vs 0.8, token 1: chi-square %.1f, df %d, bound %.1f\n", chi, df, bound(df));

    for (int si = 0; si < 2; si++) {
        REQUIRE(sample_all(stories, &plain_m, settings[si], &plain, NULL), "plain sampling");
        for (int mi = 0; mi < 3; mi++) {
            plm_spec_stats st = {0};
            char what[128];
            snprintf(what, sizeof what, "%s, %s", setting_names[si], methods[mi].name);
            REQUIRE(sample_all(stories, &methods[mi], settings[si], &spec, &st), "%s", what);
            /* (a model drafting for itself at temperature 1 has q = p: every proposal is kept) */
            const bool q_is_p = methods[mi].draft == stories && si == 0;
            /* (the foreign draft's guesses rarely survive: it exercises the residual) */
            const bool foreign = methods[mi].draft == fixture;
            CHECK(st.proposed > N_SEEDS / 2 && (foreign || st.accepted > 0) && (q_is_p || st.accepted < st.proposed),
                  "%s: proposals must be kept and rejected (%llu of %llu kept)", what,
                  (unsigned long long)st.accepted, (unsigned long long)st.proposed);
            printf("%s: %llu of %llu proposals kept\n", what, (unsigned long long)st.accepted,
                   (unsigned long long)st.proposed);
            compare(what, &plain, &spec);
        }
    }
    plm_model_free(fixture);
    plm_model_free(stories);
    return test_summary();
}
