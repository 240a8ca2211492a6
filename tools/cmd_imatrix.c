/*
 * pocketlm imatrix: an importance matrix from a calibration text, as
 * llama.cpp's llama-imatrix computes it, written in its GGUF format (or the
 * legacy .dat with --output-format dat) for `quantize --imatrix` — ours or
 * llama-quantize.  Progress on stderr: the first pass's time and an ETA,
 * then the running perplexity after each chunk, as llama-imatrix prints.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "files.h"
#include "measure.h"
#include "pocketlm.h"
#include "pocketlm_eval.h"

typedef struct imatrix_opts {
    const char *model, *text, *out, *format;
    int n_ctx, n_threads, n_chunks, save_every;
    bool process_output, no_mmap;
} imatrix_opts;

typedef struct progress {
    const imatrix_opts *o;
    plm_imatrix *im;
    uint64_t t0;
    bool failed;
} progress;

static plm_status save(const imatrix_opts *o, const plm_imatrix *im, plm_error *err) {
    return !strcmp(o->format, "dat") ? plm_imatrix_save_dat(im, o->out, err) : plm_imatrix_save(im, o->out, err);
}

static void on_chunk(void *user, const plm_ppl_result *r, int n_chunks) {
    progress *pg = user;
    if (r->n_chunks == 1) {
        const double s = (double)(measure_now_ns() - pg->t0) * 1e-9;
        fprintf(stderr, "pocketlm imatrix: %.2f seconds per pass - ETA %.2f minutes\n", s, s * n_chunks / 60);
    }
    fprintf(stderr, "[%d]%.4f,", r->n_chunks, r->ppl);
    fflush(stderr);
    /* llama-imatrix's --output-frequency: the file so far, now and then */
    if (pg->o->save_every > 0 && r->n_chunks % pg->o->save_every == 0 && r->n_chunks < n_chunks) {
        plm_error err;
        if (save(pg->o, pg->im, &err)) {
            fprintf(stderr, "\npocketlm imatrix: %s\n", err.message);
            pg->failed = true;
        }
    }
}

static bool check_opts(const imatrix_opts *o) {
    const char *missing = !o->model ? "a model (-m MODEL.gguf)" : !o->text ? "a calibration text (-f FILE)" : NULL;
    if (missing) {
        fprintf(stderr, "pocketlm imatrix: no %s given\n", missing);
        return false;
    }
    if (strcmp(o->format, "gguf") && strcmp(o->format, "dat")) {
        fprintf(stderr, "pocketlm imatrix: --output-format must be gguf or dat, not '%s'\n", o->format);
        return false;
    }
    if (o->n_ctx < 16 || o->n_threads < 0 || o->n_chunks < 0 || o->save_every < 0) {
        fprintf(stderr, "pocketlm imatrix: -c must be >= 16 (smaller batches are not collected); -t, --chunks and "
                        "--output-frequency >= 0\n");
        return false;
    }
    return true;
}

static int run_imatrix(const imatrix_opts *o, plm_model *model, plm_context *ctx, const plm_token *toks, int n) {
    plm_imatrix *im = plm_imatrix_new((uint32_t)o->n_ctx);
    if (!im || !plm_imatrix_add_dataset(im, o->text)) {
        fprintf(stderr, "pocketlm imatrix: out of memory\n");
        plm_imatrix_free(im);
        return 1;
    }
    int n_chunks = n / o->n_ctx;
    if (o->n_chunks > 0 && o->n_chunks < n_chunks) n_chunks = o->n_chunks;
    fprintf(stderr, "pocketlm imatrix: %s, %d tokens, computing over %d chunks, n_ctx=%d\n", o->text, n, n_chunks,
            o->n_ctx);
    progress pg = {o, im, measure_now_ns(), false};
    plm_imatrix_params p = {.n_chunks = n_chunks, .process_output = o->process_output, .progress = on_chunk,
                            .user = &pg};
    plm_ppl_result r;
    plm_error err;
    plm_status st = plm_imatrix_collect(ctx, im, toks, n, &p, &r, &err);
    fprintf(stderr, "\n");
    if (!st && !pg.failed) st = save(o, im, &err);
    if (st || pg.failed) {
        if (st) fprintf(stderr, "pocketlm imatrix: %s\n", err.message);
        plm_imatrix_free(im);
        return 1;
    }
    fprintf(stderr, "Final estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_err);
    fprintf(stderr, "pocketlm imatrix: stored %d entries collected over %u chunks in %s\n",
            plm_imatrix_n_entries(im), plm_imatrix_chunk_count(im), o->out);
    (void)model;
    plm_imatrix_free(im);
    return 0;
}

static int imatrix(const imatrix_opts *o) {
    size_t len = 0;
    char *text = read_file(o->text, &len);
    if (!text || len == 0) {
        fprintf(stderr, "pocketlm imatrix: cannot read %s: %s\n", o->text, text ? "empty file" : strerror(errno));
        free(text);
        return 1;
    }
    plm_model_params mp = plm_model_default_params();
    mp.use_mmap = !o->no_mmap;
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = cp.n_batch = (uint32_t)o->n_ctx;  /* a chunk in one batch: every product sees >= 16 rows */
    cp.n_threads = (uint32_t)o->n_threads;
    cp.logits_all = true;
    plm_model *model = NULL;
    plm_context *ctx = NULL;
    plm_error err;
    int rc = 1, n = 0;
    plm_token *toks = NULL;
    if (plm_model_load(o->model, &mp, &model, &err) || plm_context_new(model, &cp, &ctx, &err)) {
        fprintf(stderr, "pocketlm imatrix: %s\n", err.message);
        goto done;
    }
    toks = plm_tokenize_alloc(model, text, len, &n, true, false);
    if (!toks) {
        fprintf(stderr, "pocketlm imatrix: cannot tokenize %s (out of memory)\n", o->text);
        goto done;
    }
    if (n < 2 * o->n_ctx) {
        fprintf(stderr, "pocketlm imatrix: you need at least %d tokens for a context of %d tokens; %s tokenizes to "
                        "only %d tokens\n", 2 * o->n_ctx, o->n_ctx, o->text, n);
        goto done;
    }
    rc = run_imatrix(o, model, ctx, toks, n);
done:
    free(toks);
    free(text);
    plm_context_free(ctx);
    plm_model_free(model);
    return rc;
}

int cmd_imatrix(int argc, char **argv) {
    imatrix_opts o = {.out = "imatrix.gguf", .format = "gguf", .n_ctx = 512, .save_every = 10};
    const arg_spec specs[] = {
        {"-m", "--model", ARG_STR, &o.model, "PATH", "GGUF model (F16/F32 gives the truest statistics)"},
        {"-f", "--file", ARG_STR, &o.text, "PATH", "the calibration text (at least 2 chunks)"},
        {"-o", "--output", ARG_STR, &o.out, "PATH", "where to write the importance matrix"},
        {NULL, "--output-format", ARG_STR, &o.format, "FMT", "gguf (llama.cpp's today) or dat (legacy)"},
        {"-c", "--ctx-size", ARG_INT, &o.n_ctx, "N", "tokens per chunk, each evaluated from BOS"},
        {NULL, "--chunks", ARG_INT, &o.n_chunks, "N", "use at most N chunks, 0 = all"},
        {NULL, "--output-frequency", ARG_INT, &o.save_every, "N", "save the matrix so far every N chunks, 0 = never"},
        {NULL, "--process-output", ARG_FLAG, &o.process_output, NULL, "also collect output.weight"},
        {"-t", "--threads", ARG_INT, &o.n_threads, "N", "threads, 0 = the performance cores"},
        {NULL, "--no-mmap", ARG_FLAG, &o.no_mmap, NULL, "read the weights into memory instead of mapping"},
    };
    const arg_parser parser = {"imatrix", "pocketlm imatrix -m MODEL -f calibration.txt [-o imatrix.gguf] [options]",
                               specs, (int)(sizeof specs / sizeof specs[0]), 0};
    int n_pos;
    const int rc = args_parse(&parser, argc, argv, NULL, &n_pos);
    if (rc != ARGS_OK) return rc == ARGS_HELP ? 0 : 1;
    return check_opts(&o) ? imatrix(&o) : 1;
}
