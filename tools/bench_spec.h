/* pocketlm bench's speculative-decoding test (see bench_spec.c). */
#ifndef PLM_TOOLS_BENCH_SPEC_H
#define PLM_TOOLS_BENCH_SPEC_H

#include "spec_cli.h"

/* Prints the per-round table and the summary; 0 on success. */
int bench_spec(const char *model_path, spec_cli *so, const char *prompt, int n_gen, int n_threads, int n_batch,
               int reps);

#endif
