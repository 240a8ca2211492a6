/* Hardware probe: cores and their clusters, RAM, memory read bandwidth and
 * cold-cache file read speed, from Linux /sys and /proc. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PLM_PROBE_X86 1
#elif defined(__aarch64__)
#include <arm_neon.h>
#define PLM_PROBE_NEON 1
#endif

#include "core/error.h"
#include "core/os_apple.h"
#include "pocketlm.h"
#include "pocketlm_plan.h"

#define SYS_CPU "/sys/devices/system/cpu"

/* ---- small file readers --------------------------------------------------- */

/* First line of a small file into buf, without the newline.  false if unreadable. */
static bool read_line(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    if (ok) buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

static bool read_long(const char *path, long *out) {
    char buf[64], *end;
    if (!read_line(path, buf, sizeof buf)) return false;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (errno || end == buf) return false;
    *out = v;
    return true;
}

/* Parses a kernel CPU list ("0-3,6,8-9") into a bitmap of up to `max` CPUs.
 * Returns false on a malformed list. */
static bool parse_cpu_list(const char *s, bool *set, int max) {
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0) return false;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1 || b < a) return false;
            s = end;
        }
        for (long i = a; i <= b && i < max; i++) set[i] = true;
        if (*s == ',') s++;
        else if (*s && *s != '\n') return false;
    }
    return true;
}

/* The value of the first "key : value" line of /proc/cpuinfo whose key is
 * `key`, trimmed.  false if none. */
static bool cpuinfo_value(const char *key, char *out, size_t size) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    size_t klen = strlen(key);
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0) continue;
        const char *p = line + klen;
        while (*p == ' ' || *p == '\t') p++;
        if (*p != ':') continue;
        p++;
        while (*p == ' ' || *p == '\t') p++;
        snprintf(out, size, "%s", p);
        out[strcspn(out, "\n")] = '\0';
        size_t n = strlen(out);
        while (n && (out[n - 1] == ' ' || out[n - 1] == '\t')) out[--n] = '\0';
        found = true;
    }
    fclose(f);
    return found;
}

/* ---- CPUs ------------------------------------------------------------------- */

static void cpu_model(plm_cpu_info *o) {
    if (cpuinfo_value("model name", o->model, sizeof o->model) && o->model[0]) return;
    if (cpuinfo_value("Hardware", o->model, sizeof o->model) && o->model[0]) return;
    /* Device-tree boards (Raspberry Pi, many ARM SoCs) name themselves here. */
    FILE *f = fopen("/proc/device-tree/model", "r");
    if (f) {
        size_t n = fread(o->model, 1, sizeof o->model - 1, f);
        fclose(f);
        o->model[n] = '\0';
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)o->model[i] < 0x20) o->model[i] = '\0';
        if (o->model[0]) return;
    }
    char impl[32], part[32];
    if (cpuinfo_value("CPU implementer", impl, sizeof impl) && cpuinfo_value("CPU part", part, sizeof part))
        snprintf(o->model, sizeof o->model, "implementer %s part %s", impl, part);
}

/* The SIMD features that matter for our kernels, from /proc/cpuinfo's flags
 * (x86) or Features (ARM) line, under the names people know them by. */
static void cpu_features(plm_cpu_info *o) {
    static const char *const names[][2] = {
        {"sse4_2", "sse4.2"}, {"avx", "avx"}, {"avx2", "avx2"}, {"fma", "fma"}, {"f16c", "f16c"},
        {"avx_vnni", "avx-vnni"}, {"avx512f", "avx512f"}, {"avx512bw", "avx512bw"},
        {"avx512vl", "avx512vl"}, {"avx512vbmi", "avx512vbmi"}, {"avx512_vnni", "avx512vnni"}, {"avx512_bf16", "avx512bf16"},
        {"amx_int8", "amx-int8"}, {"asimd", "neon"}, {"fphp", "fp16"}, {"asimddp", "dotprod"},
        {"i8mm", "i8mm"}, {"bf16", "bf16"}, {"sve", "sve"}, {"sve2", "sve2"}, {"neon", "neon"},
    };
    char line[4096];
    if (!cpuinfo_value("flags", line, sizeof line) && !cpuinfo_value("Features", line, sizeof line)) return;
    size_t used = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        /* whole-word match */
        size_t len = strlen(names[k][0]);
        bool have = false;
        for (const char *p = line; (p = strstr(p, names[k][0])) != NULL; p += len)
            if ((p == line || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0')) {
                have = true;
                break;
            }
        if (!have || strstr(o->features, names[k][1])) continue;
        int w = snprintf(o->features + used, sizeof o->features - used, "%s%s", used ? " " : "", names[k][1]);
        if (w < 0 || (size_t)w >= sizeof o->features - used) {
            o->features[used] = '\0';
            break;
        }
        used += (size_t)w;
    }
}

static int cmp_khz_desc(const void *a, const void *b) {
    const plm_cpu_cluster *x = a, *y = b;
    return x->max_khz < y->max_khz ? 1 : x->max_khz > y->max_khz ? -1 : 0;
}

plm_status plm_probe_cpu(plm_cpu_info *o, plm_error *err) {
    if (!o) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_probe_cpu: no output");
    memset(o, 0, sizeof *o);
    struct utsname u;
    if (uname(&u) == 0) snprintf(o->arch, sizeof o->arch, "%s", u.machine);
    cpu_model(o);
    cpu_features(o);

    bool *on = calloc(PLM_PROBE_MAX_CPUS, sizeof *on);
    if (!on) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    char list[4096];
    if (!read_line(SYS_CPU "/online", list, sizeof list) || !parse_cpu_list(list, on, PLM_PROBE_MAX_CPUS)) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1) n = 1;
        for (long i = 0; i < n && i < PLM_PROBE_MAX_CPUS; i++) on[i] = true;
    }

    /* Each online CPU: topology and maximum frequency.  A CPU is the primary
     * thread of its physical core when it is the lowest-numbered of its SMT
     * siblings (thread_siblings_list, else the same package+core_id). */
    bool primary[PLM_PROBE_MAX_CPUS];
    for (int c = 0; c < PLM_PROBE_MAX_CPUS; c++) {
        if (!on[c]) continue;
        plm_cpu_core *cc = &o->cpus[o->n_cpus];
        cc->cpu = (uint32_t)c;
        char path[256];
        long v;
        snprintf(path, sizeof path, SYS_CPU "/cpu%d/topology/core_id", c);
        cc->core = read_long(path, &v) ? (int32_t)v : -1;
        snprintf(path, sizeof path, SYS_CPU "/cpu%d/topology/physical_package_id", c);
        cc->package = read_long(path, &v) ? (int32_t)v : -1;
        snprintf(path, sizeof path, SYS_CPU "/cpu%d/cpufreq/cpuinfo_max_freq", c);
        cc->max_khz = read_long(path, &v) && v > 0 ? (uint32_t)v : 0;

        bool is_primary = true;
        snprintf(path, sizeof path, SYS_CPU "/cpu%d/topology/thread_siblings_list", c);
        bool sib[PLM_PROBE_MAX_CPUS] = {0};
        if (read_line(path, list, sizeof list) && parse_cpu_list(list, sib, PLM_PROBE_MAX_CPUS)) {
            for (int s = 0; s < c; s++)
                if (sib[s] && on[s]) is_primary = false;
        } else if (cc->core >= 0) {
            for (uint32_t k = 0; k < o->n_cpus; k++)
                if (o->cpus[k].core == cc->core && o->cpus[k].package == cc->package) is_primary = false;
        }
        primary[o->n_cpus] = is_primary;
        o->n_cores += is_primary;
        o->n_cpus++;
    }
    free(on);
    if (o->n_cpus == 0) {  /* no /sys at all: one unknown CPU */
        o->cpus[0] = (plm_cpu_core){.cpu = 0, .core = -1, .package = -1};
        primary[0] = true;
        o->n_cpus = o->n_cores = 1;
    }

    /* Clusters: CPUs with the same maximum frequency, fastest first. */
    for (uint32_t k = 0; k < o->n_cpus; k++) {
        uint32_t j = 0;
        while (j < o->n_clusters && o->clusters[j].max_khz != o->cpus[k].max_khz) j++;
        if (j == o->n_clusters) {
            if (j == PLM_PROBE_MAX_CLUSTERS) j--; /* absurd: lump the rest into the last */
            else o->clusters[o->n_clusters++].max_khz = o->cpus[k].max_khz;
        }
        o->clusters[j].n_cpus++;
        o->clusters[j].n_cores += primary[k];
    }
    qsort(o->clusters, o->n_clusters, sizeof o->clusters[0], cmp_khz_desc);

    /* Performance cores: within 20% of the fastest maximum frequency. */
    uint32_t top = o->clusters[0].max_khz;
    o->n_perf = 0;
    for (uint32_t j = 0; j < o->n_clusters; j++)
        if (top == 0 || (uint64_t)o->clusters[j].max_khz * 5 >= (uint64_t)top * 4) o->n_perf += o->clusters[j].n_cores;
#if defined(__APPLE__)  /* no /sys: Darwin counts its performance cores itself */
    const int perf = plm_apple_sysctl_int("hw.perflevel0.physicalcpu");
    if (perf > 0) o->n_perf = (uint32_t)perf;
#endif

#if defined(__linux__)  /* glibc and bionic; Darwin has no affinity masks */
    cpu_set_t set;
    CPU_ZERO(&set);
    o->n_allowed = sched_getaffinity(0, sizeof set, &set) == 0 ? (uint32_t)CPU_COUNT(&set) : o->n_cpus;
#else
    o->n_allowed = o->n_cpus;
#endif
    if (o->n_allowed == 0) o->n_allowed = o->n_cpus;
    if (o->n_perf > o->n_allowed) o->n_perf = o->n_allowed;
    if (o->n_perf == 0) o->n_perf = 1;
    return PLM_OK;
}

uint32_t plm_default_threads(void) {
    plm_cpu_info *info = malloc(sizeof *info);
    if (!info) return 1;
    uint32_t n = plm_probe_cpu(info, NULL) == PLM_OK ? info->n_perf : 1;
    free(info);
    return n;
}

/* ---- memory ----------------------------------------------------------------- */

plm_status plm_probe_memory(plm_mem_info *o, plm_error *err) {
    if (!o) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_probe_memory: no output");
    memset(o, 0, sizeof *o);
    long ps = sysconf(_SC_PAGESIZE);
    o->page_size = ps > 0 ? (uint64_t)ps : 4096;
#if defined(__APPLE__)
    if (!plm_apple_memory(&o->total_bytes, &o->available_bytes))
        return plm_fail(err, PLM_ERR_IO, "sysctl hw.memsize failed: %s", strerror(errno));
    return PLM_OK;
#endif
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return plm_fail(err, PLM_ERR_IO, "cannot open /proc/meminfo: %s", strerror(errno));
    char line[256];
    bool have_avail = false;
    uint64_t free_kb = 0, cached_kb = 0, buffers_kb = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "MemTotal: %llu", &kb) == 1) o->total_bytes = kb * 1024;
        else if (sscanf(line, "MemAvailable: %llu", &kb) == 1) {
            o->available_bytes = kb * 1024;
            have_avail = true;
        } else if (sscanf(line, "MemFree: %llu", &kb) == 1) free_kb = kb;
        else if (sscanf(line, "Cached: %llu", &kb) == 1) cached_kb = kb;
        else if (sscanf(line, "Buffers: %llu", &kb) == 1) buffers_kb = kb;
    }
    fclose(f);
    if (!have_avail) o->available_bytes = (free_kb + cached_kb + buffers_kb) * 1024; /* kernels before 3.14 */
    if (!o->total_bytes) return plm_fail(err, PLM_ERR_IO, "/proc/meminfo has no MemTotal line");
    return PLM_OK;
}

/* ---- the process's memory budget ------------------------------------------------
 * MemAvailable is the machine's; an app lives under tighter limits: the memory
 * cgroup it was put in (containers; Android's per-app cgroups), rlimits, and
 * what the OS tells the app (Android ActivityManager.MemoryInfo, iOS
 * os_proc_available_memory()), which only the app can pass in. */

/* This process's cgroup directory for a controller: "" when not in one.
 * v1 lines read "4:memory:/path", v2 "0::/path"; v1 wins when both exist
 * because a v1 memory controller is the one that holds the limit. */
static bool own_cgroup(char *v1, size_t v1_size, char *v2, size_t v2_size) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return false;
    char line[1024];
    v1[0] = v2[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        if (!*ctrls) snprintf(v2, v2_size, "%s", path);
        else
            for (const char *t = ctrls; t; t = strchr(t, ',') ? strchr(t, ',') + 1 : NULL)
                if (!strncmp(t, "memory", 6) && (t[6] == ',' || t[6] == '\0')) snprintf(v1, v1_size, "%s", path);
    }
    fclose(f);
    return v1[0] || v2[0];
}

/* Reads a cgroup file as a byte count; "max" (v2) and v1's huge "no limit"
 * values read as 0 = unlimited. */
static bool read_cg_bytes(const char *dir, const char *name, uint64_t *out) {
    char path[1200], buf[64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!read_line(path, buf, sizeof buf)) return false;
    if (!strncmp(buf, "max", 3)) {
        *out = 0;
        return true;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno || end == buf) return false;
    *out = v >= (1ull << 60) ? 0 : (uint64_t)v; /* v1: PAGE_COUNTER_MAX * page size */
    return true;
}

/* One "key value" line of memory.stat. */
static uint64_t cg_stat(const char *dir, const char *key) {
    char path[1200], line[256];
    snprintf(path, sizeof path, "%s/memory.stat", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = strlen(key);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ' ') {
            v = strtoull(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* Where the memory controller's hierarchy is mounted: /sys/fs/cgroup(/memory)
 * on Linux distributions, elsewhere on Android (v1 at /dev/memcg; v2 under
 * /sys/fs/cgroup from Android 12), so ask /proc/self/mountinfo when the usual
 * place does not have it.  mountinfo fields: id parent dev root MOUNT opts
 * [tags] - FSTYPE source SUPER_OPTS. */
static bool cgroup_mount(bool is_v1, char *out, size_t size) {
    const char *usual = is_v1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup";
    char probe[600];
    snprintf(probe, sizeof probe, "%s/%s", usual, is_v1 ? "memory.limit_in_bytes" : "cgroup.controllers");
    if (access(probe, R_OK) == 0) {
        snprintf(out, size, "%s", usual);
        return true;
    }
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f) return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        char mnt[512], fstype[64], super[512];
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %*s %511s", mnt) != 1 ||
            sscanf(dash + 3, "%63s %*s %511s", fstype, super) != 2)
            continue;
        if (is_v1 ? !strcmp(fstype, "cgroup") && strstr(super, "memory") != NULL : !strcmp(fstype, "cgroup2")) {
            snprintf(out, size, "%s", mnt);
            found = true;
        }
    }
    fclose(f);
    return found;
}

/* The tightest limit of this cgroup and its ancestors (a parent's limit
 * binds its children).  Usage excludes the page cache (memory.stat "file" /
 * "total_cache"): file pages are reclaimed before anything is killed. */
static void cgroup_limit(plm_mem_budget *o) {
    char v1[512], v2[512];
    if (!own_cgroup(v1, sizeof v1, v2, sizeof v2)) return;
    const bool is_v1 = v1[0] != '\0';
    char mount[512], dir[1024];
    if (!cgroup_mount(is_v1, mount, sizeof mount)) return;
    snprintf(dir, sizeof dir, "%s%s", mount, is_v1 ? v1 : v2);
    for (;;) {
        uint64_t limit = 0, usage = 0;
        if (read_cg_bytes(dir, is_v1 ? "memory.limit_in_bytes" : "memory.max", &limit) && limit &&
            read_cg_bytes(dir, is_v1 ? "memory.usage_in_bytes" : "memory.current", &usage)) {
            uint64_t cache = cg_stat(dir, is_v1 ? "total_cache" : "file");
            usage = usage > cache ? usage - cache : 0;
            uint64_t left = limit > usage ? limit - usage : 0;
            if (!o->cgroup_limit_bytes || left < o->cgroup_limit_bytes - o->cgroup_used_bytes) {
                o->cgroup_limit_bytes = limit;
                o->cgroup_used_bytes = usage;
                snprintf(o->cgroup_file, sizeof o->cgroup_file, "%.200s/%s", dir,
                         is_v1 ? "memory.limit_in_bytes" : "memory.max");
            }
        }
        char *slash = strrchr(dir, '/');
        size_t root = strlen(mount);
        if (!slash || (size_t)(slash - dir) < root) break;
        *slash = '\0';
    }
}

/* VmSize / VmData of this process, in bytes (0 if unknown). */
static uint64_t proc_status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t n = strlen(key);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            v = strtoull(line + n + 1, NULL, 10) * 1024;
            break;
        }
    fclose(f);
    return v;
}

/* A soft rlimit minus what the process already uses of it; 0 = unlimited. */
static uint64_t rlimit_left(int resource, const char *status_key) {
    struct rlimit rl;
    if (getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return 0;
    uint64_t used = proc_status_kb(status_key);
    return (uint64_t)rl.rlim_cur > used ? (uint64_t)rl.rlim_cur - used : 1;
}

static void consider(plm_mem_budget *o, uint64_t bytes, const char *source) {
    if (!bytes || (o->bytes && bytes >= o->bytes)) return;
    o->bytes = bytes;
    snprintf(o->source, sizeof o->source, "%s", source);
}

plm_status plm_probe_budget(uint64_t app_limit_bytes, plm_mem_budget *o, plm_error *err) {
    if (!o) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_probe_budget: no output");
    memset(o, 0, sizeof *o);
    plm_mem_info mi;
    plm_status st = plm_probe_memory(&mi, err);
    if (st) return st;
    o->available_bytes = mi.available_bytes;
    cgroup_limit(o);
    o->rlimit_as_left = rlimit_left(RLIMIT_AS, "VmSize");
    o->rlimit_data_left = rlimit_left(RLIMIT_DATA, "VmData");
    o->app_limit_bytes = app_limit_bytes;

#if defined(__APPLE__)  /* on iOS, os_proc_available_memory: the room before Jetsam */
    consider(o, o->available_bytes, "available memory (os_proc_available_memory)");
#else
    consider(o, o->available_bytes, "available RAM (MemAvailable)");
#endif
    if (o->cgroup_limit_bytes)
        consider(o, o->cgroup_limit_bytes > o->cgroup_used_bytes ? o->cgroup_limit_bytes - o->cgroup_used_bytes : 1,
                 o->cgroup_file[0] && strstr(o->cgroup_file, "limit_in_bytes") ? "cgroup memory.limit_in_bytes"
                                                                                : "cgroup memory.max");
    consider(o, o->rlimit_as_left, "RLIMIT_AS");
    consider(o, o->rlimit_data_left, "RLIMIT_DATA");
    consider(o, app_limit_bytes, "the app's limit");
    o->maps_count = !strcmp(o->source, "RLIMIT_AS");
    return PLM_OK;
}

/* ---- memory read bandwidth --------------------------------------------------- */

typedef uint64_t (*sum_fn)(const uint8_t *p, size_t n);

#define SUM_STEP 128 /* bytes per loop iteration: four 32-byte or eight 16-byte loads */

#ifndef PLM_PROBE_NEON /* NEON always wins on arm64: no scalar fallback there */
static uint64_t sum_scalar(const uint8_t *p, size_t n) {
    const uint64_t *q = (const uint64_t *)(const void *)p;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 16 <= n / 8; i += 16) {
        a0 += q[i] + q[i + 4] + q[i + 8] + q[i + 12];
        a1 += q[i + 1] + q[i + 5] + q[i + 9] + q[i + 13];
        a2 += q[i + 2] + q[i + 6] + q[i + 10] + q[i + 14];
        a3 += q[i + 3] + q[i + 7] + q[i + 11] + q[i + 15];
    }
    return a0 + a1 + a2 + a3;
}
#endif

#ifdef PLM_PROBE_X86
__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + SUM_STEP <= n; i += SUM_STEP) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(const void *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(const void *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(const void *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(const void *)(p + i + 96)));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)(void *)lanes, a0);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#endif

#ifdef PLM_PROBE_NEON
static uint64_t sum_neon(const uint8_t *p, size_t n) {
    uint64x2_t a0 = vdupq_n_u64(0), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + SUM_STEP <= n; i += SUM_STEP) {
        const uint64_t *q = (const uint64_t *)(const void *)(p + i);
        a0 = vaddq_u64(a0, vaddq_u64(vld1q_u64(q), vld1q_u64(q + 8)));
        a1 = vaddq_u64(a1, vaddq_u64(vld1q_u64(q + 2), vld1q_u64(q + 10)));
        a2 = vaddq_u64(a2, vaddq_u64(vld1q_u64(q + 4), vld1q_u64(q + 12)));
        a3 = vaddq_u64(a3, vaddq_u64(vld1q_u64(q + 6), vld1q_u64(q + 14)));
    }
    a0 = vaddq_u64(vaddq_u64(a0, a1), vaddq_u64(a2, a3));
    return vgetq_lane_u64(a0, 0) + vgetq_lane_u64(a0, 1);
}
#endif

static sum_fn pick_sum(const char **name) {
#ifdef PLM_PROBE_X86
    if (__builtin_cpu_supports("avx2")) {
        *name = "avx2";
        return sum_avx2;
    }
#endif
#ifdef PLM_PROBE_NEON
    *name = "neon";
    return sum_neon;
#else
    *name = "scalar";
    return sum_scalar;
#endif
}

/* Workers wait for `go` so that thread start-up is not timed. */
typedef struct bw_start {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool go;
} bw_start;

/* Threads take 1 MiB chunks from a shared counter, as decode hands out
 * rows: with fixed halves the pass lasted as long as the slower thread, and
 * two threads measured 37.6 GB/s where an F16 decode then read 44. */
#define BW_CHUNK ((size_t)1 << 20)

typedef struct bw_worker {
    pthread_t thread;
    bw_start *start;
    sum_fn sum;
    const uint8_t *p;
    size_t n;
    atomic_size_t *next;
    uint64_t result;
} bw_worker;

static void *bw_run(void *arg) {
    bw_worker *w = arg;
    pthread_mutex_lock(&w->start->mu);
    while (!w->start->go) pthread_cond_wait(&w->start->cv, &w->start->mu);
    pthread_mutex_unlock(&w->start->mu);
    for (size_t off; (off = atomic_fetch_add(w->next, BW_CHUNK)) < w->n;)
        w->result += w->sum(w->p + off, w->n - off < BW_CHUNK ? w->n - off : BW_CHUNK);
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One timed pass: t threads sum the buffer, chunk by chunk.  Returns seconds, < 0 when
 * the threads could not be started. */
static double bw_pass(const uint8_t *buf, size_t bytes, uint32_t t, sum_fn sum, uint64_t *sink) {
    bw_worker *w = calloc(t, sizeof *w);
    if (!w) return -1;
    bw_start start = {.go = false};
    pthread_mutex_init(&start.mu, NULL);
    pthread_cond_init(&start.cv, NULL);
    atomic_size_t next = 0;
    uint32_t started = 0;
    for (uint32_t i = 0; i < t; i++) {
        w[i] = (bw_worker){.start = &start, .sum = sum, .p = buf, .n = bytes / SUM_STEP * SUM_STEP, .next = &next};
        if (pthread_create(&w[i].thread, NULL, bw_run, &w[i]) != 0) break;
        started++;
    }
    /* Give the workers a moment to reach the wait, then release them together. */
    struct timespec nap = {0, 2000000};
    nanosleep(&nap, NULL);
    pthread_mutex_lock(&start.mu);
    start.go = true;
    pthread_cond_broadcast(&start.cv);
    pthread_mutex_unlock(&start.mu);
    double t0 = now_s();
    for (uint32_t i = 0; i < started; i++) pthread_join(w[i].thread, NULL);
    double secs = now_s() - t0;
    for (uint32_t i = 0; i < started; i++) *sink += w[i].result;
    pthread_cond_destroy(&start.cv);
    pthread_mutex_destroy(&start.mu);
    free(w);
    return started == t ? secs : -1;
}

plm_status plm_probe_bandwidth(const plm_bandwidth_params *params, plm_bandwidth_result *out, plm_error *err) {
    if (!out) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_probe_bandwidth: no output");
    memset(out, 0, sizeof *out);
    plm_bandwidth_params p = params ? *params : (plm_bandwidth_params){0};
    if (p.passes == 0) p.passes = 3;
    if (p.passes > 1000) return plm_fail(err, PLM_ERR_INVALID_ARG, "%u passes is too many", p.passes);
    if (p.max_threads == 0) {
        plm_cpu_info *ci = malloc(sizeof *ci);
        if (!ci) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
        p.max_threads = plm_probe_cpu(ci, NULL) == PLM_OK ? ci->n_cores : 1;
        free(ci);
    }
    if (p.max_threads > PLM_PROBE_MAX_CPUS) p.max_threads = PLM_PROBE_MAX_CPUS;
    /* A quarter of the process's budget at most (its cgroup, not the host's
     * free RAM): a probe must never be what the OS kills. */
    plm_mem_budget mb;
    const uint64_t cap = plm_probe_budget(0, &mb, NULL) == PLM_OK ? mb.bytes / 4 : (uint64_t)1 << 30;
    if (p.buffer_bytes == 0) p.buffer_bytes = (uint64_t)1 << 30;
    if (p.buffer_bytes > cap) p.buffer_bytes = cap;
    /* Every thread gets at least a few KiB; slices are whole loop steps. */
    uint64_t min_bytes = (uint64_t)p.max_threads * 4096;
    if (p.buffer_bytes < min_bytes) p.buffer_bytes = min_bytes;
    const uint64_t align = 4096;
    p.buffer_bytes = (p.buffer_bytes + align - 1) / align * align;
    if (p.buffer_bytes > (uint64_t)SIZE_MAX / 2)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "a %llu-byte buffer is too large",
                        (unsigned long long)p.buffer_bytes);

    uint8_t *buf = aligned_alloc(align, (size_t)p.buffer_bytes);
    if (!buf)
        return plm_fail(err, PLM_ERR_NOMEM, "cannot allocate a %llu MiB bandwidth buffer",
                        (unsigned long long)(p.buffer_bytes >> 20));
    /* Write every page: an untouched buffer reads the shared zero page. */
    for (size_t i = 0; i < p.buffer_bytes; i += 8) {
        uint64_t v = i * 0x9E3779B97F4A7C15ull;
        memcpy(buf + i, &v, 8);
    }

    double *secs = malloc(p.passes * sizeof *secs);
    if (!secs) {
        free(buf);
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    }
    sum_fn sum = pick_sum(&out->method);
    uint64_t sink = 0;
    sum(buf, (size_t)p.buffer_bytes < (64u << 20) ? (size_t)p.buffer_bytes : (64u << 20)); /* warm up */
    plm_status st = PLM_OK;
    for (uint32_t t = 1; t <= p.max_threads && st == PLM_OK; t++) {
        size_t used = (size_t)(p.buffer_bytes / t / SUM_STEP * SUM_STEP) * t;
        for (uint32_t k = 0; k < p.passes; k++) {
            secs[k] = bw_pass(buf, (size_t)p.buffer_bytes, t, sum, &sink);
            if (secs[k] < 0) {
                st = plm_fail(err, PLM_ERR_NOMEM, "cannot start %u threads", t);
                break;
            }
        }
        if (st) break;
        qsort(secs, p.passes, sizeof *secs, cmp_double);
        double med = p.passes % 2 ? secs[p.passes / 2] : 0.5 * (secs[p.passes / 2 - 1] + secs[p.passes / 2]);
        out->gbps[t - 1] = med > 0 ? (double)used / med / 1e9 : 0;
        if (out->gbps[t - 1] > out->best_gbps) {
            out->best_gbps = out->gbps[t - 1];
            out->best_threads = t;
        }
        out->n = t;
    }
    /* The sums must look used, or the loads could be optimised away. */
    if (sink == 0x5555555555555555ull) fputc('\0', stderr);
    out->buffer_bytes = p.buffer_bytes;
    out->passes = p.passes;
    free(secs);
    free(buf);
    return st;
}

/* ---- cold-cache file read ------------------------------------------------------ */

plm_status plm_probe_file_read(const char *path, plm_file_read_result *out, plm_error *err) {
    return plm_probe_file_read_n(path, 0, out, err);
}

/* Asks the kernel to forget the file's cached pages.  Darwin has no
 * posix_fadvise: F_NOCACHE makes this descriptor's reads bypass the cache. */
static void drop_cache(int fd) {
#if defined(POSIX_FADV_DONTNEED)
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
#elif defined(F_NOCACHE)
    fcntl(fd, F_NOCACHE, 1);
#else
    (void)fd;
#endif
}

plm_status plm_probe_file_read_n(const char *path, uint64_t max_bytes, plm_file_read_result *out, plm_error *err) {
    if (!out || !path) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_probe_file_read: no path or output");
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return plm_fail(err, PLM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat stt;
    if (fstat(fd, &stt) != 0 || !S_ISREG(stt.st_mode)) {
        close(fd);
        return plm_fail(err, PLM_ERR_INVALID_ARG, "%s is not a regular file", path);
    }
    uint64_t size = (uint64_t)stt.st_size;
    drop_cache(fd);

    /* How much of the file is still cached?  DONTNEED keeps dirty pages and
     * pages other processes have mapped. */
    out->resident_before = -1;
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0) ps = 4096;
    if (size > 0 && size <= (uint64_t)SIZE_MAX / 2) {
        void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED) {
            size_t pages = (size_t)((size + (uint64_t)ps - 1) / (uint64_t)ps);
            unsigned char *vec = malloc(pages);
            if (vec && mincore(map, (size_t)size, (void *)vec) == 0) {  /* char * on Darwin */
                size_t res = 0;
                for (size_t i = 0; i < pages; i++) res += vec[i] & 1;
                out->resident_before = (double)res / (double)pages;
            }
            free(vec);
            munmap(map, (size_t)size);
        }
    } else if (size == 0) {
        out->resident_before = 0;
    }
    out->cache_dropped = out->resident_before >= 0 && out->resident_before < 0.05;

#if defined(POSIX_FADV_SEQUENTIAL)
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    const size_t chunk = 8u << 20;
    char *buf = malloc(chunk);
    if (!buf) {
        close(fd);
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    }
    double t0 = now_s();
    uint64_t total = 0;
    for (;;) {
        ssize_t got = read(fd, buf, chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return plm_fail(err, PLM_ERR_IO, "reading %s: %s", path, strerror(e));
        }
        if (got == 0) break;
        total += (uint64_t)got;
        if (max_bytes && total >= max_bytes) break;
    }
    out->seconds = now_s() - t0;
    free(buf);
    close(fd);
    out->bytes = total;
    out->mbps = out->seconds > 0 ? (double)total / out->seconds / 1e6 : 0;
    return PLM_OK;
}
