/*
 * Speculative decoding, greedy: every proposer (draft model, prompt lookup,
 * n-gram cache), batch sizes 1 and 512, f16 and q8_0 caches, adaptive or
 * fixed draft length — the output must be plain greedy decoding's, token
 * for token.  The oracle is plain decoding (itself checked against
 * llama.cpp by test_logits and the greedy oracle test); the draft models
 * are stories260K itself (every proposal right), a random-weight fixture
 * and a random synth (most proposals wrong), so acceptance and rejection
 * paths both run.  Also: vocabulary refusal and the n-gram cache file
 * (round trip, corrupt/truncated/foreign files refused, atomic save).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pocketlm.h"
#include "pocketlm_tools.h"
#include "runtime/context.h"
#include "test.h"

#define N_GEN 64
#define STORY_PROMPT \
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she " \
    "saw a big, red ball. Once upon a time, there was a little"

typedef struct setup {
    plm_model *target, *draft;
    uint32_t n_batch;
    plm_kv_type kv;
    plm_spec_params sp;  /* used when spec */
    bool spec;
    uint32_t n_ctx;      /* 0: 256 */
} setup;

static plm_model *load(const char *path) {
    plm_model *m = NULL;
    plm_error err;
    plm_model_params mp = plm_model_default_params();
    if (plm_model_load(path, &mp, &m, &err)) fprintf(stderr, "%s: %s\n", path, err.message);
    return m;
}

static plm_context *new_ctx(plm_model *m, const setup *s) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = s->n_ctx ? s->n_ctx : 256;
    cp.n_batch = s->n_batch;
    cp.n_threads = 2;
    cp.type_k = cp.type_v = s->kv;
    plm_context *c = NULL;
    plm_error err;
    if (plm_context_new(m, &cp, &c, &err)) fprintf(stderr, "context: %s\n", err.message);
    return c;
}

/* Generates N_GEN tokens greedily (or with `smp_params`) after `prompt`;
 * returns how many were written to out (-1 on error).  *stats when spec. */
static int generate(const setup *s, const char *prompt, const plm_sampler_params *smp_params, plm_token *out,
                    plm_spec_stats *stats) {
    plm_error err;
    plm_context *ctx = new_ctx(s->target, s), *dctx = s->spec && s->draft ? new_ctx(s->draft, s) : NULL;
    plm_sampler *smp = plm_sampler_new(s->target, smp_params);
    int n_prompt = 0, n = -1;
    plm_token *toks = plm_tokenize_alloc(s->target, prompt, strlen(prompt), &n_prompt, true, false);
    plm_spec *spec = NULL;
    if (!ctx || !smp || !toks || (s->spec && s->draft && !dctx)) goto done;
    if (s->spec && plm_spec_new(ctx, dctx, &s->sp, &spec, &err)) {
        fprintf(stderr, "spec: %s\n", err.message);
        goto done;
    }
    if (plm_decode(ctx, toks, n_prompt, &err)) goto done;
    for (int i = 0; i < n_prompt; i++) plm_sampler_accept(smp, toks[i]);
    if (spec && plm_spec_begin(spec, toks, n_prompt, &err)) goto done;
    plm_token t = plm_sampler_sample(smp, plm_get_logits(ctx, -1));
    plm_sampler_accept(smp, t);
    out[0] = t;
    n = 1;
    while (n < N_GEN) {
        if (spec) {
            int m;
            if (plm_spec_step(spec, smp, t, out + n, N_GEN - n, &m, &err)) {
                fprintf(stderr, "step: %s\n", err.message);
                n = -1;
                break;
            }
            n += m;
        } else {
            if (plm_decode(ctx, &t, 1, &err)) {
                n = -1;
                break;
            }
            out[n] = plm_sampler_sample(smp, plm_get_logits(ctx, -1));
            plm_sampler_accept(smp, out[n]);
            n++;
        }
        t = out[n - 1];
    }
    if (spec && stats) plm_spec_get_stats(spec, stats);
    if (spec && s->sp.lookup_cache && plm_spec_save_cache(spec, &err)) {
        fprintf(stderr, "save: %s\n", err.message);
        n = -1;
    }
done:
    plm_spec_free(spec);
    plm_context_free(dctx);  /* the draft first: it runs on the target's threads */
    plm_context_free(ctx);
    plm_sampler_free(smp);
    free(toks);
    return n;
}

static plm_sampler_params greedy(void) {
    plm_sampler_params p = plm_sampler_default_params();
    p.temperature = 0.0f;
    return p;
}

/* Speculative greedy output equals `plain` (plain greedy decoding's, same
 * model, batch size and cache type). */
static void check_same(const char *what, setup s, const char *prompt, const plm_token *plain, bool expect_accepts) {
    plm_token spec[N_GEN];
    const plm_sampler_params gp = greedy();
    s.spec = true;
    plm_spec_stats st = {0};
    const int b = generate(&s, prompt, &gp, spec, &st);
    REQUIRE_VOID(b == N_GEN, "%s: generation failed", what);
    int first_diff = -1;
    for (int i = 0; i < N_GEN && first_diff < 0; i++)
        if (plain[i] != spec[i]) first_diff = i;
    CHECK(first_diff < 0, "%s: speculative output differs from plain at token %d", what, first_diff);
    CHECK(st.generated == N_GEN - 1, "%s: %llu tokens from steps", what, (unsigned long long)st.generated);
    if (expect_accepts)
        CHECK(st.accepted > 0 && st.steps < st.generated, "%s: expected accepted proposals (%llu of %llu, %llu steps)",
              what, (unsigned long long)st.accepted, (unsigned long long)st.proposed, (unsigned long long)st.steps);
    printf("%-44s proposed %3llu accepted %3llu steps %3llu\n", what, (unsigned long long)st.proposed,
           (unsigned long long)st.accepted, (unsigned long long)st.steps);
}

static void check_methods(const char *name, plm_model *target, plm_model *self_draft, plm_model *other_draft,
                          const char *cache_path, bool q8) {
    const uint32_t batches[2] = {1, 512};
    for (int kv = 0; kv < (q8 ? 2 : 1); kv++)
        for (int bi = 0; bi < 2; bi++)
            for (int adaptive = 0; adaptive < 2; adaptive++) {
                if (adaptive && bi == 0) continue;  /* the draft length does not meet the batch size */
                char what[160];
                setup s = {target, NULL, batches[bi], kv ? PLM_KV_Q8_0 : PLM_KV_F16, plm_spec_default_params(), false, 0};
                plm_token plain[N_GEN];
                const plm_sampler_params gp = greedy();
                REQUIRE_VOID(generate(&s, STORY_PROMPT, &gp, plain, NULL) == N_GEN, "plain generation");
                s.sp.adaptive = adaptive;
                s.sp.draft_p_min = 0.0f;
                const char *tag = kv ? "q8_0" : "f16";
#define LABEL(m) snprintf(what, sizeof what, "%s %s b%u %s %s", name, m, batches[bi], tag, adaptive ? "adapt" : "fixed")
                s.sp.draft_max = 5;
                if (self_draft) {
                    s.draft = self_draft;
                    LABEL("self-draft");
                    check_same(what, s, STORY_PROMPT, plain, !adaptive);
                }
                if (other_draft) {
                    s.draft = other_draft;
                    s.sp.draft_max = 8;
                    LABEL("other-draft");
                    check_same(what, s, STORY_PROMPT, plain, false);
                    s.sp.draft_max = 5;
                }
                s.draft = NULL;
                s.sp.lookup_ngram = 3;
                LABEL("lookup");
                check_same(what, s, STORY_PROMPT, plain, false);
                s.sp.lookup_ngram = 0;
                s.sp.lookup_cache = cache_path;
                LABEL("ngram-cache");
                check_same(what, s, STORY_PROMPT, plain, false);
#undef LABEL
            }
}

/* The n tokens into c's cache in batches it takes (512): false on an error. */
static bool decode_in_batches(plm_context *c, const plm_token *t, int n, plm_error *err) {
    for (int p0 = 0; p0 < n; p0 += 512)
        if (plm_decode(c, t + p0, n - p0 < 512 ? n - p0 : 512, err) != PLM_OK) return false;
    return true;
}

/* A verification batch gives the logits of decoding its tokens one by one,
 * bit for bit (the batched gemm would sum in another order: ~1e-6 apart on
 * Q8_0, enough to flip a near-tie of a random model).  After a long prompt
 * (512 keys and more, an f16 or a quantized cache: forward.h) decoding splits each token's keys
 * over the threads (model/forward.c, attend_split) and the verification
 * splits them the same way in one thread. */
static void test_verify_bit_exact(plm_model *m, plm_kv_type kv, int n_prompt) {
    setup s = {m, NULL, 512, kv, plm_spec_default_params(), false, n_prompt > 200 ? 2048 : 0};
    plm_context *a = new_ctx(m, &s), *b = new_ctx(m, &s);
    REQUIRE_VOID(a && b, "contexts");
    plm_error err;
    const plm_token batch[7] = {90, 100, 110, 120, 130, 140, 150};
    plm_token prompt[1200] = {1, 40, 50, 60, 70, 80};
    REQUIRE_VOID(n_prompt <= 1200, "prompt length");
    for (int i = 6; i < n_prompt; i++) prompt[i] = 10 + (i * 37) % 200;
    const int V = plm_model_n_vocab(m);
    REQUIRE_VOID(decode_in_batches(a, prompt, n_prompt, &err) && decode_in_batches(b, prompt, n_prompt, &err), "prompt: %s",
                 err.message);
    a->fwd.rowwise_matmul = true;
    REQUIRE_VOID(plm_decode_tail(a, batch, 7, 7, &err) == PLM_OK, "%s", err.message);
    int differ = 0;
    for (int i = 0; i < 7; i++) {
        REQUIRE_VOID(plm_decode(b, &batch[i], 1, &err) == PLM_OK, "%s", err.message);
        if (memcmp(plm_get_logits(a, i), plm_get_logits(b, -1), (size_t)V * sizeof(float))) differ++;
    }
    CHECK(differ == 0, "%d of 7 verified rows differ from single-token decoding (%s cache, %d-token prompt)", differ,
          plm_kv_type_name(kv), n_prompt);
    /* A server's round: plain tokens of other sequences first (the batched
     * gemm), then a verification (the single-token kernel), in one pass:
     * the verified rows are still single-token decoding's bit for bit, and
     * the plain rows are the batched gemm's, as in a pass of their own. */
    plm_kv_truncate(a, n_prompt);
    plm_kv_truncate(b, n_prompt);
    a->fwd.rowwise_from = 3;
    REQUIRE_VOID(plm_decode_tail(a, batch, 7, 7, &err) == PLM_OK, "%s", err.message);
    a->fwd.rowwise_matmul = false;
    a->fwd.rowwise_from = 0;
    plm_context *c = new_ctx(m, &s);
    REQUIRE_VOID(c && decode_in_batches(c, prompt, n_prompt, &err), "prompt: %s", c ? err.message : "no context");
    REQUIRE_VOID(plm_decode_tail(c, batch, 3, 3, &err) == PLM_OK, "%s", err.message);
    differ = 0;
    for (int i = 0; i < 3; i++) differ += memcmp(plm_get_logits(a, i), plm_get_logits(c, i), (size_t)V * sizeof(float)) != 0;
    CHECK(differ == 0, "%d of 3 plain rows differ from their own batched pass (%s cache)", differ, plm_kv_type_name(kv));
    differ = 0;
    for (int i = 0; i < 7; i++) {
        REQUIRE_VOID(plm_decode(b, &batch[i], 1, &err) == PLM_OK, "%s", err.message);
        if (i >= 3) differ += memcmp(plm_get_logits(a, i), plm_get_logits(b, -1), (size_t)V * sizeof(float)) != 0;
    }
    CHECK(differ == 0, "%d of 4 verified rows after 3 plain ones differ from single-token decoding (%s cache)", differ,
          plm_kv_type_name(kv));
    plm_context_free(c);
    plm_context_free(a);
    plm_context_free(b);
}

/* ---- n-gram cache file ---------------------------------------------------- */

static long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static plm_status open_with_cache(plm_model *m, const char *path, plm_error *err) {
    setup s = {m, NULL, 512, PLM_KV_F16, plm_spec_default_params(), true, 0};
    s.sp.lookup_cache = path;
    plm_context *ctx = new_ctx(m, &s);
    plm_spec *spec = NULL;
    plm_status st = plm_spec_new(ctx, NULL, &s.sp, &spec, err);
    plm_spec_free(spec);
    plm_context_free(ctx);
    return st;
}

static void corrupt_byte(const char *src, const char *dst, long at, int delta, long truncate_to) {
    FILE *f = fopen(src, "rb");
    long n = file_size(src);
    unsigned char *b = malloc((size_t)n);
    if (!f || !b || fread(b, 1, (size_t)n, f) != (size_t)n) abort();
    fclose(f);
    if (at >= 0) b[at] = (unsigned char)(b[at] + delta);
    FILE *g = fopen(dst, "wb");
    fwrite(b, 1, (size_t)(truncate_to >= 0 ? truncate_to : n), g);
    fclose(g);
    free(b);
}

static void test_cache_file(plm_model *m, const char *dir, const char *cache) {
    plm_error err;
    /* The cache check_methods wrote: present, and nothing left beside it. */
    const long n = file_size(cache);
    CHECK(n > 40 && (n - 40) % 52 == 0, "cache file size %ld", n);
    char tmp[600], bad[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", cache);
    CHECK(access(tmp, F_OK) != 0, "the temporary file was renamed away");
    CHECK(open_with_cache(m, cache, &err) == PLM_OK, "reload: %s", err.message);

    snprintf(bad, sizeof bad, "%s/bad.ngram", dir);
    corrupt_byte(cache, bad, n / 2, 1, -1);
    CHECK(open_with_cache(m, bad, &err) == PLM_ERR_FORMAT && strstr(err.message, "corrupt"), "flipped byte: %s",
          err.message);
    corrupt_byte(cache, bad, -1, 0, n - 3);
    CHECK(open_with_cache(m, bad, &err) == PLM_ERR_FORMAT, "truncated: %s", err.message);
    corrupt_byte(cache, bad, 8, 1, -1);
    CHECK(open_with_cache(m, bad, &err) == PLM_ERR_FORMAT && strstr(err.message, "version"), "version: %s",
          err.message);
    corrupt_byte(cache, bad, 12, 1, -1);
    CHECK(open_with_cache(m, bad, &err) == PLM_ERR_FORMAT && strstr(err.message, "vocabulary"), "vocab: %s",
          err.message);
    FILE *f = fopen(bad, "wb");
    fputs("not a cache at all, just some text that is long enough", f);
    fclose(f);
    CHECK(open_with_cache(m, bad, &err) == PLM_ERR_FORMAT && strstr(err.message, "PLMNGRAM"), "garbage: %s",
          err.message);
    unlink(bad);
}

/* The cache learns across runs: a second run over the same prompt proposes
 * more, and stays exact. */
static void test_cache_learns(plm_model *m, const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/learn.ngram", dir);
    unlink(path);
    setup s = {m, NULL, 512, PLM_KV_F16, plm_spec_default_params(), true, 0};
    s.sp.lookup_cache = path;
    s.sp.adaptive = false;
    plm_token out[N_GEN];
    plm_spec_stats first, second;
    const plm_sampler_params gp = greedy();
    REQUIRE_VOID(generate(&s, "Once upon a time", &gp, out, &first) == N_GEN, "first run");
    REQUIRE_VOID(generate(&s, "Once upon a time", &gp, out, &second) == N_GEN, "second run");
    CHECK(second.accepted > first.accepted + 20, "second run accepted %llu, first %llu",
          (unsigned long long)second.accepted, (unsigned long long)first.accepted);
    unlink(path);
}

/* plm_spec_begin with only the newest tokens (a chat turn that kept the
 * cached start of the conversation): accepted when the decoder followed the
 * ones before, refused when it did not. */
static void test_begin_tail(plm_model *m) {
    setup s = {m, NULL, 512, PLM_KV_F16, plm_spec_default_params(), true, 0};
    s.sp.lookup_ngram = 2;
    plm_context *ctx = new_ctx(m, &s);
    plm_spec *spec = NULL;
    plm_error err;
    int n = 0;
    plm_token *toks = plm_tokenize_alloc(m, STORY_PROMPT, strlen(STORY_PROMPT), &n, true, false);
    REQUIRE_VOID(ctx && toks && n > 20 && plm_spec_new(ctx, NULL, &s.sp, &spec, &err) == PLM_OK, "setup");
    REQUIRE_VOID(plm_decode(ctx, toks, 10, &err) == PLM_OK, "decode");
    CHECK(plm_spec_begin(spec, toks + 6, 4, &err) == PLM_ERR_INVALID_ARG && strstr(err.message, "give all"),
          "a tail the decoder never followed is refused: %s", err.message);
    CHECK(plm_spec_begin(spec, toks, 11, &err) == PLM_ERR_INVALID_ARG, "more tokens than the context holds");
    CHECK(plm_spec_begin(spec, toks, 10, &err) == PLM_OK, "all of them: %s", err.message);
    plm_kv_truncate(ctx, 8);  /* the next turn keeps 8 and evaluates the rest */
    REQUIRE_VOID(plm_decode(ctx, toks + 8, n - 8, &err) == PLM_OK, "decode the rest");
    CHECK(plm_spec_begin(spec, toks + 8, n - 8, &err) == PLM_OK, "the newest only: %s", err.message);
    plm_sampler *smp = plm_sampler_new(m, NULL);
    plm_token out[32];
    int got = 0;
    CHECK(smp && plm_spec_step(spec, smp, toks[0], out, 32, &got, &err) == PLM_OK && got >= 1,
          "a step follows the whole context: %s", err.message);
    plm_sampler_free(smp);
    plm_spec_free(spec);
    plm_context_free(ctx);
    free(toks);
}

static void test_vocab_refusal(plm_model *target) {
    plm_model_params mp = plm_model_default_params();
    mp.vocab_only = true;
    plm_model *other = NULL;
    plm_error err;
    REQUIRE_VOID(plm_model_load(SHARED("vocab/ggml-vocab-llama-spm.gguf"), &mp, &other, &err) == PLM_OK, "%s",
                 err.message);
    CHECK(plm_spec_vocab_compatible(target, other, &err) == PLM_ERR_UNSUPPORTED && strstr(err.message, "draft model"),
          "llama-spm vocab accepted as a draft of stories260K: %s", err.message);
    printf("refused: %s\n", err.message);
    plm_model_free(other);
    CHECK(plm_spec_vocab_compatible(target, target, &err) == PLM_OK, "a model is its own compatible draft");
}

int main(void) {
    char dir[] = "/tmp/plm_spec_XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    char synth[512], cache[512];
    snprintf(synth, sizeof synth, "%s/draft.gguf", dir);
    snprintf(cache, sizeof cache, "%s/cache.ngram", dir);

    plm_model *stories = load(SHARED("models/stories260K.gguf"));
    plm_model *fx_q8 = load(SHARED("models/fixtures/fixture-llama-pure-Q8_0.gguf"));
    plm_model *fx_q2 = load(SHARED("models/fixtures/fixture-llama-Q2_K.gguf"));
    plm_synth_params sp = {"test-llama-tiny", SHARED("models/stories260K.gguf"), synth, false, 7};
    plm_error err;
    REQUIRE(plm_synth(&sp, &err) == PLM_OK, "synth: %s", err.message);
    plm_model *rnd = load(synth);
    REQUIRE(stories && fx_q8 && fx_q2 && rnd, "models");

    test_verify_bit_exact(fx_q8, PLM_KV_F16, 6);
    test_verify_bit_exact(fx_q8, PLM_KV_Q8_0, 6);
    test_verify_bit_exact(stories, PLM_KV_F16, 6);
    test_verify_bit_exact(fx_q8, PLM_KV_F16, 1100);
    test_verify_bit_exact(fx_q8, PLM_KV_Q8_0, 1100); /* a quantized cache splits its keys too */
    check_methods("stories260K", stories, stories, rnd, cache, false);
    test_cache_file(stories, dir, cache);
    test_cache_learns(stories, dir);
    char fx_cache[512];
    snprintf(fx_cache, sizeof fx_cache, "%s/fixture.ngram", dir);
    check_methods("fixture-Q8_0", fx_q8, NULL, fx_q2, fx_cache, true);
    unlink(fx_cache);
    test_vocab_refusal(stories);
    test_begin_tail(stories);

    plm_model_free(rnd);
    plm_model_free(fx_q2);
    plm_model_free(fx_q8);
    plm_model_free(stories);
    unlink(cache);
    unlink(synth);
    rmdir(dir);
    return test_summary();
}
