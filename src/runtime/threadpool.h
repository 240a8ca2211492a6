/*
 * A persistent thread pool for the forward pass.  plm_pool_run runs one task
 * on every thread (the caller is thread 0) and returns when all are done.
 * Idle workers spin briefly on the next task — a decode step dispatches
 * hundreds of tasks a token, microseconds apart — then sleep on a condition
 * variable so an idle context costs no CPU.
 *
 * Tasks must hand out their work dynamically (an atomic counter), not by
 * thread index: a worker that is not running when the caller finishes is
 * not waited for — the caller and whoever did start share all the work.  On
 * a machine with more runnable threads than cores, waiting for a descheduled
 * worker would cost a whole time slice per task.
 */
#ifndef PLM_RUNTIME_THREADPOOL_H
#define PLM_RUNTIME_THREADPOOL_H

typedef struct plm_pool plm_pool;
typedef void (*plm_task_fn)(void *arg, int ith, int nth);

/* n_threads counts the caller; NULL if threads cannot be created. */
plm_pool *plm_pool_new(int n_threads);
void plm_pool_free(plm_pool *p);
int plm_pool_size(const plm_pool *p);
/* Runs fn(arg, ith, nth) on the caller (ith 0) and on every worker that picks
 * the task up before the caller has finished it; returns when all that
 * started are done.  Every thread's part runs under a SIGBUS recovery point
 * (core/fault_guard.h): a fault in a mapped model file on any of them is
 * re-raised on the caller, into its own guard, once the task is closed. */
void plm_pool_run(plm_pool *p, plm_task_fn fn, void *arg);

#endif
