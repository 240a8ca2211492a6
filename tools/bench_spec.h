/* pocketlm bench's speculative-decoding test (see bench_spec.c). */
#ifndef PLM_TOOLS_BENCH_SPEC_H
#define PLM_TOOLS_BENCH_SPEC_H

#include <stdbool.h>

#include "spec_cli.h"

/* Prints the per-round table and the summary; 0 on success.  repack: the
 * model's matrices row-interleaved (plm_model_params.repack).  quote: the
 * prompt becomes prompt + its greedy continuation + prompt (--spec-quote). */
int bench_spec(const char *model_path, bool repack, spec_cli *so, const char *prompt, bool quote, int n_gen, int n_threads,
               int n_batch, int reps);

#endif
