/*
 * plm_context_state_save/load: a context restored from a file continues
 * with exactly the logits of the context that saved it (same model, same
 * tokens: the same rows), and a file of another model, a truncated one or a damaged one is refused by name, leaving no cache.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pocketlm.h"
#include "pocketlm_tools.h"
#include "test.h"

#define STORIES SHARED("models/stories260K.gguf")

static plm_context *new_ctx(plm_model *m, plm_kv_type tk) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 1;
    cp.type_k = tk;
    plm_context *c = NULL;
    plm_error err;
    if (plm_context_new(m, &cp, &c, &err)) fprintf(stderr, "%s\n", err.message);
    return c;
}

static int n_vocab;

static bool same_next_logits(plm_context *a, plm_context *b, plm_token next) {
    plm_error err;
    if (plm_decode(a, &next, 1, &err) || plm_decode(b, &next, 1, &err)) return false;
    return !memcmp(plm_get_logits(a, -1), plm_get_logits(b, -1), (size_t)n_vocab * sizeof(float));
}

/* A model with sliding-window layers (gemma3's block, window 8) and small
 * batches: its windowed layers keep a ring of 12 positions and a mirror,
 * which a restored context must rebuild to continue bit-identically. */
static void check_windowed(const char *dir) {
    char model[256], path[256];
    snprintf(model, sizeof model, "%s/gemma3.gguf", dir);
    snprintf(path, sizeof path, "%s/w.kv", dir);
    plm_synth_params sp = {"test-gemma3-tiny", STORIES, model, false, 3};
    plm_error err;
    REQUIRE_VOID(plm_synth(&sp, &err) == PLM_OK, "synth: %s", err.message);
    plm_model *m = NULL;
    REQUIRE_VOID(plm_model_load(model, NULL, &m, &err) == PLM_OK, "load: %s", err.message);
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 4;
    cp.n_threads = 1;
    plm_context *a = NULL, *b = NULL;
    REQUIRE_VOID(plm_context_new(m, &cp, &a, &err) == PLM_OK && plm_context_new(m, &cp, &b, &err) == PLM_OK,
                 "contexts: %s", err.message);
    plm_token toks[30];
    for (int i = 0; i < 30; i++) toks[i] = (plm_token)(1 + (i * 37) % 500);
    CHECK(plm_decode(a, toks, 30, &err) == PLM_OK, "decode: %s", err.message);
    CHECK(plm_context_state_save(a, path, toks, 30, &err) == PLM_OK, "save: %s", err.message);
    plm_token back[64];
    int nb = 0;
    CHECK(plm_context_state_load(b, path, back, 64, &nb, &err) == PLM_OK && nb == 30, "load: %s", err.message);
    const int saved = n_vocab;
    n_vocab = plm_model_n_vocab(m);
    bool same = true;
    for (int i = 0; i < 10; i++) same &= same_next_logits(a, b, toks[i]);  /* 10 more: windows wrap again */
    CHECK(same, "a restored windowed context continues bit-identically");
    n_vocab = saved;
    plm_context_free(a);
    plm_context_free(b);
    plm_model_free(m);
}

int main(void) {
    char dir[] = "/tmp/plm-state-XXXXXX", path[256], other[256], cmd[600];
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/s.kv", dir);
    snprintf(other, sizeof other, "%s/q8.gguf", dir);
    plm_model *m = NULL, *q = NULL;
    plm_error err;
    plm_model_params mp = plm_model_default_params();
    REQUIRE(plm_model_load(STORIES, &mp, &m, &err) == PLM_OK, "load: %s", err.message);
    n_vocab = plm_model_n_vocab(m);
    int n = 0;
    const char *text = "Once upon a time there was a little girl named Lily.";
    plm_token *toks = plm_tokenize_alloc(m, text, strlen(text), &n, true, false);
    REQUIRE(toks && n > 4, "tokenize");

    plm_context *a = new_ctx(m, PLM_KV_F16), *b = new_ctx(m, PLM_KV_F16);
    REQUIRE(a && b, "contexts");
    CHECK(plm_decode(a, toks, n, &err) == PLM_OK, "decode");
    CHECK(plm_context_state_save(a, path, toks, n - 1, &err) == PLM_ERR_INVALID_ARG, "count must match the cache");
    CHECK(plm_context_state_save(a, path, toks, n, &err) == PLM_OK, "save: %s", err.message);
    plm_token back[256];
    int nb = 0;
    CHECK(plm_context_state_load(b, path, back, 256, &nb, &err) == PLM_OK, "load: %s", err.message);
    CHECK(nb == n && !memcmp(back, toks, (size_t)n * sizeof *toks) && plm_context_n_past(b) == (uint32_t)n,
          "tokens and length restored");
    CHECK(same_next_logits(a, b, toks[1]), "the restored context continues bit-identically");
    CHECK(plm_context_state_load(b, path, back, n - 1, &nb, &err) == PLM_ERR_INVALID_ARG, "too little room");

    /* Another model: same shape and vocabulary, Q8_0 weights.  (Other KV
     * types cannot be tried here: stories260K's head size 8 allows only f16.) */
    REQUIRE(plm_quantize(STORIES, other, "Q8_0", &err) == PLM_OK, "quantize: %s", err.message);
    REQUIRE(plm_model_load(other, &mp, &q, &err) == PLM_OK, "load q8");
    plm_context *d = new_ctx(q, PLM_KV_F16);
    CHECK(d && plm_context_state_load(d, path, back, 256, &nb, &err) == PLM_ERR_INVALID_ARG &&
              strstr(err.message, "another model"), "other model refused: %s", err.message);

    /* Damaged: one flipped byte in the rows; truncated: the last byte gone. */
    FILE *f = fopen(path, "r+b");
    REQUIRE(f != NULL, "open");
    fseek(f, -100, SEEK_END);
    int ch = fgetc(f);
    fseek(f, -100, SEEK_END);
    fputc(ch ^ 1, f);
    fclose(f);
    CHECK(plm_context_state_load(b, path, back, 256, &nb, &err) == PLM_ERR_FORMAT && strstr(err.message, "checksum"),
          "damage found: %s", err.message);
    CHECK(plm_context_n_past(b) == 0, "a refused load leaves no cache");
    snprintf(cmd, sizeof cmd, "truncate -s -1 %s", path);
    CHECK(system(cmd) == 0, "truncate");
    CHECK(plm_context_state_load(b, path, back, 256, &nb, &err) == PLM_ERR_FORMAT && strstr(err.message, "truncated"),
          "truncation found: %s", err.message);
    CHECK(plm_context_state_load(b, STORIES, back, 256, &nb, &err) == PLM_ERR_FORMAT, "not a state file");
    check_windowed(dir);

    free(toks);
    plm_context_free(a);
    plm_context_free(b);
    plm_context_free(d);
    plm_model_free(m);
    plm_model_free(q);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    return test_summary();
}
