/*
 * dump_logits [-u N] MODEL.gguf OUT.f32 TOKEN...: evaluates the tokens in one
 * batch (or in batches of N: -u 1 decodes them one at a time) and writes the
 * logits of every position (n_tokens x n_vocab float32, host byte order) to
 * OUT.f32.  The oracle tests compare them with llama.cpp's distribution
 * over the same file (tests/oracle/families.test.mjs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocketlm.h"

int main(int argc, char **argv) {
    int ubatch = 0;  /* 0: all in one batch */
    if (argc > 2 && !strcmp(argv[1], "-u")) {
        ubatch = atoi(argv[2]);
        argc -= 2;
        argv += 2;
    }
    if (argc < 4 || ubatch < 0) {
        fprintf(stderr, "usage: dump_logits [-u N] MODEL.gguf OUT.f32 TOKEN...\n");
        return 2;
    }
    const int n = argc - 3;
    plm_token *toks = malloc((size_t)n * sizeof *toks);
    if (!toks) return 1;
    for (int i = 0; i < n; i++) toks[i] = (plm_token)atoi(argv[3 + i]);

    plm_model_params mp = plm_model_default_params();
    plm_model *model = NULL;
    plm_context *ctx = NULL;
    plm_error err;
    int rc = 1;
    FILE *out = NULL;
    if (plm_model_load(argv[1], &mp, &model, &err)) goto fail;
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = (uint32_t)(n < 64 ? 64 : n);
    const int per = ubatch && ubatch < n ? ubatch : n;
    cp.n_batch = (uint32_t)per;
    cp.logits_all = true;
    if (plm_context_new(model, &cp, &ctx, &err)) goto fail;
    if (!(out = fopen(argv[2], "wb"))) {
        fprintf(stderr, "dump_logits: cannot write %s\n", argv[2]);
        goto done;
    }
    const size_t nv = (size_t)plm_model_n_vocab(model);
    for (int i0 = 0; i0 < n; i0 += per) {
        const int m = n - i0 < per ? n - i0 : per;
        if (plm_decode(ctx, toks + i0, m, &err)) goto fail;
        for (int i = 0; i < m; i++)
            if (fwrite(plm_get_logits(ctx, i), sizeof(float), nv, out) != nv) goto done;
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "dump_logits: %s\n", err.message);
done:
    if (out && fclose(out)) rc = 1;
    plm_context_free(ctx);
    plm_model_free(model);
    free(toks);
    return rc;
}
