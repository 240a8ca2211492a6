/* pocketlm probe: what this device offers an LLM — cores and clusters, RAM,
 * memory read bandwidth, and (with --file) cold-cache file read speed. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "pocketlm.h"
#include "pocketlm_plan.h"

typedef struct probe_opts {
    const char *output, *file;
    int buffer_mib, passes, threads;
    bool no_bandwidth;
} probe_opts;

static void json_str(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
        else if (*p < 0x20) fprintf(out, "\\u%04x", *p);
        else fputc(*p, out);
    }
    fputc('"', out);
}

static void print_json(const plm_cpu_info *c, const plm_mem_info *m, const plm_bandwidth_result *bw,
                       const char *file, const plm_file_read_result *fr) {
    printf("{\n  \"cpu\": {\n    \"model\": ");
    json_str(stdout, c->model);
    printf(",\n    \"arch\": ");
    json_str(stdout, c->arch);
    printf(",\n    \"features\": ");
    json_str(stdout, c->features);
    printf(",\n    \"logical_cpus\": %u,\n    \"physical_cores\": %u,\n    \"allowed_cpus\": %u,\n"
           "    \"performance_cores\": %u,\n    \"default_threads\": %u,\n    \"clusters\": [",
           c->n_cpus, c->n_cores, c->n_allowed, c->n_perf, c->n_perf);
    for (uint32_t i = 0; i < c->n_clusters; i++)
        printf("%s\n      {\"max_mhz\": %.0f, \"cpus\": %u, \"cores\": %u}", i ? "," : "",
               c->clusters[i].max_khz / 1e3, c->clusters[i].n_cpus, c->clusters[i].n_cores);
    printf("\n    ],\n    \"cpus\": [");
    for (uint32_t i = 0; i < c->n_cpus; i++)
        printf("%s\n      {\"cpu\": %u, \"core_id\": %d, \"package_id\": %d, \"max_mhz\": %.0f}", i ? "," : "",
               c->cpus[i].cpu, c->cpus[i].core, c->cpus[i].package, c->cpus[i].max_khz / 1e3);
    printf("\n    ]\n  },\n  \"memory\": {\"total_bytes\": %" PRIu64 ", \"available_bytes\": %" PRIu64
           ", \"page_size\": %" PRIu64 "}",
           m->total_bytes, m->available_bytes, m->page_size);
    if (bw) {
        printf(",\n  \"bandwidth\": {\n    \"buffer_bytes\": %" PRIu64 ",\n    \"passes\": %u,\n    \"method\": ",
               bw->buffer_bytes, bw->passes);
        json_str(stdout, bw->method);
        printf(",\n    \"read_gbps\": [");
        for (uint32_t i = 0; i < bw->n; i++)
            printf("%s\n      {\"threads\": %u, \"gbps\": %.3f}", i ? "," : "", i + 1, bw->gbps[i]);
        printf("\n    ],\n    \"best_gbps\": %.3f,\n    \"best_threads\": %u\n  }", bw->best_gbps, bw->best_threads);
    }
    if (fr) {
        printf(",\n  \"file\": {\"path\": ");
        json_str(stdout, file);
        printf(", \"bytes\": %" PRIu64 ", \"seconds\": %.6f, \"mbps\": %.1f, \"resident_before\": %.4f, "
               "\"cache_dropped\": %s}",
               fr->bytes, fr->seconds, fr->mbps, fr->resident_before, fr->cache_dropped ? "true" : "false");
    }
    printf("\n}\n");
}

static void print_text(const plm_cpu_info *c, const plm_mem_info *m, const plm_bandwidth_result *bw,
                       const char *file, const plm_file_read_result *fr) {
    printf("cpu        %s (%s)\n", c->model[0] ? c->model : "unknown model", c->arch);
    printf("simd       %s\n", c->features[0] ? c->features : "(none found)");
    printf("cores      %u logical CPUs, %u physical cores, %u usable by this process\n", c->n_cpus, c->n_cores,
           c->n_allowed);
    for (uint32_t i = 0; i < c->n_clusters; i++) {
        const plm_cpu_cluster *k = &c->clusters[i];
        if (k->max_khz) printf("cluster    %u cores (%u CPUs) up to %.2f GHz\n", k->n_cores, k->n_cpus, k->max_khz / 1e6);
        else printf("cluster    %u cores (%u CPUs), maximum frequency unknown (no cpufreq)\n", k->n_cores, k->n_cpus);
    }
    printf("threads    %u performance cores: the default for -t\n", c->n_perf);
    printf("per CPU   ");
    for (uint32_t i = 0; i < c->n_cpus; i++) {
        const plm_cpu_core *p = &c->cpus[i];
        printf(" cpu%u:core%d", p->cpu, p->core);
        if (p->max_khz) printf("@%.0fMHz", p->max_khz / 1e3);
    }
    printf("\n");
    printf("memory     %.2f GiB total, %.2f GiB available, page size %" PRIu64 " bytes\n",
           m->total_bytes / 1073741824.0, m->available_bytes / 1073741824.0, m->page_size);
    plm_mem_budget mb;  /* what this process may really use: docs/MEMORY.md */
    if (plm_probe_budget(0, &mb, NULL) == PLM_OK)
        printf("budget     %.2f GiB: %s\n", mb.bytes / 1073741824.0, mb.source);
    if (bw) {
        printf("bandwidth  read, %s loads, %.0f MiB buffer, median of %u passes:\n", bw->method,
               bw->buffer_bytes / 1048576.0, bw->passes);
        for (uint32_t i = 0; i < bw->n; i++)
            printf("           %3u thread%s %7.2f GB/s\n", i + 1, i ? "s" : " ", bw->gbps[i]);
        printf("           best %.2f GB/s with %u thread%s\n", bw->best_gbps, bw->best_threads,
               bw->best_threads == 1 ? "" : "s");
    }
    if (fr) {
        printf("file       %s: %.1f MB in %.3f s = %.1f MB/s sequential read\n", file, fr->bytes / 1e6, fr->seconds,
               fr->mbps);
        if (fr->cache_dropped) printf("           cold read: the page cache was dropped first\n");
        else if (fr->resident_before >= 0)
            printf("           NOT a cold read: %.0f%% of the file stayed in the page cache (mapped by another "
                   "process, or dirty); drop it as root with: echo 1 > /proc/sys/vm/drop_caches\n",
                   fr->resident_before * 100);
        else printf("           could not check whether the page cache was dropped (mincore failed)\n");
    }
}

int cmd_probe(int argc, char **argv) {
    probe_opts o = {.output = "text", .buffer_mib = 0, .passes = 3, .threads = 0};
    const arg_spec specs[] = {
        {"-o", "--output", ARG_STR, &o.output, "FMT", "text or json"},
        {"-f", "--file", ARG_STR, &o.file, "PATH", "also time a cold-cache sequential read of this file"},
        {NULL, "--buffer-mib", ARG_INT, &o.buffer_mib, "N", "bandwidth buffer, 0 = min(1024, available RAM / 4)"},
        {NULL, "--passes", ARG_INT, &o.passes, "N", "bandwidth passes per thread count (the median is kept)"},
        {"-t", "--threads", ARG_INT, &o.threads, "N", "measure bandwidth with 1..N threads, 0 = physical cores"},
        {NULL, "--no-bandwidth", ARG_FLAG, &o.no_bandwidth, NULL, "skip the bandwidth measurement"},
    };
    const arg_parser parser = {"probe", "pocketlm probe [-o text|json] [--file MODEL.gguf] [options]", specs,
                               sizeof specs / sizeof specs[0], 0};
    char *pos[1];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    args_free(&parser);
    if (rc != ARGS_OK) return rc == ARGS_HELP ? 0 : 1;
    bool json = !strcmp(o.output, "json");
    if (!json && strcmp(o.output, "text")) {
        fprintf(stderr, "pocketlm probe: -o must be text or json, not '%s'\n", o.output);
        return 1;
    }
    if (o.buffer_mib < 0 || o.passes <= 0 || o.threads < 0) {
        fprintf(stderr, "pocketlm probe: --buffer-mib and -t must be >= 0, --passes > 0\n");
        return 1;
    }

    plm_error err;
    plm_cpu_info *cpu = malloc(sizeof *cpu);
    plm_bandwidth_result *bw = malloc(sizeof *bw);
    plm_mem_info mem;
    plm_file_read_result fr;
    rc = 1;
    if (!cpu || !bw) {
        fprintf(stderr, "pocketlm probe: out of memory\n");
        goto done;
    }
    if (plm_probe_cpu(cpu, &err) || plm_probe_memory(&mem, &err)) {
        fprintf(stderr, "pocketlm probe: %s\n", err.message);
        goto done;
    }
    if (!o.no_bandwidth) {
        plm_bandwidth_params bp = {.buffer_bytes = (uint64_t)o.buffer_mib << 20,
                                   .max_threads = (uint32_t)o.threads,
                                   .passes = (uint32_t)o.passes};
        if (plm_probe_bandwidth(&bp, bw, &err)) {
            fprintf(stderr, "pocketlm probe: bandwidth: %s\n", err.message);
            goto done;
        }
    }
    if (o.file && plm_probe_file_read(o.file, &fr, &err)) {
        fprintf(stderr, "pocketlm probe: %s\n", err.message);
        goto done;
    }
    if (json) print_json(cpu, &mem, o.no_bandwidth ? NULL : bw, o.file, o.file ? &fr : NULL);
    else print_text(cpu, &mem, o.no_bandwidth ? NULL : bw, o.file, o.file ? &fr : NULL);
    rc = 0;
done:
    free(cpu);
    free(bw);
    return rc;
}
