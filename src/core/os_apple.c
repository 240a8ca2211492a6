/* Darwin's answers to what Linux keeps in /proc (see os_apple.h).  Built on
 * Apple platforms only; elsewhere this file is empty. */
#include "core/os_apple.h"

#if defined(__APPLE__)
#include <TargetConditionals.h>
#include <mach/mach.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysctl.h>
#if TARGET_OS_IPHONE
#include <os/proc.h>
#endif

bool plm_apple_memory(uint64_t *total, uint64_t *available) {
    size_t len = sizeof *total;
    if (sysctlbyname("hw.memsize", total, &len, NULL, 0) != 0) return false;
#if TARGET_OS_IPHONE
    if (__builtin_available(iOS 13.0, *)) {
        *available = (uint64_t)os_proc_available_memory();
        return true;
    }
#endif
    vm_statistics64_data_t vm;
    mach_msg_type_number_t n = HOST_VM_INFO64_COUNT;
    vm_size_t page = 0;
    if (host_page_size(mach_host_self(), &page) != KERN_SUCCESS ||
        host_statistics64(mach_host_self(), HOST_VM_INFO64, (host_info64_t)&vm, &n) != KERN_SUCCESS) {
        *available = 0;
        return true;
    }
    *available = ((uint64_t)vm.free_count + vm.inactive_count + vm.purgeable_count) * (uint64_t)page;
    return true;
}

void plm_apple_mem_sample(plm_mem_sample *m) {
    struct mach_task_basic_info bi;
    mach_msg_type_number_t n = MACH_TASK_BASIC_INFO_COUNT;
    if (task_info(mach_task_self(), MACH_TASK_BASIC_INFO, (task_info_t)&bi, &n) == KERN_SUCCESS) {
        m->rss_bytes = bi.resident_size;
        m->peak_rss_bytes = bi.resident_size_max;
    }
    task_vm_info_data_t vi;
    n = TASK_VM_INFO_COUNT;
    if (task_info(mach_task_self(), TASK_VM_INFO, (task_info_t)&vi, &n) == KERN_SUCCESS) {
        m->rss_anon_bytes = vi.phys_footprint;
        m->rss_file_bytes = m->rss_bytes > vi.phys_footprint ? m->rss_bytes - vi.phys_footprint : 0;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        m->minor_faults = (uint64_t)ru.ru_minflt;
        m->major_faults = (uint64_t)ru.ru_majflt;
    }
}

int plm_apple_sysctl_int(const char *name) {
    int v = 0;
    size_t len = sizeof v;
    return sysctlbyname(name, &v, &len, NULL, 0) == 0 ? v : 0;
}
#else
typedef int plm_os_apple_unused; /* ISO C wants a declaration in every file */
#endif
