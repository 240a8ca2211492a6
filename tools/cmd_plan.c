/* pocketlm plan: will this model fit on that device, and how fast can it go?
 * Reads only the GGUF header (or bare numbers with --shape). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "units.h"
#include "pocketlm.h"
#include "pocketlm_plan.h"

typedef struct plan_opts {
    const char *model, *device, *ram, *type_k, *type_v, *output, *mem_limit, *draft_model;
    int draft_max;
    const char *params, *active, *quant;
    int n_ctx, n_batch, n_threads, parallel;
    int layers, kv_heads, head_dim, embd, heads, ff, vocab, at_tokens, at_batch;
    float bandwidth, app_share, bpw, storage, gops;
    bool no_mmap, repack, shape, list_devices;
} plan_opts;

/* " x 4 sequences" when the KV cache holds several (serve --parallel). */
static const char *parallel_note(const plm_plan_params *pp) {
    static char note[40];
    if (pp->n_seq <= 1) return "";
    snprintf(note, sizeof note, " x %u sequences", pp->n_seq);
    return note;
}

static void line(const char *what, uint64_t bytes) {
    char a[32], b[32];
    printf("  %-44s %12s  %12s\n", what, human(bytes, a, sizeof a), mib(bytes, b, sizeof b));
}

static double fixed_bw;
static const char *storage_note = "";  /* where the storage speed came from */
static char storage_note_buf[96];
static double given_bandwidth(void *user) {
    (void)user;
    return fixed_bw;
}

/* The verdict line: fits, pages (and how fast), or what is over the limit. */
static void print_verdict(const plm_plan *p, const plm_plan_verdict *v) {
    char a[32], b[32], c[32];
    const char *budget = human(v->budget_bytes, b, sizeof b);
    if (v->fit == PLM_FITS)
        printf("verdict    fits in RAM (peak %s of %s)\n", human(p->peak_rss, a, sizeof a), budget);
    else if (v->fit == PLM_FITS_MMAP) {
        printf("verdict    runs only by paging weights from storage (peak %s over the budget %s; %s of it cannot be "
               "paged out)\n", human(p->peak_rss, a, sizeof a), budget, human(p->anon_bytes, c, sizeof c));
        if (v->decode_tps_paged > 0)
            printf("           about %.2f tok/s reading weights back at %.2f GB/s%s\n", v->decode_tps_paged,
                   v->storage_gbs, storage_note);
    } else
        printf("verdict    does not fit (%s needs %s; the budget is %s)\n",
               p->params.use_mmap ? "anonymous memory: KV cache, buffers, tables," : "the bill, weights read into memory,",
               human(p->params.use_mmap ? p->anon_bytes : p->peak_rss, a, sizeof a), budget);
}

static void print_human(const plm_plan *p, const plm_device *d, const plm_plan_verdict *v) {
    char a[32], b[32];
    const plm_plan_params *pp = &p->params;
    if (p->from_shape)
        printf("shape      %.1fB parameters%s, %u layers, n_embd %u%s, %u heads / %u KV heads x %u, n_ff %u, vocab %u\n",
               p->n_params / 1e9, p->n_params_active != p->n_params ? " (MoE)" : "", p->n_layer, p->n_embd,
               p->estimated_dims ? " (estimated)" : "", p->n_head, p->n_head_kv, p->head_dim, p->n_ff, p->n_vocab);
    else
        printf("model      %s%s%s (%s): %u layers, n_embd %u, %u heads / %u KV heads x %u, n_ff %u, vocab %u\n",
               p->name[0] ? "\"" : "", p->name[0] ? p->name : "", p->name[0] ? "\"" : "", p->arch, p->n_layer,
               p->n_embd, p->n_head, p->n_head_kv, p->head_dim, p->n_ff, p->n_vocab);
    if (p->n_expert) {
        const double scale = p->n_params >= 1e9 ? 1e9 : 1e6;
        printf("experts    %u per layer, %u chosen per token, %u rows each: a token reads %.2f%s of %.2f%s parameters\n",
               p->n_expert, p->n_expert_used, p->n_ff_expert, p->n_params_active / scale, scale == 1e9 ? "B" : "M",
               p->n_params / scale, scale == 1e9 ? "B" : "M");
    }
    printf("context    %u tokens%s, batch %u, %u threads, KV cache K %s / V %s, %s\n\n", pp->n_ctx,
           parallel_note(pp), pp->n_batch, pp->n_threads, plm_kv_type_name(pp->type_k), plm_kv_type_name(pp->type_v),
           pp->use_mmap ? "weights mmap'd" : "weights read into memory (--no-mmap)");

    printf("weights by type %36s  %12s\n", "bytes", "");
    for (int i = 0; i < p->n_types; i++) {
        char what[64];
        if (p->from_shape)
            snprintf(what, sizeof what, "%-8s %9.1f M params (shape)", p->types[i].type, p->types[i].n_elements / 1e6);
        else
            snprintf(what, sizeof what, "%-8s %5u tensors %9.1f M params", p->types[i].type, p->types[i].n_tensors,
                     p->types[i].n_elements / 1e6);
        line(what, p->types[i].bytes);
    }
    char what[128];
    snprintf(what, sizeof what, "total %.2f bits/weight", p->bits_per_weight);
    line(what, p->weight_bytes);
    if (p->n_expert) {
        snprintf(what, sizeof what, "active per token (%u of %u experts)", p->n_expert_used, p->n_expert);
        line(what, p->weight_bytes_active);
    }

    printf("\nthe bill (resident memory)\n");
    snprintf(what, sizeof what, "weights (%s)", pp->use_mmap ? "file pages, mmap" : "anonymous copy of the file");
    line(what, p->weights_resident);
    if (p->repack_bytes) line("repacked matrices (anonymous, --repack)", p->repack_bytes);
    snprintf(what, sizeof what, "KV cache (K %s %s + V %s %s)", plm_kv_type_name(pp->type_k),
             human(p->buf.kv_k, a, sizeof a), plm_kv_type_name(pp->type_v), human(p->buf.kv_v, b, sizeof b));
    line(what, p->kv_bytes);
    if (p->n_layer_swa) {  /* a windowed layer's cache: its window, one batch and the window's mirror */
        snprintf(what, sizeof what, "  %u of %u layers hold a %u-token window", p->n_layer_swa, p->n_layer, p->n_swa);
        printf("  %s\n", what);
    }
    snprintf(what, sizeof what, "scratch, logits, kernel stacks (batch %u)", pp->n_batch);
    line(what, p->scratch_bytes);
    line("tokenizer tables + parsed metadata", p->vocab_bytes);
    line("model tables, thread stacks", p->model_bytes);
    line("process overhead (code, libc, stack)", p->overhead_bytes);
    if (p->draft) {
        snprintf(what, sizeof what, "draft model, %u layers (+ %u logit rows)", p->draft->n_layer,
                 (uint32_t)(p->draft_max + 1) * (p->params.n_seq ? p->params.n_seq : 1));
        line(what, p->draft_bytes);
    }
    printf("  %s\n", "--------------------------------------------------------------------------");
    line("predicted peak RSS", p->peak_rss);
    if (pp->use_mmap) line("  of which cannot be paged out (anonymous)", p->anon_bytes);

    if (!d) return;
    printf("\ndevice     %s: %s\n", d->name, d->label);
    char c[32];
    printf("budget     %s: %s (RAM %s x %.0f%%%s%s)\n", human(v->budget_bytes, a, sizeof a), v->budget_source,
           human(d->ram_bytes, b, sizeof b), d->app_share * 100, d->used_bytes ? " - in use " : "",
           d->used_bytes ? human(d->used_bytes, c, sizeof c) : "");
    print_verdict(p, v);
    if (v->decode_tps > 0)
        printf("decode     ceiling %.1f tok/s (%.1f GB/s / %s per token); %.1f tok/s at a full context\n",
               v->decode_tps, d->bandwidth_gbs, human(p->decode_bytes, a, sizeof a), v->decode_tps_full);
    if (v->prefill_tps > 0)
        printf("prefill    about %.0f tok/s (estimate: %.0f GOPS int8 x %.0f%% / %.1f GFLOP per token)\n", v->prefill_tps,
               d->compute_gops, PLM_PLAN_PREFILL_EFFICIENCY * 100, 2.0 * p->n_params_active / 1e9);
    printf("would fit  largest context at these types: %u", v->max_ctx);
    if (v->max_ctx == 0) printf(" (none)");
    printf("; best quant at %u tokens: %s\n", pp->n_ctx, v->quant_for_ctx[0] ? v->quant_for_ctx : "none");
}

static void print_json(const plm_plan *p, const plm_device *d, const plm_plan_verdict *v) {
    const plm_plan_params *pp = &p->params;
    printf("{\n  \"from_shape\": %s, \"arch\": \"%s\", \"n_params\": %" PRIu64 ", \"n_params_active\": %" PRIu64 ",\n",
           p->from_shape ? "true" : "false", p->arch, p->n_params, p->n_params_active);
    printf("  \"n_layer\": %u, \"n_embd\": %u, \"n_head\": %u, \"n_head_kv\": %u, \"head_dim\": %u, \"n_ff\": %u, "
           "\"n_vocab\": %u,\n", p->n_layer, p->n_embd, p->n_head, p->n_head_kv, p->head_dim, p->n_ff, p->n_vocab);
    printf("  \"n_swa\": %u, \"n_layer_swa\": %u,\n", p->n_swa, p->n_layer_swa);
    printf("  \"n_ctx\": %u, \"n_seq\": %u, \"n_batch\": %u, \"n_threads\": %u, \"type_k\": \"%s\", "
           "\"type_v\": \"%s\", \"use_mmap\": %s,\n", pp->n_ctx, pp->n_seq, pp->n_batch, pp->n_threads,
           plm_kv_type_name(pp->type_k), plm_kv_type_name(pp->type_v), pp->use_mmap ? "true" : "false");
    printf("  \"weights\": [");
    for (int i = 0; i < p->n_types; i++)
        printf("%s{\"type\": \"%s\", \"n_tensors\": %u, \"n_elements\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
               i ? ", " : "", p->types[i].type, p->types[i].n_tensors, p->types[i].n_elements, p->types[i].bytes);
    printf("],\n  \"weight_bytes\": %" PRIu64 ", \"bits_per_weight\": %.4f, \"file_bytes\": %" PRIu64 ",\n",
           p->weight_bytes, p->bits_per_weight, p->file_bytes);
    printf("  \"bill\": {\"weights_resident\": %" PRIu64 ", \"kv\": %" PRIu64 ", \"kv_k\": %" PRIu64
           ", \"kv_v\": %" PRIu64 ", \"scratch\": %" PRIu64 ", \"vocab\": %" PRIu64 ", \"model\": %" PRIu64
           ", \"overhead\": %" PRIu64 ", \"draft\": %" PRIu64 ", \"peak_rss\": %" PRIu64 ", \"anon\": %" PRIu64
           "},\n",
           p->weights_resident, p->kv_bytes, p->buf.kv_k, p->buf.kv_v, p->scratch_bytes, p->vocab_bytes,
           p->model_bytes, p->overhead_bytes, p->draft_bytes, p->peak_rss, p->anon_bytes);
    printf("  \"n_expert\": %u, \"n_expert_used\": %u, \"n_ff_expert\": %u, \"weight_bytes_active\": %" PRIu64 ",\n",
           p->n_expert, p->n_expert_used, p->n_ff_expert, p->weight_bytes_active);
    printf("  \"decode_bytes_per_token\": %" PRIu64 ", \"kv_read_full\": %" PRIu64, p->decode_bytes, p->kv_read_full);
    if (d) {
        printf(",\n  \"device\": {\"name\": \"%s\", \"ram\": %" PRIu64 ", \"used\": %" PRIu64
               ", \"app_share\": %.3f, \"bandwidth_gbs\": %.2f, \"storage_gbs\": %.2f, \"compute_gops\": %.0f},\n",
               d->name, d->ram_bytes, d->used_bytes, d->app_share, d->bandwidth_gbs, d->storage_gbs, d->compute_gops);
        printf("  \"budget\": %" PRIu64 ", \"verdict\": \"%s\", \"decode_tps\": %.3f, \"decode_tps_full\": %.3f, "
               "\"decode_tps_paged\": %.3f, \"prefill_tps_estimate\": %.3f, \"max_ctx\": %u, \"quant_for_ctx\": \"%s\", "
               "\"budget_source\": \"%s\", \"fit\": \"%s\"",
               v->budget_bytes, plm_fit_name(v->fit), v->decode_tps, v->decode_tps_full, v->decode_tps_paged,
               v->prefill_tps, v->max_ctx, v->quant_for_ctx, v->budget_source,
               v->fit == PLM_FITS ? "fits" : v->fit == PLM_FITS_MMAP ? "paging" : "no_fit");
    }
    printf("\n}\n");
}

/* This machine pages from the disk the model is on: read the first 128 MiB
 * of the file from a cold cache (what `pocketlm probe --file` measures). */
static void measure_storage(const char *path, plm_device *dev, const plm_plan *p, plm_plan_verdict *v) {
    plm_file_read_result r;
    if (plm_probe_file_read_n(path, 128u << 20, &r, NULL) != PLM_OK || r.mbps <= 0) {
        storage_note = " (assumed: the disk read could not be measured)";
        return;
    }
    dev->storage_gbs = r.mbps / 1000.0;
    snprintf(storage_note_buf, sizeof storage_note_buf, " (measured: %.0f MiB %s read of the model file)",
             r.bytes / 1048576.0, r.cache_dropped ? "cold" : "partly cached");
    storage_note = storage_note_buf;
    plm_plan_evaluate(p, dev, v, NULL);
}

static int kv_type(const char *name, plm_kv_type *out) {
    int t = plm_kv_type_from_name(name);
    if (t < 0) {
        fprintf(stderr, "pocketlm plan: unknown KV cache type '%s' (f16, q8_0, q4_0)\n", name);
        return 1;
    }
    *out = (plm_kv_type)t;
    return 0;
}

static int run_plan(plan_opts *o) {
    plm_error err;
    plm_plan_params pp = plm_plan_default_params();
    pp.n_ctx = (uint32_t)o->n_ctx;
    pp.n_batch = (uint32_t)o->n_batch;
    pp.n_threads = (uint32_t)o->n_threads;
    pp.n_seq = (uint32_t)o->parallel;
    pp.use_mmap = !o->no_mmap;
    pp.repack = o->repack;
    if (kv_type(o->type_k, &pp.type_k) || kv_type(o->type_v, &pp.type_v)) return 1;

    plm_plan p;
    if (o->shape) {
        plm_shape sh = {0};
        double v;
        if (!o->params || !parse_size(o->params, 1e9, &sh.n_params)) {
            fprintf(stderr, "pocketlm plan: --shape needs --params N (35B, 7.2e9...)\n");
            return 1;
        }
        if (o->active && parse_size(o->active, 1e9, &v)) sh.n_params_active = v;
        sh.n_layer = (uint32_t)o->layers;
        sh.n_head_kv = (uint32_t)o->kv_heads;
        sh.head_dim = (uint32_t)o->head_dim;
        sh.n_embd = (uint32_t)o->embd;
        sh.n_head = (uint32_t)o->heads;
        sh.n_ff = (uint32_t)o->ff;
        sh.n_vocab = (uint32_t)o->vocab;
        sh.quant = o->quant;
        sh.bits_per_weight = o->bpw;
        if (plm_plan_shape(&sh, &pp, &p, &err)) {
            fprintf(stderr, "pocketlm plan: %s\n", err.message);
            return 1;
        }
    } else {
        if (!o->model) {
            fprintf(stderr, "pocketlm plan: give a model (-m MODEL.gguf) or --shape with numbers\n");
            return 1;
        }
        if (plm_plan_file(o->model, &pp, &p, &err)) {
            fprintf(stderr, "pocketlm plan: %s\n", err.message);
            return 1;
        }
    }
    plm_plan draft;  /* p keeps a pointer to it */
    if (o->draft_model && (plm_plan_file(o->draft_model, &pp, &draft, &err) ||
                           plm_plan_add_draft(&p, &draft, o->draft_max, &err))) {
        fprintf(stderr, "pocketlm plan: draft model %s: %s\n", o->draft_model, err.message);
        return 1;
    }

    plm_device dev;
    const plm_device *d = NULL;
    if (o->ram) {
        double ram;
        if (!parse_size(o->ram, 1, &ram) || ram <= 0) {
            fprintf(stderr, "pocketlm plan: cannot read --ram '%s' (8G, 7.5GiB, 12GB)\n", o->ram);
            return 1;
        }
        memset(&dev, 0, sizeof dev);
        snprintf(dev.name, sizeof dev.name, "custom");
        snprintf(dev.label, sizeof dev.label, "--ram %s --bandwidth %.1f", o->ram, o->bandwidth);
        dev.ram_bytes = (uint64_t)ram;
        dev.app_share = 0.6;
        dev.bandwidth_gbs = o->bandwidth;
        dev.storage_gbs = 1.0;
        dev.phone = true;
        d = &dev;
    } else if (o->device && strcmp(o->device, "this")) {
        d = plm_device_find(o->device);
        if (!d) {
            fprintf(stderr, "pocketlm plan: unknown device '%s' (see --list-devices)\n", o->device);
            return 1;
        }
        dev = *d;
        d = &dev;
    } else {
        fixed_bw = o->bandwidth;
        if (plm_device_this(&dev, o->bandwidth > 0 ? given_bandwidth : NULL, NULL, &err)) {
            fprintf(stderr, "pocketlm plan: %s\n", err.message);
            return 1;
        }
        d = &dev;
    }
    if (o->app_share > 0) dev.app_share = o->app_share;
    if (o->bandwidth > 0) dev.bandwidth_gbs = o->bandwidth;
    if (o->storage > 0) dev.storage_gbs = o->storage;
    if (o->gops > 0) dev.compute_gops = o->gops;
    if (o->mem_limit) {
        double lim;
        if (!parse_size(o->mem_limit, 1, &lim) || lim < 1) {
            fprintf(stderr, "pocketlm plan: --mem-limit '%s' is not a size like 2G or 512M\n", o->mem_limit);
            return 1;
        }
        if (!dev.limit_bytes || (uint64_t)lim < dev.limit_bytes) {
            dev.limit_bytes = (uint64_t)lim;
            dev.limit_maps_count = false;
            snprintf(dev.limit_source, sizeof dev.limit_source, "--mem-limit");
        }
    }

    plm_plan_verdict v;
    plm_plan_evaluate(&p, d, &v, NULL);
    if (v.fit == PLM_FITS_MMAP) {
        if (o->storage > 0) storage_note = " (--storage)";
        else if (!strcmp(dev.name, "this") && o->model) measure_storage(o->model, &dev, &p, &v);
        else storage_note = " (the device profile's flash read speed)";
    }
    if (!strcmp(o->output, "json")) print_json(&p, d, &v);
    else print_human(&p, d, &v);
    if (o->at_tokens > 0) {
        uint32_t batch = (uint32_t)(o->at_batch > 0 ? o->at_batch : o->at_tokens);
        uint64_t r = plm_plan_rss_at(&p, (uint32_t)o->at_tokens, batch);
        if (!strcmp(o->output, "json")) printf("{\"rss_at\": %" PRIu64 ", \"tokens\": %d, \"batch\": %u}\n", r, o->at_tokens, batch);
        else printf("at %d tokens (batches <= %u): predicted RSS %.2f MiB\n", o->at_tokens, batch, r / 1048576.0);
    }
    return 0;
}

int cmd_plan(int argc, char **argv) {
    plan_opts o = {.type_k = "f16", .type_v = "f16", .output = "text", .n_batch = 512, .parallel = 1,
                   .quant = "Q4_K_M", .draft_max = plm_spec_default_params().draft_max};
    const arg_spec specs[] = {
        {"-m", "--model", ARG_STR, &o.model, "PATH", "GGUF model: only its header is read"},
        {"-c", "--ctx-size", ARG_INT, &o.n_ctx, "N", "context length, 0 = min(trained, 4096)"},
        {"-b", "--batch-size", ARG_INT, &o.n_batch, "N", "prompt tokens per forward pass"},
        {"-t", "--threads", ARG_INT, &o.n_threads, "N", "threads, 0 = the performance cores"},
        {"-np", "--parallel", ARG_INT, &o.parallel, "N", "sequences in the KV cache (serve --parallel), -c each"},
        {NULL, "--cache-type-k", ARG_STR, &o.type_k, "TYPE", "KV cache keys: f16, q8_0, q4_0"},
        {NULL, "--cache-type-v", ARG_STR, &o.type_v, "TYPE", "KV cache values: f16, q8_0, q4_0"},
        {NULL, "--no-mmap", ARG_FLAG, &o.no_mmap, NULL, "plan for weights read into memory"},
        {NULL, "--draft-model", ARG_STR, &o.draft_model, "PATH", "plan a speculative draft model beside it (both "
         "weights, both KV caches)"},
        {NULL, "--draft-max", ARG_INT, &o.draft_max, "N", "tokens drafted per verification (its logits)"},
        {NULL, "--repack", ARG_FLAG, &o.repack, NULL, "plan for row-interleaved copies of the Q4_0/Q8_0 matrices"},
        {NULL, "--device", ARG_STR, &o.device, "NAME", "a device profile (--list-devices) or 'this' (default)"},
        {NULL, "--ram", ARG_STR, &o.ram, "SIZE", "plan for a device with this much RAM (8G, 12GB, 7.5GiB)"},
        {NULL, "--bandwidth", ARG_FLOAT, &o.bandwidth, "GB/s", "memory bandwidth (overrides the profile/probe)"},
        {NULL, "--mem-limit", ARG_STR, &o.mem_limit, "SIZE",
         "the app's own limit (Android MemoryInfo, iOS os_proc_available_memory); the budget is the smallest"},
        {NULL, "--app-share", ARG_FLOAT, &o.app_share, "F", "share of RAM an app can use (phones: 0.6)"},
        {NULL, "--storage", ARG_FLOAT, &o.storage, "GB/s", "flash read speed, for mmap paging"},
        {NULL, "--gops", ARG_FLOAT, &o.gops, "N", "CPU int8 GOPS, for the prefill estimate"},
        {NULL, "--shape", ARG_FLAG, &o.shape, NULL, "plan a model given only as numbers (below)"},
        {NULL, "--params", ARG_STR, &o.params, "N", "shape: total parameters (35B, 7.2e9)"},
        {NULL, "--active-params", ARG_STR, &o.active, "N", "shape: parameters per token (MoE)"},
        {NULL, "--layers", ARG_INT, &o.layers, "N", "shape: layers"},
        {NULL, "--kv-heads", ARG_INT, &o.kv_heads, "N", "shape: KV heads"},
        {NULL, "--head-dim", ARG_INT, &o.head_dim, "N", "shape: head size"},
        {NULL, "--embd", ARG_INT, &o.embd, "N", "shape: n_embd, 0 = estimate"},
        {NULL, "--heads", ARG_INT, &o.heads, "N", "shape: query heads, 0 = n_embd / head size"},
        {NULL, "--ff", ARG_INT, &o.ff, "N", "shape: feed-forward size, 0 = 8/3 n_embd"},
        {NULL, "--vocab", ARG_INT, &o.vocab, "N", "shape: vocabulary, 0 = 32000"},
        {NULL, "--type", ARG_STR, &o.quant, "QUANT", "shape: F16 Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0 Q3_K_M Q2_K"},
        {NULL, "--bpw", ARG_FLOAT, &o.bpw, "BITS", "shape: bits per weight (overrides --type)"},
        {NULL, "--at-tokens", ARG_INT, &o.at_tokens, "N", "also predict RSS after only N tokens were cached"},
        {NULL, "--at-batch", ARG_INT, &o.at_batch, "N", "... with prompt batches of at most N (default: N tokens)"},
        {"-o", "--output", ARG_STR, &o.output, "FMT", "text or json"},
        {NULL, "--list-devices", ARG_FLAG, &o.list_devices, NULL, "print the device profiles"},
    };
    const arg_parser parser = {"plan", "pocketlm plan -m MODEL.gguf | --shape --params N ... [options]", specs,
                               sizeof specs / sizeof specs[0], 0};
    char *pos[1];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) {
        args_free(&parser);
        return rc == ARGS_HELP ? 0 : 1;
    }
    if (o.list_devices) {
        for (int i = 0; i < plm_device_count(); i++) {
            const plm_device *d = plm_device_at(i);
            printf("%-24s %-52s %5.1f GB/s  share %.0f%%\n", d->name, d->label, d->bandwidth_gbs,
                   d->app_share * 100);
        }
        printf("%-24s %s\n", "this", "this machine: /proc/meminfo and a measured bandwidth");
        args_free(&parser);
        return 0;
    }
    if (o.n_ctx < 0 || o.n_batch <= 0 || o.n_threads < 0 || o.parallel < 1 || o.parallel > 256 ||
        (strcmp(o.output, "text") && strcmp(o.output, "json"))) {
        fprintf(stderr, "pocketlm plan: -c >= 0, -b > 0, -t >= 0, --parallel 1..256 and -o text|json\n");
        args_free(&parser);
        return 1;
    }
    rc = run_plan(&o);
    args_free(&parser);
    return rc;
}
