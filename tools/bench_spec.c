/*
 * pocketlm bench with --draft-model / --lookup / --lookup-cache: speculative
 * decoding against plain decoding of the same prompt, greedy (so both write
 * the same tokens, which is checked), in alternating rounds in one process so
 * that a machine busy with other work slows both alike.  Each round times the
 * generation of n tokens after the prompt, once plain and once speculative
 * (order alternating), with a fresh speculative state each round, so the
 * adaptive control's learning is part of what is measured.  Reported: the
 * median of the per-round speed ratios, acceptance (accepted / proposed) and
 * the mean tokens per verification.
 */
#include "bench_spec.h"

#include <stdlib.h>
#include <string.h>

#include "measure.h"

typedef struct round_result {
    uint64_t ns;
    plm_spec_stats st;
} round_result;

/* Generates n_gen tokens after the prompt, plainly (spec NULL) or with spec;
 * times the generation only.  out gets the tokens. */
static plm_status generate(plm_model *m, plm_context *ctx, plm_spec *spec, const plm_token *prompt, int n_prompt, int n_gen,
                           plm_token *out, round_result *r, plm_error *err) {
    plm_kv_truncate(ctx, 0);
    plm_status st = plm_decode(ctx, prompt, n_prompt, err);
    if (!st && spec) st = plm_spec_begin(spec, prompt, n_prompt, err);
    if (st) return st;
    plm_sampler_params sp = plm_sampler_default_params();
    sp.temperature = 0.0f;
    plm_sampler *smp = plm_sampler_new(m, &sp);
    if (!smp) return PLM_ERR_NOMEM;
    const uint64_t t0 = measure_now_ns();
    out[0] = plm_sampler_sample(smp, plm_get_logits(ctx, -1));
    int n = 1;
    while (!st && n < n_gen) {
        if (spec) {
            int m = 0;
            st = plm_spec_step(spec, smp, out[n - 1], out + n, n_gen - n, &m, err);
            n += m;
        } else {
            st = plm_decode(ctx, &out[n - 1], 1, err);
            if (!st) out[n] = plm_sampler_sample(smp, plm_get_logits(ctx, -1)), n++;
        }
    }
    r->ns = measure_now_ns() - t0;
    if (spec) plm_spec_get_stats(spec, &r->st);
    plm_sampler_free(smp);
    return st;
}

int bench_spec(const char *model_path, spec_cli *so, const char *prompt, int n_gen, int n_threads, int n_batch,
               int reps) {
    plm_error err;
    plm_model *m = NULL;
    plm_context *ctx = NULL;
    plm_token *toks = NULL, *a = NULL, *b = NULL;
    double *ratios = malloc((size_t)reps * sizeof *ratios);
    int rc = 1, n_prompt = 0;
    if (!ratios || plm_model_load(model_path, NULL, &m, &err)) {
        fprintf(stderr, "pocketlm bench: %s\n", ratios ? err.message : "out of memory");
        goto out;
    }
    toks = plm_tokenize_alloc(m, prompt, strlen(prompt), &n_prompt, true, false);
    a = malloc((size_t)(n_gen + 1) * sizeof *a);
    b = malloc((size_t)(n_gen + 1) * sizeof *b);
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = (uint32_t)(n_prompt + n_gen + so->draft_max + 16);
    cp.n_batch = (uint32_t)n_batch;
    cp.n_threads = (uint32_t)n_threads;
    if (!toks || !a || !b || n_prompt < 1 || plm_context_new(m, &cp, &ctx, &err)) {
        fprintf(stderr, "pocketlm bench: %s\n", toks && a && b && n_prompt ? err.message : "prompt or memory");
        goto out;
    }
    if (!spec_cli_open("bench", so, ctx, &cp, true)) goto out;
    const plm_spec_params sp = spec_cli_params(so);
    printf("speculative decoding: %s, %s; prompt %d tokens, %d generated, %d threads, greedy, %d alternating rounds\n\n",
           model_path, so->draft_model ? so->draft_model : so->lookup ? "prompt lookup" : "n-gram cache", n_prompt,
           n_gen, n_threads, reps);
    printf("| round | plain t/s | speculative t/s | speedup | accepted | tokens/verification | plain steps | same output |\n");
    printf("| ----: | --------: | --------------: | ------: | -------: | ------------------: | ----------: | :---------: |\n");
    uint64_t proposed = 0, accepted = 0, verifications = 0;
    bool all_same = true;
    for (int r = -1; r < reps; r++) {  /* round -1 warms up */
        round_result plain = {0}, spec = {0};
        plm_spec *s = NULL;
        plm_status st = plm_spec_new(ctx, so->dctx, &sp, &s, &err);
        for (int order = 0; order < 2 && !st; order++) {
            const bool do_spec = (order == 0) == (r % 2 != 0);
            st = generate(m, ctx, do_spec ? s : NULL, toks, n_prompt, n_gen, do_spec ? b : a, do_spec ? &spec : &plain,
                          &err);
        }
        plm_spec_free(s);
        if (st) {
            fprintf(stderr, "pocketlm bench: %s\n", err.message);
            goto out;
        }
        if (r < 0) continue;
        const bool same = !memcmp(a, b, (size_t)n_gen * sizeof *a);
        all_same = all_same && same;
        ratios[r] = (double)plain.ns / (double)spec.ns;
        proposed += spec.st.proposed;
        accepted += spec.st.accepted;
        verifications += spec.st.verifications;
        printf("| %5d | %9.2f | %15.2f | %6.3fx | %7.1f%% | %19.2f | %11llu | %11s |\n", r + 1, n_gen * 1e9 / plain.ns,
               n_gen * 1e9 / spec.ns, ratios[r],
               spec.st.proposed ? 100.0 * spec.st.accepted / spec.st.proposed : 0.0,
               spec.st.verifications ? (double)(spec.st.accepted + spec.st.verifications) / spec.st.verifications : 0.0,
               (unsigned long long)spec.st.paused_steps, same ? "yes" : "NO");
    }
    printf("\nspeedup (median of %d rounds): %.3fx | acceptance %.1f%% | %.2f tokens per verification | output %s\n",
           reps, measure_median(ratios, reps), proposed ? 100.0 * accepted / proposed : 0.0,
           verifications ? (double)(accepted + verifications) / verifications : 0.0,
           all_same ? "identical to plain decoding" : "DIFFERS from plain decoding");
    rc = all_same ? 0 : 1;
out:
    spec_cli_close("bench", so);
    plm_context_free(ctx);
    plm_model_free(m);
    free(toks);
    free(a);
    free(b);
    free(ratios);
    return rc;
}
