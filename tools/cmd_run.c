/* pocketlm run: stream a completion of a prompt, then one summary line. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "config.h"
#include "files.h"
#include "fit.h"
#include "measure.h"
#include "spec_cli.h"
#include "telemetry.h"
#include "pocketlm.h"

#define DEMO_MODEL "../shared/models/stories260K.gguf"

typedef struct run_opts {
    const char *model, *prompt, *prompt_file, *cache_type_k, *cache_type_v;
    const char *mem_log, *mem_plot, *mem_limit;
    int mem_every;
    int n_predict, n_ctx, n_batch, n_threads;
    bool no_mmap, mlock, repack, no_repack, ignore_eos, no_display_prompt, ctx_shift, flash_attn;
    bool coarse_prefill;
    int keep;
    plm_sampler_params sp;
    uint64_t seed;
    arg_list stops;
    spec_cli spec;
} run_opts;

static double now_s(void) { return measure_now_ns() * 1e-9; }


/* What the generation callbacks need: telemetry ticks per token. */
typedef struct run_state {
    telemetry tm;
    int n_prompt, n_gen;
} run_state;

static bool print_piece(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return true;
}

static bool tick_token(void *user, plm_token t, const float *logits) {
    (void)t;
    (void)logits;
    run_state *rs = user;
    telemetry_tick(&rs->tm, rs->n_prompt + rs->n_gen, rs->n_gen > 0, rs->n_gen == 0);
    rs->n_gen++;
    return true;
}

static plm_sampler *new_sampler(const run_opts *o, const plm_model *model) {
    plm_sampler_params sp = o->sp;
    sp.seed = o->seed;
    plm_sampler *smp;
    plm_error err;
    if (plm_sampler_create(model, &sp, &smp, &err)) {
        fprintf(stderr, "pocketlm run: %s\n", err.message);
        return NULL;
    }
    return smp;
}

static void print_summary(const run_opts *o, double t_load, const plm_generate_result *r) {
    double t_prompt = r->t_prompt_s, t_gen = r->t_gen_s;
    fprintf(stderr,
            "load %.0f ms | prompt %d tok, %.1f tok/s | generated %d tok, %.1f tok/s | peak RSS %.1f MiB | seed %" PRIu64
            "\n",
            t_load * 1e3, r->n_prompt, r->n_prompt / (t_prompt > 0 ? t_prompt : 1e-9), r->n_generated,
            r->n_generated / (t_gen > 0 ? t_gen : 1e-9), plm_peak_rss_bytes() / 1048576.0, o->seed);
}

/* Plans the context before the model is loaded: a --no-mmap load that does
 * not fit must be refused before it is read, not killed while reading. */
static bool plan_context(const run_opts *o, plm_context_params *out, fit_info *fi) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = (uint32_t)o->n_ctx;
    cp.n_batch = (uint32_t)o->n_batch;
    cp.n_threads = (uint32_t)o->n_threads;
    cp.type_k = (plm_kv_type)plm_kv_type_from_name(o->cache_type_k);
    cp.type_v = (plm_kv_type)plm_kv_type_from_name(o->cache_type_v);
    cp.flash_attn = o->flash_attn;
    cp.coarse_prefill = o->coarse_prefill;
    *out = cp;
    if (!o->spec.draft_model) return fit_context_info("run", o->model, !o->no_mmap, o->mem_limit, out, fi);
    memset(fi, 0, sizeof *fi);  /* a pair has no single bill for the paging warning to quote */
    return spec_cli_fit("run", &o->spec, o->model, !o->no_mmap, o->mem_limit, out);
}

static int generate(run_opts *o, plm_model *model, double t_load, plm_context_params cp, const fit_info *fi) {
    plm_error err;
    plm_context *ctx;
    if (plm_context_new(model, &cp, &ctx, &err)) {
        fprintf(stderr, "pocketlm run: %s\n", err.message);
        return 1;
    }
    if (spec_cli_wanted(&o->spec) && !spec_cli_open("run", &o->spec, ctx, &cp, !o->no_mmap)) {
        spec_cli_close("run", &o->spec);
        plm_context_free(ctx);
        return 1;
    }

    size_t plen = 0;
    char *prompt = o->prompt_file ? read_file(o->prompt_file, &plen) : strdup(o->prompt);
    if (!prompt) {
        fprintf(stderr, "pocketlm run: cannot read prompt %s\n", o->prompt_file ? o->prompt_file : "");
        spec_cli_close("run", &o->spec);
        plm_context_free(ctx);
        return 1;
    }
    if (!o->prompt_file) plen = strlen(prompt);
    int n_prompt = 0;
    plm_token *toks = plm_tokenize_alloc(model, prompt, plen, &n_prompt, true, true);
    int rc = 1;
    plm_sampler *smp = NULL;
    run_state rs = {.n_prompt = n_prompt};
    if (n_prompt <= 0) {
        fprintf(stderr, "pocketlm run: the prompt is empty after tokenization\n");
        goto done;
    }
    if ((uint32_t)n_prompt >= plm_context_n_ctx(ctx)) {
        fprintf(stderr, "pocketlm run: the prompt has %d tokens but the context holds %u; use a larger -c\n",
                n_prompt, plm_context_n_ctx(ctx));
        goto done;
    }
    if (!(smp = new_sampler(o, model))) goto done;
    if (!o->no_display_prompt) {
        fwrite(prompt, 1, plen, stdout);
        fflush(stdout);
    }
    if (!telemetry_open(&rs.tm, o->mem_log, o->mem_plot, o->mem_every)) goto done;
    telemetry_set_plan(&rs.tm, o->spec.draft_model ? NULL : fi);
    telemetry_trim_on_sigusr1(&rs.tm, ctx);
    telemetry_tick(&rs.tm, 0, false, true);

    plm_generate_params gp = plm_generate_default_params();
    gp.max_tokens = o->n_predict;
    gp.stops = (const char *const *)o->stops.items;
    gp.n_stops = o->stops.n;
    gp.ignore_eos = o->ignore_eos;
    gp.ctx_shift = o->ctx_shift;
    /* Keep the first tokens (BOS always), drop half of the rest. */
    gp.n_keep = (o->keep < 0 ? n_prompt : o->keep) + (plm_vocab_add_bos(model) ? 1 : 0);
    gp.on_token = tick_token;
    gp.user = &rs;
    gp.spec = o->spec.spec;
    plm_generate_result r;
    plm_status st = plm_generate(ctx, toks, n_prompt, smp, &gp, print_piece, &r, &err);
    telemetry_tick(&rs.tm, n_prompt + r.n_generated, true, true);
    telemetry_close(&rs.tm);
    printf("\n");
    fflush(stdout);
    if (st) {
        fprintf(stderr, "pocketlm run: %s\n", err.message);
        goto done;
    }
    if (r.finish == PLM_FINISH_CONTEXT)
        fprintf(stderr, "pocketlm run: context full: generation stopped (use a larger -c, or --ctx-shift)\n");
    print_summary(o, t_load, &r);
    spec_cli_report(&o->spec, stderr);
    rc = 0;
done:
    if (!spec_cli_close("run", &o->spec)) rc = 1;  /* before ctx: the draft's history follows it */
    plm_sampler_free(smp);
    free(toks);
    free(prompt);
    plm_context_free(ctx);
    return rc;
}

/* The library names the parameter; the user typed an option. */
static bool check_sampler_options(const plm_sampler_params *sp) {
    static const char *const names[][2] = {
        {"temperature", "--temp"}, {"top_k", "--top-k"}, {"top_p", "--top-p"}, {"min_p", "--min-p"},
        {"repeat_penalty", "--repeat-penalty"}, {"presence_penalty", "--presence-penalty"},
        {"frequency_penalty", "--frequency-penalty"}, {"penalty_last_n", "--repeat-last-n"}};
    plm_error err;
    if (plm_sampler_params_check(sp, &err) == PLM_OK) return true;
    const char *flag = "";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(err.message, names[i][0], strlen(names[i][0])) && err.message[strlen(names[i][0])] == ' ')
            flag = names[i][1];
    fprintf(stderr, "pocketlm run: %s%s%s\n", flag, *flag ? ": " : "", err.message);
    return false;
}

int cmd_run(int argc, char **argv) {
    run_opts o = {.prompt = "Once upon a time", .n_predict = 128, .n_ctx = 0, .n_batch = 0,
                  .cache_type_k = "f16", .cache_type_v = "f16", .mem_every = 200,
                  .sp = plm_sampler_default_params(), .spec = spec_cli_defaults()};
    o.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    arg_spec specs[64] = {
        {"-m", "--model", ARG_STR, &o.model, "PATH", "GGUF model (default: " DEMO_MODEL " if present)"},
        {"-p", "--prompt", ARG_STR, &o.prompt, "TEXT", "prompt"},
        {"-f", "--file", ARG_STR, &o.prompt_file, "PATH", "read the prompt from a file"},
        {"-n", "--n-predict", ARG_INT, &o.n_predict, "N", "tokens to generate, -1 = until end of text"},
        {"-c", "--ctx-size", ARG_INT, &o.n_ctx, "N", "context length, 0 = the largest that fits memory"},
        {NULL, "--mem-limit", ARG_STR, &o.mem_limit, "SIZE", "refuse to plan past this (e.g. 2G); default: available RAM"},
        {"-b", "--batch-size", ARG_INT, &o.n_batch, "N", "prompt tokens per forward pass, 0 = tuned, else 512"},
        {"-t", "--threads", ARG_INT, &o.n_threads, "N", "threads, 0 = tuned, else the performance cores"},
        {"-ctk", "--cache-type-k", ARG_STR, &o.cache_type_k, "TYPE", "KV cache keys: f16, q8_0, q4_0"},
        {"-ctv", "--cache-type-v", ARG_STR, &o.cache_type_v, "TYPE", "KV cache values: f16, q8_0, q4_0"},
        {"-fa", "--flash-attn", ARG_FLAG, &o.flash_attn, NULL,
         "one-pass (flash) attention: reads the keys once, keeps the softmax weights in f32; default: two passes "
         "with llama.cpp's f16-rounded weights"},
        {NULL, "--coarse-prefill", ARG_FLAG, &o.coarse_prefill, NULL,
         "batches of 32+ tokens multiply K-quant weights in int8 with one scale per 256 (faster prefill on AVX-512 VNNI; logits move slightly, not bit-faithful to llama.cpp)"},
        {NULL, "--temp", ARG_FLOAT, &o.sp.temperature, "T", "temperature, 0 = greedy"},
        {NULL, "--top-k", ARG_INT, &o.sp.top_k, "K", "keep the K most likely tokens, 0 = off"},
        {NULL, "--top-p", ARG_FLOAT, &o.sp.top_p, "P", "nucleus sampling, 1 = off"},
        {NULL, "--min-p", ARG_FLOAT, &o.sp.min_p, "P", "drop tokens below P x the best, 0 = off"},
        {NULL, "--repeat-penalty", ARG_FLOAT, &o.sp.repeat_penalty, "X", "penalise recent tokens, 1 = off"},
        {NULL, "--repeat-last-n", ARG_INT, &o.sp.penalty_last_n, "N", "window of the penalties"},
        {NULL, "--presence-penalty", ARG_FLOAT, &o.sp.presence_penalty, "X", "0 = off"},
        {NULL, "--frequency-penalty", ARG_FLOAT, &o.sp.frequency_penalty, "X", "0 = off"},
        {"-s", "--seed", ARG_U64, &o.seed, "N", "random seed (default: from the clock)"},
        {NULL, "--stop", ARG_LIST, &o.stops, "TEXT", "stop when this text is generated"},
        {NULL, "--ctx-shift", ARG_FLAG, &o.ctx_shift, NULL, "when the context is full, drop half of it and go on"},
        {NULL, "--keep", ARG_INT, &o.keep, "N", "tokens kept at a context shift (after BOS), -1 = the prompt"},
        {NULL, "--ignore-eos", ARG_FLAG, &o.ignore_eos, NULL, "keep generating past end-of-text"},
        {NULL, "--no-display-prompt", ARG_FLAG, &o.no_display_prompt, NULL, "do not echo the prompt"},
        {NULL, "--mem-log", ARG_STR, &o.mem_log, "FILE", "write RSS, page faults and tokens/s as CSV"},
        {NULL, "--mem-plot", ARG_STR, &o.mem_plot, "FILE", "draw the RSS watermark and tokens/s as SVG"},
        {NULL, "--mem-every", ARG_INT, &o.mem_every, "N", "tokens between telemetry samples"},
        {NULL, "--no-mmap", ARG_FLAG, &o.no_mmap, NULL, "read the weights into memory instead of mapping"},
        {NULL, "--mlock", ARG_FLAG, &o.mlock, NULL, "lock the weights in RAM"},
        {NULL, "--repack", ARG_FLAG, &o.repack, NULL,
         "row-interleaved Q4_0/Q8_0/Q4_K copies at load (default: when they fit with half the memory to spare)"},
        {NULL, "--no-repack", ARG_FLAG, &o.no_repack, NULL, "keep the file's layout"},
    };
    int n_specs = 0;
    while (specs[n_specs].long_name) n_specs++;
    spec_cli_args(&o.spec, specs + n_specs);
    n_specs += SPEC_CLI_N_ARGS;
    const arg_parser parser = {"run", "pocketlm run [-m MODEL.gguf] [-p PROMPT] [options]", specs, n_specs, 0};
    char *pos[1];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) {
        args_free(&parser);
        return rc == ARGS_HELP ? 0 : 1;
    }
    if (!o.model) {
        if (access(DEMO_MODEL, R_OK) != 0) {
            fprintf(stderr, "pocketlm run: no model given: pass one with -m MODEL.gguf\n");
            args_free(&parser);
            return 1;
        }
        o.model = DEMO_MODEL;
    }
    if (plm_kv_type_from_name(o.cache_type_k) < 0 || plm_kv_type_from_name(o.cache_type_v) < 0) {
        fprintf(stderr, "pocketlm run: cache types are f16, q8_0 or q4_0\n");
        args_free(&parser);
        return 1;
    }
    if (o.n_ctx < 0 || o.n_batch < 0 || o.n_threads < 0) {
        fprintf(stderr, "pocketlm run: -c, -b and -t must be >= 0\n");
        args_free(&parser);
        return 1;
    }

    if (!check_sampler_options(&o.sp)) {
        args_free(&parser);
        return 1;
    }

    tuned_defaults tuned;
    if (config_load(&tuned)) {  /* this device's `pocketlm tune` results */
        if (o.n_threads == 0) o.n_threads = tuned.threads;
        if (o.n_batch == 0) o.n_batch = tuned.batch;
    }
    if (o.n_batch == 0) o.n_batch = 512;
    plm_context_params cp;
    fit_info fi;
    if (!plan_context(&o, &cp, &fi)) {
        args_free(&parser);
        return 1;
    }
    plm_model_params mp = plm_model_default_params();
    mp.use_mmap = !o.no_mmap;
    mp.use_mlock = o.mlock;
    mp.repack = !o.no_repack && fit_repack("run", o.model, !o.no_mmap, o.mem_limit, &cp, o.repack);
    plm_model *model;
    plm_error err;
    double t0 = now_s();
    if (plm_model_load(o.model, &mp, &model, &err)) {
        fprintf(stderr, "pocketlm run: %s\n", err.message);
        args_free(&parser);
        return 1;
    }
    rc = generate(&o, model, now_s() - t0, cp, &fi);
    plm_model_free(model);
    args_free(&parser);
    return rc;
}
