/* What the process holds in RAM, from /proc/self/status and /proc/self/stat:
 * resident set (split into file-backed pages — the mmap'd weights — and
 * anonymous memory — KV cache, buffers), its peak, and page faults.  A major
 * fault during decode means weights are being read back from storage. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/os_apple.h"
#include "pocketlm.h"

#if !defined(__APPLE__)  /* Darwin: core/os_apple.c */
static void read_status(plm_mem_sample *m) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return;
    static const struct {
        const char *key;
        size_t field;
    } keys[] = {
        {"VmRSS:", offsetof(plm_mem_sample, rss_bytes)},
        {"VmHWM:", offsetof(plm_mem_sample, peak_rss_bytes)},
        {"RssAnon:", offsetof(plm_mem_sample, rss_anon_bytes)},
        {"RssFile:", offsetof(plm_mem_sample, rss_file_bytes)},
    };
    char line[256];
    while (fgets(line, sizeof line, f)) {
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            size_t n = strlen(keys[i].key);
            unsigned long long kb;
            if (!strncmp(line, keys[i].key, n) && sscanf(line + n, "%llu", &kb) == 1)
                *(uint64_t *)((char *)m + keys[i].field) = (uint64_t)kb * 1024;
        }
    }
    fclose(f);
}

/* minflt and majflt are fields 10 and 12 of /proc/self/stat, counted after
 * the command name, which is in parentheses and may contain spaces. */
static void read_faults(plm_mem_sample *m) {
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    unsigned long long minflt, majflt;
    if (p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %llu %*u %llu", &minflt, &majflt) == 2) {
        m->minor_faults = minflt;
        m->major_faults = majflt;
    }
}

#endif

void plm_mem_sample_now(plm_mem_sample *m) {
    memset(m, 0, sizeof *m);
#if defined(__APPLE__)
    plm_apple_mem_sample(m);  /* no /proc on Darwin */
#else
    read_status(m);
    read_faults(m);
#endif
}

uint64_t plm_peak_rss_bytes(void) {
    plm_mem_sample m;
    plm_mem_sample_now(&m);
    return m.peak_rss_bytes;
}
