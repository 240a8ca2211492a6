/*
 * pocketlm perplexity and pocketlm kld: what quantization of the weights or of
 * the KV cache costs in quality, measured as llama.cpp's llama-perplexity
 * does (chunks of -c tokens, each in a fresh KV cache starting with BOS, the
 * second half of each scored).  perplexity --kld-save writes the base
 * model's log-probabilities; kld re-evaluates the same tokens with another
 * model or KV cache type and prints the KL divergence statistics.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "config.h"
#include "files.h"
#include "fit.h"
#include "measure.h"
#include "pocketlm.h"
#include "pocketlm_plan.h"
#include "pocketlm_eval.h"

typedef struct quality_opts {
    const char *model, *text, *kld_save, *base, *cache_type_k, *cache_type_v, *mem_limit;
    int n_ctx, n_batch, n_threads, n_chunks;
    bool no_mmap, flash_attn, coarse_prefill;
} quality_opts;

/* Progress: seconds for the first chunk and an ETA, as llama-perplexity. */
typedef struct progress {
    const char *cmd;
    uint64_t t0;
    bool eta_done;
} progress;

static void eta(progress *pg, int n_chunks) {
    if (pg->eta_done) return;
    pg->eta_done = true;
    const double s = (double)(measure_now_ns() - pg->t0) * 1e-9;
    fprintf(stderr, "pocketlm %s: %.2f seconds per pass - ETA %.2f minutes\n", pg->cmd, s, s * n_chunks / 60);
}

static bool cache_types_ok(const char *cmd, const quality_opts *o) {
    const char *bad = plm_kv_type_from_name(o->cache_type_k) < 0 ? o->cache_type_k
                      : plm_kv_type_from_name(o->cache_type_v) < 0 ? o->cache_type_v : NULL;
    if (!bad) return true;
    fprintf(stderr, "pocketlm %s: unknown cache type '%s': use f16, q8_0 or q4_0\n", cmd, bad);
    return false;
}

/* Loads the model and a logits_all context of n_ctx tokens: -b, -t and this
 * device's tuned defaults as in run, the KV types, checked against memory. */
static bool open_model(const char *cmd, const quality_opts *o, uint32_t n_ctx, plm_model **model,
                       plm_context **ctx) {
    *model = NULL;
    *ctx = NULL;
    int n_batch = o->n_batch, n_threads = o->n_threads;
    tuned_defaults tuned;
    if (config_load(&tuned)) {
        if (n_threads == 0) n_threads = tuned.threads;
        if (n_batch == 0) n_batch = tuned.batch;
    }
    if (n_batch == 0) n_batch = 512;
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = (uint32_t)n_batch < n_ctx ? (uint32_t)n_batch : n_ctx;
    cp.n_threads = (uint32_t)n_threads;
    cp.logits_all = true;
    cp.type_k = (plm_kv_type)plm_kv_type_from_name(o->cache_type_k);
    cp.type_v = (plm_kv_type)plm_kv_type_from_name(o->cache_type_v);
    cp.flash_attn = o->flash_attn;
    cp.coarse_prefill = o->coarse_prefill;
    if (!fit_context(cmd, o->model, !o->no_mmap, o->mem_limit, &cp)) return false;

    plm_model_params mp = plm_model_default_params();
    mp.use_mmap = !o->no_mmap;
    plm_error err;
    if (plm_model_load(o->model, &mp, model, &err) || plm_context_new(*model, &cp, ctx, &err)) {
        fprintf(stderr, "pocketlm %s: %s\n", cmd, err.message);
        plm_model_free(*model);
        *model = NULL;
        return false;
    }
    const int n_train = plm_model_n_ctx_train(*model);
    if (n_train > 0 && n_ctx > (uint32_t)n_train)
        fprintf(stderr, "pocketlm %s: warning: the model was trained on only %d context tokens (%u specified)\n", cmd,
                n_train, n_ctx);
    fprintf(stderr, "pocketlm %s: %s, context %u, batch %u, %u threads, KV cache %s/%s\n", cmd, o->model, n_ctx,
            cp.n_batch, cp.n_threads ? cp.n_threads : plm_default_threads(), o->cache_type_k, o->cache_type_v);
    return true;
}

/* ---- perplexity ---------------------------------------------------------- */

typedef struct ppl_progress {
    progress pg;
} ppl_progress;

static void ppl_progress_fn(void *user, const plm_ppl_result *r, int n_chunks) {
    ppl_progress *p = user;
    eta(&p->pg, n_chunks);
    printf("[%d]%.4f,", r->n_chunks, r->ppl);
    fflush(stdout);
}

static int perplexity(const quality_opts *o) {
    size_t len = 0;
    char *text = read_file(o->text, &len);
    if (!text) {
        fprintf(stderr, "pocketlm perplexity: cannot read %s: %s\n", o->text, strerror(errno));
        return 1;
    }
    if (len == 0) {
        fprintf(stderr, "pocketlm perplexity: %s is empty\n", o->text);
        free(text);
        return 1;
    }
    plm_model *model;
    plm_context *ctx;
    if (!open_model("perplexity", o, (uint32_t)o->n_ctx, &model, &ctx)) {
        free(text);
        return 1;
    }
    int rc = 1, n = 0;
    plm_token *toks = plm_tokenize_alloc(model, text, len, &n, true, false);
    free(text);
    if (!toks) {
        fprintf(stderr, "pocketlm perplexity: cannot tokenize %s (out of memory)\n", o->text);
        goto done;
    }
    if (n < 2 * o->n_ctx) {
        fprintf(stderr,
                "pocketlm perplexity: you need at least %d tokens to evaluate perplexity with a context of %d, "
                "but %s tokenizes to only %d tokens\n",
                2 * o->n_ctx, o->n_ctx, o->text, n);
        goto done;
    }
    int n_chunks = n / o->n_ctx;
    if (o->n_chunks > 0 && o->n_chunks < n_chunks) n_chunks = o->n_chunks;
    fprintf(stderr, "pocketlm perplexity: %d tokens, %d chunks of %d, scoring the last %d tokens of each\n", n,
            n_chunks, o->n_ctx, o->n_ctx - 1 - o->n_ctx / 2);

    ppl_progress pp = {{"perplexity", measure_now_ns(), false}};
    plm_ppl_params p = plm_ppl_default_params();
    p.n_ctx = (uint32_t)o->n_ctx;
    p.n_chunks = n_chunks;
    p.kld_save = o->kld_save;
    p.progress = ppl_progress_fn;
    p.user = &pp;
    plm_ppl_result r;
    plm_error err;
    plm_status st = plm_perplexity(ctx, toks, n, &p, &r, &err);
    printf("\n");
    if (st) {
        fprintf(stderr, "pocketlm perplexity: %s\n", err.message);
        goto done;
    }
    printf("Final estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_err);
    if (o->kld_save)
        fprintf(stderr, "pocketlm perplexity: saved the log-probabilities of %llu positions to %s\n",
                (unsigned long long)r.n_scored, o->kld_save);
    rc = 0;
done:
    free(toks);
    plm_context_free(ctx);
    plm_model_free(model);
    return rc;
}

/* Options both commands share. */
#define COMMON_SPECS(o)                                                                                          \
    {"-b", "--batch-size", ARG_INT, &(o).n_batch, "N", "tokens per forward pass, 0 = tuned, else 512"},     \
        {"-t", "--threads", ARG_INT, &(o).n_threads, "N", "threads, 0 = tuned, else the performance cores"},    \
        {NULL, "--chunks", ARG_INT, &(o).n_chunks, "N", "evaluate at most N chunks, 0 = all"},                  \
        {"-ctk", "--cache-type-k", ARG_STR, &(o).cache_type_k, "TYPE", "KV cache keys: f16, q8_0, q4_0"},       \
        {"-ctv", "--cache-type-v", ARG_STR, &(o).cache_type_v, "TYPE", "KV cache values: f16, q8_0, q4_0"},     \
        {NULL, "--mem-limit", ARG_STR, &(o).mem_limit, "SIZE", "refuse to plan past this (e.g. 2G); default: available RAM"}, \
        {"-fa", "--flash-attn", ARG_FLAG, &(o).flash_attn, NULL, "one-pass attention softmax (see pocketlm run)"}, \
        {NULL, "--coarse-prefill", ARG_FLAG, &(o).coarse_prefill, NULL, "coarse int8 K-quant products for large batches (see pocketlm run)"}, \
        {NULL, "--no-mmap", ARG_FLAG, &(o).no_mmap, NULL, "read the weights into memory instead of mapping"}

static bool common_checks(const char *cmd, const quality_opts *o) {
    if (!o->model) {
        fprintf(stderr, "pocketlm %s: no model given: pass one with -m MODEL.gguf\n", cmd);
        return false;
    }
    if (!cache_types_ok(cmd, o)) return false;
    if (o->n_batch < 0 || o->n_threads < 0 || o->n_chunks < 0) {
        fprintf(stderr, "pocketlm %s: -b, -t and --chunks must be >= 0\n", cmd);
        return false;
    }
    return true;
}

int cmd_perplexity(int argc, char **argv) {
    quality_opts o = {.n_ctx = 512, .cache_type_k = "f16", .cache_type_v = "f16"};
    const arg_spec specs[] = {
        {"-m", "--model", ARG_STR, &o.model, "PATH", "GGUF model"},
        {"-f", "--file", ARG_STR, &o.text, "PATH", "the text to score"},
        {"-c", "--ctx-size", ARG_INT, &o.n_ctx, "N", "tokens per chunk (the text needs at least 2 chunks)"},
        {NULL, "--kld-save", ARG_STR, &o.kld_save, "FILE",
         "save the log-probabilities of every scored position: the base for `pocketlm kld`"},
        COMMON_SPECS(o),
    };
    const arg_parser parser = {"perplexity", "pocketlm perplexity -m MODEL.gguf -f TEXT.txt [-c N] [options]", specs,
                               sizeof specs / sizeof specs[0], 0};
    char *pos[1];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) return rc == ARGS_HELP ? 0 : 1;
    if (!common_checks("perplexity", &o)) return 1;
    if (!o.text) {
        fprintf(stderr, "pocketlm perplexity: no text given: pass one with -f TEXT.txt\n");
        return 1;
    }
    if (o.n_ctx < 3 || o.n_ctx > (1 << 24)) {
        fprintf(stderr, "pocketlm perplexity: -c must be between 3 and 16777216\n");
        return 1;
    }
    return perplexity(&o);
}

/* ---- kld ------------------------------------------------------------------ */

typedef struct kld_progress {
    progress pg;
    bool header;
} kld_progress;

static void kld_progress_fn(void *user, const plm_kld_result *r, int n_chunks) {
    kld_progress *p = user;
    eta(&p->pg, n_chunks);
    if (!p->header) {
        p->header = true;
        printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              "
               "Δp RMS            Same top p\n");
    }
    printf("%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
           r->n_chunks, r->ppl.ppl, r->ppl.ppl_err, r->ln_ratio, r->ln_ratio_err, r->kld, r->kld_err,
           100 * r->dp_rms, 100 * r->dp_rms_err, 100 * r->same_top, 100 * r->same_top_err);
    fflush(stdout);
}

static void print_kld(const plm_kld_result *r) {
    printf("\n====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", r->ppl.ppl, r->ppl.ppl_err);
    printf("Mean PPL(base)                : %10.6f ± %10.6f\n", r->ppl_base.ppl, r->ppl_base.ppl_err);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * r->cor);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", r->ln_ratio, r->ln_ratio_err);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", r->ratio, r->ratio_err);
    printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", r->diff, r->diff_err);

    const plm_quantiles *k = &r->kld_q;
    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f ± %10.6f\n", r->kld, r->kld_err);
    printf("Maximum KLD: %10.6f\n", k->max);
    printf("99.9%%   KLD: %10.6f\n", k->p99_9);
    printf("99.0%%   KLD: %10.6f\n", k->p99);
    printf("95.0%%   KLD: %10.6f\n", k->p95);
    printf("90.0%%   KLD: %10.6f\n", k->p90);
    printf("Median  KLD: %10.6f\n", k->median);
    printf("10.0%%   KLD: %10.6f\n", k->p10);
    printf(" 5.0%%   KLD: %10.6f\n", k->p5);
    printf(" 1.0%%   KLD: %10.6f\n", k->p1);
    printf(" 0.1%%   KLD: %10.6f\n", k->p0_1);
    printf("Minimum KLD: %10.6f\n", k->min);

    const plm_quantiles *d = &r->dp_q;
    printf("\n====== Token probability statistics ======\n");
    printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * r->dp, 100 * r->dp_err);
    printf("Maximum Δp: %6.3f%%\n", 100 * d->max);
    printf("99.9%%   Δp: %6.3f%%\n", 100 * d->p99_9);
    printf("99.0%%   Δp: %6.3f%%\n", 100 * d->p99);
    printf("95.0%%   Δp: %6.3f%%\n", 100 * d->p95);
    printf("90.0%%   Δp: %6.3f%%\n", 100 * d->p90);
    printf("75.0%%   Δp: %6.3f%%\n", 100 * d->p75);
    printf("Median  Δp: %6.3f%%\n", 100 * d->median);
    printf("25.0%%   Δp: %6.3f%%\n", 100 * d->p25);
    printf("10.0%%   Δp: %6.3f%%\n", 100 * d->p10);
    printf(" 5.0%%   Δp: %6.3f%%\n", 100 * d->p5);
    printf(" 1.0%%   Δp: %6.3f%%\n", 100 * d->p1);
    printf(" 0.1%%   Δp: %6.3f%%\n", 100 * d->p0_1);
    printf("Minimum Δp: %6.3f%%\n", 100 * d->min);
    printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * r->dp_rms, 100 * r->dp_rms_err);
    printf("Same top p: %6.3f ± %5.3f %%\n", 100 * r->same_top, 100 * r->same_top_err);
}

int cmd_kld(int argc, char **argv) {
    quality_opts o = {.cache_type_k = "f16", .cache_type_v = "f16"};
    const arg_spec specs[] = {
        {"-m", "--model", ARG_STR, &o.model, "PATH", "GGUF model"},
        {NULL, "--base", ARG_STR, &o.base, "FILE", "log-probabilities of the base model (perplexity --kld-save)"},
        COMMON_SPECS(o),
    };
    const arg_parser parser = {"kld", "pocketlm kld -m MODEL.gguf --base BASE.kld [options]", specs,
                               sizeof specs / sizeof specs[0], 0};
    char *pos[1];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) return rc == ARGS_HELP ? 0 : 1;
    if (!common_checks("kld", &o)) return 1;
    if (!o.base) {
        fprintf(stderr, "pocketlm kld: no base given: pass --base BASE.kld (write one with pocketlm perplexity "
                        "--kld-save)\n");
        return 1;
    }
    plm_kld_info info;
    plm_error err;
    if (plm_kld_file_info(o.base, &info, &err)) {
        fprintf(stderr, "pocketlm kld: %s\n", err.message);
        return 1;
    }
    plm_model *model;
    plm_context *ctx;
    if (!open_model("kld", &o, info.n_ctx, &model, &ctx)) return 1;
    const int n_chunks = o.n_chunks > 0 && (uint32_t)o.n_chunks < info.n_chunks ? o.n_chunks : (int)info.n_chunks;
    fprintf(stderr, "pocketlm kld: %s: %u chunks of %u tokens, %d evaluated\n", o.base, info.n_chunks, info.n_ctx,
            n_chunks);

    kld_progress kp = {{"kld", measure_now_ns(), false}, false};
    plm_kld_params p = plm_kld_default_params();
    p.n_chunks = n_chunks;
    p.progress = kld_progress_fn;
    p.user = &kp;
    plm_kld_result r;
    rc = 1;
    if (plm_kld(ctx, o.base, &p, &r, &err)) {
        fprintf(stderr, "pocketlm kld: %s\n", err.message);
    } else {
        print_kld(&r);
        rc = 0;
    }
    plm_context_free(ctx);
    plm_model_free(model);
    return rc;
}
