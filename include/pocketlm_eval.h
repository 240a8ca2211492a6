/*
 * pocketlm evaluation: perplexity and KL divergence against a base model,
 * measured as llama.cpp's llama-perplexity does (`pocketlm perplexity`,
 * `pocketlm kld`).
 */
#ifndef POCKETLM_EVAL_H
#define POCKETLM_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pocketlm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- quality: perplexity and KL divergence -------------------------------
 * What quantization of the weights or of the KV cache costs, measured as
 * llama.cpp's llama-perplexity measures it.  The tokens are cut into chunks
 * of n_ctx; each chunk is evaluated in a cleared KV cache with its first
 * token replaced by BOS (when the vocabulary adds BOS), in pieces of the
 * context's n_batch, and only its second half is scored: the logits at
 * positions n_ctx/2 .. n_ctx-2 against the token that follows, that is
 * n_ctx - 1 - n_ctx/2 tokens per chunk.  Sums are kept in double.
 * The context needs logits_all and a length of at least n_ctx. */

typedef struct plm_ppl_result {
    int n_chunks;        /* chunks evaluated */
    uint64_t n_scored;   /* tokens scored */
    double nll;          /* mean -ln p(next token) */
    double ppl;          /* exp(nll) */
    double ppl_err;      /* llama.cpp's standard error: ppl * sqrt(var(-ln p) / (n_scored - 1)) */
} plm_ppl_result;

/* Called after each chunk with the totals so far. */
typedef void (*plm_ppl_progress_fn)(void *user, const plm_ppl_result *so_far, int n_chunks);

typedef struct plm_ppl_params {
    uint32_t n_ctx;          /* tokens per chunk; 0 = the context's length */
    int n_chunks;            /* 0 = every whole chunk: n_tokens / n_ctx */
    const char *kld_save;    /* if set, write the log-probabilities of every scored
                                position there: the base for plm_kld */
    plm_ppl_progress_fn progress;
    void *user;
} plm_ppl_params;

PLM_API plm_ppl_params plm_ppl_default_params(void);

/* Needs at least one whole chunk (llama-perplexity itself asks for two;
 * the command does). */
PLM_API plm_status plm_perplexity(plm_context *ctx, const plm_token *tokens, int n_tokens, const plm_ppl_params *params,
                          plm_ppl_result *out, plm_error *err);

/* ---- importance matrix ----------------------------------------------------
 * llama-imatrix's statistics: per weight matrix and input column, the sum
 * of squared activations over a calibration text, and the token count;
 * `quantize --imatrix` weights its fits by their ratio.  Files are read in
 * llama.cpp's GGUF format or its legacy .dat format, written in either. */
typedef struct plm_imatrix plm_imatrix;

typedef struct plm_imatrix_params {
    int n_chunks;              /* 0 = every whole chunk */
    bool process_output;       /* also collect output.weight (llama-imatrix --process-output) */
    plm_ppl_progress_fn progress;  /* after each chunk: the running perplexity */
    void *user;
} plm_imatrix_params;

PLM_API plm_imatrix *plm_imatrix_new(uint32_t chunk_size);  /* empty; chunk_size = tokens per chunk */
PLM_API void plm_imatrix_free(plm_imatrix *im);
PLM_API plm_status plm_imatrix_load(const char *path, plm_imatrix **out, plm_error *err);
PLM_API plm_status plm_imatrix_save(const plm_imatrix *im, const char *path, plm_error *err);      /* GGUF */
PLM_API plm_status plm_imatrix_save_dat(const plm_imatrix *im, const char *path, plm_error *err);  /* legacy */
PLM_API bool plm_imatrix_add_dataset(plm_imatrix *im, const char *dataset);
PLM_API int plm_imatrix_n_entries(const plm_imatrix *im);
PLM_API uint32_t plm_imatrix_chunk_count(const plm_imatrix *im);
PLM_API const char *plm_imatrix_dataset(const plm_imatrix *im);  /* the first, or NULL */
/* Evaluates the tokens as plm_perplexity does (chunks of the imatrix's
 * chunk_size, each in a fresh cache from BOS; needs >= 2 chunks, a
 * logits_all context) and adds every matrix input of at least 16 tokens
 * (llama-imatrix's threshold) to im; *ppl gets the perplexity. */
PLM_API plm_status plm_imatrix_collect(plm_context *ctx, plm_imatrix *im, const plm_token *tokens, int n_tokens,
                                       const plm_imatrix_params *params, plm_ppl_result *ppl, plm_error *err);

/* The distribution of a per-position statistic. */
typedef struct plm_quantiles {
    double min, p0_1, p1, p5, p10, p25, median, p75, p90, p95, p99, p99_9, max;
} plm_quantiles;

/* llama-perplexity --kl-divergence's statistics of this model against the
 * base file's, over the same scored positions. */
typedef struct plm_kld_result {
    int n_chunks;
    uint64_t n_scored;
    plm_ppl_result ppl, ppl_base;    /* this model; the base (from its saved log-probabilities) */
    double cor;                      /* correlation of the two models' -ln p */
    double ln_ratio, ln_ratio_err;   /* mean ln(PPL / PPL_base) */
    double ratio, ratio_err;         /* PPL / PPL_base */
    double diff, diff_err;           /* PPL - PPL_base */
    double kld, kld_err;             /* mean KL(base || this model) per position, nats */
    plm_quantiles kld_q;             /* filled by plm_kld at the end (not in progress calls) */
    double dp, dp_err;               /* mean delta-p: p(next token) here minus in the base */
    double dp_rms, dp_rms_err;
    plm_quantiles dp_q;
    double same_top, same_top_err;   /* share of positions where both models' argmax agree */
} plm_kld_result;

typedef void (*plm_kld_progress_fn)(void *user, const plm_kld_result *so_far, int n_chunks);

typedef struct plm_kld_params {
    int n_chunks;  /* 0 = every chunk of the base file */
    plm_kld_progress_fn progress;
    void *user;
} plm_kld_params;

PLM_API plm_kld_params plm_kld_default_params(void);

/* What a base file (plm_ppl_params.kld_save) holds; validates the whole file. */
typedef struct plm_kld_info {
    uint32_t n_vocab, n_ctx, n_chunks;
} plm_kld_info;

PLM_API plm_status plm_kld_file_info(const char *path, plm_kld_info *out, plm_error *err);

/* Re-evaluates the base file's tokens with ctx's model and KV cache (context
 * length >= the file's n_ctx).  Refuses a file written for another
 * vocabulary or a malformed/truncated one (PLM_ERR_FORMAT). */
PLM_API plm_status plm_kld(plm_context *ctx, const char *base_path, const plm_kld_params *params, plm_kld_result *out,
                   plm_error *err);

#ifdef __cplusplus
}
#endif
#endif
