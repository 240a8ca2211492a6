/* Peak resident set size, from the VmHWM line of /proc/self/status. */
#include <stdio.h>
#include <string.h>

#include "pocketlm.h"

uint64_t plm_peak_rss_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (!strncmp(line, "VmHWM:", 6) && sscanf(line + 6, "%llu", &v) == 1) {
            kb = v;
            break;
        }
    }
    fclose(f);
    return kb * 1024;
}
