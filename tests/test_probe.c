/*
 * The hardware probe against facts read independently: MemTotal from
 * /proc/meminfo, online CPUs from sysconf, the CPUs this process may use from
 * sched_getaffinity (what nproc prints), physical cores from the distinct
 * package+core_id pairs in /sys (the probe itself uses thread_siblings_list).
 * Bandwidth and file read speed must be positive; `pocketlm probe -o json`
 * must parse as JSON and agree with the library.
 */
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "pocketlm.h"
#include "pocketlm_plan.h"
#include "test.h"

static uint64_t meminfo_kb(const char *key) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    uint64_t v = 0;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            v = strtoull(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static long read_sys_long(const char *fmt, int cpu) {
    char path[256];
    snprintf(path, sizeof path, fmt, cpu);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long v = -1;
    if (fscanf(f, "%ld", &v) != 1) v = -1;
    fclose(f);
    return v;
}

static void test_memory(void) {
    plm_mem_info m;
    plm_error err;
    REQUIRE_VOID(plm_probe_memory(&m, &err) == PLM_OK, "probe_memory: %s", err.message);
    uint64_t total = meminfo_kb("MemTotal") * 1024;
    CHECK(total > 0 && m.total_bytes == total, "total %llu, /proc/meminfo says %llu",
          (unsigned long long)m.total_bytes, (unsigned long long)total);
    CHECK(m.available_bytes > 0 && m.available_bytes <= m.total_bytes, "available %llu of %llu",
          (unsigned long long)m.available_bytes, (unsigned long long)m.total_bytes);
    CHECK(m.page_size == (uint64_t)sysconf(_SC_PAGESIZE), "page size %llu", (unsigned long long)m.page_size);
    CHECK(plm_probe_memory(NULL, NULL) == PLM_ERR_INVALID_ARG, "NULL output accepted");
}

static void test_cpu(void) {
    plm_cpu_info *c = malloc(sizeof *c);
    plm_error err;
    REQUIRE_VOID(c && plm_probe_cpu(c, &err) == PLM_OK, "probe_cpu: %s", err.message);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(c->n_cpus == (uint32_t)online, "%u CPUs, sysconf says %ld", c->n_cpus, online);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        CHECK(c->n_allowed == (uint32_t)CPU_COUNT(&set), "%u allowed, nproc says %d", c->n_allowed,
              CPU_COUNT(&set));

    /* Physical cores: distinct (package, core_id) pairs, counted here the other way. */
    uint32_t pairs = 0;
    bool have_topology = true;
    long pk[PLM_PROBE_MAX_CPUS], co[PLM_PROBE_MAX_CPUS];
    for (uint32_t i = 0; i < c->n_cpus; i++) {
        int n = (int)c->cpus[i].cpu;
        pk[i] = read_sys_long("/sys/devices/system/cpu/cpu%d/topology/physical_package_id", n);
        co[i] = read_sys_long("/sys/devices/system/cpu/cpu%d/topology/core_id", n);
        if (co[i] < 0) have_topology = false;
        bool seen = false;
        for (uint32_t j = 0; j < i; j++) seen |= pk[j] == pk[i] && co[j] == co[i];
        pairs += !seen;
        CHECK(c->cpus[i].core == co[i] && c->cpus[i].package == pk[i], "cpu%d topology", n);
    }
    /* On x86 the pairs are the cores; some ARM kernels repeat core_id across
     * clusters of one package, so there the pairs can only undercount. */
#if defined(__x86_64__) || defined(__i386__)
    if (have_topology)
        CHECK(c->n_cores == pairs, "%u physical cores, /sys package+core_id pairs say %u", c->n_cores, pairs);
#else
    if (have_topology) CHECK(c->n_cores >= pairs, "%u physical cores, %u package+core_id pairs", c->n_cores, pairs);
#endif
    CHECK(c->n_cores >= 1 && c->n_cores <= c->n_cpus, "%u cores of %u CPUs", c->n_cores, c->n_cpus);

    uint32_t cpus = 0, cores = 0;
    for (uint32_t i = 0; i < c->n_clusters; i++) {
        cpus += c->clusters[i].n_cpus;
        cores += c->clusters[i].n_cores;
        if (i) CHECK(c->clusters[i].max_khz < c->clusters[i - 1].max_khz, "clusters not fastest first");
    }
    CHECK(c->n_clusters >= 1 && cpus == c->n_cpus && cores == c->n_cores, "clusters add up to %u CPUs, %u cores",
          cpus, cores);
    CHECK(c->n_perf >= 1 && c->n_perf <= c->n_cores && c->n_perf <= c->n_allowed, "%u performance cores",
          c->n_perf);
    CHECK(c->n_perf >= c->clusters[0].n_cores || c->n_perf == c->n_allowed, "the fastest cluster is not all counted");
    CHECK(plm_default_threads() == c->n_perf, "plm_default_threads %u, probe %u", plm_default_threads(), c->n_perf);
    CHECK(c->arch[0] != '\0', "no architecture");
    free(c);
}

static void test_bandwidth(void) {
    plm_bandwidth_result *r = malloc(sizeof *r);
    plm_error err;
    plm_bandwidth_params p = {.buffer_bytes = 8u << 20, .max_threads = 2, .passes = 2};
    REQUIRE_VOID(r && plm_probe_bandwidth(&p, r, &err) == PLM_OK, "bandwidth: %s", err.message);
    CHECK(r->n == 2 && r->passes == 2 && r->buffer_bytes == (8u << 20), "n %u passes %u bytes %llu", r->n, r->passes,
          (unsigned long long)r->buffer_bytes);
    CHECK(r->gbps[0] > 0 && r->gbps[1] > 0, "gbps %g %g", r->gbps[0], r->gbps[1]);
    CHECK(r->best_gbps >= r->gbps[0] && r->best_gbps >= r->gbps[1] && r->best_threads >= 1 && r->best_threads <= 2,
          "best %g with %u", r->best_gbps, r->best_threads);
    CHECK(r->method && r->method[0], "no method");
    /* An odd size is rounded up, never overrun. */
    p = (plm_bandwidth_params){.buffer_bytes = 100000, .max_threads = 3, .passes = 1};
    CHECK(plm_probe_bandwidth(&p, r, &err) == PLM_OK && r->n == 3 && r->buffer_bytes >= 100000,
          "odd size: %s", err.message);
    free(r);
}

static void test_file_read(const char *path) {
    plm_file_read_result r;
    plm_error err;
    REQUIRE_VOID(plm_probe_file_read(path, &r, &err) == PLM_OK, "file read: %s", err.message);
    CHECK(r.bytes == (3u << 20), "read %llu bytes", (unsigned long long)r.bytes);
    CHECK(r.seconds > 0 && r.mbps > 0, "%g s, %g MB/s", r.seconds, r.mbps);
    CHECK(r.resident_before >= 0 && r.resident_before <= 1, "resident %g", r.resident_before);
    CHECK(r.cache_dropped == (r.resident_before < 0.05), "cache_dropped %d with %g", r.cache_dropped,
          r.resident_before);
    CHECK(plm_probe_file_read("/nonexistent/file.gguf", &r, &err) == PLM_ERR_IO && strstr(err.message, "nonexistent"),
          "missing file: %s", err.message);
    CHECK(plm_probe_file_read("/", &r, &err) == PLM_ERR_INVALID_ARG, "a directory was read");
}

/* `pocketlm probe -o json` parses, and its RAM total is the library's. */
static void test_cli_json(const char *file) {
    char json[] = "/tmp/plm-probe-XXXXXX";
    int fd = mkstemp(json);
    REQUIRE_VOID(fd >= 0, "mkstemp");
    close(fd);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s probe -o json --buffer-mib 8 --passes 1 --file %s > %s", PLM_BIN, file, json);
    CHECK(system(cmd) == 0, "%s failed", cmd);
    plm_mem_info m;
    plm_probe_memory(&m, NULL);
    const char *check =
        "d=JSON.parse(require('fs').readFileSync(process.argv[1],'utf8'));"
        "if(d.memory.total_bytes!==Number(process.argv[2])||!(d.bandwidth.best_gbps>0)||"
        "d.cpu.logical_cpus<1||d.file.bytes!==3145728||typeof d.file.cache_dropped!=='boolean')process.exit(1)";
    if (system("command -v node >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof cmd, "node -e \"%s\" %s %llu", check, json, (unsigned long long)m.total_bytes);
        CHECK(system(cmd) == 0, "the JSON does not parse or disagrees: %s", json);
    } else if (system("command -v python3 >/dev/null 2>&1") == 0) {
        snprintf(cmd, sizeof cmd,
                 "python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); "
                 "sys.exit(0 if d['memory']['total_bytes']==int(sys.argv[2]) and d['bandwidth']['best_gbps']>0 "
                 "and d['file']['bytes']==3145728 else 1)\" %s %llu",
                 json, (unsigned long long)m.total_bytes);
        CHECK(system(cmd) == 0, "the JSON does not parse or disagrees: %s", json);
    } else {
        fprintf(stderr, "note: neither node nor python3 found; the JSON was not parsed\n");
    }
    /* Bad options fail cleanly. */
    snprintf(cmd, sizeof cmd, "%s probe -o yaml --no-bandwidth >/dev/null 2>&1", PLM_BIN);
    CHECK(system(cmd) != 0, "-o yaml accepted");
    remove(json);
}

int main(void) {
    test_memory();
    test_cpu();
    test_bandwidth();

    char path[] = "/tmp/plm-probe-file-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0, "mkstemp");
    char *buf = calloc(1, 3u << 20);
    REQUIRE(buf != NULL, "calloc");
    for (size_t i = 0; i < (3u << 20); i++) buf[i] = (char)(i * 7);
    CHECK(write(fd, buf, 3u << 20) == (ssize_t)(3u << 20), "write");
    free(buf);
    fsync(fd); /* clean pages can be dropped */
    close(fd);
    test_file_read(path);
    test_cli_json(path);
    remove(path);
    return test_summary();
}
