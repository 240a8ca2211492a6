/*
 * The memory budget is the process's real limit, checked against figures the
 * test reads itself: MemAvailable from /proc/meminfo, VmData/VmSize from
 * /proc/self/status after setting RLIMIT_DATA/RLIMIT_AS, the app's figure,
 * and (as root, where cgroups exist) a memory cgroup made by
 * scripts/phone-sim.sh.  Verdicts: a 22 GB model on an 8 GB phone never
 * "fits"; under RLIMIT_AS paging is no way out.
 */
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "pocketlm.h"
#include "pocketlm_plan.h"
#include "test.h"

#define SIM PLM_SOURCE_DIR "/scripts/phone-sim.sh"

static uint64_t status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t v = 0;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') v = strtoull(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return v * 1024;
}

static void plain_and_app(void) {
    plm_mem_budget b;
    plm_error err;
    REQUIRE_VOID(plm_probe_budget(0, &b, &err) == PLM_OK, "%s", err.message);
    CHECK(b.bytes > 0 && b.bytes <= b.available_bytes && b.source[0], "budget %llu (%s) <= available %llu",
          (unsigned long long)b.bytes, b.source, (unsigned long long)b.available_bytes);
    const uint64_t app = 123456789;
    REQUIRE_VOID(plm_probe_budget(app, &b, &err) == PLM_OK, "%s", err.message);
    CHECK(b.bytes == app && !strcmp(b.source, "the app's limit"), "the app's figure binds: %llu %s",
          (unsigned long long)b.bytes, b.source);
    CHECK(plm_probe_budget(0, NULL, &err) == PLM_ERR_INVALID_ARG, "NULL output");
}

/* Lower a soft rlimit to what is used + room, probe, restore. */
static void rlimit_binds(int resource, const char *key, const char *name, uint64_t room) {
    struct rlimit old;
    REQUIRE_VOID(getrlimit(resource, &old) == 0, "getrlimit");
    const uint64_t used = status_kb(key);
    struct rlimit lim = {.rlim_cur = used + room, .rlim_max = old.rlim_max};
    REQUIRE_VOID(setrlimit(resource, &lim) == 0, "setrlimit %s", name);
    struct rlimit now;
    if (getrlimit(resource, &now) != 0 || now.rlim_cur != lim.rlim_cur) {
        /* qemu-user accepts and ignores RLIMIT_AS/RLIMIT_DATA (its own memory). */
        printf("  %s: skipped: setrlimit has no effect here (an emulator?)\n", name);
        setrlimit(resource, &old);
        return;
    }
    plm_mem_budget b;
    plm_error err;
    plm_status st = plm_probe_budget(0, &b, &err);
    plm_device dev;
    plm_status st2 = plm_device_this(&dev, NULL, NULL, &err);
    setrlimit(resource, &old);
    REQUIRE_VOID(st == PLM_OK && st2 == PLM_OK, "probe: %s", err.message);
    /* The probe reads /proc itself and allocates a little: within 4 MiB. */
    CHECK(!strcmp(b.source, name) && b.bytes <= room && b.bytes + (4u << 20) >= room,
          "%s: budget %llu (%s), room %llu", name, (unsigned long long)b.bytes, b.source, (unsigned long long)room);
    CHECK(b.maps_count == (resource == RLIMIT_AS), "%s: mapped files count only under RLIMIT_AS", name);
    CHECK(!strcmp(dev.limit_source, name) && dev.limit_bytes <= room, "plm_device_this carries %s: %s %llu", name,
          dev.limit_source, (unsigned long long)dev.limit_bytes);
    if (resource != RLIMIT_AS) return;
    /* 1B parameters mapped: pages under a cgroup, but not under RLIMIT_AS. */
    plm_shape sh = {.n_params = 1e9, .n_layer = 16, .n_head_kv = 8, .head_dim = 64, .quant = "Q8_0"};
    plm_plan p;
    plm_plan_params pp = plm_plan_default_params();
    pp.n_ctx = 256;
    pp.n_threads = 1;
    REQUIRE_VOID(plm_plan_shape(&sh, &pp, &p, &err) == PLM_OK, "%s", err.message);
    plm_plan_verdict v;
    plm_plan_evaluate(&p, &dev, &v, NULL);
    CHECK(v.fit == PLM_NO_FIT && !strcmp(v.budget_source, "RLIMIT_AS"), "RLIMIT_AS: %s (%s)", plm_fit_name(v.fit),
          v.budget_source);
    dev.limit_maps_count = false;  /* the same limit as a cgroup's */
    plm_plan_evaluate(&p, &dev, &v, NULL);
    CHECK(v.fit == PLM_FITS_MMAP, "the same limit, not counting mappings: %s", plm_fit_name(v.fit));
}

static void phone_verdicts(void) {
    plm_shape sh = {.n_params = 35e9, .n_layer = 60, .n_head_kv = 8, .head_dim = 128, .quant = "Q4_K_M"};
    plm_plan p;
    plm_error err;
    plm_plan_params pp = plm_plan_default_params();
    pp.n_ctx = 4096;
    REQUIRE_VOID(plm_plan_shape(&sh, &pp, &p, &err) == PLM_OK, "%s", err.message);
    REQUIRE_VOID(p.weight_bytes > 20e9, "a 21 GB model: %llu", (unsigned long long)p.weight_bytes);
    plm_device d = *plm_device_find("iphone-15-pro");
    plm_plan_verdict v;
    plm_plan_evaluate(&p, &d, &v, NULL);
    CHECK(v.fit == PLM_FITS_MMAP && !strstr(plm_fit_name(v.fit), "fits") &&
              strstr(plm_fit_name(v.fit), "paging weights from storage") && v.decode_tps_paged > 0 &&
              v.decode_tps_paged < 1,
          "22 GB on an 8 GB phone: %s at %.2f tok/s", plm_fit_name(v.fit), v.decode_tps_paged);
    CHECK(strstr(v.budget_source, "app share"), "budget source: %s", v.budget_source);
    d.limit_bytes = 3ull << 30;
    snprintf(d.limit_source, sizeof d.limit_source, "the app's limit");
    plm_plan_evaluate(&p, &d, &v, NULL);
    CHECK(v.budget_bytes == 3ull << 30 && !strcmp(v.budget_source, "the app's limit"), "a smaller app limit binds: %s",
          v.budget_source);
    pp.use_mmap = false;
    plm_plan_shape(&sh, &pp, &p, &err);
    plm_plan_evaluate(&p, &d, &v, NULL);
    CHECK(v.fit == PLM_NO_FIT && !strcmp(plm_fit_name(v.fit), "does not fit"), "--no-mmap: %s", plm_fit_name(v.fit));
}

/* Inside a 300 MiB memory cgroup, the plan's budget is the cgroup's. */
static void in_a_cgroup(void) {
    FILE *p = popen(SIM " --check >/dev/null 2>&1 && " SIM " --mem 300M -- " PLM_BIN " plan -m " SHARED(
                        "models/stories260K.gguf") " --bandwidth 10 -o json 2>&1",
                    "r");
    REQUIRE_VOID(p != NULL, "popen");
    char out[16384];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !n) {
        printf("  cgroup: skipped (phone-sim.sh cannot make a box here: not root, or no memory cgroup)\n");
        return;
    }
    const char *b = strstr(out, "\"budget\": ");
    unsigned long long budget = 0;
    if (b) sscanf(b, "\"budget\": %llu", &budget);
    /* the limit minus what the process already uses: a few MiB, tens of MiB
     * under ASan (its shadow and quarantine count in the cgroup too) */
    CHECK(strstr(out, "\"budget_source\": \"cgroup memory.") && budget <= 300ull << 20 && budget >= 200ull << 20,
          "the cgroup binds: budget %llu of 300 MiB: %s", budget, out);
}

int main(void) {
    plain_and_app();
    rlimit_binds(RLIMIT_DATA, "VmData", "RLIMIT_DATA", 64u << 20);
    rlimit_binds(RLIMIT_AS, "VmSize", "RLIMIT_AS", 256u << 20);
    phone_verdicts();
    in_a_cgroup();
    return test_summary();
}
