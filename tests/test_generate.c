/*
 * plm_generate: whole UTF-8 characters out of byte-fallback tokens, stop
 * strings across pieces, aborts between prefill batches, limits, a full
 * context with and without a shift, and the same text as the hand-written
 * loop it replaced (sample -> accept -> decode) for greedy and seeded runs.
 * End-of-generation tokens.  Sampler parameter validation lives here too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pocketlm.h"
#include "test.h"

#define STORIES SHARED("models/stories260K.gguf")

typedef struct capture {
    char *text;
    size_t len, cap;
    size_t *ends;      /* byte offset where each piece ended */
    int n_pieces, cap_pieces;
    plm_token *toks;
    int n_toks, cap_toks;
    int abort_after;   /* abort() returns true at this call (0 = never) */
    int abort_calls;
} capture;

static bool on_piece(void *user, const char *t, size_t n) {
    capture *c = user;
    if (c->len + n + 1 > c->cap) {
        c->cap = (c->len + n + 1) * 2;
        c->text = realloc(c->text, c->cap);
    }
    memcpy(c->text + c->len, t, n);
    c->len += n;
    c->text[c->len] = '\0';
    if (c->n_pieces == c->cap_pieces) {
        c->cap_pieces = c->cap_pieces ? c->cap_pieces * 2 : 64;
        c->ends = realloc(c->ends, (size_t)c->cap_pieces * sizeof *c->ends);
    }
    c->ends[c->n_pieces++] = c->len;
    return true;
}

static bool on_token(void *user, plm_token t, const float *logits) {
    capture *c = user;
    (void)logits;
    if (c->n_toks == c->cap_toks) {
        c->cap_toks = c->cap_toks ? c->cap_toks * 2 : 64;
        c->toks = realloc(c->toks, (size_t)c->cap_toks * sizeof *c->toks);
    }
    c->toks[c->n_toks++] = t;
    return true;
}

static bool on_abort(void *user) {
    capture *c = user;
    return ++c->abort_calls == c->abort_after;
}

static void capture_free(capture *c) {
    free(c->text);
    free(c->ends);
    free(c->toks);
}

static plm_context *new_ctx(plm_model *m, uint32_t n_ctx, uint32_t n_batch) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = 1;
    plm_context *ctx = NULL;
    plm_error err;
    if (plm_context_new(m, &cp, &ctx, &err)) fprintf(stderr, "context: %s\n", err.message);
    return ctx;
}

static plm_sampler *new_sampler(plm_model *m, float temp, uint64_t seed) {
    plm_sampler_params sp = plm_sampler_default_params();
    sp.temperature = temp;
    sp.seed = seed;
    if (temp > 1.0f) sp.top_k = 0, sp.top_p = 1.0f, sp.min_p = 0.0f;  /* near uniform: many byte tokens */
    return plm_sampler_new(m, &sp);
}

/* Runs plm_generate on `prompt` in a fresh context. */
static plm_status gen(plm_model *m, const char *prompt, plm_context *ctx, plm_sampler *s,
                      plm_generate_params *gp, capture *c, plm_generate_result *r) {
    int n = 0;
    plm_token *toks = plm_tokenize_alloc(m, prompt, strlen(prompt), &n, true, false);
    gp->user = c;
    gp->on_token = on_token;
    plm_error err;
    plm_status st = plm_generate(ctx, toks, n, s, gp, on_piece, r, &err);
    if (st) fprintf(stderr, "plm_generate: %s\n", err.message);
    free(toks);
    return st;
}

/* Length of the valid UTF-8 character (RFC 3629: no overlongs, no
 * surrogates, <= U+10FFFF) starting at s, or 0 when there is none. */
static int valid_char_len(const unsigned char *s, size_t n) {
    if (s[0] < 0x80) return 1;
    int len = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    if (!len || (size_t)len > n) return 0;
    for (int i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (s[0] == 0xE0 && s[1] < 0xA0) return 0;
    if (s[0] == 0xED && s[1] > 0x9F) return 0;
    if (s[0] == 0xF0 && s[1] < 0x90) return 0;
    if (s[0] == 0xF4 && s[1] > 0x8F) return 0;
    return len;
}

/* Near-uniform sampling over stories260K's 512 tokens, half of them byte
 * tokens (<0xE2>...): many valid multi-byte characters come out split over
 * two or more tokens.  No valid character may straddle two pieces, and the
 * pieces together are exactly the tokens' bytes. */
static void test_utf8_whole_characters(plm_model *m) {
    plm_context *ctx = new_ctx(m, 1024, 64);
    plm_sampler *s = new_sampler(m, 50.0f, 1234);
    REQUIRE_VOID(ctx && s, "context and sampler");
    capture c = {0};
    plm_generate_params gp = plm_generate_default_params();
    gp.max_tokens = 900;
    gp.ignore_eos = true;
    plm_generate_result r;
    REQUIRE_VOID(gen(m, "Once upon a time", ctx, s, &gp, &c, &r) == PLM_OK, "generate");
    CHECK(r.finish == PLM_FINISH_LENGTH && r.n_generated == 900, "finish %s after %d",
          plm_finish_reason_name(r.finish), r.n_generated);

    /* The bytes of every sampled token, and where each token's bytes end. */
    size_t cap = 64 * (size_t)c.n_toks + 1, len = 0;
    char *all = malloc(cap);
    size_t *tok_end = malloc((size_t)c.n_toks * sizeof *tok_end);
    for (int i = 0; i < c.n_toks; i++) {
        int k = plm_token_to_piece(m, c.toks[i], all + len, (int)(cap - len), false);
        if (k > 0) len += (size_t)k;
        tok_end[i] = len;
    }
    CHECK(c.n_toks == 900, "on_token saw %d tokens", c.n_toks);
    CHECK(c.len == len && !memcmp(c.text, all, len), "pieces (%zu bytes) are the tokens' bytes (%zu)", c.len, len);

    int split_by_tokens = 0, split_by_pieces = 0;
    const unsigned char *u = (const unsigned char *)c.text;
    for (size_t i = 0; i < c.len;) {
        int k = valid_char_len(u + i, c.len - i);
        if (k <= 1) {
            i++;
            continue;
        }
        for (int t = 0; t < c.n_toks; t++)
            if (tok_end[t] > i && tok_end[t] < i + (size_t)k) {
                split_by_tokens++;
                break;
            }
        for (int p = 0; p < c.n_pieces; p++)
            if (c.ends[p] > i && c.ends[p] < i + (size_t)k) split_by_pieces++;
        i += (size_t)k;
    }
    CHECK(split_by_tokens >= 1, "the run must split characters over tokens to test anything (%d)", split_by_tokens);
    CHECK(split_by_pieces == 0, "%d characters straddle two pieces", split_by_pieces);
    printf("utf8: %d tokens, %d pieces, %d characters split over tokens, none over pieces\n", c.n_toks,
           c.n_pieces, split_by_tokens);
    free(all);
    free(tok_end);
    capture_free(&c);
    plm_sampler_free(s);
    plm_context_free(ctx);
}

/* The loop plm_generate replaced, spelled out: it must give the same text. */
static char *reference_loop(plm_model *m, const char *prompt, float temp, uint64_t seed, int n_gen) {
    plm_context *ctx = new_ctx(m, 512, 512);
    plm_sampler *s = new_sampler(m, temp, seed);
    int n = 0;
    plm_token *toks = plm_tokenize_alloc(m, prompt, strlen(prompt), &n, true, false);
    for (int i = 0; i < n; i++) plm_sampler_accept(s, toks[i]);
    plm_error err;
    char *out = calloc(1, 64 * (size_t)n_gen + 1);
    size_t len = 0;
    if (plm_decode(ctx, toks, n, &err) == PLM_OK)
        for (int i = 0; i < n_gen; i++) {
            plm_token t = plm_sampler_sample(s, plm_get_logits(ctx, -1));
            plm_sampler_accept(s, t);
            int k = plm_token_to_piece(m, t, out + len, 64, false);
            if (k > 0) len += (size_t)k;
            if (i + 1 < n_gen && plm_decode(ctx, &t, 1, &err)) break;
        }
    free(toks);
    plm_sampler_free(s);
    plm_context_free(ctx);
    return out;
}

static void test_same_as_reference_loop(plm_model *m) {
    const float temps[] = {0.0f, 0.8f, 50.0f};
    for (int i = 0; i < 3; i++) {
        char *want = reference_loop(m, "Once upon a time", temps[i], 99, 100);
        plm_context *ctx = new_ctx(m, 512, 7);  /* prompt in pieces of 7: same logits */
        plm_sampler *s = new_sampler(m, temps[i], 99);
        capture c = {0};
        plm_generate_params gp = plm_generate_default_params();
        gp.max_tokens = 100;
        gp.ignore_eos = true;
        plm_generate_result r;
        CHECK(gen(m, "Once upon a time", ctx, s, &gp, &c, &r) == PLM_OK, "generate");
        CHECK(c.text && !strcmp(c.text, want), "temp %g: '%s' vs '%s'", (double)temps[i], c.text, want);
        capture_free(&c);
        free(want);
        plm_sampler_free(s);
        plm_context_free(ctx);
    }
}

/* Greedy stories260K: "Once upon a time, there was a little girl named Lily". */
static void test_stop_strings(plm_model *m) {
    struct {
        const char *stop, *want;
        bool stopped;
    } cases[] = {
        {"girl named", ", there was a little ", true},   /* spans tokens */
        {"e g", ", there was a littl", true},             /* inside "little girl" */
        {"little boy", NULL, false},                      /* a held prefix released again */
    };
    char *full = NULL;
    for (int i = -1; i < 3; i++) {
        plm_context *ctx = new_ctx(m, 256, 64);
        plm_sampler *s = new_sampler(m, 0.0f, 1);
        capture c = {0};
        plm_generate_params gp = plm_generate_default_params();
        gp.max_tokens = 20;
        gp.ignore_eos = true;
        const char *stops[2] = {"never appears", i >= 0 ? cases[i].stop : ""};
        gp.stops = stops;
        gp.n_stops = 2;
        plm_generate_result r;
        CHECK(gen(m, "Once upon a time", ctx, s, &gp, &c, &r) == PLM_OK, "generate");
        if (i < 0) {
            full = c.text;
            c.text = NULL;
            CHECK(full && strstr(full, "little girl named"), "greedy text: %s", full);
        } else if (cases[i].stopped) {
            CHECK(r.finish == PLM_FINISH_STOP && r.stop_index == 1, "'%s': finish %s index %d", cases[i].stop,
                  plm_finish_reason_name(r.finish), r.stop_index);
            CHECK(c.text && !strcmp(c.text, cases[i].want), "'%s': got '%s'", cases[i].stop, c.text);
        } else {
            CHECK(r.finish == PLM_FINISH_LENGTH && c.text && full && !strcmp(c.text, full),
                  "'%s': nothing lost: '%s'", cases[i].stop, c.text);
            /* "little " was held while it might have become "little boy" */
            bool held = false;
            for (int p = 0; p < c.n_pieces; p++)
                if (c.ends[p] >= 7 && !memcmp(c.text + c.ends[p] - 7, "little ", 7)) held = true;
            CHECK(!held, "a piece ended with the partial match 'little '");
        }
        capture_free(&c);
        plm_sampler_free(s);
        plm_context_free(ctx);
    }
    free(full);
}

/* An end-of-generation token ends it: seen by on_token, not counted, no
 * text.  Near-uniform sampling reaches EOS (1 in 512 a token) early. */
static void test_end_of_generation(plm_model *m) {
    plm_context *ctx = new_ctx(m, 2048, 512);
    plm_sampler *s = new_sampler(m, 50.0f, 7);
    capture c = {0};
    plm_generate_params gp = plm_generate_default_params();
    plm_generate_result r;
    REQUIRE_VOID(ctx && s && gen(m, "Once upon a time", ctx, s, &gp, &c, &r) == PLM_OK, "generate");
    CHECK(r.finish == PLM_FINISH_EOG, "finish %s after %d tokens", plm_finish_reason_name(r.finish), r.n_generated);
    CHECK(c.n_toks == r.n_generated + 1 && c.n_toks > 0 && plm_token_is_eog(m, c.toks[c.n_toks - 1]),
          "the EOG token is the last seen and not counted (%d seen, %d generated)", c.n_toks, r.n_generated);
    size_t len = 0;
    char piece[64];
    for (int i = 0; i + 1 < c.n_toks; i++) {
        int k = plm_token_to_piece(m, c.toks[i], piece, sizeof piece, false);
        len += k > 0 ? (size_t)k : 0;
    }
    CHECK(c.len == len, "text is the tokens before EOG: %zu vs %zu bytes", c.len, len);
    capture_free(&c);
    plm_sampler_free(s);
    plm_context_free(ctx);
}

static const char *LONG_PROMPT =
    "Once upon a time there was a little girl named Lily. She liked to play in the park with her friend Tom. "
    "One day they found a big red ball under a tree and they played all day long.";

static void test_abort_in_prefill(plm_model *m) {
    plm_context *ctx = new_ctx(m, 512, 4);
    plm_sampler *s = new_sampler(m, 0.0f, 1);
    capture c = {.abort_after = 3};
    plm_generate_params gp = plm_generate_default_params();
    gp.abort = on_abort;
    gp.max_tokens = 10;
    plm_generate_result r;
    REQUIRE_VOID(gen(m, LONG_PROMPT, ctx, s, &gp, &c, &r) == PLM_OK, "generate");
    CHECK(r.finish == PLM_FINISH_ABORT, "finish %s", plm_finish_reason_name(r.finish));
    CHECK(r.n_prompt == 8 && plm_context_n_past(ctx) == 8, "two batches of 4 evaluated: %d, n_past %u",
          r.n_prompt, plm_context_n_past(ctx));
    CHECK(r.n_generated == 0 && c.len == 0 && c.n_toks == 0, "nothing generated");

    /* During generation: the fifth poll (two prompt batches, then one per token). */
    plm_kv_truncate(ctx, 0);
    capture d = {.abort_after = 5};
    gp.max_tokens = 50;
    REQUIRE_VOID(gen(m, "Once upon a time", ctx, s, &gp, &d, &r) == PLM_OK, "generate");
    CHECK(r.finish == PLM_FINISH_ABORT && r.n_generated == 3, "aborted after %d tokens", r.n_generated);
    capture_free(&c);
    capture_free(&d);
    plm_sampler_free(s);
    plm_context_free(ctx);
}

static void test_limits_and_full_context(plm_model *m) {
    plm_generate_params gp = plm_generate_default_params();
    gp.ignore_eos = true;
    plm_generate_result r;
    plm_error err;
    plm_context *ctx = new_ctx(m, 32, 512);
    plm_sampler *s = new_sampler(m, 0.0f, 1);
    capture c = {0};
    CHECK(gen(m, "Once upon a time", ctx, s, &gp, &c, &r) == PLM_OK, "generate");
    CHECK(r.finish == PLM_FINISH_CONTEXT && plm_context_n_past(ctx) == 32, "full context: %s, n_past %u",
          plm_finish_reason_name(r.finish), plm_context_n_past(ctx));
    capture_free(&c);

    plm_kv_truncate(ctx, 0);
    memset(&c, 0, sizeof c);
    gp.ctx_shift = true;
    gp.max_tokens = 100;
    CHECK(gen(m, "Once upon a time", ctx, s, &gp, &c, &r) == PLM_OK, "generate");
    CHECK(r.finish == PLM_FINISH_LENGTH && r.n_generated == 100 && r.n_shifts >= 3, "shifts: %s %d %d",
          plm_finish_reason_name(r.finish), r.n_generated, r.n_shifts);
    capture_free(&c);

    plm_kv_truncate(ctx, 0);
    memset(&c, 0, sizeof c);
    gp.max_tokens = 0;
    CHECK(gen(m, "Once upon a time", ctx, s, &gp, &c, &r) == PLM_OK && r.finish == PLM_FINISH_LENGTH &&
              r.n_generated == 0 && c.len == 0, "max_tokens 0");
    capture_free(&c);

    plm_kv_truncate(ctx, 0);
    plm_token many[32] = {0};
    CHECK(plm_generate(ctx, many, 32, s, &gp, NULL, &r, &err) == PLM_ERR_CONTEXT_FULL, "prompt too long");
    CHECK(plm_generate(ctx, many, 0, s, &gp, NULL, &r, &err) == PLM_ERR_INVALID_ARG, "empty prompt");
    many[3] = 100000;
    CHECK(plm_generate(ctx, many, 5, s, &gp, NULL, &r, &err) == PLM_ERR_INVALID_ARG && strstr(err.message, "index 3"),
          "token outside the vocabulary: %s", err.message);
    CHECK(plm_context_n_past(ctx) == 0, "refused prompts evaluate nothing");
    plm_sampler_free(s);
    plm_context_free(ctx);
}

static void test_sampler_validation(plm_model *m) {
    struct {
        const char *field, *range;
    } bad[] = {
        {"temperature", "finite"}, {"top_k", ">= 0"}, {"top_p", "[0, 1]"}, {"min_p", "[0, 1]"},
        {"repeat_penalty", "> 0"}, {"presence_penalty", "finite"}, {"frequency_penalty", "finite"},
        {"penalty_last_n", ">= -1"},
    };
    for (int i = 0; i < 8; i++) {
        plm_sampler_params p = plm_sampler_default_params();
        switch (i) {
        case 0: p.temperature = NAN; break;
        case 1: p.top_k = -1; break;
        case 2: p.top_p = 2.0f; break;
        case 3: p.min_p = -0.1f; break;
        case 4: p.repeat_penalty = 0.0f; break;
        case 5: p.presence_penalty = INFINITY; break;
        case 6: p.frequency_penalty = NAN; break;
        case 7: p.penalty_last_n = -2; break;
        }
        plm_error err = {0};
        plm_sampler *s = (plm_sampler *)1;
        CHECK(plm_sampler_create(m, &p, &s, &err) == PLM_ERR_INVALID_ARG && s == NULL, "%s refused", bad[i].field);
        CHECK(!strncmp(err.message, bad[i].field, strlen(bad[i].field)) && strstr(err.message, bad[i].range),
              "message names %s and %s: %s", bad[i].field, bad[i].range, err.message);
        CHECK(plm_sampler_new(m, &p) == NULL, "plm_sampler_new refuses %s", bad[i].field);
    }
    plm_sampler_params ok = plm_sampler_default_params();
    ok.temperature = -1.0f;  /* greedy, as in llama.cpp */
    ok.top_p = 0.0f;
    ok.min_p = 1.0f;
    ok.penalty_last_n = -1;
    plm_sampler *s = NULL;
    plm_error err;
    CHECK(plm_sampler_create(m, &ok, &s, &err) == PLM_OK && s, "edges of the ranges accepted");
    plm_sampler_free(s);
}

int main(void) {
    plm_model *m;
    plm_error err;
    REQUIRE(plm_model_load(STORIES, NULL, &m, &err) == PLM_OK, "%s", err.message);
    test_utf8_whole_characters(m);
    test_same_as_reference_loop(m);
    test_stop_strings(m);
    test_end_of_generation(m);
    test_abort_in_prefill(m);
    test_limits_and_full_context(m);
    test_sampler_validation(m);
    plm_model_free(m);
    return test_summary();
}
