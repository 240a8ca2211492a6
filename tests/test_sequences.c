/*
 * Sequences in one KV cache: batches whose tokens carry a sequence id and a
 * position, each sequence attending only to itself.  The oracle is
 * llama.cpp's logits for the fixtures' prompt (expected/NAME.logits.f32):
 * the prompt, decoded in one sequence while other sequences hold unrelated
 * tokens, interleaved with them in the same batches, must give llama.cpp's
 * logits at every position; so must a sequence forked from another's prefix
 * (copy + truncate) and continued.  Any attention across sequences would
 * mix the unrelated tokens in and move the logits far past the tolerance.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/forward.h"
#include "pocketlm.h"
#include "runtime/context.h"
#include "expected.h"
#include "test.h"

enum { MAX_TOKENS = 1024, N_SEQ = 3 };

/* A batch under construction: tokens with their sequences and positions. */
typedef struct batch {
    plm_token tok[MAX_TOKENS];
    uint32_t pos[MAX_TOKENS];
    plm_kv_seq seq[MAX_TOKENS];
    int prompt_pos[MAX_TOKENS];  /* the prompt position a token checks, or -1 */
    int n;
} batch;

static void add(batch *b, plm_token t, plm_kv_seq seq, uint32_t pos, int check) {
    b->tok[b->n] = t;
    b->seq[b->n] = seq;
    b->pos[b->n] = pos;
    b->prompt_pos[b->n++] = check;
}

/* Unrelated tokens for the other sequences. */
static plm_token junk(int i, int n_vocab) { return (plm_token)((i * 37 + 11) % n_vocab); }

typedef struct run {
    plm_forward_state *fs;
    const float *want;   /* llama.cpp's logits, [n_prompt][n_vocab] */
    int n_vocab;
    float worst;
    int checked;
} run;

/* Evaluates b and compares the logits of the tokens that check a prompt
 * position against llama.cpp's. */
static void eval(run *r, const batch *b) {
    plm_error err;
    const plm_ubatch ub = {.tokens = b->tok, .n = b->n, .pos = b->pos, .seq = b->seq};
    REQUIRE_VOID(plm_kv_check_batch(&r->fs->kv, &ub, &err) == PLM_OK, "batch: %s", err.message);
    float *logits = malloc((size_t)b->n * r->n_vocab * sizeof(float));
    REQUIRE_VOID(logits != NULL, "malloc");
    plm_forward(r->fs, &ub, 0, logits);
    plm_kv_commit(&r->fs->kv, &ub);
    for (int t = 0; t < b->n; t++) {
        if (b->prompt_pos[t] < 0) continue;
        const float *got = logits + (size_t)t * r->n_vocab, *exp = r->want + (size_t)b->prompt_pos[t] * r->n_vocab;
        for (int j = 0; j < r->n_vocab; j++)
            if (!(fabsf(got[j] - exp[j]) <= r->worst)) r->worst = fabsf(got[j] - exp[j]);
        r->checked++;
    }
    free(logits);
}

static void check_fixture(const char *name) {
    char path[1024];
    plm_token prompt[MAX_TOKENS];
    snprintf(path, sizeof path, "%s/models/expected/%s.tokens", PLM_SHARED_DIR, name);
    const int n = expected_read_tokens(path, prompt, MAX_TOKENS);
    REQUIRE_VOID(n > 40, "%s: tokens", name);
    snprintf(path, sizeof path, "%s/models/fixtures/%s.gguf", PLM_SHARED_DIR, name);
    plm_model *model;
    plm_error err;
    REQUIRE_VOID(plm_model_load(path, NULL, &model, &err) == PLM_OK, "%s: %s", name, err.message);
    const int nv = plm_model_n_vocab(model);
    snprintf(path, sizeof path, "%s/models/expected/%s.logits.f32", PLM_SHARED_DIR, name);
    float *want = expected_read_logits(path, (size_t)n * nv);
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 256;
    plm_context *ctx = NULL;
    if (!want || plm_context_new(model, &cp, &ctx, &err)) {
        CHECK(0, "%s: setup", name);
        goto out;
    }
    /* The context's cache, re-made with three sequences. */
    plm_forward_state *fs = &ctx->fwd;
    plm_kv_free(&fs->kv);
    const plm_kv_spec spec = {model->arch, &model->hp, cp.n_ctx, cp.n_batch, cp.type_k, cp.type_v, N_SEQ};
    REQUIRE_VOID(plm_kv_init(&fs->kv, &spec, &err) == PLM_OK, "%s", err.message);

    run r = {.fs = fs, .want = want, .n_vocab = nv};
    static batch b;
    /* Batch 1: the prompt's first 30 tokens in sequence 0, interleaved with
     * 20 unrelated ones in sequence 1. */
    b.n = 0;
    for (int i = 0; i < 30; i++) {
        add(&b, prompt[i], 0, (uint32_t)i, i);
        if (i < 20) add(&b, junk(i, nv), 1, (uint32_t)i, -1);
    }
    eval(&r, &b);
    /* Batch 2: sequence 1 goes first this time, then the rest of the prompt. */
    b.n = 0;
    for (int i = 20; i < 50; i++) add(&b, junk(i, nv), 1, (uint32_t)i, -1);
    for (int i = 30; i < n; i++) add(&b, prompt[i], 0, (uint32_t)i, i);
    eval(&r, &b);
    CHECK(r.checked == n, "%s: %d positions checked", name, r.checked);
    CHECK(plm_kv_seq_len(&fs->kv, 0) == (uint32_t)n && plm_kv_seq_len(&fs->kv, 1) == 50 &&
              plm_kv_seq_len(&fs->kv, 2) == 0, "%s: sequence lengths", name);

    /* Fork: sequence 2 takes sequence 0's first 25 positions, continues with
     * the prompt beside more of sequence 1's tokens. */
    REQUIRE_VOID(plm_kv_seq_copy(&fs->kv, 0, 2, &err) == PLM_OK, "%s", err.message);
    plm_kv_seq_truncate(&fs->kv, 2, 25);
    b.n = 0;
    for (int i = 25; i < n; i++) {
        add(&b, prompt[i], 2, (uint32_t)i, i);
        if (i < 60) add(&b, junk(i + 50, nv), 1, (uint32_t)(i + 25), -1);
    }
    eval(&r, &b);
    CHECK(r.checked == n + (n - 25), "%s: fork positions checked (%d)", name, r.checked);
    printf("%-20s %d sequences: max |dlogit| vs llama.cpp %.5f over %d positions\n", name, N_SEQ, r.worst,
           r.checked);
    CHECK(r.worst <= 0.01f, "%s: max logit difference %g", name, r.worst);

    /* Batches that do not append are refused, naming the problem. */
    const uint32_t bad_pos = 7;
    const plm_kv_seq seq0 = 0, seq9 = 9;
    plm_ubatch ub = {.tokens = prompt, .n = 1, .pos = &bad_pos, .seq = &seq0};
    CHECK(plm_kv_check_batch(&fs->kv, &ub, &err) == PLM_ERR_INVALID_ARG && strstr(err.message, "continues at"),
          "a gap is refused: %s", err.message);
    ub.seq = &seq9;
    CHECK(plm_kv_check_batch(&fs->kv, &ub, &err) == PLM_ERR_INVALID_ARG && strstr(err.message, "sequence 9"),
          "an unknown sequence is refused: %s", err.message);
    CHECK(plm_kv_seq_copy(&fs->kv, 0, 5, &err) == PLM_ERR_INVALID_ARG, "copy to an unknown sequence");
out:
    plm_context_free(ctx);
    free(want);
    plm_model_free(model);
}

int main(void) {
    check_fixture("fixture-llama-f16");
    check_fixture("fixture-qwen2-f16");
    return test_summary();
}
