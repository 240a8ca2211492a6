/* SIGBUS recovery for mapped model files: see fault_guard.h. */
#include "core/fault_guard.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Models mapped at once: a process holds a few; more go unprotected. */
enum { MAX_MAPPINGS = 32 };

/* The handler reads base/len with atomic loads and nothing else: a slot is
 * published by storing base last and retired by clearing base first. */
typedef struct mapping {
    _Atomic uintptr_t base;
    _Atomic size_t len;
    char path[512];
} mapping;

static mapping mappings[MAX_MAPPINGS];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static struct sigaction previous;
static bool installed;

/* A recovery point.  jmp is taken with the signal mask unsaved (a mask save
 * costs a syscall per guarded call, hundreds per token); the recovery path
 * unblocks SIGBUS itself. */
typedef struct frame {
    sigjmp_buf jmp;
    struct frame *outer;
    const void *volatile addr;
} frame;

/* The handler reads this thread's frame.  initial-exec TLS is a fixed offset
 * from the thread pointer, so the read allocates nothing even on a thread
 * that never ran a guarded call (global-dynamic TLS in a shared library may
 * malloc on first use, which a signal handler must not).  Android before API
 * 29 has only emulated TLS: there the first read must not come from the
 * handler, which holds for every thread of ours (they set it first). */
#if defined(__GLIBC__)
static __thread frame *current __attribute__((tls_model("initial-exec")));
#else
static __thread frame *current;
#endif

static const mapping *find(uintptr_t a) {
    for (int i = 0; i < MAX_MAPPINGS; i++) {
        uintptr_t b = atomic_load(&mappings[i].base);
        if (b && a >= b && a - b < atomic_load(&mappings[i].len)) return &mappings[i];
    }
    return NULL;
}

/* Not ours: hand it to whoever was there, as if we never were. */
static void chain(int sig, siginfo_t *si, void *uc) {
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction) previous.sa_sigaction(sig, si, uc);
        return;
    }
    if (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN) {
        /* Restore the default action; returning re-executes the faulting
         * access, which then kills the process as it would have. */
        signal(sig, SIG_DFL);
        return;
    }
    previous.sa_handler(sig);
}

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    frame *f = current;
    if (f && si && si->si_addr && find((uintptr_t)si->si_addr)) {
        f->addr = si->si_addr;
        siglongjmp(f->jmp, 1);
    }
    chain(sig, si, uc);
}

static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    installed = sigaction(SIGBUS, &sa, &previous) == 0;
}

bool plm_fault_guard_register(const void *base, size_t len, const char *path) {
    if (!base || !len) return false;
    pthread_once(&install_once, install);
    if (!installed) return false;
    pthread_mutex_lock(&table_lock);
    bool ok = false;
    for (int i = 0; i < MAX_MAPPINGS && !ok; i++) {
        if (atomic_load(&mappings[i].base)) continue;
        snprintf(mappings[i].path, sizeof mappings[i].path, "%s", path ? path : "the model file");
        atomic_store(&mappings[i].len, len);
        atomic_store(&mappings[i].base, (uintptr_t)base);
        ok = true;
    }
    pthread_mutex_unlock(&table_lock);
    return ok;
}

void plm_fault_guard_unregister(const void *base) {
    if (!base) return;
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < MAX_MAPPINGS; i++)
        if (atomic_load(&mappings[i].base) == (uintptr_t)base) atomic_store(&mappings[i].base, 0);
    pthread_mutex_unlock(&table_lock);
}

static void unblock_sigbus(void) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
}

bool plm_fault_guard_call(plm_guarded_fn fn, void *arg, int ith, int nth, const void **addr) {
    frame f;
    f.outer = current;
    f.addr = NULL;
    if (sigsetjmp(f.jmp, 0)) {
        current = f.outer;
        unblock_sigbus();
        if (addr) *addr = f.addr;
        return false;
    }
    current = &f;
    fn(arg, ith, nth);
    current = f.outer;
    return true;
}

void plm_fault_guard_raise(const void *addr) {
    frame *f = current;
    if (!f) return;
    f->addr = addr;
    siglongjmp(f->jmp, 1);
}

void plm_fault_guard_describe(const void *addr, char *buf, size_t size) {
    char path[512] = "the model file";
    uint64_t off = 0, len = 0;
    pthread_mutex_lock(&table_lock);
    const mapping *m = find((uintptr_t)addr);
    if (m) {
        snprintf(path, sizeof path, "%s", m->path);
        off = (uint64_t)((uintptr_t)addr - atomic_load(&m->base));
        len = atomic_load(&m->len);
    }
    pthread_mutex_unlock(&table_lock);
    struct stat st;
    char now[64] = "";
    if (m && stat(path, &st) == 0) snprintf(now, sizeof now, ", now %llu", (unsigned long long)st.st_size);
    else if (m) snprintf(now, sizeof now, ", now gone");
    snprintf(buf, size,
             "%s shrank under the process (truncated or replaced while mapped: %llu bytes when loaded%s): "
             "reading its weights at byte %llu failed (SIGBUS); this context is unusable: free it and load the "
             "model again",
             path, (unsigned long long)len, now, (unsigned long long)off);
}
