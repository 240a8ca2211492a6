/*
 * A persistent thread pool for the forward pass.  plm_pool_run runs one task
 * on the handle's threads (the caller is thread 0) and returns when all are
 * done.  Idle workers spin briefly on the next task — a decode step
 * dispatches hundreds of tasks a token, microseconds apart — then sleep on a
 * condition variable so an idle context costs no CPU.
 *
 * Tasks must hand out their work dynamically (an atomic counter), not by
 * thread index: a worker that is not running when the caller finishes is
 * not waited for — the caller and whoever did start share all the work.  On
 * a machine with more runnable threads than cores, waiting for a descheduled
 * worker would cost a whole time slice per task.
 *
 * Shared pool: every context of a process runs on one set of workers
 * (plm_pool_shared), so ten idle contexts are not ten sets of spinning
 * threads.  Each handle keeps its own thread count (a 1-thread context uses
 * one thread of a pool grown to 4).  One task runs at a time; a caller that
 * finds the workers busy with another handle's task runs its own task alone
 * (dynamic work hand-out makes that correct), so two contexts decoding from
 * two threads both make progress.  The shared workers live from the first
 * handle to the release of the last.
 */
#ifndef PLM_CORE_THREADPOOL_H
#define PLM_CORE_THREADPOOL_H

typedef struct plm_pool plm_pool;
typedef void (*plm_task_fn)(void *arg, int ith, int nth);

/* Most threads a pool runs (the caller included). */
#define PLM_POOL_MAX_THREADS 256

/* A private pool of n_threads (counting the caller); NULL if threads cannot
 * be created. */
plm_pool *plm_pool_new(int n_threads);
/* A handle of n_threads on the process's shared workers, started or grown
 * as needed; NULL if threads cannot be created. */
plm_pool *plm_pool_shared(int n_threads);
/* Frees a private pool or releases a shared handle (the workers stop with
 * the last one). */
void plm_pool_free(plm_pool *p);
int plm_pool_size(const plm_pool *p);
/* Runs fn(arg, ith, nth) on the caller (ith 0) and on every worker of the
 * handle that picks the task up before the caller has finished it; returns
 * when all that started are done. */
void plm_pool_run(plm_pool *p, plm_task_fn fn, void *arg);

#endif
