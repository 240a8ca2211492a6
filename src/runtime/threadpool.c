#include "runtime/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core/fault_guard.h"

/* Spin this many times before sleeping: long enough to bridge the gap
 * between two steps of one forward pass, short against a sampling step. */
enum { SPIN_ITERATIONS = 4000 };

typedef struct worker {
    plm_pool *pool;
    pthread_t thread;
    int ith;
} worker;

struct plm_pool {
    int n;
    worker *workers;
    plm_task_fn fn;
    void *arg;
    atomic_uint generation;  /* bumped once per task */
    atomic_uint closed;      /* the last generation the caller has finished */
    atomic_int active;       /* workers inside the current task */
    atomic_bool stop;
    _Atomic(const void *) fault; /* a SIGBUS in a mapped file cut a task short here */
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    int sleeping;            /* guarded by mutex */
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static unsigned wait_for_task(plm_pool *p, unsigned seen) {
    for (int i = 0; i < SPIN_ITERATIONS; i++) {
        unsigned g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen) return g;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mutex);
    unsigned g;
    while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen) {
        p->sleeping++;
        pthread_cond_wait(&p->wake, &p->mutex);
        p->sleeping--;
    }
    pthread_mutex_unlock(&p->mutex);
    return g;
}

/* A task under a SIGBUS recovery point: a worker that faults records it and
 * goes on serving; the caller re-raises it once the task is closed. */
static void run_guarded(plm_pool *p, plm_task_fn fn, void *arg, int ith) {
    const void *addr = NULL;
    if (!plm_fault_guard_call(fn, arg, ith, p->n, &addr)) atomic_store(&p->fault, addr);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    plm_pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        seen = wait_for_task(p, seen);
        if (atomic_load(&p->stop)) break;
        /* Join, then check the caller has not finished this task already:
         * with both sides seq_cst, either we see `closed` or the caller sees
         * us in `active` and waits — never neither.  `closed` may be past
         * `seen` too (this worker was descheduled through whole tasks; fn and
         * arg then belong to a later one): run only while `seen` is open. */
        atomic_fetch_add(&p->active, 1);
        if ((int)(seen - atomic_load(&p->closed)) > 0) run_guarded(p, p->fn, p->arg, w->ith);
        atomic_fetch_sub(&p->active, 1);
    }
    return NULL;
}

/* Publishes a new generation and wakes sleepers.  Taking the mutex after the
 * bump means a worker either sees the new generation before it sleeps or is
 * already waiting when we broadcast: no lost wake-up. */
static unsigned publish(plm_pool *p) {
    unsigned g = atomic_fetch_add(&p->generation, 1) + 1;
    pthread_mutex_lock(&p->mutex);
    if (p->sleeping) pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mutex);
    return g;
}

plm_pool *plm_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    plm_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->mutex, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->workers = calloc((size_t)n_threads, sizeof *p->workers);
    if (!p->workers) {
        plm_pool_free(p);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        p->workers[i] = (worker){.pool = p, .ith = i};
        if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]) != 0) {
            p->n = i;  /* only threads 1..i-1 exist: free joins just those */
            plm_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void plm_pool_free(plm_pool *p) {
    if (!p) return;
    if (p->workers) {
        atomic_store(&p->stop, true);
        publish(p);
        for (int i = 1; i < p->n; i++) pthread_join(p->workers[i].thread, NULL);
    }
    pthread_mutex_destroy(&p->mutex);
    pthread_cond_destroy(&p->wake);
    free(p->workers);
    free(p);
}

int plm_pool_size(const plm_pool *p) { return p->n; }

void plm_pool_run(plm_pool *p, plm_task_fn fn, void *arg) {
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    const unsigned g = publish(p);
    run_guarded(p, fn, arg, 0);
    atomic_store(&p->closed, g);
    int spins = 0;
    while (atomic_load(&p->active) != 0) {
        if (++spins < SPIN_ITERATIONS) cpu_relax();
        else sched_yield();
    }
    const void *fault = atomic_exchange(&p->fault, NULL);
    if (fault) plm_fault_guard_raise(fault);
}
