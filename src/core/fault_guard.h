/*
 * Surviving a model file that shrinks under its mapping.  Reading a page of
 * a MAP_PRIVATE file mapping past the file's new end raises SIGBUS in the
 * thread that touched it; without a handler the process dies.  Each thread
 * that reads weights runs that work through plm_fault_guard_call, which sets
 * a recovery point; one process-wide SIGBUS handler jumps back to it when
 * the faulting address lies in a registered mapping, and passes every other
 * SIGBUS on to the handler that was installed before ours.
 */
#ifndef PLM_CORE_FAULT_GUARD_H
#define PLM_CORE_FAULT_GUARD_H

#include <stdbool.h>
#include <stddef.h>

/* Protects [base, base + len), a mapping of `path` (installs the handler on
 * first use).  False when the table of mappings is full or the handler
 * cannot be installed: the mapping is then unprotected, as before. */
bool plm_fault_guard_register(const void *base, size_t len, const char *path);
void plm_fault_guard_unregister(const void *base);

/* Runs fn(arg, ith, nth) under a recovery point on this thread (they nest).
 * True when it ran to the end; false when a SIGBUS in a registered mapping
 * cut it short, with the faulting address in *addr.  fn must hold no locks
 * and own no allocations that a jump out of it would leak. */
typedef void (*plm_guarded_fn)(void *arg, int ith, int nth);
bool plm_fault_guard_call(plm_guarded_fn fn, void *arg, int ith, int nth, const void **addr);

/* Inside a guarded call: abandon it as if this thread had faulted at addr
 * (how the thread pool hands a worker's fault to the caller's guard).
 * Returns only when no guard is active on this thread. */
void plm_fault_guard_raise(const void *addr);

/* "PATH shrank under the process (truncated or replaced?) ..." for a fault
 * at addr. */
void plm_fault_guard_describe(const void *addr, char *buf, size_t size);

#endif
