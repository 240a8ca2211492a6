/*
 * dump_logits MODEL.gguf OUT.f32 TOKEN...: evaluates the tokens in one batch
 * and writes the logits of every position (n_tokens x n_vocab float32, host
 * byte order) to OUT.f32.  The oracle tests compare them with llama.cpp's
 * distribution over the same file (tests/oracle/families.test.mjs).
 */
#include <stdio.h>
#include <stdlib.h>

#include "pocketlm.h"

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: dump_logits MODEL.gguf OUT.f32 TOKEN...\n");
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
    cp.n_batch = (uint32_t)n;
    cp.logits_all = true;
    if (plm_context_new(model, &cp, &ctx, &err) || plm_decode(ctx, toks, n, &err)) goto fail;
    if (!(out = fopen(argv[2], "wb"))) {
        fprintf(stderr, "dump_logits: cannot write %s\n", argv[2]);
        goto done;
    }
    const size_t nv = (size_t)plm_model_n_vocab(model);
    for (int i = 0; i < n; i++)
        if (fwrite(plm_get_logits(ctx, i), sizeof(float), nv, out) != nv) goto done;
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
