/*
 * pocketlm tune: measure prompt processing and generation over a grid of
 * thread counts and batch sizes on this device, and save the best as its
 * defaults for run, chat, serve and bench.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "config.h"
#include "measure.h"
#include "pocketlm.h"
#include "pocketlm_plan.h"

enum { MAX_GRID = 32 };

typedef struct tune_opts {
    const char *model, *threads, *batches;
    int n_prompt, n_gen, reps;
    bool dry_run;
} tune_opts;

static int parse_grid(const char *s, int *out, const char *what) {
    int n = 0;
    for (const char *p = s; *p && n < MAX_GRID;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v <= 0 || v > 4096) {
            fprintf(stderr, "pocketlm tune: %s list '%s' must be positive numbers separated by commas\n", what, s);
            return 0;
        }
        out[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return 0;
    }
    return n;
}

/* Median tokens/s of `reps` samples of pp (batch > 0) or tg (batch == 0). */
static double sample(plm_model *m, int threads, int batch, const tune_opts *o, plm_error *err) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = (uint32_t)(o->n_prompt + o->n_gen + 8);
    cp.n_threads = (uint32_t)threads;
    cp.n_batch = (uint32_t)(batch ? batch : 512);
    plm_context *ctx;
    if (plm_context_new(m, &cp, &ctx, err)) return -1;
    const int n = batch ? o->n_prompt : o->n_gen;
    plm_token *toks = malloc((size_t)n * sizeof *toks);
    double tps[64];
    uint64_t rng = 0x9e3779b97f4a7c15ull, ns;
    int k = 0;
    for (int r = 0; toks && r <= o->reps && r < 64; r++) {  /* r == 0 warms up */
        plm_status st = batch ? measure_pp(ctx, toks, n, plm_model_n_vocab(m), &rng, &ns, err)
                              : measure_tg(ctx, toks, n, plm_model_n_vocab(m), &rng, &ns, err);
        if (st) break;
        if (r > 0) tps[k++] = n / (ns * 1e-9);
    }
    free(toks);
    plm_context_free(ctx);
    return k ? measure_median(tps, k) : -1;
}

static int usage_error(const arg_parser *p) {
    args_free(p);
    return 1;
}

int cmd_tune(int argc, char **argv) {
    tune_opts o = {.n_prompt = 128, .n_gen = 32, .reps = 3};
    char default_threads[64] = "";
    plm_cpu_info *ci = calloc(1, sizeof *ci);
    int logical = ci && plm_probe_cpu(ci, NULL) == PLM_OK && ci->n_allowed ? (int)ci->n_allowed : 1;
    free(ci);
    for (int t = 1, len = 0; t <= logical && t <= 16; t++)
        len += snprintf(default_threads + len, sizeof default_threads - (size_t)len, "%s%d", t > 1 ? "," : "", t);
    o.threads = default_threads;
    o.batches = "64,128,256,512";
    const arg_spec specs[] = {
        {"-m", "--model", ARG_STR, &o.model, "PATH", "GGUF model to measure with"},
        {"-t", "--threads", ARG_STR, &o.threads, "LIST", "thread counts to try"},
        {"-b", "--batch-size", ARG_STR, &o.batches, "LIST", "prompt batch sizes to try"},
        {"-p", "--n-prompt", ARG_INT, &o.n_prompt, "N", "prompt tokens per prefill sample"},
        {"-n", "--n-gen", ARG_INT, &o.n_gen, "N", "tokens per generation sample"},
        {"-r", "--repetitions", ARG_INT, &o.reps, "N", "samples per grid point (median)"},
        {NULL, "--dry-run", ARG_FLAG, &o.dry_run, NULL, "print the grid and the config path; measure nothing"},
    };
    const arg_parser parser = {"tune", "pocketlm tune -m MODEL.gguf [options]", specs, sizeof specs / sizeof specs[0], 0};
    char *pos[1];
    int n_pos, threads[MAX_GRID], batches[MAX_GRID];
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) return rc == ARGS_HELP ? 0 : usage_error(&parser);
    const int nt = parse_grid(o.threads, threads, "thread"), nb = parse_grid(o.batches, batches, "batch");
    if (!nt || !nb) return usage_error(&parser);
    if (o.n_prompt < 1 || o.n_gen < 1 || o.reps < 1 || o.reps > 63) {
        fprintf(stderr, "pocketlm tune: -p and -n must be positive, -r between 1 and 63\n");
        return usage_error(&parser);
    }
    char path[1024];
    if (!config_path(path, sizeof path)) snprintf(path, sizeof path, "(no HOME: results not saved)");

    printf("grid: threads {%s} x batch {%s}: %d prefill points (pp%d) and %d generation points (tg%d), %d samples each\n",
           o.threads, o.batches, nt * nb, o.n_prompt, nt, o.n_gen, o.reps);
    printf("defaults file: %s\n", path);
    if (o.dry_run) {
        args_free(&parser);
        return 0;
    }
    if (!o.model) {
        fprintf(stderr, "pocketlm tune: give a model with -m\n");
        return usage_error(&parser);
    }

    plm_model *m;
    plm_error err;
    if (plm_model_load(o.model, NULL, &m, &err)) {
        fprintf(stderr, "pocketlm tune: %s\n", err.message);
        return usage_error(&parser);
    }
    tuned_defaults best = {0};
    double best_tg = 0, best_pp = 0;
    printf("\n| threads | batch | pp t/s   | tg t/s   |\n|--------:|------:|---------:|---------:|\n");
    for (int i = 0; i < nt; i++) {
        double tg = sample(m, threads[i], 0, &o, &err);
        for (int j = 0; j < nb; j++) {
            double pp = sample(m, threads[i], batches[j], &o, &err);
            printf("| %7d | %5d | %8.1f | %8.1f |\n", threads[i], batches[j], pp, tg);
            fflush(stdout);
            if (pp > best_pp) {
                best_pp = pp;
                best.batch = batches[j];
            }
        }
        if (tg > best_tg) {
            best_tg = tg;
            best.threads = threads[i];
        }
    }
    plm_model_free(m);
    args_free(&parser);
    if (!best.threads || !best.batch) {
        fprintf(stderr, "pocketlm tune: no measurement succeeded: %s\n", err.message);
        return 1;
    }
    config_cpu_model(best.cpu, sizeof best.cpu);
    char why[1200];
    if (!config_save(&best, why, sizeof why)) {
        fprintf(stderr, "pocketlm tune: %s\n", why);
        return 1;
    }
    printf("\nbest: %d threads for generation (%.1f t/s), batch %d for prompts (%.1f t/s); saved to %s\n",
           best.threads, best_tg, best.batch, best_pp, path);
    return 0;
}
