#include "core/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core/fault_guard.h"

/* Spin this many times before sleeping: long enough to bridge the gap
 * between two steps of one forward pass, short against a sampling step. */
enum { SPIN_ITERATIONS = 4000 };

typedef struct workers workers;

typedef struct worker {
    workers *set;
    pthread_t thread;
    int ith;
} worker;

/* The threads: a private pool's, or the shared ones. */
struct workers {
    int n;                   /* threads, the caller's included: workers 1..n-1 run */
    worker *w;               /* [PLM_POOL_MAX_THREADS] */
    plm_task_fn fn;
    void *arg;
    int nth;                 /* threads of the task being run */
    atomic_uint generation;  /* bumped once per task */
    atomic_uint closed;      /* the last generation the caller has finished */
    atomic_int active;       /* workers inside the current task */
    atomic_bool stop;
    _Atomic(const void *) fault; /* a SIGBUS in a mapped file cut a task short here */
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    int sleeping;            /* guarded by mutex */
    pthread_mutex_t running; /* held by the caller of the task in flight */
    int users;               /* handles on a shared set (guarded by shared_lock) */
};

/* A handle: a thread count on a set of workers. */
struct plm_pool {
    workers *set;
    int n;
    bool shared;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static unsigned wait_for_task(workers *p, unsigned seen) {
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
static void run_guarded(workers *p, plm_task_fn fn, void *arg, int ith, int nth) {
    const void *addr = NULL;
    if (!plm_fault_guard_call(fn, arg, ith, nth, &addr)) atomic_store(&p->fault, addr);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    workers *p = w->set;
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
        if ((int)(seen - atomic_load(&p->closed)) > 0 && w->ith < p->nth) run_guarded(p, p->fn, p->arg, w->ith, p->nth);
        atomic_fetch_sub(&p->active, 1);
    }
    return NULL;
}

/* Publishes a new generation and wakes sleepers.  Taking the mutex after the
 * bump means a worker either sees the new generation before it sleeps or is
 * already waiting when we broadcast: no lost wake-up. */
static unsigned publish(workers *p) {
    unsigned g = atomic_fetch_add(&p->generation, 1) + 1;
    pthread_mutex_lock(&p->mutex);
    if (p->sleeping) pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mutex);
    return g;
}

/* Starts workers up to n threads in all; false if a thread cannot start
 * (those started stay). */
static bool grow(workers *p, int n) {
    for (int i = p->n; i < n; i++) {
        p->w[i] = (worker){.set = p, .ith = i};
        if (pthread_create(&p->w[i].thread, NULL, worker_main, &p->w[i]) != 0) return false;
        p->n = i + 1;
    }
    return true;
}

static void workers_free(workers *p) {
    if (!p) return;
    atomic_store(&p->stop, true);
    publish(p);
    for (int i = 1; i < p->n; i++) pthread_join(p->w[i].thread, NULL);
    pthread_mutex_destroy(&p->mutex);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->running);
    free(p->w);
    free(p);
}

static workers *workers_new(int n) {
    workers *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = 1;
    pthread_mutex_init(&p->mutex, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_mutex_init(&p->running, NULL);
    p->w = calloc(PLM_POOL_MAX_THREADS, sizeof *p->w);
    if (!p->w || !grow(p, n)) {
        workers_free(p);
        return NULL;
    }
    return p;
}

static int clamp_threads(int n) {
    return n < 1 ? 1 : n > PLM_POOL_MAX_THREADS ? PLM_POOL_MAX_THREADS : n;
}

plm_pool *plm_pool_new(int n_threads) {
    n_threads = clamp_threads(n_threads);
    plm_pool *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    *h = (plm_pool){.set = workers_new(n_threads), .n = n_threads, .shared = false};
    if (!h->set) {
        free(h);
        return NULL;
    }
    return h;
}

/* The process's shared workers: the one piece of global state, guarded by
 * shared_lock (handles come and go with contexts, from any thread). */
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static workers *shared_set;

plm_pool *plm_pool_shared(int n_threads) {
    n_threads = clamp_threads(n_threads);
    plm_pool *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    pthread_mutex_lock(&shared_lock);
    if (!shared_set) shared_set = workers_new(1);
    bool ok = shared_set != NULL;
    if (ok && shared_set->n < n_threads) {
        pthread_mutex_lock(&shared_set->running);  /* no task reads n while it grows */
        ok = grow(shared_set, n_threads);
        pthread_mutex_unlock(&shared_set->running);
    }
    if (ok) {
        shared_set->users++;
        *h = (plm_pool){.set = shared_set, .n = n_threads, .shared = true};
    } else if (shared_set && shared_set->users == 0) {
        workers_free(shared_set);
        shared_set = NULL;
    }
    pthread_mutex_unlock(&shared_lock);
    if (!ok) {
        free(h);
        return NULL;
    }
    return h;
}

void plm_pool_free(plm_pool *h) {
    if (!h) return;
    if (!h->shared) {
        workers_free(h->set);
    } else {
        pthread_mutex_lock(&shared_lock);
        if (--shared_set->users == 0) {
            workers_free(shared_set);
            shared_set = NULL;
        }
        pthread_mutex_unlock(&shared_lock);
    }
    free(h);
}

int plm_pool_size(const plm_pool *h) { return h->n; }

void plm_pool_run(plm_pool *h, plm_task_fn fn, void *arg) {
    workers *p = h->set;
    /* One thread, or the workers busy with another handle's task: run it
     * here, alone. */
    if (h->n == 1 || pthread_mutex_trylock(&p->running) != 0) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->nth = h->n;
    const unsigned g = publish(p);
    run_guarded(p, fn, arg, 0, h->n);
    atomic_store(&p->closed, g);
    int spins = 0;
    while (atomic_load(&p->active) != 0) {
        if (++spins < SPIN_ITERATIONS) cpu_relax();
        else sched_yield();
    }
    const void *fault = atomic_exchange(&p->fault, NULL);
    pthread_mutex_unlock(&p->running);
    if (fault) plm_fault_guard_raise(fault);
}
