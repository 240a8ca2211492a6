/*
 * The public sequence API and plm_gen, the stepped generation the server's
 * slots run.
 *
 * plm_decode_seqs is held to llama.cpp: the fixture's prompt, decoded in
 * sequence 2 in batches interleaved with unrelated tokens of sequences 0
 * and 1, must give llama.cpp's logits (expected/NAME.logits.f32) at its
 * last position.  plm_gen is held to plm_generate, which the greedy oracle
 * test holds to llama.cpp: three generations stepped together in one
 * context (their decode steps sharing forward passes, their prompts of
 * different lengths read while the others generate) must each give the
 * tokens and text plm_generate gives alone, with the same finish reason —
 * batching must be invisible.  The same holds with speculative decoding in
 * each sequence (the server's slots: a decoder per sequence, every
 * sequence's drafts verified in one pass): with the model as its own draft
 * (a draft context of three sequences, batch-invariant like the model's:
 * it agrees on every token, so every draft must be accepted) and with prompt lookup plus one n-gram
 * cache shared by the three.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pocketlm.h"
#include "expected.h"
#include "test.h"

enum { MAX_TOKENS = 1024, N_GEN = 3, MAX_OUT = 4096 };

typedef struct out {
    char text[MAX_OUT];
    size_t len;
    plm_token tokens[256];
    int n_tokens;
} out;

static bool on_piece(void *user, const char *text, size_t len) {
    out *o = user;
    if (o->len + len < MAX_OUT) memcpy(o->text + o->len, text, len), o->len += len;
    return true;
}

static bool on_token(void *user, plm_token t, const float *logits) {
    (void)logits;
    out *o = user;
    if (o->n_tokens < 256) o->tokens[o->n_tokens++] = t;
    return true;
}

static plm_generate_params gen_params(out *o, int max_tokens, const char *const *stops, int n_stops) {
    plm_generate_params gp = plm_generate_default_params();
    gp.max_tokens = max_tokens;
    gp.stops = stops;
    gp.n_stops = n_stops;
    gp.on_token = on_token;
    gp.user = o;
    return gp;
}

static void check_decode_seqs(plm_model *model, const char *name, const plm_token *prompt, int n) {
    char path[1024];
    const int nv = plm_model_n_vocab(model);
    snprintf(path, sizeof path, "%s/models/expected/%s.logits.f32", PLM_SHARED_DIR, name);
    float *want = expected_read_logits(path, (size_t)n * nv);
    REQUIRE_VOID(want != NULL, "%s: expected logits", name);
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 32;  /* several pieces */
    cp.n_seq = 3;
    plm_context *ctx = NULL;
    plm_error err;
    REQUIRE_VOID(plm_context_new(model, &cp, &ctx, &err) == PLM_OK, "%s", err.message);
    CHECK(plm_context_n_seq(ctx) == 3, "three sequences");
    static plm_token tok[2 * MAX_TOKENS];
    static plm_seq_id seq[2 * MAX_TOKENS];
    int m = 0;
    for (int i = 0; i < n; i++) {  /* junk of sequences 0 and 1 between the prompt's tokens; the last is the prompt's */
        tok[m] = (plm_token)((i * 37 + 11) % nv), seq[m++] = i % 2;
        tok[m] = prompt[i], seq[m++] = 2;
    }
    REQUIRE_VOID(plm_decode_seqs(ctx, tok, seq, m, 1, &err) == PLM_OK, "%s", err.message);
    const float *got = plm_get_logits(ctx, m - 1), *exp = want + (size_t)(n - 1) * nv;
    float worst = 0;
    for (int j = 0; j < nv; j++)
        if (!(fabsf(got[j] - exp[j]) <= worst)) worst = fabsf(got[j] - exp[j]);
    printf("%-20s plm_decode_seqs: max |dlogit| vs llama.cpp %.5f\n", name, worst);
    CHECK(worst <= 0.01f, "%s: last logits differ by %g", name, worst);
    CHECK(plm_seq_n_past(ctx, 2) == (uint32_t)n && plm_seq_n_past(ctx, 0) == (uint32_t)(n + 1) / 2 &&
              plm_seq_n_past(ctx, 1) == (uint32_t)n / 2 && plm_seq_n_past(ctx, 7) == 0,
          "%s: sequence lengths", name);

    /* Refusals name the problem and change nothing. */
    const plm_seq_id bad = 5;
    CHECK(plm_decode_seqs(ctx, prompt, &bad, 1, 1, &err) == PLM_ERR_INVALID_ARG && strstr(err.message, "sequence 5"),
          "unknown sequence: %s", err.message);
    plm_seq_truncate(ctx, 0, 0);
    plm_seq_id s0[300];
    for (int i = 0; i < 300; i++) s0[i] = 0;
    static plm_token many[300];
    CHECK(plm_decode_seqs(ctx, many, s0, 257, 1, &err) == PLM_ERR_CONTEXT_FULL, "overflow: %s", err.message);
    CHECK(plm_seq_n_past(ctx, 0) == 0 && plm_seq_n_past(ctx, 2) == (uint32_t)n, "nothing changed");
    CHECK(plm_seq_copy(ctx, 2, 1, &err) == PLM_OK && plm_seq_n_past(ctx, 1) == (uint32_t)n, "copy");
    plm_context_free(ctx);
    free(want);
}

enum { PLAIN, SPEC_DRAFT, SPEC_LOOKUP };
static const char *const MODE_NAME[] = {"plain", "draft model", "lookup + shared cache"};

/* The three generations stepped together in one context of three sequences,
 * as the server does (mode: plain, or speculating in each sequence), must
 * each give the tokens, text and finish of plm_generate alone. */
static void check_together(plm_model *model, const char *name, const plm_token *prompt, const int *lens,
                           const int *max_tok, const char *const *stop, const out *alone,
                           const plm_generate_result *r_alone, int mode) {
    static out batched[N_GEN];
    memset(batched, 0, sizeof batched);
    plm_generate_result r_batched[N_GEN];
    plm_sampler_params sp = plm_sampler_default_params();
    sp.temperature = 0;
    plm_error err;
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 16;
    cp.n_seq = N_GEN;
    plm_context *ctx = NULL, *dctx = NULL;
    REQUIRE_VOID(plm_context_new(model, &cp, &ctx, &err) == PLM_OK, "%s", err.message);
    if (mode == SPEC_DRAFT) REQUIRE_VOID(plm_context_new(model, &cp, &dctx, &err) == PLM_OK, "%s", err.message);
    plm_spec_params spp = plm_spec_default_params();
    spp.draft_max = 6;
    spp.draft_p_min = 0.0f;
    spp.adaptive = false;  /* always speculate: every step is a verification */
    if (mode == SPEC_LOOKUP) spp.lookup_ngram = 3;
    plm_sampler *smp[N_GEN];
    plm_gen *g[N_GEN];
    plm_spec *spec[N_GEN] = {NULL};
    plm_generate_params gp[N_GEN];
    for (int i = 0; i < N_GEN; i++) {
        if (mode != PLAIN)
            REQUIRE_VOID(plm_spec_new_seq(ctx, i, dctx, i, &spp, i ? spec[0] : NULL, &spec[i], &err) == PLM_OK,
                         "%s", err.message);
        smp[i] = plm_sampler_new(model, &sp);
        gp[i] = gen_params(&batched[i], max_tok[i], i == 2 ? stop : NULL, i == 2);
        gp[i].spec = spec[i];
        REQUIRE_VOID(plm_gen_new(ctx, i, prompt, lens[i], smp[i], &gp[i], on_piece, &r_batched[i], &g[i], &err) ==
                         PLM_OK, "%s", err.message);
    }
    plm_context_set_batch_invariant(ctx, true);
    if (dctx) plm_context_set_batch_invariant(dctx, true);  /* the draft's logits are then the model's own */
    int steps = 0;
    for (bool any = true; any && steps < 1000; steps++) {
        CHECK(plm_gen_step(g, N_GEN, &err) == PLM_OK, "step: %s", err.message);
        any = false;
        for (int i = 0; i < N_GEN; i++) any = any || !plm_gen_done(g[i]);
    }
    uint64_t proposed = 0, accepted = 0;
    for (int i = 0; i < N_GEN; i++) {
        CHECK(plm_gen_done(g[i]), "%s, %s: generation %d ended", name, MODE_NAME[mode], i);
        CHECK(batched[i].n_tokens == alone[i].n_tokens &&
                  !memcmp(batched[i].tokens, alone[i].tokens, (size_t)alone[i].n_tokens * sizeof(plm_token)),
              "%s, %s: generation %d: tokens differ from plm_generate alone (%d vs %d)", name, MODE_NAME[mode], i,
              batched[i].n_tokens, alone[i].n_tokens);
        CHECK(batched[i].len == alone[i].len && !memcmp(batched[i].text, alone[i].text, alone[i].len),
              "%s, %s: generation %d: text differs:\n  alone:   %.*s\n  batched: %.*s", name, MODE_NAME[mode], i,
              (int)alone[i].len, alone[i].text, (int)batched[i].len, batched[i].text);
        CHECK(r_batched[i].finish == r_alone[i].finish && r_batched[i].n_generated == r_alone[i].n_generated &&
                  r_batched[i].n_prompt == lens[i], "%s, %s: generation %d: result", name, MODE_NAME[mode], i);
        /* The cache holds what plain decoding leaves: prompt + all generated but the last. */
        CHECK(plm_seq_n_past(ctx, i) == (uint32_t)(lens[i] + r_alone[i].n_generated - 1) ||
                  r_alone[i].finish != PLM_FINISH_LENGTH,
              "%s, %s: sequence %d holds %u tokens", name, MODE_NAME[mode], i, plm_seq_n_past(ctx, i));
        if (spec[i]) {
            plm_spec_stats st;
            plm_spec_get_stats(spec[i], &st);
            proposed += st.proposed;
            accepted += st.accepted;
        }
        plm_gen_free(g[i]);
        plm_sampler_free(smp[i]);
    }
    if (mode == SPEC_DRAFT)
        CHECK(proposed > 50 && accepted == proposed, "%s: its own draft: %llu of %llu accepted", name,
              (unsigned long long)accepted, (unsigned long long)proposed);
    if (mode == SPEC_LOOKUP) CHECK(proposed > 0, "%s: lookup proposed nothing", name);
    printf("%-20s plm_gen, %s: %d generations in %d steps, same as alone; %llu of %llu drafts accepted\n", name,
           MODE_NAME[mode], N_GEN, steps, (unsigned long long)accepted, (unsigned long long)proposed);
    for (int i = N_GEN - 1; i >= 0; i--) plm_spec_free(spec[i]);
    plm_context_free(dctx);
    plm_context_free(ctx);
}

static void check_gen(plm_model *model, const char *name, const plm_token *prompt, int n) {
    /* Three requests: prompt lengths n, n/2 and n; limits; a stop string. */
    const int lens[N_GEN] = {n, n / 2, n}, max_tok[N_GEN] = {48, 20, 64};
    plm_sampler_params sp = plm_sampler_default_params();
    sp.temperature = 0;
    plm_error err;

    /* Alone: plm_generate in a one-sequence context.  The third request's
     * stop string is a piece from the middle of its text without one. */
    static out alone[N_GEN];
    memset(alone, 0, sizeof alone);
    plm_generate_result r_alone[N_GEN];
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 16;
    char stop_text[8] = "";
    const char *stop[] = {stop_text};
    for (int i = 0; i < N_GEN; i++) {
        plm_context *ctx = NULL;
        plm_sampler *smp = plm_sampler_new(model, &sp);
        REQUIRE_VOID(smp && plm_context_new(model, &cp, &ctx, &err) == PLM_OK, "setup");
        plm_context_set_batch_invariant(ctx, true);
        const plm_generate_params gp = gen_params(&alone[i], max_tok[i], i == 2 ? stop : NULL, i == 2);
        CHECK(plm_generate(ctx, prompt, lens[i], smp, &gp, on_piece, &r_alone[i], &err) == PLM_OK, "%s", err.message);
        plm_context_free(ctx);
        plm_sampler_free(smp);
        if (i == 1) {  /* the third runs with the stop string, its text is the same up to it */
            memcpy(stop_text, alone[0].text + alone[0].len / 2, 4);
            stop_text[4] = '\0';
        }
    }
    CHECK(r_alone[2].finish == PLM_FINISH_STOP, "%s: the stop string %s ends the third", name, stop_text);

    for (int mode = 0; mode < 3; mode++)
        check_together(model, name, prompt, lens, max_tok, stop, alone, r_alone, mode);

    /* Together: one context of three sequences, for the refusals. */
    cp.n_seq = N_GEN;
    plm_context *ctx = NULL;
    REQUIRE_VOID(plm_context_new(model, &cp, &ctx, &err) == PLM_OK, "%s", err.message);
    /* Refusals. */
    plm_gen *bad = NULL;
    plm_sampler *s = plm_sampler_new(model, &sp);
    plm_generate_result r;
    CHECK(plm_gen_new(ctx, N_GEN, prompt, 3, s, NULL, NULL, &r, &bad, &err) == PLM_ERR_INVALID_ARG && !bad,
          "unknown sequence: %s", err.message);
    plm_sampler_free(s);
    plm_context_free(ctx);
}

static void check_fixture(const char *name) {
    char path[1024];
    static plm_token prompt[MAX_TOKENS];
    snprintf(path, sizeof path, "%s/models/expected/%s.tokens", PLM_SHARED_DIR, name);
    const int n = expected_read_tokens(path, prompt, MAX_TOKENS);
    REQUIRE_VOID(n > 40 && n < 200, "%s: tokens", name);
    snprintf(path, sizeof path, "%s/models/fixtures/%s.gguf", PLM_SHARED_DIR, name);
    plm_model *model;
    plm_error err;
    REQUIRE_VOID(plm_model_load(path, NULL, &model, &err) == PLM_OK, "%s: %s", name, err.message);
    check_decode_seqs(model, name, prompt, n);
    check_gen(model, name, prompt, n);
    plm_model_free(model);
}

int main(void) {
    check_fixture("fixture-llama-f16");
    check_fixture("fixture-qwen2-f16");
    return test_summary();
}
