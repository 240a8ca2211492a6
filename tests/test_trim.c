/*
 * plm_context_trim, an app's answer to onTrimMemory / didReceiveMemoryWarning:
 * after a long sequence was cached and cut back, trimming hands the KV pages
 * past the cut and the scratch buffers back (the process's anonymous RSS,
 * read from /proc/self/status by this test, drops by at least the bytes of
 * those pages), and decoding afterwards gives bit-identical logits to a
 * context that was never trimmed.  Two threads: the trimmed pool restarts.
 */
#include <string.h>

#include "pocketlm.h"
#include "pocketlm_plan.h"
#include "test.h"

#define STORIES SHARED("models/stories260K.gguf")
#define N_FILL 768
#define N_KEEP 16

static uint64_t rss_anon(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "RssAnon:", 8)) kb = strtoull(line + 8, NULL, 10);
    fclose(f);
    return kb * 1024;
}

/* Fill the cache with N_FILL tokens, cut it back to N_KEEP, optionally trim,
 * then decode `next`; returns the logits (malloc'd). */
static float *fill_cut_decode(plm_model *m, plm_trim_level level, bool trim, uint64_t *drop, uint64_t *released) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 1024;
    cp.n_batch = 512;
    cp.n_threads = 2;
    plm_context *c;
    plm_error err;
    if (plm_context_new(m, &cp, &c, &err)) return NULL;
    plm_token *toks = malloc(N_FILL * sizeof *toks);
    for (int i = 0; i < N_FILL; i++) toks[i] = 1 + (i * 37) % 500;
    float *out = NULL;
    if (plm_decode(c, toks, N_FILL, &err) == PLM_OK) {
        plm_kv_truncate(c, N_KEEP);
        if (trim) {
            uint64_t before = rss_anon();
            *released = plm_context_trim(c, level);
            uint64_t after = rss_anon();
            *drop = before > after ? before - after : 0;
        }
        plm_token next[3] = {42, 77, 301};
        if (plm_decode(c, next, 3, &err) == PLM_OK) {
            const int nv = plm_model_n_vocab(m);
            out = malloc((size_t)nv * sizeof *out);
            memcpy(out, plm_get_logits(c, -1), (size_t)nv * sizeof *out);
        } else {
            fprintf(stderr, "decode after trim: %s\n", err.message);
        }
    }
    free(toks);
    plm_context_free(c);
    return out;
}

int main(void) {
    plm_model *m;
    plm_error err;
    REQUIRE(plm_model_load(STORIES, NULL, &m, &err) == PLM_OK, "load: %s", err.message);
    plm_plan_params pp = plm_plan_default_params();
    pp.n_ctx = 1024;
    pp.n_threads = 2;
    plm_plan plan;
    REQUIRE(plm_plan_file(STORIES, &pp, &plan, &err) == PLM_OK, "plan: %s", err.message);
    /* KV pages written past the cut, every layer, keys and values. */
    const uint64_t kv_past = (uint64_t)plan.n_layer * (N_FILL - N_KEEP) * (plan.buf.kv_row_k + plan.buf.kv_row_v);

    uint64_t d0 = 0, r0 = 0;
    float *ref = fill_cut_decode(m, PLM_TRIM_SCRATCH, false, &d0, &r0);
    REQUIRE(ref != NULL, "reference decode");
    const int nv = plm_model_n_vocab(m);
    const plm_trim_level levels[] = {PLM_TRIM_SCRATCH, PLM_TRIM_KV, PLM_TRIM_WEIGHTS};
    uint64_t scratch_drop = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t drop = 0, released = 0;
        float *got = fill_cut_decode(m, levels[i], true, &drop, &released);
        printf("level %d: released %.2f MiB of address space, RssAnon -%.2f MiB (KV past the cut %.2f MiB)\n", i,
               released / 1048576.0, drop / 1048576.0, kv_past / 1048576.0);
        CHECK(got && !memcmp(got, ref, (size_t)nv * sizeof *got), "level %d: decode after trim gives the same logits",
              i);
        if (levels[i] >= PLM_TRIM_KV)
            CHECK(drop >= scratch_drop + kv_past * 9 / 10,
                  "level %d: RssAnon dropped %llu bytes: the scratch (%llu) and the KV past the cut (%llu)", i,
                  (unsigned long long)drop, (unsigned long long)scratch_drop, (unsigned long long)kv_past);
        else
            CHECK((scratch_drop = drop) > 0, "level %d: the scratch trim lowers RssAnon (dropped %llu)", i, (unsigned long long)drop);
        CHECK(released >= drop, "level %d: released %llu >= dropped %llu", i, (unsigned long long)released,
              (unsigned long long)drop);
        free(got);
    }
    CHECK(plm_context_trim(NULL, PLM_TRIM_KV) == 0, "NULL context");
    free(ref);
    plm_model_free(m);
    return test_summary();
}
