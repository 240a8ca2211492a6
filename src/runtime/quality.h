/*
 * The math of plm_perplexity and plm_kld, kept apart from the model so it can
 * be tested on any logits (llama.cpp's included): log-softmax, the running
 * sums of llama-perplexity and their statistics, and the base-file format
 * (described in quality.c).
 */
#ifndef PLM_RUNTIME_QUALITY_H
#define PLM_RUNTIME_QUALITY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pocketlm.h"
#include "pocketlm_eval.h"

/* ln sum(exp(x)) over n values, in double: max + ln sum(exp(x - max)). */
double plm_logsumexp(const float *x, int n);

/* Index of the largest value, the first one on a tie (as llama.cpp). */
int plm_argmax(const float *x, int n);

/* The log-softmax of a row as stored in a base file: (float)(x[i] - lse). */
void plm_log_softmax(const float *x, int n, double lse, float *out);

/* Perplexity: sums of -ln p and its square over scored tokens. */
typedef struct plm_nll_acc {
    double sum, sum2;
    uint64_t n;
} plm_nll_acc;

void plm_nll_add(plm_nll_acc *a, double nll);
/* nll, ppl and llama.cpp's "Final estimate" error:
 * ppl * sqrt((sum2/n - (sum/n)^2) / (n - 1)). */
void plm_nll_result(const plm_nll_acc *a, int n_chunks, plm_ppl_result *out);

/* KL divergence: llama-perplexity's sums, plus every position's KLD and
 * delta-p for the quantiles. */
typedef struct plm_kld_acc {
    double nll, nll2, nll_base, nll_base2, nll_nll_base;
    double kld, kld2, dp, dp2, dp4;
    uint64_t same_top, n;
    int n_chunks;
    float *kld_values, *dp_values; /* n values each, capacity cap */
    uint64_t cap;
} plm_kld_acc;

/* Capacity for `cap` positions; false when out of memory. */
bool plm_kld_acc_init(plm_kld_acc *a, uint64_t cap);
void plm_kld_acc_free(plm_kld_acc *a);

/* One scored position: base_lp is the base model's log-softmax row, logits
 * this model's raw logits, `next` the token that followed.  Both
 * distributions are compared at the base file's precision (this model's
 * log-probabilities rounded to float as plm_log_softmax stores them), so a
 * model against its own base file gives exactly 0.  The sum runs over the
 * whole vocabulary (llama.cpp's skips base log-probabilities below -16,
 * which its uint16 file cannot hold: terms under 1.2e-7 each).  Fails
 * (false) only when the capacity is exhausted or `next` is out of range. */
bool plm_kld_acc_add(plm_kld_acc *a, const float *base_lp, const float *logits, int n_vocab, plm_token next);

/* Statistics as llama-perplexity prints them; the quantiles only when
 * `quantiles` (they sort the stored values in place). */
void plm_kld_acc_result(plm_kld_acc *a, bool quantiles, plm_kld_result *out);

/* Linear-interpolated quantile of sorted values (llama.cpp's percentile). */
double plm_quantile_sorted(const float *sorted, uint64_t n, double fraction);

/* ---- the base file ------------------------------------------------------ */

#define PLM_KLD_MAGIC "PLM-KLD"  /* 8 bytes with the NUL */
#define PLM_KLD_VERSION 1u
#define PLM_KLD_HEADER_BYTES 40u

/* Positions scored per chunk of n_ctx tokens: n_ctx/2 .. n_ctx-2. */
static inline uint32_t plm_kld_n_scored(uint32_t n_ctx) { return n_ctx - 1 - n_ctx / 2; }

/* FNV-1a 64 over every token's text (length-prefixed, special tokens as
 * text): two models that tokenize alike have the same fingerprint. */
uint64_t plm_vocab_fingerprint(const plm_model *model);

typedef struct plm_kld_header {
    plm_kld_info info;
    uint64_t vocab_hash;
} plm_kld_header;

typedef struct plm_kld_writer plm_kld_writer;
/* Writes to PATH.tmp and renames on plm_kld_writer_close, so a failed run
 * never leaves a half-written file under the name. */
plm_status plm_kld_writer_open(const char *path, const plm_kld_header *h, const plm_token *tokens,
                               plm_kld_writer **out, plm_error *err);
plm_status plm_kld_writer_row(plm_kld_writer *w, const float *row, plm_error *err);
/* Checks that every row was written, then renames; frees w either way. */
plm_status plm_kld_writer_close(plm_kld_writer *w, plm_error *err);
void plm_kld_writer_abort(plm_kld_writer *w);

typedef struct plm_kld_reader {
    FILE *f;
    plm_kld_header h;
    plm_token *tokens;  /* n_chunks * n_ctx */
    uint64_t rows_read;
    char *path;
} plm_kld_reader;

/* Validates the header, the exact file size and the tokens (< n_vocab) before
 * returning; PLM_ERR_FORMAT names what is wrong. */
plm_status plm_kld_reader_open(const char *path, plm_kld_reader **out, plm_error *err);
/* Reads the next row (n_vocab floats) and checks it is a log-probability
 * distribution. */
plm_status plm_kld_reader_row(plm_kld_reader *r, float *row, plm_error *err);
void plm_kld_reader_close(plm_kld_reader *r);

#endif
