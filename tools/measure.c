#include "measure.h"

#include <stdlib.h>
#include <time.h>

uint64_t measure_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void random_tokens(plm_token *t, int n, int n_vocab, uint64_t *rng) {
    for (int i = 0; i < n; i++) t[i] = (plm_token)(rng_next(rng) % (uint64_t)n_vocab);
}

plm_status measure_pp(plm_context *ctx, plm_token *toks, int p, int n_vocab, uint64_t *rng, uint64_t *ns,
                      plm_error *err) {
    random_tokens(toks, p, n_vocab, rng);
    plm_kv_truncate(ctx, 0);
    uint64_t t0 = measure_now_ns();
    plm_status st = plm_decode(ctx, toks, p, err);
    *ns = measure_now_ns() - t0;
    return st;
}

plm_status measure_tg(plm_context *ctx, plm_token *toks, int n, int n_vocab, uint64_t *rng, uint64_t *ns,
                      plm_error *err) {
    random_tokens(toks, n, n_vocab, rng);
    plm_kv_truncate(ctx, 0);
    plm_status st = PLM_OK;
    uint64_t t0 = measure_now_ns();
    for (int i = 0; i < n && st == PLM_OK; i++) st = plm_decode(ctx, &toks[i], 1, err);
    *ns = measure_now_ns() - t0;
    return st;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double measure_median(double *x, int n) {
    if (n <= 0) return 0;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}
