/*
 * Context shift: dropping tokens from a full cache and re-rotating the kept
 * keys, and a 1,000-turn conversation whose memory stays flat.
 */
#include <math.h>
#include <string.h>

#include "pocketlm.h"
#include "runtime/context.h"
#include "quant/fp16.h"
#include "test.h"

/* Re-rotating by -d then +d must give back the keys (up to f16 rounding):
 * RoPE angles add, so the shift moved each key exactly d positions. */
static void test_rotation_composes(plm_model *m) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 64;
    plm_context *ctx;
    plm_error err;
    REQUIRE_VOID(plm_context_new(m, &cp, &ctx, &err) == PLM_OK, "%s", err.message);
    plm_token toks[20];
    for (int i = 0; i < 20; i++) toks[i] = 10 + 7 * i;
    REQUIRE_VOID(plm_decode(ctx, toks, 20, &err) == PLM_OK, "%s", err.message);
    plm_kv_cache *kv = &ctx->fwd.kv;
    uint16_t before[10][1024];
    for (int j = 0; j < 10; j++) memcpy(before[j], plm_kv_keys(kv, 0, 0, 10 + j), kv->k_row);

    CHECK(plm_kv_shift(ctx, 4, 6, &err) == PLM_OK && plm_context_n_past(ctx) == 14, "shift");
    CHECK(plm_kv_shift(ctx, 10, 10, &err) == PLM_ERR_INVALID_ARG, "cannot drop more than is cached");
    plm_forward_rerotate(&ctx->fwd, kv, 0, 4, 10, +6);
    float worst = 0;
    for (int j = 0; j < 10; j++)
        for (int i = 0; i < kv->kv_dim; i++) {
            float a = plm_fp16_to_fp32(before[j][i]);
            float b = plm_fp16_to_fp32(((const uint16_t *)plm_kv_keys(kv, 0, 0, 4 + j))[i]);
            if (fabsf(a - b) > worst) worst = fabsf(a - b);
        }
    CHECK(worst < 0.01f, "keys after -6/+6 rotation differ by %g", worst);
    /* and decoding goes on from the shifted state */
    CHECK(plm_decode(ctx, toks, 5, &err) == PLM_OK && plm_context_n_past(ctx) == 19, "decode after shift");
    plm_context_free(ctx);
}

/* A long chat in a small context: each turn appends tokens and shifts when
 * full.  After warm-up, the resident set must not grow. */
static void test_thousand_turns(plm_model *m) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;  /* thread stacks first touched late are not what we look for */
    plm_context *ctx;
    plm_error err;
    REQUIRE_VOID(plm_context_new(m, &cp, &ctx, &err) == PLM_OK, "%s", err.message);
    plm_sampler_params sp = plm_sampler_default_params();
    plm_sampler *s = plm_sampler_new(m, &sp);
    plm_mem_sample at100 = {0}, at1000 = {0};
    int shifts = 0;
    for (int turn = 1; turn <= 1000; turn++) {
        plm_token t = (plm_token)(turn % 400) + 10;  /* the "user" says one token (vocab: 512) */
        for (int i = 0; i < 8; i++) {                /* the model answers eight */
            if (plm_context_n_past(ctx) + 1 > plm_context_n_ctx(ctx)) {
                const uint32_t keep = 4, drop = (plm_context_n_past(ctx) - keep) / 2;
                CHECK(plm_kv_shift(ctx, keep, drop, &err) == PLM_OK, "shift: %s", err.message);
                shifts++;
            }
            if (plm_decode(ctx, &t, 1, &err) != PLM_OK) {
                CHECK(0, "turn %d: %s", turn, err.message);
                goto out;
            }
            t = plm_sampler_sample(s, plm_get_logits(ctx, -1));
            plm_sampler_accept(s, t);
        }
        if (turn == 100) plm_mem_sample_now(&at100);
    }
    plm_mem_sample_now(&at1000);
    printf("RSS after 100 turns %.0f KiB (anon %.0f, file %.0f), after 1000 turns %.0f KiB (anon %.0f, file %.0f), %d shifts\n", at100.rss_bytes / 1024.0, at100.rss_anon_bytes / 1024.0, at100.rss_file_bytes / 1024.0,
           at1000.rss_bytes / 1024.0, at1000.rss_anon_bytes / 1024.0, at1000.rss_file_bytes / 1024.0, shifts);
    CHECK(shifts > 100, "the context filled and shifted (%d)", shifts);
    /* Anonymous memory (KV cache, buffers, heap) must not grow.  File-backed
     * pages may: weights of tokens not seen before (embedding rows, code)
     * page in as the conversation goes on, bounded by the file sizes. */
    CHECK(at1000.rss_anon_bytes <= at100.rss_anon_bytes + 64 * 1024, "anonymous memory grew from %llu to %llu bytes",
          (unsigned long long)at100.rss_anon_bytes, (unsigned long long)at1000.rss_anon_bytes);
out:
    plm_sampler_free(s);
    plm_context_free(ctx);
}

int main(void) {
    plm_model *m;
    plm_error err;
    REQUIRE(plm_model_load(SHARED("models/fixtures/fixture-llama-f16.gguf"), NULL, &m, &err) == PLM_OK, "%s",
            err.message);
    test_rotation_composes(m);
    plm_model_free(m);
    REQUIRE(plm_model_load(SHARED("models/stories260K.gguf"), NULL, &m, &err) == PLM_OK, "%s", err.message);
    test_thousand_turns(m);
    plm_model_free(m);
    return test_summary();
}
