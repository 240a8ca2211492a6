/*
 * The public API as a user sees it: load/generate/free cycles (run under
 * LeakSanitizer in CI), two contexts on one model decoding concurrently from
 * two threads, clean errors for bad input, and greedy generation of
 * stories260K against the text llama.cpp produces (../shared/models/README.md).
 */
#include <pthread.h>
#include <string.h>

#include "pocketlm.h"
#include "test.h"

#define STORIES SHARED("models/stories260K.gguf")

/* Greedy continuation of `prompt`, detokenized into out. */
static int greedy(plm_model *m, const char *prompt, int n_gen, char *out, size_t out_size) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 256;
    plm_context *ctx;
    plm_error err;
    if (plm_context_new(m, &cp, &ctx, &err)) return -1;
    plm_token toks[256];
    int n = plm_tokenize(m, prompt, strlen(prompt), toks, 256, true, false);
    plm_sampler_params sp = plm_sampler_default_params();
    sp.temperature = 0;
    plm_sampler *s = plm_sampler_new(m, &sp);
    size_t len = 0;
    int rc = plm_decode(ctx, toks, n, &err);
    for (int i = 0; rc == PLM_OK && i < n_gen; i++) {
        plm_token t = plm_sampler_sample(s, plm_get_logits(ctx, -1));
        char piece[64];
        int k = plm_token_to_piece(m, t, piece, sizeof piece, false);
        if (k > 0 && len + (size_t)k < out_size) {
            memcpy(out + len, piece, (size_t)k);
            len += (size_t)k;
        }
        rc = plm_decode(ctx, &t, 1, &err);
    }
    out[len] = '\0';
    plm_sampler_free(s);
    plm_context_free(ctx);
    return rc;
}

typedef struct {
    plm_model *m;
    char text[4096];
    int rc;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    j->rc = greedy(j->m, "Once upon a time", 48, j->text, sizeof j->text);
    return NULL;
}

static void test_llama_cpp_text(void) {
    plm_model *m;
    plm_error err;
    REQUIRE_VOID(plm_model_load(STORIES, NULL, &m, &err) == PLM_OK, "load: %s", err.message);
    char text[4096];
    CHECK(greedy(m, "Once upon a time", 40, text, sizeof text) == PLM_OK, "greedy failed");
    /* llama.cpp's greedy continuation, as recorded in ../shared/models/README.md */
    const char *want = ", there was a little girl named Lily. She loved to play outside in the park.";
    CHECK(strncmp(text, want, strlen(want)) == 0, "greedy text '%s'", text);
    plm_model_free(m);
}

static void test_two_threads(void) {
    plm_model *m;
    plm_error err;
    REQUIRE_VOID(plm_model_load(STORIES, NULL, &m, &err) == PLM_OK, "load: %s", err.message);
    job solo = {.m = m};
    run_job(&solo);
    job a = {.m = m}, b = {.m = m};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, run_job, &a);
    pthread_create(&tb, NULL, run_job, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(solo.rc == 0 && a.rc == 0 && b.rc == 0, "decode failed");
    CHECK(strlen(solo.text) > 20, "nothing generated");
    CHECK(!strcmp(a.text, solo.text) && !strcmp(b.text, solo.text), "threads disagree:\n%s\n%s\n%s", solo.text,
          a.text, b.text);
    plm_model_free(m);
}

static void test_load_free_cycles(void) {
    for (int i = 0; i < 5; i++) {
        plm_model *m;
        plm_error err;
        plm_model_params mp = plm_model_default_params();
        mp.use_mmap = i % 2 == 0;  /* both the mmap and the read-into-memory paths */
        REQUIRE_VOID(plm_model_load(STORIES, &mp, &m, &err) == PLM_OK, "load: %s", err.message);
        char text[1024];
        CHECK(greedy(m, "Lily", 16, text, sizeof text) == PLM_OK, "cycle %d", i);
        plm_model_free(m);
    }
}

static void test_errors(void) {
    plm_model *m;
    plm_error err;
    CHECK(plm_model_load("/nonexistent/model.gguf", NULL, &m, &err) == PLM_ERR_IO && m == NULL,
          "missing file: %s", err.message);
    CHECK(strstr(err.message, "/nonexistent/model.gguf") != NULL, "message should name the file: %s", err.message);
    CHECK(plm_model_load(SHARED("vocab/ggml-vocab-gpt-2.gguf"), NULL, &m, &err) != PLM_OK,
          "a vocab-only file has no weights");

    REQUIRE_VOID(plm_model_load(STORIES, NULL, &m, &err) == PLM_OK, "load: %s", err.message);
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 8;
    plm_context *ctx;
    REQUIRE_VOID(plm_context_new(m, &cp, &ctx, &err) == PLM_OK, "ctx: %s", err.message);
    plm_token toks[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    CHECK(plm_decode(ctx, toks, 9, &err) == PLM_ERR_CONTEXT_FULL, "9 tokens in an 8-token context");
    CHECK(plm_context_n_past(ctx) == 0, "a failed decode must change nothing");
    plm_token bad = 100000;
    CHECK(plm_decode(ctx, &bad, 1, &err) == PLM_ERR_INVALID_ARG, "token outside the vocabulary");
    CHECK(plm_decode(ctx, toks, 8, &err) == PLM_OK, "8 tokens fit: %s", err.message);
    CHECK(plm_decode(ctx, toks, 1, &err) == PLM_ERR_CONTEXT_FULL, "full");
    plm_kv_truncate(ctx, 4);
    CHECK(plm_context_n_past(ctx) == 4 && plm_decode(ctx, toks, 4, &err) == PLM_OK, "truncate then refill");
    plm_context_free(ctx);
    plm_model_free(m);
}

int main(void) {
    test_llama_cpp_text();
    test_two_threads();
    test_load_free_cycles();
    test_errors();
    return test_summary();
}
