/*
 * pocketlm-serve: the OpenAI- and Ollama-compatible HTTP server (src/server/).
 * Users run it as `pocketlm serve`, which executes this binary (see
 * tools/cmd_serve.c for why it is a binary of its own).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "config.h"
#include "fit.h"
#include "pocketlm.h"
#include "pocketlm_plan.h"
#include "spec_cli.h"
#include "server/server.h"

#define DEMO_MODEL "../shared/models/stories260K.gguf"

typedef struct serve_opts {
    const char *model, *host, *api_key, *alias, *cache_type_k, *cache_type_v, *mem_limit;
    const char *chat_template, *chat_template_file;
    int port, n_ctx, n_batch, n_threads, parallel, queue, max_prompt, max_tokens, timeout, max_conn;
    int max_body_kib;
    float grace;
    bool no_mmap, mlock, repack, no_repack, flash_attn, batch_invariant, coarse_prefill;
    spec_cli spec;  /* speculative decoding in every slot */
} serve_opts;

/* "260K", "1.1B": Ollama's parameter_size. */
static void param_size(uint64_t n, char out[16]) {
    if (n >= 1000000000ull) snprintf(out, 16, "%.1fB", n / 1e9);
    else if (n >= 1000000ull) snprintf(out, 16, "%.0fM", n / 1e6);
    else snprintf(out, 16, "%.0fK", n / 1e3);
}

/* A stable id for /api/tags' digest (Ollama's is the file's sha256; reading
 * gigabytes at start-up to compute one is not worth it): FNV-1a of the path,
 * size and mtime, spread to 64 hex digits. */
static void file_digest(const char *path, uint64_t size, int64_t mtime, char out[65]) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = path; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ size) * 1099511628211ull;
    h = (h ^ (uint64_t)mtime) * 1099511628211ull;
    for (int i = 0; i < 4; i++) {
        h = (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ull;
        snprintf(out + 16 * i, 17, "%016llx", (unsigned long long)h);
    }
}

static void model_info(const serve_opts *o, const plm_model *model, srv_model_info *mi) {
    memset(mi, 0, sizeof *mi);
    const char *base = strrchr(o->model, '/') ? strrchr(o->model, '/') + 1 : o->model;
    snprintf(mi->name, sizeof mi->name, "%s", o->alias ? o->alias : base);
    char *dot = strstr(mi->name, ".gguf");
    if (!o->alias && dot && !dot[5]) *dot = '\0';
    snprintf(mi->arch, sizeof mi->arch, "%s", plm_model_arch(model));
    param_size(plm_model_n_params(model), mi->param_size);
    struct stat st;
    if (stat(o->model, &st) == 0) {
        mi->file_bytes = (uint64_t)st.st_size;
        mi->mtime = (int64_t)st.st_mtime;
    }
    file_digest(o->model, mi->file_bytes, mi->mtime, mi->digest);
    plm_plan plan;  /* the weight type holding the most bytes */
    plm_error err;
    if (plm_plan_file(o->model, NULL, &plan, &err) == PLM_OK) {
        uint64_t best = 0;
        for (int i = 0; i < plan.n_types; i++)
            if (plan.types[i].bytes > best) {
                best = plan.types[i].bytes;
                snprintf(mi->quant, sizeof mi->quant, "%s", plan.types[i].type);
            }
    }
}

/* The draft model of --draft-model, checked against the model's vocabulary. */
static bool load_draft(const serve_opts *o, srv_server *srv) {
    plm_model_params mp = plm_model_default_params();
    mp.use_mmap = !o->no_mmap;
    plm_error err;
    if (plm_model_load(o->spec.draft_model, &mp, &srv->cfg.draft, &err) ||
        plm_spec_vocab_compatible(srv->model, srv->cfg.draft, &err)) {
        fprintf(stderr, "pocketlm serve: draft model %s: %s\n", o->spec.draft_model, err.message);
        plm_model_free(srv->cfg.draft);
        srv->cfg.draft = NULL;
        return false;
    }
    return true;
}

static int serve(const serve_opts *o, srv_server *srv) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = (uint32_t)o->n_ctx;
    cp.n_batch = (uint32_t)o->n_batch;
    cp.n_threads = (uint32_t)o->n_threads;
    cp.type_k = (plm_kv_type)plm_kv_type_from_name(o->cache_type_k);
    cp.type_v = (plm_kv_type)plm_kv_type_from_name(o->cache_type_v);
    cp.flash_attn = o->flash_attn;
    cp.coarse_prefill = o->coarse_prefill;
    cp.n_seq = (uint32_t)o->parallel;  /* a sequence per slot, the draft's too */
    if (!spec_cli_fit("serve", &o->spec, o->model, !o->no_mmap, o->mem_limit, &cp)) return 1;
    plm_model_params mp = plm_model_default_params();
    mp.use_mmap = !o->no_mmap;
    mp.use_mlock = o->mlock;
    mp.repack = !o->no_repack && fit_repack("serve", o->model, !o->no_mmap, o->mem_limit, &cp, o->repack);
    plm_error err;
    if (plm_model_load(o->model, &mp, &srv->model, &err)) {
        fprintf(stderr, "pocketlm serve: %s\n", err.message);
        return 1;
    }
    if (o->spec.draft_model && !load_draft(o, srv)) {
        plm_model_free(srv->model);
        return 1;
    }
    model_info(o, srv->model, &srv->info);
    if (!chat_setup(srv, o->chat_template, o->chat_template_file)) {
        chat_teardown(&srv->chat);
        plm_model_free(srv->model);
        return 1;
    }
    metrics_init(&srv->metrics);
    int rc = 1;
    if (sched_new(srv->model, &cp, &srv->cfg, &srv->metrics, &srv->sched, &err)) {
        fprintf(stderr, "pocketlm serve: %s\n", err.message);
    } else {
        rc = server_run(srv);
        sched_free(srv->sched);
    }
    metrics_destroy(&srv->metrics);
    chat_teardown(&srv->chat);
    plm_model_free(srv->cfg.draft);
    plm_model_free(srv->model);
    return rc;
}

static bool check_opts(const serve_opts *o) {
    const char *bad = NULL;
    if (o->port < 0 || o->port > 65535) bad = "--port must be in [0, 65535] (0 = any free port)";
    else if (o->n_ctx < 0 || o->n_batch < 0 || o->n_threads < 0) bad = "-c, -b and -t must be >= 0";
    else if (o->parallel < 1 || o->parallel > 256) bad = "--parallel must be 1..256";
    else if (o->queue < 1) bad = "--queue must be >= 1";
    else if (o->max_body_kib < 1) bad = "--max-body must be >= 1 (KiB)";
    else if (o->max_prompt < 0 || o->max_tokens < 0) bad = "--max-prompt and --max-tokens must be >= 0";
    else if (o->timeout < 1) bad = "--timeout must be >= 1 second";
    else if (o->max_conn < 1) bad = "--max-connections must be >= 1";
    else if (!(o->grace >= 0)) bad = "--grace must be >= 0 seconds";
    else if (plm_kv_type_from_name(o->cache_type_k) < 0 || plm_kv_type_from_name(o->cache_type_v) < 0)
        bad = "cache types are f16, q8_0 or q4_0";
    if (bad) fprintf(stderr, "pocketlm serve: %s\n", bad);
    return !bad;
}

int main(int argc, char **argv) {
    serve_opts o = {.host = "127.0.0.1", .port = 8080, .parallel = 1, .queue = 16, .max_body_kib = 1024,
                    .timeout = 30, .max_conn = 512, .grace = 10.0f, .cache_type_k = "f16", .cache_type_v = "f16",
                    .spec = spec_cli_defaults()};
    arg_spec specs[64] = {
        {"-m", "--model", ARG_STR, &o.model, "PATH", "GGUF model (default: " DEMO_MODEL " if present)"},
        {NULL, "--host", ARG_STR, &o.host, "ADDR", "address to listen on (0.0.0.0 = every IPv4 interface)"},
        {NULL, "--port", ARG_INT, &o.port, "N", "port; 0 = any free one (printed)"},
        {NULL, "--api-key", ARG_STR, &o.api_key, "KEY", "require 'Authorization: Bearer KEY'"},
        {NULL, "--alias", ARG_STR, &o.alias, "NAME", "model name in the APIs (default: the file name)"},
        {NULL, "--chat-template", ARG_STR, &o.chat_template, "NAME",
         "built-in chat template (chatml, llama3, qwen3, ...) instead of the model's"},
        {NULL, "--chat-template-file", ARG_STR, &o.chat_template_file, "FILE", "Jinja chat template instead of the model's"},
        {"-c", "--ctx-size", ARG_INT, &o.n_ctx, "N", "context length, 0 = the largest that fits memory"},
        {NULL, "--mem-limit", ARG_STR, &o.mem_limit, "SIZE", "refuse to plan past this (e.g. 2G)"},
        {"-b", "--batch-size", ARG_INT, &o.n_batch, "N", "prompt tokens per forward pass, 0 = tuned, else 512"},
        {"-t", "--threads", ARG_INT, &o.n_threads, "N", "threads, 0 = tuned, else the performance cores"},
        {"-ctk", "--cache-type-k", ARG_STR, &o.cache_type_k, "TYPE", "KV cache keys: f16, q8_0, q4_0"},
        {"-ctv", "--cache-type-v", ARG_STR, &o.cache_type_v, "TYPE", "KV cache values: f16, q8_0, q4_0"},
        {"-fa", "--flash-attn", ARG_FLAG, &o.flash_attn, NULL, "one-pass (flash) attention"},
        {NULL, "--coarse-prefill", ARG_FLAG, &o.coarse_prefill, NULL, "coarse int8 K-quant products for large batches (see pocketlm run)"},
        {NULL, "--batch-invariant", ARG_FLAG, &o.batch_invariant, NULL,
         "answers bit-identical however prompts are split or batched (slower prompts)"},
        {"-np", "--parallel", ARG_INT, &o.parallel, "N", "slots: requests served at once, batched into one forward pass (each slot holds -c tokens)"},
        {NULL, "--queue", ARG_INT, &o.queue, "N", "requests that may wait for a slot; more get 503"},
        {NULL, "--max-body", ARG_INT, &o.max_body_kib, "KIB", "largest request body; larger get 413"},
        {NULL, "--max-prompt", ARG_INT, &o.max_prompt, "N", "most prompt tokens, 0 = the context length - 1"},
        {NULL, "--max-tokens", ARG_INT, &o.max_tokens, "N", "most tokens a request may generate, 0 = the context"},
        {NULL, "--timeout", ARG_INT, &o.timeout, "S", "close connections idle this many seconds"},
        {NULL, "--max-connections", ARG_INT, &o.max_conn, "N", "open connections at most"},
        {NULL, "--grace", ARG_FLOAT, &o.grace, "S", "on SIGTERM, time running requests get to finish"},
        {NULL, "--no-mmap", ARG_FLAG, &o.no_mmap, NULL, "read the weights into memory instead of mapping"},
        {NULL, "--mlock", ARG_FLAG, &o.mlock, NULL, "lock the weights in RAM"},
        {NULL, "--repack", ARG_FLAG, &o.repack, NULL,
         "row-interleaved Q4_0/Q8_0/Q4_K copies at load (default: when they fit with half the memory to spare)"},
        {NULL, "--no-repack", ARG_FLAG, &o.no_repack, NULL, "keep the file's layout"},
    };
    int n_specs = 0;
    while (specs[n_specs].long_name) n_specs++;
    spec_cli_args(&o.spec, specs + n_specs);  /* speculation in every slot */
    n_specs += SPEC_CLI_N_ARGS;
    const arg_parser parser = {"serve", "pocketlm serve [-m MODEL.gguf] [--host ADDR] [--port N] [options]", specs,
                               n_specs, 0};
    char *pos[1];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) {
        args_free(&parser);
        return rc == ARGS_HELP ? 0 : 1;
    }
    if (!o.model && access(DEMO_MODEL, R_OK) == 0) o.model = DEMO_MODEL;
    if (!o.model) fprintf(stderr, "pocketlm serve: no model given: pass one with -m MODEL.gguf\n");
    if (!o.model || !check_opts(&o)) {
        args_free(&parser);
        return 1;
    }
    tuned_defaults tuned;
    if (config_load(&tuned)) {
        if (o.n_threads == 0) o.n_threads = tuned.threads;
        if (o.n_batch == 0) o.n_batch = tuned.batch;
    }
    if (o.n_batch == 0) o.n_batch = 512;

    srv_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        args_free(&parser);
        return 1;
    }
    srv->cfg = (srv_config){.host = o.host, .port = o.port, .api_key = o.api_key, .model_path = o.model,
                            .n_parallel = o.parallel, .batch_invariant = o.batch_invariant, .queue_size = o.queue,
                            .max_body_bytes = (size_t)o.max_body_kib * 1024, .max_prompt_tokens = o.max_prompt,
                            .max_tokens = o.max_tokens, .timeout_s = o.timeout, .max_connections = o.max_conn,
                            .grace_s = o.grace, .sampling = plm_sampler_default_params(),
                            .speculate = spec_cli_wanted(&o.spec), .spec = spec_cli_params(&o.spec)};
    /* SIGTERM/SIGINT are taken by server_run's sigwait: blocked here, before
     * any thread starts, so every thread inherits the mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    rc = serve(&o, srv);
    free(srv);
    args_free(&parser);
    return rc;
}
