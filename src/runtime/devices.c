/* Device profiles for memory planning, and `this` machine measured.
 * Every number and its public source: docs/DEVICES.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pocketlm.h"
#include "pocketlm_plan.h"

#define GB 1000000000ull
#define GIB (1024ull * 1024ull * 1024ull)

/* compute_gops: int8 dot-product peak of all CPU cores, cores x clock x
 * int8 ops per cycle (SDOT: 16 MACs = 32 ops per 128-bit pipe per cycle),
 * derived in docs/DEVICES.md. */
static const plm_device devices[] = {
    {"iphone-15-pro", "Apple iPhone 15 Pro (A17 Pro, 8 GB LPDDR5-6400)", 8 * GIB, 0, 0.60, 51.2, 2.0, 1506,
     true, 0, "", false},
    {"snapdragon-8-gen-2", "Snapdragon 8 Gen 2 phone (12 GB LPDDR5X-8400)", 12 * GIB, 0, 0.60, 67.2, 4.2, 1318,
     true, 0, "", false},
    {"snapdragon-8-gen-3", "Snapdragon 8 Gen 3 phone (12 GB LPDDR5X-9600)", 12 * GIB, 0, 0.60, 76.8, 4.2, 1567,
     true, 0, "", false},
    {"snapdragon-8-gen-3-24g", "Snapdragon 8 Gen 3 phone (24 GB LPDDR5X-9600)", 24 * GIB, 0, 0.60, 76.8, 4.2,
     1567, true, 0, "", false},
    {"dimensity-9300", "MediaTek Dimensity 9300 phone (16 GB LPDDR5T-9600)", 16 * GIB, 0, 0.60, 76.8, 4.2, 2022,
     true, 0, "", false},
    {"raspberry-pi-5", "Raspberry Pi 5 (8 GB LPDDR4X-4267, 32-bit)", 8 * GIB, 0, 0.85, 17.1, 0.09, 614, false, 0, "", false},
};

int plm_device_count(void) { return (int)(sizeof devices / sizeof devices[0]); }

const plm_device *plm_device_at(int i) {
    return i >= 0 && i < plm_device_count() ? &devices[i] : NULL;
}

const plm_device *plm_device_find(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < plm_device_count(); i++)
        if (!strcmp(devices[i].name, name)) return &devices[i];
    return NULL;
}

static double probe_bandwidth(void) {
    plm_bandwidth_params bp = {.buffer_bytes = 256ull << 20, .max_threads = 0, .passes = 2};
    plm_bandwidth_result r;
    plm_error err;
    if (plm_probe_bandwidth(&bp, &r, &err) != PLM_OK) return 0;
    return r.best_gbps;
}

plm_status plm_device_this(plm_device *o, plm_bandwidth_fn bw, void *user, plm_error *err) {
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "this");
    plm_mem_info mi;
    plm_status st = plm_probe_memory(&mi, err);
    if (st) return st;
    o->ram_bytes = mi.total_bytes;
    o->used_bytes = mi.total_bytes > mi.available_bytes ? mi.total_bytes - mi.available_bytes : 0;
    o->app_share = 1.0;
    plm_mem_budget mb;  /* the process's own limit: cgroup, rlimits */
    if (plm_probe_budget(0, &mb, NULL) == PLM_OK && mb.bytes < mi.available_bytes) {
        o->limit_bytes = mb.bytes;
        snprintf(o->limit_source, sizeof o->limit_source, "%s", mb.source);
        o->limit_maps_count = mb.maps_count;
    }
    o->bandwidth_gbs = bw ? bw(user) : probe_bandwidth();
    /* Rough int8 peak: physical cores x max clock x 64 ops a cycle (two
     * 128-bit dot-product pipes, or one 256-bit AVX2 madd chain). */
    plm_cpu_info *ci = calloc(1, sizeof *ci);
    double ghz = 2.5;
    uint32_t cores = 1;
    if (ci && plm_probe_cpu(ci, NULL) == PLM_OK) {
        cores = ci->n_cores ? ci->n_cores : (ci->n_cpus ? ci->n_cpus : 1);
        if (ci->n_clusters && ci->clusters[0].max_khz) ghz = ci->clusters[0].max_khz / 1e6;
        snprintf(o->label, sizeof o->label, "this machine (%.48s, %u cores)", ci->model[0] ? ci->model : ci->arch, cores);
    } else {
        snprintf(o->label, sizeof o->label, "this machine");
    }
    free(ci);
    o->compute_gops = cores * ghz * 64;
    o->storage_gbs = 1.0;
    o->phone = false;
    return PLM_OK;
}
