/*
 * Token sampler internals.  The public API (plm_sampler_*) is in pocketlm.h;
 * this header adds a constructor that needs only the vocabulary size, so the
 * sampler can be built and tested without a model.
 */
#ifndef PLM_RUNTIME_SAMPLER_H
#define PLM_RUNTIME_SAMPLER_H

#include <stdint.h>

#include "pocketlm.h"

/* The seed plm_sampler_default_params() returns.  It is a fixed value, not
 * "random": two runs with default parameters produce the same text.  Callers
 * that want variety pass their own seed (the CLI's --seed). */
#define PLM_SAMPLER_DEFAULT_SEED 42u

/* A negative penalty_last_n means "the whole context" in llama.cpp; a sampler
 * does not know the context length, so it uses this window instead. */
#define PLM_SAMPLER_MAX_LAST_N 4096

/* Returns NULL when n_vocab < 1 or memory runs out.  All buffers the sampler
 * needs are allocated here; sampling never allocates. */
plm_sampler *plm_sampler_new_n_vocab(int n_vocab, const plm_sampler_params *params);

/* For speculative sampling, which needs the distribution a draw comes from:
 * plm_sampler_dist writes the probabilities plm_sampler_sample would draw
 * from (penalties, top-k, top-p, min-p and temperature applied) as probs[n_vocab],
 * zero outside the kept set; greedy gives a one-hot at the argmax.  It draws
 * no random number and returns the most likely token. */
plm_token plm_sampler_dist(plm_sampler *s, const float *logits, float *probs);
/* Uniform in [0, 1) from the sampler's generator. */
double plm_sampler_uniform(plm_sampler *s);
/* Draws index i with probability weights[i] / sum (weights >= 0) from the
 * sampler's generator; -1 when every weight is 0. */
plm_token plm_sampler_draw(plm_sampler *s, const float *weights, int n);
const plm_sampler_params *plm_sampler_params_of(const plm_sampler *s);

#endif
