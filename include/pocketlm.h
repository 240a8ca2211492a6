/*
 * pocketlm — an LLM inference engine that makes a quantized model live
 * inside a phone's memory.  Public C API.
 *
 * Every object is an opaque handle.  Functions that can fail return a
 * plm_status and, when `err` is non-NULL, fill it with a message that names
 * the problem.  The library never exits the process and keeps no global
 * mutable state: two contexts on one loaded model may decode concurrently
 * from two threads.
 */
#ifndef POCKETLM_H
#define POCKETLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLM_VERSION "0.1.0"

typedef int32_t plm_token;

typedef enum {
    PLM_OK = 0,
    PLM_ERR_IO,            /* open/read/mmap/write failed */
    PLM_ERR_FORMAT,        /* malformed or hostile file */
    PLM_ERR_UNSUPPORTED,   /* valid, but not something we implement */
    PLM_ERR_NOMEM,         /* allocation failed or would exceed a limit */
    PLM_ERR_INVALID_ARG,   /* caller passed something out of range */
    PLM_ERR_CONTEXT_FULL,  /* the KV cache has no room for the batch */
} plm_status;

typedef struct plm_error {
    plm_status code;
    char message[512];
} plm_error;

const char *plm_status_name(plm_status s);

/* ---- models ---------------------------------------------------------- */

typedef struct plm_model plm_model;

typedef struct plm_model_params {
    bool use_mmap;   /* default true: weights are paged in from the file */
    bool use_mlock;  /* default false: pin the weights in RAM */
    bool vocab_only; /* load only the tokenizer (no weights needed in the file) */
} plm_model_params;

plm_model_params plm_model_default_params(void);
plm_status plm_model_load(const char *path, const plm_model_params *params,
                          plm_model **out, plm_error *err);
void plm_model_free(plm_model *model);

const char *plm_model_arch(const plm_model *model);     /* "llama", "qwen2" */
const char *plm_model_name(const plm_model *model);     /* general.name or "" */
int plm_model_n_vocab(const plm_model *model);
int plm_model_n_ctx_train(const plm_model *model);
int plm_model_n_embd(const plm_model *model);
int plm_model_n_layer(const plm_model *model);
uint64_t plm_model_n_params(const plm_model *model);
uint64_t plm_model_weight_bytes(const plm_model *model);

/* ---- vocabulary ------------------------------------------------------- */

plm_token plm_token_bos(const plm_model *model);  /* -1 when none */
plm_token plm_token_eos(const plm_model *model);
plm_token plm_token_eot(const plm_model *model);
bool plm_token_is_eog(const plm_model *model, plm_token t); /* EOS, EOT, ... */
bool plm_vocab_add_bos(const plm_model *model);

/* Tokenize `len` bytes of UTF-8.  add_special: BOS/EOS as the vocabulary asks.
 * parse_special: text like "<|im_start|>" becomes the control token.
 * Returns the number of tokens written; if `max` is too small, returns
 * -(tokens needed) and writes nothing useful; INT_MIN if it failed (out of
 * memory).  plm_tokenize_alloc does the sizing for you. */
int plm_tokenize(const plm_model *model, const char *text, size_t len,
                 plm_token *out, int max, bool add_special, bool parse_special);

/* Tokenizes into a malloc'd array (free() it); *n_out gets the count.
 * NULL on failure. */
plm_token *plm_tokenize_alloc(const plm_model *model, const char *text, size_t len, int *n_out,
                              bool add_special, bool parse_special);

/* Bytes of one token's text, written to buf (not NUL-terminated).  Returns
 * the byte count, or -(bytes needed) when `size` is too small.  Control
 * tokens render as empty unless `special`. */
int plm_token_to_piece(const plm_model *model, plm_token t, char *buf,
                       int size, bool special);

/* ---- contexts --------------------------------------------------------- */

typedef struct plm_context plm_context;

typedef struct plm_context_params {
    uint32_t n_ctx;       /* KV cache length in tokens; 0 = min(trained, 4096) */
    uint32_t n_batch;     /* prompt tokens evaluated per forward pass; default 512 */
    uint32_t n_threads;   /* 0 = default */
    bool logits_all;      /* keep logits of every token of a decode, not just the last */
} plm_context_params;

plm_context_params plm_context_default_params(void);
plm_status plm_context_new(plm_model *model, const plm_context_params *params,
                           plm_context **out, plm_error *err);
void plm_context_free(plm_context *ctx);

uint32_t plm_context_n_ctx(const plm_context *ctx);
uint32_t plm_context_n_past(const plm_context *ctx);  /* tokens in the KV cache */

/* Append `n` tokens at position n_past: run the forward pass in chunks of
 * n_batch tokens and store keys/values.  Fails with PLM_ERR_CONTEXT_FULL,
 * changing nothing, when they do not fit. */
plm_status plm_decode(plm_context *ctx, const plm_token *tokens, int n,
                      plm_error *err);

/* Logits (n_vocab floats) of token i of the last plm_decode call; i = -1 is
 * the last token.  Without logits_all only the last token has logits. */
const float *plm_get_logits(const plm_context *ctx, int i);

/* Forget cached tokens from position `pos` on (0 clears everything). */
void plm_kv_truncate(plm_context *ctx, uint32_t pos);

/* ---- sampling --------------------------------------------------------- */

typedef struct plm_sampler plm_sampler;

typedef struct plm_sampler_params {
    float temperature;        /* 0 = greedy; default 0.8 */
    int32_t top_k;            /* 0 = off; default 40 */
    float top_p;              /* 1 = off; default 0.95 */
    float min_p;              /* 0 = off; default 0.05 */
    float repeat_penalty;     /* 1 = off; default 1.0 */
    float presence_penalty;   /* 0 = off */
    float frequency_penalty;  /* 0 = off */
    int32_t penalty_last_n;   /* window of recent tokens penalised; default 64 */
    uint64_t seed;            /* same seed, same output */
} plm_sampler_params;

plm_sampler_params plm_sampler_default_params(void);
plm_sampler *plm_sampler_new(const plm_model *model, const plm_sampler_params *params);
void plm_sampler_free(plm_sampler *s);
/* Pick a token from `logits` (n_vocab floats; not modified). */
plm_token plm_sampler_sample(plm_sampler *s, const float *logits);
/* Record a token (prompt or generated) for the repetition penalties. */
void plm_sampler_accept(plm_sampler *s, plm_token t);
void plm_sampler_reset(plm_sampler *s);

/* ---- stop strings -----------------------------------------------------
 * Generated text arrives one token's bytes at a time and a stop string may
 * straddle tokens, so the matcher holds back any tail that could still become
 * a stop string and releases it once it cannot:
 *
 *     plm_stop_out o = plm_stop_feed(m, piece, len);
 *     fwrite(o.text, 1, o.len, stdout);
 *     if (o.stop >= 0) break;            // stop string o.stop completed
 *     ...
 *     o = plm_stop_flush(m);             // at the end: release the tail
 *
 * The text of a completed stop string is never released. */

typedef struct plm_stop plm_stop;

typedef struct plm_stop_out {
    const char *text;  /* bytes safe to emit now; valid until the next call */
    size_t len;
    int stop;          /* index of the stop string that completed, or -1 */
} plm_stop_out;

/* Copies the strings; empty ones are ignored.  NULL only when out of memory. */
plm_stop *plm_stop_new(const char *const *stops, int n_stops);
void plm_stop_free(plm_stop *m);
void plm_stop_reset(plm_stop *m);
plm_stop_out plm_stop_feed(plm_stop *m, const char *piece, size_t len);
plm_stop_out plm_stop_flush(plm_stop *m);
size_t plm_stop_held(const plm_stop *m);

/* ---- synthetic models ---------------------------------------------------
 * A random-weight GGUF with the exact tensor shapes of a real model, for
 * benchmarks and memory planning: norm weights 1, other weights N(0, 0.02),
 * token embeddings N(0, 0.1).  The vocabulary is copied from `vocab_path`. */

typedef struct plm_synth_params {
    const char *shape;       /* "tinyllama-1.1b", "qwen2.5-0.5b", ... */
    const char *vocab_path;  /* GGUF whose tokenizer.* keys are copied */
    const char *out_path;
    bool f32;                /* default F16 */
    uint64_t seed;
} plm_synth_params;

/* NULL-terminated list of the shape names plm_synth knows. */
const char *const *plm_synth_shapes(void);
plm_status plm_synth(const plm_synth_params *params, plm_error *err);

/* ---- misc ------------------------------------------------------------- */

/* Peak resident set size of this process in bytes (VmHWM), 0 if unknown. */
uint64_t plm_peak_rss_bytes(void);

#ifdef __cplusplus
}
#endif
#endif
