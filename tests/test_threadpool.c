/*
 * The thread pool: private and shared handles, each task's items done
 * exactly once, a handle's thread count respected on a larger shared pool,
 * and two handles running tasks at the same time from two threads; the
 * chunk queue hands each chunk out once, a thread's own share first.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "core/chunks.h"
#include "core/threadpool.h"
#include "test.h"

enum { N_ITEMS = 10000 };

typedef struct task {
    atomic_int next;
    atomic_int done[N_ITEMS];
    atomic_int max_ith, max_nth;
} task;

static void count_items(void *arg, int ith, int nth) {
    task *t = arg;
    int m;
    while ((m = atomic_load(&t->max_ith)) < ith && !atomic_compare_exchange_weak(&t->max_ith, &m, ith)) {}
    while ((m = atomic_load(&t->max_nth)) < nth && !atomic_compare_exchange_weak(&t->max_nth, &m, nth)) {}
    for (int i; (i = atomic_fetch_add(&t->next, 1)) < N_ITEMS;) atomic_fetch_add(&t->done[i], 1);
}

/* Runs one task on h; true if every item was done exactly once. */
static bool run_once(plm_pool *h, task *t) {
    memset(t, 0, sizeof *t);
    plm_pool_run(h, count_items, t);
    for (int i = 0; i < N_ITEMS; i++)
        if (atomic_load(&t->done[i]) != 1) return false;
    return true;
}

typedef struct runner {
    plm_pool *h;
    int rounds, good;
    task t;
} runner;

static void *run_many(void *arg) {
    runner *r = arg;
    for (int i = 0; i < r->rounds; i++) r->good += run_once(r->h, &r->t);
    return NULL;
}

typedef struct chunk_task {
    plm_chunks q;
    atomic_int done[N_ITEMS];
} chunk_task;

static void take_chunks(void *arg, int ith, int nth) {
    (void)nth;
    chunk_task *t = arg;
    for (int64_t c; plm_chunks_take(&t->q, ith, &c);) atomic_fetch_add(&t->done[c], 1);
}

/* n chunks for `shares` threads, run on h (which may have fewer). */
static bool chunks_once(plm_pool *h, chunk_task *t, int n, int shares) {
    memset(t, 0, sizeof *t);
    plm_chunks_init(&t->q, n, shares);
    plm_pool_run(h, take_chunks, t);
    for (int i = 0; i < n; i++)
        if (atomic_load(&t->done[i]) != 1) return false;
    return n == N_ITEMS || atomic_load(&t->done[n]) == 0;
}

static void test_chunks(void) {
    static chunk_task t;
    plm_pool *h = plm_pool_new(3);
    REQUIRE_VOID(h != NULL, "pool");
    int good = 0;
    for (int i = 0; i < 200; i++) good += chunks_once(h, &t, N_ITEMS, 3);
    CHECK(good == 200, "%d of 200: every chunk once", good);
    /* The order, taken by one thread alone: its own share first (thread 1
     * of 3 over 9 chunks: 3, 4, 5), then the next shares' (6-8, 0-2). */
    plm_chunks_init(&t.q, 9, 3);
    int64_t order[10], c;
    int n = 0;
    while (n < 10 && plm_chunks_take(&t.q, 1, &c)) order[n++] = c;
    const int64_t want[9] = {3, 4, 5, 6, 7, 8, 0, 1, 2};
    CHECK(n == 9 && memcmp(order, want, sizeof want) == 0, "thread 1's order: %d chunks, first %lld", n,
          (long long)order[0]);
    /* Shares for more threads than run (40: past PLM_CHUNK_SHARES too), and
     * fewer chunks than threads: the running ones take the rest. */
    CHECK(chunks_once(h, &t, N_ITEMS, 40), "40 shares on 3 threads");
    CHECK(chunks_once(h, &t, 2, 3) && chunks_once(h, &t, 0, 3), "2 and 0 chunks on 3 threads");
    plm_pool_free(h);
    plm_pool *one = plm_pool_new(1);
    REQUIRE_VOID(one != NULL, "pool");
    CHECK(chunks_once(one, &t, 777, 8), "8 shares on one thread");
    plm_pool_free(one);
}

int main(void) {
    static task t;
    test_chunks();
    plm_pool *priv = plm_pool_new(3);
    REQUIRE(priv != NULL, "private pool");
    CHECK(plm_pool_size(priv) == 3, "size %d", plm_pool_size(priv));
    CHECK(run_once(priv, &t) && atomic_load(&t.max_ith) <= 2, "private pool task");
    plm_pool_free(priv);

    /* A 4-thread handle grows the shared workers; a 1-thread and a 2-thread
     * handle on them use no more threads than they asked for. */
    plm_pool *big = plm_pool_shared(4), *one = plm_pool_shared(1), *two = plm_pool_shared(2);
    REQUIRE(big && one && two, "shared handles");
    CHECK(plm_pool_size(big) == 4 && plm_pool_size(one) == 1 && plm_pool_size(two) == 2, "sizes");
    int ok = 0;
    for (int i = 0; i < 200; i++) {
        ok += run_once(one, &t) && atomic_load(&t.max_ith) == 0 && atomic_load(&t.max_nth) == 1;
        ok += run_once(two, &t) && atomic_load(&t.max_ith) <= 1 && atomic_load(&t.max_nth) <= 2;
        ok += run_once(big, &t) && atomic_load(&t.max_ith) <= 3 && atomic_load(&t.max_nth) <= 4;
    }
    CHECK(ok == 600, "%d of 600 tasks done exactly once within their handle's threads", ok);

    /* Two handles from two threads at once: both finish every task. */
    static runner a, b;
    a.h = big;
    b.h = two;
    a.rounds = b.rounds = 300;
    pthread_t ta, tb;
    REQUIRE(pthread_create(&ta, NULL, run_many, &a) == 0 && pthread_create(&tb, NULL, run_many, &b) == 0,
            "threads");
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.good == 300 && b.good == 300, "concurrent handles: %d and %d of 300", a.good, b.good);

    /* Releasing every handle stops the workers; a new handle starts them again. */
    plm_pool_free(big);
    plm_pool_free(one);
    plm_pool_free(two);
    plm_pool *again = plm_pool_shared(2);
    REQUIRE(again != NULL, "shared pool after release");
    CHECK(run_once(again, &t), "task after restart");
    plm_pool_free(again);
    return test_summary();
}
