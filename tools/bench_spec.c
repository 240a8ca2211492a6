/*
 * pocketlm bench with --draft-model / --lookup / --lookup-cache: speculative
 * decoding against plain decoding of the same prompt, greedy (so both write
 * the same tokens, which is checked).  On a shared machine the speed of one
 * run drifts by tens of percent within seconds, so the two are interleaved
 * step by step: each round decodes the prompt into two contexts, then runs
 * speculative steps (timed) for CHUNK tokens and as many plain steps (timed) as
 * bring plain decoding level with them, and so on until both have n tokens; both sides
 * see the same moments of the machine's load.  A fresh speculative state each
 * round makes the adaptive control's learning part of what is measured.
 * Reported per round and as medians: the speed ratio, acceptance (accepted
 * / proposed) and the mean tokens per verification.  The ratio is given in
 * wall time and in the process's CPU time: while other programs hold the
 * cores, wall time counts the moments this process waited for a core, CPU
 * time only what its threads ran (memory stalls included), which is what the
 * decode would take with the cores to itself.
 */
#include "bench_spec.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "measure.h"

/* Tokens each side runs before the other takes over: a few seconds of a
 * bandwidth-bound model, long enough that switching contexts (their
 * buffers leave the CPU caches) costs nothing worth measuring on a tiny one. */
#define CHUNK 16

typedef struct side {
    plm_context *ctx;
    plm_sampler *smp;
    plm_token *out;
    int n;
    uint64_t ns, cpu_ns;
} side;

static uint64_t cpu_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static plm_status start(plm_model *m, side *d, plm_spec *spec, const plm_token *prompt, int n_prompt,
                        plm_error *err) {
    plm_kv_truncate(d->ctx, 0);
    plm_status st = plm_decode(d->ctx, prompt, n_prompt, err);
    if (!st && spec) st = plm_spec_begin(spec, prompt, n_prompt, err);
    if (st) return st;
    plm_sampler_params sp = plm_sampler_default_params();
    sp.temperature = 0.0f;
    plm_sampler_free(d->smp);
    d->smp = plm_sampler_new(m, &sp);
    if (!d->smp) return PLM_ERR_NOMEM;
    d->out[0] = plm_sampler_sample(d->smp, plm_get_logits(d->ctx, -1));
    d->n = 1;
    d->ns = d->cpu_ns = 0;
    return PLM_OK;
}

/* One step of either side: a speculative step (several tokens) or one plain token. */
static plm_status step(side *d, plm_spec *spec, int n_gen, plm_error *err) {
    const uint64_t t0 = measure_now_ns(), c0 = cpu_now_ns();
    plm_status st;
    if (spec) {
        int m = 0;
        st = plm_spec_step(spec, d->smp, d->out[d->n - 1], d->out + d->n, n_gen - d->n, &m, err);
        d->n += m;
    } else {
        st = plm_decode(d->ctx, &d->out[d->n - 1], 1, err);
        if (!st) d->out[d->n] = plm_sampler_sample(d->smp, plm_get_logits(d->ctx, -1)), d->n++;
    }
    d->ns += measure_now_ns() - t0;
    d->cpu_ns += cpu_now_ns() - c0;
    return st;
}

/* The workload that quotes its input (--spec-quote): the prompt, its own
 * greedy continuation of n_gen tokens, and the prompt again, whose greedy
 * continuation then repeats much of the first (what prompt lookup is for: a
 * summary, a rewrite, a code edit quoting their context).  Built from token
 * ids, so no retokenization moves a seam.  *toks grows in place. */
static plm_status quote_prompt(plm_model *m, side *d, plm_token **toks, int *n_prompt, int n_gen, plm_error *err) {
    const int n = *n_prompt, first = plm_vocab_add_bos(m) ? 1 : 0;
    plm_token *t = realloc(*toks, (size_t)(2 * n + n_gen) * sizeof *t);
    if (!t) {
        snprintf(err->message, sizeof err->message, "out of memory for the quoting prompt");
        return err->code = PLM_ERR_NOMEM;
    }
    *toks = t;
    plm_status st = start(m, d, NULL, t, n, err);
    while (!st && d->n < n_gen) st = step(d, NULL, n_gen, err);
    if (st) return st;
    memcpy(t + n, d->out, (size_t)n_gen * sizeof *t);
    memcpy(t + n + n_gen, t + first, (size_t)(n - first) * sizeof *t);
    *n_prompt = 2 * n - first + n_gen;
    return PLM_OK;
}

/* One round: both sides to n_gen tokens, interleaved. */
static plm_status round_run(plm_model *m, side *plain, side *sp, plm_spec *spec, const plm_token *prompt,
                            int n_prompt, int n_gen, plm_error *err) {
    plm_status st = start(m, plain, NULL, prompt, n_prompt, err);
    if (!st) st = start(m, sp, spec, prompt, n_prompt, err);
    while (!st && (sp->n < n_gen || plain->n < n_gen)) {
        const int goal = sp->n + CHUNK < n_gen ? sp->n + CHUNK : n_gen;
        while (!st && sp->n < goal) st = step(sp, spec, n_gen, err);
        while (!st && plain->n < sp->n) st = step(plain, NULL, n_gen, err);
    }
    return st;
}

int bench_spec(const char *model_path, bool repack, spec_cli *so, const char *prompt, bool quote, int n_gen, int n_threads,
               int n_batch, int reps) {
    plm_error err;
    plm_model *m = NULL;
    side plain = {0}, sp = {0};
    plm_token *toks = NULL;
    double *ratios = malloc((size_t)reps * 2 * sizeof *ratios), *cpu_ratios = ratios + reps;
    int rc = 1, n_prompt = 0;
    if (n_gen < 2) n_gen = 2;
    plm_model_params mp = plm_model_default_params();
    mp.repack = repack;
    if (!ratios || plm_model_load(model_path, &mp, &m, &err)) {
        fprintf(stderr, "pocketlm bench: %s\n", ratios ? err.message : "out of memory");
        goto out;
    }
    toks = plm_tokenize_alloc(m, prompt, strlen(prompt), &n_prompt, true, false);
    plain.out = malloc((size_t)(n_gen + 1) * sizeof *plain.out);
    sp.out = malloc((size_t)(n_gen + 1) * sizeof *sp.out);
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = (uint32_t)((quote ? 2 * n_prompt + n_gen : n_prompt) + n_gen + so->draft_max + 16);
    cp.n_batch = (uint32_t)n_batch;
    cp.n_threads = (uint32_t)n_threads;
    if (!toks || !plain.out || !sp.out || n_prompt < 1 || plm_context_new(m, &cp, &plain.ctx, &err) ||
        plm_context_new(m, &cp, &sp.ctx, &err)) {
        fprintf(stderr, "pocketlm bench: %s\n", toks && plain.out && sp.out && n_prompt ? err.message : "prompt or memory");
        goto out;
    }
    const int quote_at = n_prompt; /* where the quoted continuation starts in toks */
    if (quote && quote_prompt(m, &plain, &toks, &n_prompt, n_gen, &err)) {
        fprintf(stderr, "pocketlm bench: %s\n", err.message);
        goto out;
    }
    if (!spec_cli_open("bench", so, sp.ctx, &cp, true)) goto out;
    const plm_spec_params params = spec_cli_params(so);
    printf("speculative decoding: %s%s, %s; prompt %d tokens%s, %d generated, %d threads, greedy, %d rounds, plain "
           "and speculative steps interleaved\n\n",
           model_path, plm_model_repacked_bytes(m) ? " (repacked)" : "", so->draft_model ? so->draft_model : so->lookup ? "prompt lookup" : "n-gram cache", n_prompt,
           quote ? " (quoting: prompt, its continuation, prompt)" : "", n_gen, n_threads, reps);
    printf("| round | plain t/s | speculative t/s | speedup | speedup, CPU time | accepted | tokens/verification | plain steps | same output |\n");
    printf("| ----: | --------: | --------------: | ------: | ----------------: | -------: | ------------------: | ----------: | :---------: |\n");
    uint64_t proposed = 0, accepted = 0, verifications = 0;
    bool all_same = true;
    for (int r = -1; r < reps; r++) {  /* round -1 warms up */
        plm_spec *s = NULL;
        plm_spec_stats st = {0};
        plm_status e = plm_spec_new(sp.ctx, so->dctx, &params, &s, &err);
        if (!e) e = round_run(m, &plain, &sp, s, toks, n_prompt, n_gen, &err);
        if (s) plm_spec_get_stats(s, &st);
        plm_spec_free(s);
        if (e) {
            fprintf(stderr, "pocketlm bench: %s\n", err.message);
            goto out;
        }
        if (r < 0) continue;
        const bool same = !memcmp(plain.out, sp.out, (size_t)n_gen * sizeof *sp.out);
        all_same = all_same && same;
        ratios[r] = (double)plain.ns / (double)sp.ns;
        cpu_ratios[r] = (double)plain.cpu_ns / (double)sp.cpu_ns;
        proposed += st.proposed;
        accepted += st.accepted;
        verifications += st.verifications;
        printf("| %5d | %9.2f | %15.2f | %6.3fx | %16.3fx | %7.1f%% | %19.2f | %11llu | %11s |\n", r + 1,
               (n_gen - 1) * 1e9 / plain.ns, (n_gen - 1) * 1e9 / sp.ns, ratios[r], cpu_ratios[r],
               st.proposed ? 100.0 * st.accepted / st.proposed : 0.0,
               st.verifications ? (double)(st.accepted + st.verifications) / st.verifications : 0.0,
               (unsigned long long)st.paused_steps, same ? "yes" : "NO");
        fflush(stdout);
    }
    const double wall = measure_median(ratios, reps), cpu = measure_median(cpu_ratios, reps);
    printf("\nspeedup (median of %d rounds): %.3fx wall, %.3fx CPU time | acceptance %.1f%% | %.2f tokens per "
           "verification | output %s\n",
           reps, wall, cpu, proposed ? 100.0 * accepted / proposed : 0.0,
           verifications ? (double)(accepted + verifications) / verifications : 0.0,
           all_same ? "identical to plain decoding" : "DIFFERS from plain decoding");
    if (quote) { /* how much of the workload prompt lookup can find at all */
        int q = 0;
        while (q < n_gen && plain.out[q] == toks[quote_at + q]) q++;
        printf("the output repeats the quoted continuation for its first %d of %d tokens\n", q, n_gen);
    }
    rc = all_same ? 0 : 1;
out:
    spec_cli_close("bench", so);
    plm_context_free(sp.ctx);
    plm_context_free(plain.ctx);
    plm_sampler_free(sp.smp);
    plm_sampler_free(plain.smp);
    plm_model_free(m);
    free(toks);
    free(plain.out);
    free(sp.out);
    free(ratios);
    return rc;
}
