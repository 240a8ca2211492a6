/* Chunks 0..n-1 of a task handed out to the threads of a pool.
 *
 * Each thread first walks its own contiguous share, in order: its reads of a
 * weight matrix form one long stream that the hardware prefetcher follows,
 * where a single shared counter interleaves the threads chunk by chunk.  A
 * thread whose share is done takes chunks from the others' shares, so a
 * slower core (a phone's little core, a busy or throttled one, a worker the
 * OS descheduled) is helped at the granularity of one chunk instead of
 * holding the whole task back.  Measured on a 2-vCPU VM, 2-thread decode
 * of llama-3.2-1b Q4_K_M: 47.5 t/s this way (16 chunks a thread), 42.9
 * with one shared counter over 4 chunks a thread, 31 with static halves
 * (the two vCPUs do not run at the same speed).
 *
 * Every thread that enters calls plm_chunks_take until it returns false;
 * a thread that never joins (the pool ran the task on fewer threads) just
 * leaves its share to be taken by the others. */
#ifndef PLM_CORE_CHUNKS_H
#define PLM_CORE_CHUNKS_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum { PLM_CHUNK_SHARES = 32 }; /* threads past this many start in share ith % 32 */

typedef struct plm_chunks {
    int n_shares;
    struct {
        alignas(64) atomic_llong next; /* own cache line: the threads take from their own share at once */
        int64_t end;
    } share[PLM_CHUNK_SHARES];
} plm_chunks;

/* Chunks per thread for a product over n_tok tokens: decode (a few tokens)
 * is bound by memory and wants the fine balance; a prefill batch is bound
 * by compute and its gemm tables the activations once per chunk, so it
 * keeps the larger chunks it was tuned with. */
static inline int plm_chunks_per_thread(int n_tok) { return n_tok < 8 ? 16 : 4; }

/* n chunks over nth threads. */
static inline void plm_chunks_init(plm_chunks *q, int64_t n, int nth) {
    const int s = nth < 1 ? 1 : nth > PLM_CHUNK_SHARES ? PLM_CHUNK_SHARES : nth;
    q->n_shares = s;
    for (int i = 0; i < s; i++) {
        atomic_init(&q->share[i].next, n * i / s);
        q->share[i].end = n * (i + 1) / s;
    }
}

/* The next chunk for thread ith into *c; false when none is left. */
static inline bool plm_chunks_take(plm_chunks *q, int ith, int64_t *c) {
    const int s = q->n_shares, own = ith % s;
    for (int k = 0; k < s; k++) {
        const int i = (own + k) % s;
        if (atomic_load_explicit(&q->share[i].next, memory_order_relaxed) >= q->share[i].end) continue;
        const int64_t got = atomic_fetch_add_explicit(&q->share[i].next, 1, memory_order_relaxed);
        if (got < q->share[i].end) {
            *c = got;
            return true;
        }
    }
    return false;
}

#endif
