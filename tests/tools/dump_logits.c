/*
 * dump_logits [-u N] MODEL.gguf OUT.f32 [-c N_CTX] [-b N_BATCH] [-s AT,KEEP,DROP] [-r] TOKEN...:
 * evaluates the tokens (in one batch, or batches of N_BATCH; -u N is the
 * same as -b N, and -u 1 decodes them one at a time) and writes the logits of
 * every position (n_tokens x n_vocab float32, host byte order) to OUT.f32.
 * The context holds max(64, n_tokens) positions unless -c says otherwise.
 * -s: after the first AT tokens, a context shift drops DROP cached tokens
 * after the first KEEP (plm_kv_shift), and the rest follow.  -r: the
 * matrices repacked (plm_model_params.repack), their bytes on stderr.
 * The oracle tests compare them with llama.cpp's distribution over the same
 * file (tests/oracle/families.test.mjs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocketlm.h"

int main(int argc, char **argv) {
    int first = 3, n_ctx = 0, n_batch = 0, shift_at = -1, keep = 0, drop = 0;
    if (argc > 2 && !strcmp(argv[1], "-u")) {
        n_batch = atoi(argv[2]);
        argc -= 2;
        argv += 2;
    }
    bool bad = false, repack = false;
    for (;;) {
        if (first < argc && !strcmp(argv[first], "-r")) {
            repack = true;
            first++;
            continue;
        }
        if (!(first + 1 < argc && (!strcmp(argv[first], "-c") || !strcmp(argv[first], "-b") || !strcmp(argv[first], "-s"))))
            break;
        if (argv[first][1] == 's') bad |= sscanf(argv[first + 1], "%d,%d,%d", &shift_at, &keep, &drop) != 3;
        else *(argv[first][1] == 'c' ? &n_ctx : &n_batch) = atoi(argv[first + 1]);
        first += 2;
    }
    if (bad || argc <= first || n_ctx < 0 || n_batch < 0 || (shift_at >= 0 && (keep < 0 || drop < 0))) {
        fprintf(stderr, "usage: dump_logits [-u N] MODEL.gguf OUT.f32 [-c N_CTX] [-b N_BATCH] [-s AT,KEEP,DROP] [-r] TOKEN...\n");
        return 2;
    }
    const int n = argc - first;
    plm_token *toks = malloc((size_t)n * sizeof *toks);
    if (!toks) return 1;
    for (int i = 0; i < n; i++) toks[i] = (plm_token)atoi(argv[first + i]);
    if (n_batch == 0 || n_batch > n) n_batch = n;

    plm_model_params mp = plm_model_default_params();
    plm_model *model = NULL;
    plm_context *ctx = NULL;
    plm_error err;
    int rc = 1;
    FILE *out = NULL;
    mp.repack = repack;
    if (plm_model_load(argv[1], &mp, &model, &err)) goto fail;
    if (repack) fprintf(stderr, "repacked %llu bytes\n", (unsigned long long)plm_model_repacked_bytes(model));
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = (uint32_t)(n_ctx ? n_ctx : n < 64 ? 64 : n);
    cp.n_batch = (uint32_t)n_batch;
    cp.logits_all = true;
    if (plm_context_new(model, &cp, &ctx, &err)) goto fail;
    if (!(out = fopen(argv[2], "wb"))) {
        fprintf(stderr, "dump_logits: cannot write %s\n", argv[2]);
        goto done;
    }
    const size_t nv = (size_t)plm_model_n_vocab(model);
    for (int b = 0, nb; b < n; b += nb) {  /* each batch's logits before the next overwrites them */
        nb = n - b < n_batch ? n - b : n_batch;
        if (b < shift_at && b + nb > shift_at) nb = shift_at - b;  /* a batch ends where the shift is */
        if (b == shift_at && plm_kv_shift(ctx, (uint32_t)keep, (uint32_t)drop, &err)) goto fail;
        if (plm_decode(ctx, toks + b, nb, &err)) goto fail;
        for (int i = 0; i < nb; i++)
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
