/* pocketlm bench: prompt processing (pp) and token generation (tg) speed, in
 * the manner of llama.cpp's llama-bench, with the same JSON field names so
 * tooling written for llama-bench reads our results.  Each model x batch x
 * threads combination runs a pp test (one plm_decode of p random tokens into
 * an empty cache) and a tg test (n random tokens decoded one at a time into an
 * empty cache), each repeated -r times after a short warm-up. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "bench_spec.h"
#include "cli.h"
#include "config.h"
#include "fit.h"
#include "measure.h"
#include "pocketlm.h"
#include "pocketlm_plan.h"
#include "pocketlm_gguf.h"

#define MAX_LIST 64

typedef enum { OUT_MD, OUT_JSON, OUT_CSV } out_fmt;

typedef struct int_list {
    int v[MAX_LIST];
    int n;
} int_list;

typedef struct bench_opts {
    arg_list models;
    const char *n_prompt, *n_gen, *threads, *batch, *flash_attn, *output;
    int reps;
    float bandwidth;
    bool no_warmup, verbose, repack, no_repack, coarse_prefill;
    spec_cli spec;             /* speculative decoding: a test of its own (bench_spec.c) */
    const char *spec_prompt;
    bool spec_quote;           /* the prompt quotes its own continuation (prompt lookup's workload) */
} bench_opts;

/* What one test measured, and about what. */
typedef struct bench_result {
    const char *model_filename;
    char model_type[96];
    uint64_t model_size, model_n_params;
    int n_batch, n_threads, n_prompt, n_gen, reps;
    bool flash_attn;
    char test_time[32];
    const uint64_t *samples_ns;
    double bytes_per_token; /* weight bytes read per token, nominal */
    double bandwidth_gbps;
} bench_result;


/* "512" or "128,256,512" into a list of non-negative numbers. */
static bool parse_list(const char *s, int_list *out, const char *what, int min) {
    out->n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < min || v > 1000000 || out->n == MAX_LIST || (*end && *end != ',')) {
            fprintf(stderr, "pocketlm bench: %s expects a comma list of numbers >= %d, got '%s'\n", what, min, s);
            return false;
        }
        out->v[out->n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (out->n == 0) {
        fprintf(stderr, "pocketlm bench: %s is empty\n", what);
        return false;
    }
    return true;
}

/* ---- statistics: llama-bench reports the mean and the sample standard
 * deviation of the per-repetition times and of the per-repetition t/s. */

static double mean_of(const double *x, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return n ? s / n : 0;
}

static double stddev_of(const double *x, int n) {
    if (n < 2) return 0;
    double m = mean_of(x, n), s = 0;
    for (int i = 0; i < n; i++) s += (x[i] - m) * (x[i] - m);
    return sqrt(s / (n - 1));
}

typedef struct stats {
    double avg_ns, stddev_ns, avg_ts, stddev_ts;
    double ts[1024];  /* per-repetition tokens/s */
} stats;

static void compute(const bench_result *r, stats *s) {
    double ns[1024] = {0};
    int n = r->reps, toks = r->n_prompt + r->n_gen;
    for (int i = 0; i < n; i++) {
        ns[i] = (double)r->samples_ns[i];
        s->ts[i] = ns[i] > 0 ? 1e9 * toks / ns[i] : 0;
    }
    s->avg_ns = mean_of(ns, n);
    s->stddev_ns = stddev_of(ns, n);
    s->avg_ts = mean_of(s->ts, n);
    s->stddev_ts = stddev_of(s->ts, n);
}

/* ---- model description -------------------------------------------------- */

/* general.file_type (llama.cpp's llama_ftype) as llama.cpp names it. */
static const char *ftype_name(uint32_t ft) {
    switch (ft) {
    case 0: return "all F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K - Medium";
    case 11: return "Q3_K - Small";
    case 12: return "Q3_K - Medium";
    case 13: return "Q3_K - Large";
    case 14: return "Q4_K - Small";
    case 15: return "Q4_K - Medium";
    case 16: return "Q5_K - Small";
    case 17: return "Q5_K - Medium";
    case 18: return "Q6_K";
    case 21: return "Q2_K - Small";
    case 25: return "IQ4_NL - 4.5 bpw";
    case 30: return "IQ4_XS - 4.25 bpw";
    case 32: return "BF16";
    default: return NULL;
    }
}

/* "llama 1.1B Q4_0": architecture, parameter count, weight format.  Also the
 * bytes of an untied token embedding table (0 when tied or not found): a
 * token reads one row of it, not all of it. */
static void describe_model(const char *path, const plm_model *m, char *out, size_t size, uint64_t *embd_bytes,
                           uint64_t *embd_rows) {
    *embd_bytes = 0;
    *embd_rows = 1;
    char sz[32];
    double np = (double)plm_model_n_params(m);
    if (np >= 1e9) snprintf(sz, sizeof sz, "%.1fB", np / 1e9);
    else if (np >= 1e6) snprintf(sz, sizeof sz, "%.0fM", np / 1e6);
    else snprintf(sz, sizeof sz, "%.0fK", np / 1e3);

    const char *ft = NULL;
    char guess[32] = "?";
    plm_gguf_open_params gp = {.use_mmap = true};
    plm_gguf_file *f = plm_gguf_open(path, &gp, NULL);
    if (f) {
        uint32_t v;
        if (plm_gguf_get_u32(f, "general.file_type", &v)) ft = ftype_name(v);
        if (!ft) {
            /* No (known) file type: name the type holding the most weight bytes. */
            uint64_t bytes[64] = {0}, best = 0;
            for (uint64_t i = 0; i < f->n_tensors; i++)
                if (f->tensors[i].type < 64) bytes[f->tensors[i].type] += f->tensors[i].nbytes;
            for (uint32_t t = 0; t < 64; t++)
                if (bytes[t] > best) {
                    best = bytes[t];
                    snprintf(guess, sizeof guess, "%s", plm_gguf_tensor_type_name(t));
                }
        }
        const plm_gguf_tensor *e = plm_gguf_find_tensor(f, "token_embd.weight");
        if (e && plm_gguf_find_tensor(f, "output.weight") && e->ne[1] > 0) {
            *embd_bytes = e->nbytes;
            *embd_rows = e->ne[1];
        }
        plm_gguf_close(f);
    }
    snprintf(out, size, "%s %s %s", plm_model_arch(m), sz, ft ? ft : guess);
}

/* ---- output ---------------------------------------------------------------- */

static void json_str(FILE *o, const char *s) {
    fputc('"', o);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(o, "\\%c", *p);
        else if (*p < 0x20) fprintf(o, "\\u%04x", *p);
        else fputc(*p, o);
    }
    fputc('"', o);
}

static void csv_str(FILE *o, const char *s) {
    fputc('"', o);
    for (const char *p = s; *p; p++) {
        if (*p == '"') fputc('"', o);
        fputc(*p, o);
    }
    fputc('"', o);
}

static const char *cpu_info_str(void) {
    static char model[128];
    plm_cpu_info *c = malloc(sizeof *c);
    if (c && plm_probe_cpu(c, NULL) == PLM_OK) snprintf(model, sizeof model, "%s", c->model);
    free(c);
    return model;
}

static void print_json_result(const bench_result *r, const char *cpu, bool first) {
    stats s;
    compute(r, &s);
    FILE *o = stdout;
    fprintf(o, "%s  {\n", first ? "" : ",\n");
    fprintf(o, "    \"build_commit\": \"pocketlm-%s\",\n    \"build_number\": 0,\n    \"cpu_info\": ", PLM_VERSION);
    json_str(o, cpu);
    fprintf(o, ",\n    \"gpu_info\": \"\",\n    \"backends\": \"CPU\",\n    \"model_filename\": ");
    json_str(o, r->model_filename);
    fprintf(o, ",\n    \"model_type\": ");
    json_str(o, r->model_type);
    fprintf(o,
            ",\n    \"model_size\": %" PRIu64 ",\n    \"model_n_params\": %" PRIu64 ",\n"
            "    \"n_batch\": %d,\n    \"n_ubatch\": %d,\n    \"n_threads\": %d,\n"
            "    \"cpu_mask\": \"0x0\",\n    \"cpu_strict\": false,\n    \"poll\": 0,\n"
            "    \"type_k\": \"f16\",\n    \"type_v\": \"f16\",\n    \"n_gpu_layers\": 0,\n"
            "    \"split_mode\": \"none\",\n    \"main_gpu\": 0,\n    \"no_kv_offload\": false,\n"
            "    \"flash_attn\": %s,\n    \"tensor_split\": \"0.00\",\n    \"use_mmap\": true,\n"
            "    \"embeddings\": false,\n    \"n_prompt\": %d,\n    \"n_gen\": %d,\n    \"n_depth\": 0,\n"
            "    \"test_time\": \"%s\",\n    \"avg_ns\": %.0f,\n    \"stddev_ns\": %.0f,\n"
            "    \"avg_ts\": %.6f,\n    \"stddev_ts\": %.6f,\n    \"samples_ns\": [ ",
            r->model_size, r->model_n_params, r->n_batch, r->n_batch, r->n_threads, r->flash_attn ? "true" : "false",
            r->n_prompt, r->n_gen, r->test_time, s.avg_ns, s.stddev_ns, s.avg_ts, s.stddev_ts);
    for (int i = 0; i < r->reps; i++) fprintf(o, "%s%" PRIu64, i ? ", " : "", r->samples_ns[i]);
    fprintf(o, " ],\n    \"samples_ts\": [ ");
    for (int i = 0; i < r->reps; i++) fprintf(o, "%s%g", i ? ", " : "", s.ts[i]);
    double share = r->bandwidth_gbps > 0 ? r->bytes_per_token * s.avg_ts / (r->bandwidth_gbps * 1e9) : 0;
    fprintf(o,
            " ],\n    \"weight_bytes_per_token\": %.0f,\n    \"bandwidth_gbps\": %.3f,\n"
            "    \"bandwidth_share\": %.4f\n  }",
            r->bytes_per_token, r->bandwidth_gbps, share);
    fflush(o);
}

static const char *const csv_fields =
    "build_commit,build_number,cpu_info,gpu_info,backends,model_filename,model_type,model_size,model_n_params,"
    "n_batch,n_ubatch,n_threads,type_k,type_v,n_gpu_layers,flash_attn,use_mmap,n_prompt,n_gen,n_depth,test_time,avg_ns,"
    "stddev_ns,avg_ts,stddev_ts,samples_ns,samples_ts,weight_bytes_per_token,bandwidth_gbps,bandwidth_share";

static void print_csv_result(const bench_result *r, const char *cpu) {
    stats s;
    compute(r, &s);
    FILE *o = stdout;
    fprintf(o, "\"pocketlm-%s\",\"0\",", PLM_VERSION);
    csv_str(o, cpu);
    fprintf(o, ",\"\",\"CPU\",");
    csv_str(o, r->model_filename);
    fputc(',', o);
    csv_str(o, r->model_type);
    fprintf(o,
            ",\"%" PRIu64 "\",\"%" PRIu64 "\",\"%d\",\"%d\",\"%d\",\"f16\",\"f16\",\"0\",\"%d\",\"1\",\"%d\",\"%d\","
            "\"0\",\"%s\",\"%.0f\",\"%.0f\",\"%.6f\",\"%.6f\",\"",
            r->model_size, r->model_n_params, r->n_batch, r->n_batch, r->n_threads, r->flash_attn, r->n_prompt, r->n_gen,
            r->test_time, s.avg_ns, s.stddev_ns, s.avg_ts, s.stddev_ts);
    for (int i = 0; i < r->reps; i++) fprintf(o, "%s%" PRIu64, i ? ";" : "", r->samples_ns[i]);
    fprintf(o, "\",\"");
    for (int i = 0; i < r->reps; i++) fprintf(o, "%s%g", i ? ";" : "", s.ts[i]);
    double share = r->bandwidth_gbps > 0 ? r->bytes_per_token * s.avg_ts / (r->bandwidth_gbps * 1e9) : 0;
    fprintf(o, "\",\"%.0f\",\"%.3f\",\"%.4f\"\n", r->bytes_per_token, r->bandwidth_gbps, share);
    fflush(o);
}

static void human_bytes(double b, char *out, size_t size) {
    if (b >= 1073741824.0) snprintf(out, size, "%.2f GiB", b / 1073741824.0);
    else if (b >= 1048576.0) snprintf(out, size, "%.2f MiB", b / 1048576.0);
    else snprintf(out, size, "%.2f KiB", b / 1024.0);
}

static void print_md_header(void) {
    printf("| model                          |       size |     params | backend | threads | n_batch | fa |"
           "            test |                  t/s |   weights/token | mem BW used |\n");
    printf("| ------------------------------ | ---------: | ---------: | ------- | ------: | ------: | -: |"
           " --------------: | -------------------: | --------------: | ----------: |\n");
    fflush(stdout);
}

static void print_md_result(const bench_result *r) {
    stats s;
    compute(r, &s);
    char size[32], params[32], test[32], ts[48], bpt[32], share[32];
    human_bytes((double)r->model_size, size, sizeof size);
    double np = (double)r->model_n_params;
    if (np >= 1e9) snprintf(params, sizeof params, "%.2f B", np / 1e9);
    else if (np >= 1e6) snprintf(params, sizeof params, "%.2f M", np / 1e6);
    else snprintf(params, sizeof params, "%.2f K", np / 1e3);
    if (r->n_prompt) snprintf(test, sizeof test, "pp%d", r->n_prompt);
    else snprintf(test, sizeof test, "tg%d", r->n_gen);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", s.avg_ts, s.stddev_ts);
    human_bytes(r->bytes_per_token, bpt, sizeof bpt);
    if (r->bandwidth_gbps > 0)
        snprintf(share, sizeof share, "%.1f%%", 100.0 * r->bytes_per_token * s.avg_ts / (r->bandwidth_gbps * 1e9));
    else snprintf(share, sizeof share, "?");
    printf("| %-30s | %10s | %10s | %-7s | %7d | %7d | %2d | %15s | %20s | %15s | %11s |\n", r->model_type, size,
           params, "CPU", r->n_threads, r->n_batch, r->flash_attn, test, ts, bpt, share);
    fflush(stdout);
}

/* ---- the measurements --------------------------------------------------------- */

typedef struct bench_run {
    const bench_opts *o;
    out_fmt fmt;
    const char *cpu;
    double bandwidth_gbps;
    int n_printed;
} bench_run;

static void emit(bench_run *b, const bench_result *r) {
    if (b->fmt == OUT_JSON) print_json_result(r, b->cpu, b->n_printed == 0);
    else if (b->fmt == OUT_CSV) print_csv_result(r, b->cpu);
    else print_md_result(r);
    b->n_printed++;
}

static void stamp(char *out, size_t size) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* All tests of one model at one batch size and thread count. */
static int bench_config(bench_run *b, const char *path, plm_model *m, const char *model_type, double embd_bytes,
                        double embd_rows, int n_batch, int n_threads, bool flash, const int_list *pp,
                        const int_list *tg) {
    const bench_opts *o = b->o;
    int max_tok = 1;
    for (int i = 0; i < pp->n; i++) max_tok = pp->v[i] > max_tok ? pp->v[i] : max_tok;
    for (int i = 0; i < tg->n; i++) max_tok = tg->v[i] > max_tok ? tg->v[i] : max_tok;
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = (uint32_t)max_tok;
    cp.n_batch = (uint32_t)n_batch;
    cp.n_threads = (uint32_t)n_threads;
    cp.flash_attn = flash;
    cp.coarse_prefill = o->coarse_prefill;
    plm_context *ctx;
    plm_error err;
    if (plm_context_new(m, &cp, &ctx, &err)) {
        fprintf(stderr, "pocketlm bench: %s: %s\n", path, err.message);
        return 1;
    }
    plm_token *toks = malloc((size_t)max_tok * sizeof *toks);
    uint64_t *samples = malloc((size_t)o->reps * sizeof *samples);
    if (!toks || !samples) {
        fprintf(stderr, "pocketlm bench: out of memory\n");
        free(toks);
        free(samples);
        plm_context_free(ctx);
        return 1;
    }
    const int n_vocab = plm_model_n_vocab(m);
    /* pp reads every weight once per batch (a MoE batch: nearly every expert);
     * tg only the active ones (a MoE token: its selected experts) */
    const double wbytes = (double)plm_model_weight_bytes(m) - embd_bytes, row = embd_bytes / embd_rows;
    const double wbytes_tg = (double)plm_model_weight_bytes_active(m) - embd_bytes;
    const int eff_batch = n_batch < max_tok ? n_batch : max_tok;
    uint64_t rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n_threads << 32) ^ (uint64_t)n_batch;
    int rc = 0;
    bench_result r = {.model_filename = path, .model_size = plm_model_weight_bytes(m),
                      .model_n_params = plm_model_n_params(m), .n_batch = n_batch, .n_threads = n_threads,
                      .flash_attn = flash,
                      .reps = o->reps, .samples_ns = samples, .bandwidth_gbps = b->bandwidth_gbps};
    snprintf(r.model_type, sizeof r.model_type, "%s", model_type);

    for (int k = 0; k < pp->n + tg->n && rc == 0; k++) {
        bool is_pp = k < pp->n;
        int n = is_pp ? pp->v[k] : tg->v[k - pp->n];
        if (n == 0) continue;
        uint64_t ns;
        plm_status st = PLM_OK;
        if (!o->no_warmup) {
            if (is_pp) st = measure_pp(ctx, toks, n < 32 ? n : 32, n_vocab, &rng, &ns, &err);
            else st = measure_tg(ctx, toks, n < 4 ? n : 4, n_vocab, &rng, &ns, &err);
        }
        stamp(r.test_time, sizeof r.test_time);
        for (int i = 0; i < o->reps && st == PLM_OK; i++) {
            st = is_pp ? measure_pp(ctx, toks, n, n_vocab, &rng, &samples[i], &err)
                       : measure_tg(ctx, toks, n, n_vocab, &rng, &samples[i], &err);
        }
        if (st) {
            fprintf(stderr, "pocketlm bench: %s: %s%d: %s\n", path, is_pp ? "pp" : "tg", n, err.message);
            rc = 1;
            break;
        }
        r.n_prompt = is_pp ? n : 0;
        r.n_gen = is_pp ? 0 : n;
        /* A generated token reads every weight once (of an untied embedding
         * table, one row); a batched pass, once per chunk of n_batch tokens. */
        r.bytes_per_token = (is_pp ? wbytes * ((n + eff_batch - 1) / eff_batch) / n : wbytes_tg) + row;
        emit(b, &r);
    }
    free(toks);
    free(samples);
    plm_context_free(ctx);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    /* Defaults: this device's tuned values (pocketlm tune), else the
     * performance cores and llama-bench's batch of 512. */
    char default_threads[16], default_batch[16];
    tuned_defaults tuned;
    const bool have_tuned = config_load(&tuned);
    snprintf(default_threads, sizeof default_threads, "%u",
             have_tuned && tuned.threads ? (unsigned)tuned.threads : plm_default_threads());
    snprintf(default_batch, sizeof default_batch, "%d", have_tuned && tuned.batch ? tuned.batch : 512);
    bench_opts o = {.n_prompt = "512", .n_gen = "128", .threads = default_threads, .batch = default_batch,
                    .flash_attn = "0", .output = "md", .reps = 5, .spec = spec_cli_defaults(),
                    .spec_prompt = "Once upon a time"};
    arg_spec specs[64] = {
        {"-m", "--model", ARG_LIST, &o.models, "PATH", "GGUF model to benchmark"},
        {"-p", "--n-prompt", ARG_STR, &o.n_prompt, "N[,N...]", "prompt tokens of a pp test, 0 = none"},
        {"-n", "--n-gen", ARG_STR, &o.n_gen, "N[,N...]", "generated tokens of a tg test, 0 = none"},
        {"-t", "--threads", ARG_STR, &o.threads, "N[,N...]", "threads; default: tuned, else the performance cores"},
        {"-b", "--batch-size", ARG_STR, &o.batch, "N[,N...]", "prompt tokens per forward pass"},
        {"-fa", "--flash-attn", ARG_STR, &o.flash_attn, "0|1[,...]", "one-pass attention softmax (see pocketlm run)"},
        {"-r", "--repetitions", ARG_INT, &o.reps, "N", "repetitions of each test"},
        {NULL, "--bandwidth", ARG_FLOAT, &o.bandwidth, "GBPS", "memory read bandwidth, 0 = measure it once"},
        {"-o", "--output", ARG_STR, &o.output, "FMT", "md, json or csv (to stdout)"},
        {NULL, "--no-warmup", ARG_FLAG, &o.no_warmup, NULL, "skip the warm-up run before each test"},
        {"-v", "--verbose", ARG_FLAG, &o.verbose, NULL, "progress on stderr"},
        {NULL, "--repack", ARG_FLAG, &o.repack, NULL, "row-interleaved weights (default: as pocketlm run decides)"},
        {NULL, "--no-repack", ARG_FLAG, &o.no_repack, NULL, "keep the file's layout"},
        {NULL, "--coarse-prefill", ARG_FLAG, &o.coarse_prefill, NULL, "coarse int8 K-quant products for large batches (see pocketlm run)"},
        {NULL, "--spec-prompt", ARG_STR, &o.spec_prompt, "TEXT", "the prompt of the speculative-decoding test"},
        {NULL, "--spec-quote", ARG_FLAG, &o.spec_quote, NULL,
         "that test's prompt is TEXT, its greedy continuation of -n tokens and TEXT again (an input to quote)"},
    };
    int n_specs = 0;
    while (specs[n_specs].long_name) n_specs++;
    spec_cli_args(&o.spec, specs + n_specs);
    n_specs += SPEC_CLI_N_ARGS;
    const arg_parser parser = {"bench", "pocketlm bench -m MODEL.gguf [-m ...] [-p 512] [-n 128] [-t 1,2] [options]",
                               specs, n_specs, 0};
    char *pos[1];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) {
        args_free(&parser);
        return rc == ARGS_HELP ? 0 : 1;
    }
    int_list pp, tg, th, bs, fa;
    bench_run b = {.o = &o};
    rc = 1;
    if (o.models.n == 0) {
        fprintf(stderr, "pocketlm bench: no model given: pass one or more with -m MODEL.gguf\n");
        goto out;
    }
    if (!parse_list(o.n_prompt, &pp, "-p", 0) || !parse_list(o.n_gen, &tg, "-n", 0) ||
        !parse_list(o.threads, &th, "-t", 1) || !parse_list(o.batch, &bs, "-b", 1) ||
        !parse_list(o.flash_attn, &fa, "-fa", 0))
        goto out;
    for (int i = 0; i < fa.n; i++)
        if (fa.v[i] > 1) {
            fprintf(stderr, "pocketlm bench: -fa takes 0 or 1, not %d\n", fa.v[i]);
            goto out;
        }
    if (o.reps < 1 || o.reps > 1024) {
        fprintf(stderr, "pocketlm bench: -r must be between 1 and 1024\n");
        goto out;
    }
    if (!strcmp(o.output, "md")) b.fmt = OUT_MD;
    else if (!strcmp(o.output, "json")) b.fmt = OUT_JSON;
    else if (!strcmp(o.output, "csv")) b.fmt = OUT_CSV;
    else {
        fprintf(stderr, "pocketlm bench: -o must be md, json or csv, not '%s'\n", o.output);
        goto out;
    }

    if (spec_cli_wanted(&o.spec)) {  /* plain vs speculative decoding, first -t/-b/-n values */
        plm_context_params rcp = plm_context_default_params();  /* repacked as the other tests' models are */
        rcp.n_ctx = 4096;
        const bool repack =
            !o.no_repack && (o.repack || fit_repack("bench", o.models.items[0], true, NULL, &rcp, false));
        rc = bench_spec(o.models.items[0], repack, &o.spec, o.spec_prompt, o.spec_quote, tg.v[0], th.v[0], bs.v[0],
                        o.reps);
        goto out;
    }
    b.cpu = cpu_info_str();
    b.bandwidth_gbps = o.bandwidth;
    if (o.bandwidth <= 0) {
        if (o.verbose) fprintf(stderr, "pocketlm bench: measuring memory read bandwidth...\n");
        plm_bandwidth_result *bw = malloc(sizeof *bw);
        plm_error err;
        if (bw && plm_probe_bandwidth(NULL, bw, &err) == PLM_OK) b.bandwidth_gbps = bw->best_gbps;
        else fprintf(stderr, "pocketlm bench: could not measure memory bandwidth%s%s\n", bw ? ": " : "",
                     bw ? err.message : "");
        free(bw);
    }
    if (b.fmt == OUT_MD) {
        printf("memory read bandwidth: %.2f GB/s (%s); weights/token is nominal (every weight read once per token, "
               "or once per batch in pp; one row of an untied embedding table)\n\n",
               b.bandwidth_gbps, o.bandwidth > 0 ? "--bandwidth" : "measured by pocketlm probe's method");
        print_md_header();
    } else if (b.fmt == OUT_JSON) {
        printf("[\n");
    } else {
        printf("%s\n", csv_fields);
    }

    rc = 0;
    for (int mi = 0; mi < o.models.n && rc == 0; mi++) {
        const char *path = o.models.items[mi];
        plm_model *m;
        plm_error err;
        if (o.verbose) fprintf(stderr, "pocketlm bench: loading %s\n", path);
        plm_model_params mp = plm_model_default_params();
        plm_context_params rcp = plm_context_default_params();
        rcp.n_ctx = 4096;
        mp.repack = !o.no_repack && (o.repack || fit_repack("bench", path, true, NULL, &rcp, false));
        if (plm_model_load(path, &mp, &m, &err)) {
            fprintf(stderr, "pocketlm bench: %s\n", err.message);
            rc = 1;
            break;
        }
        char model_type[96];
        uint64_t embd_bytes, embd_rows;
        describe_model(path, m, model_type, sizeof model_type, &embd_bytes, &embd_rows);
        for (int bi = 0; bi < bs.n && rc == 0; bi++)
            for (int ti = 0; ti < th.n && rc == 0; ti++)
                for (int fi = 0; fi < fa.n && rc == 0; fi++) {
                    if (o.verbose)
                        fprintf(stderr, "pocketlm bench: %s, n_batch %d, %d threads, fa %d\n", model_type, bs.v[bi],
                                th.v[ti], fa.v[fi]);
                    rc = bench_config(&b, path, m, model_type, (double)embd_bytes, (double)embd_rows, bs.v[bi],
                                      th.v[ti], fa.v[fi] != 0, &pp, &tg);
                }
        plm_model_free(m);
    }
    if (b.fmt == OUT_JSON) printf("%s]\n", b.n_printed ? "\n" : "");
out:
    args_free(&parser);
    return rc;
}
