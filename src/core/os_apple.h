/* What Linux reads from /proc and /sys, asked of Darwin (iOS, macOS) instead.
 * Only declared and built on Apple platforms. */
#ifndef PLM_CORE_OS_APPLE_H
#define PLM_CORE_OS_APPLE_H

#if defined(__APPLE__)
#include <stdbool.h>
#include <stdint.h>

#include "pocketlm.h"

/* RAM (hw.memsize) and what this process may still use: on iOS
 * os_proc_available_memory() (iOS 13+), the bytes left before Jetsam ends
 * the app; on macOS the free, inactive and purgeable pages.  False if the
 * total is unknown. */
bool plm_apple_memory(uint64_t *total, uint64_t *available);

/* resident_size(_max) of the task, its physical footprint (what Jetsam
 * counts) as the anonymous share, and getrusage's page faults. */
void plm_apple_mem_sample(plm_mem_sample *m);

/* An integer sysctl (hw.optional.arm.FEAT_DotProd, hw.perflevel0.physicalcpu);
 * 0 when the name is unknown. */
int plm_apple_sysctl_int(const char *name);
#endif

#endif
