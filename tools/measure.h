/* Timing prompt processing and generation: shared by bench and tune. */
#ifndef PLM_TOOLS_MEASURE_H
#define PLM_TOOLS_MEASURE_H

#include <stdint.h>

#include "pocketlm.h"

uint64_t measure_now_ns(void);
/* One pp sample: p random tokens in one plm_decode into an empty cache. */
plm_status measure_pp(plm_context *ctx, plm_token *toks, int p, int n_vocab, uint64_t *rng, uint64_t *ns,
                      plm_error *err);
/* One tg sample: n random tokens decoded one at a time into an empty cache. */
plm_status measure_tg(plm_context *ctx, plm_token *toks, int n, int n_vocab, uint64_t *rng, uint64_t *ns,
                      plm_error *err);
/* Median of n values (sorts x in place). */
double measure_median(double *x, int n);

#endif
