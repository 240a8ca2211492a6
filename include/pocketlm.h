/*
 * pocketlm — an LLM inference engine that makes a quantized model live
 * inside a phone's memory.  Public C API.
 *
 * Every object is an opaque handle.  Functions that can fail return a
 * plm_status and, when `err` is non-NULL, fill it with a message that names
 * the problem.  The library never exits the process and keeps no global
 * mutable state: two contexts on one loaded model may decode concurrently
 * from two threads.
 *
 * This header is the core an app needs: models, contexts, tokenizer,
 * sampling and generation.  The rest of the library has its own headers:
 *   pocketlm_plan.h   hardware probe, memory planning, device profiles
 *   pocketlm_eval.h   perplexity and KL divergence
 *   pocketlm_tools.h  quantize and synthetic models
 *   pocketlm_gguf.h   the GGUF reader and writer
 *   pocketlm_chat.h   chat templates
 */
#ifndef POCKETLM_H
#define POCKETLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PLM_VERSION_MAJOR 0
#define PLM_VERSION_MINOR 1
#define PLM_VERSION_PATCH 0
#define PLM_VERSION "0.1.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH, for #if checks. */
#define PLM_VERSION_NUMBER (PLM_VERSION_MAJOR * 10000 + PLM_VERSION_MINOR * 100 + PLM_VERSION_PATCH)

/* What the shared library exports: the library is built with hidden
 * visibility, so only declarations marked PLM_API are visible to an app. */
#if defined(_WIN32)
#define PLM_API __declspec(dllexport)
#else
#define PLM_API __attribute__((visibility("default")))
#endif

typedef int32_t plm_token;

typedef enum {
    PLM_OK = 0,
    PLM_ERR_IO,            /* open/read/mmap/write failed */
    PLM_ERR_FORMAT,        /* malformed or hostile file */
    PLM_ERR_UNSUPPORTED,   /* valid, but not something we implement */
    PLM_ERR_NOMEM,         /* allocation failed or would exceed a limit */
    PLM_ERR_INVALID_ARG,   /* caller passed something out of range */
    PLM_ERR_CONTEXT_FULL,  /* the KV cache has no room for the batch */
    PLM_ERR_ABORTED,       /* a progress or abort callback asked to stop */
} plm_status;

typedef struct plm_error {
    plm_status code;
    char message[512];
} plm_error;

PLM_API const char *plm_status_name(plm_status s);

/* The library's version ("0.1.0"): the PLM_VERSION it was built with, which
 * may differ from the header an app was compiled against. */
PLM_API const char *plm_version(void);

/* Frees memory the library returned to the caller (plm_tokenize_alloc's
 * array, plm_chat_render's prompt): the library's own allocator, whatever the
 * app links.  NULL is ignored. */
PLM_API void plm_free(void *p);

/* ---- parameter structs ---------------------------------------------------
 * plm_model_params, plm_context_params, plm_sampler_params and
 * plm_generate_params begin with `struct_size`, so a later release can add
 * fields without breaking a program built against this header:
 *   - start from the *_default_params() function: it is inline, so it sets
 *     struct_size to sizeof the struct *this header* declares and fills the
 *     defaults through the library's *_params_init(p, size);
 *   - the library reads only the first struct_size bytes; a field past them
 *     (added in a newer release) takes its default;
 *   - a struct_size larger than the library knows is accepted only when the
 *     bytes it does not know are zero (PLM_ERR_UNSUPPORTED otherwise: the
 *     program asked for something this older library cannot do);
 *   - struct_size 0 (a struct built with = {0} or designated initializers)
 *     means this header's size: right only for code built with the library.
 * New fields are only ever appended; none is removed or reordered. */

/* ---- models ---------------------------------------------------------- */

typedef struct plm_model plm_model;

typedef struct plm_model_params {
    size_t struct_size; /* see "parameter structs" above */
    bool use_mmap;   /* default true: weights are paged in from the file */
    bool use_mlock;  /* default false: pin the weights in RAM */
    bool vocab_only; /* load only the tokenizer (no weights needed in the file) */
    /* Called as loading advances with a fraction from 0 to 1 (never
     * decreasing; 1 once, when the model is ready); return false to abandon
     * the load (PLM_ERR_ABORTED, nothing leaked).  Optional. */
    bool (*progress)(void *user, float fraction);
    void *progress_user;
    bool repack;     /* default false: copy the matrices (MoE experts too) of the formats
                        the CPU has interleaved kernels for (Q4_0, Q5_0, Q8_0, Q4_K, ...)
                        into a row-interleaved layout in anonymous memory (faster
                        kernels; the file pages copied are released; every expert
                        becomes resident): see plm_plan_params.repack */
} plm_model_params;

PLM_API void plm_model_params_init(plm_model_params *p, size_t struct_size);
static inline plm_model_params plm_model_default_params(void) {
    plm_model_params p;
    plm_model_params_init(&p, sizeof p);
    return p;
}
PLM_API plm_status plm_model_load(const char *path, const plm_model_params *params,
                          plm_model **out, plm_error *err);
/* The GGUF image at bytes [offset, offset + length) of an open file (length
 * 0 = to the end): a model stored uncompressed inside an APK or an Android
 * asset (AssetFileDescriptor's fd, start offset and length).  The fd stays
 * the caller's; the library neither closes it nor needs it after the load
 * (a mapping keeps the file).  The offset need not be page-aligned, but the
 * weights are mapped only from an offset that is a multiple of 16; from any
 * other they are read into memory (as with use_mmap false). */
PLM_API plm_status plm_model_load_fd(int fd, uint64_t offset, uint64_t length, const plm_model_params *params,
                             plm_model **out, plm_error *err);
/* The GGUF image in memory (AAsset_getBuffer, a download): not copied, so it
 * must stay valid and unchanged until plm_model_free, unless it is not
 * 16-byte aligned: then it is copied (the tensors are read in place).
 * use_mmap and use_mlock do not apply. */
PLM_API plm_status plm_model_load_memory(const void *data, size_t size, const plm_model_params *params,
                                 plm_model **out, plm_error *err);
PLM_API void plm_model_free(plm_model *model);

PLM_API const char *plm_model_arch(const plm_model *model);     /* "llama", "qwen2" */
PLM_API const char *plm_model_name(const plm_model *model);     /* general.name or "" */
PLM_API int plm_model_n_vocab(const plm_model *model);
PLM_API int plm_model_n_ctx_train(const plm_model *model);
PLM_API int plm_model_n_embd(const plm_model *model);
PLM_API int plm_model_n_layer(const plm_model *model);
PLM_API uint64_t plm_model_n_params(const plm_model *model);
PLM_API uint64_t plm_model_weight_bytes(const plm_model *model);
/* Weight bytes one generated token reads: all of them for a dense model;
 * for a Mixture-of-Experts, the selected experts' share only. */
PLM_API uint64_t plm_model_weight_bytes_active(const plm_model *model);
/* Bytes of the row-interleaved copies made by plm_model_params.repack (0: none). */
PLM_API uint64_t plm_model_repacked_bytes(const plm_model *model);

/* ---- vocabulary ------------------------------------------------------- */

PLM_API plm_token plm_token_bos(const plm_model *model);  /* -1 when none */
PLM_API plm_token plm_token_eos(const plm_model *model);
PLM_API plm_token plm_token_eot(const plm_model *model);
PLM_API bool plm_token_is_eog(const plm_model *model, plm_token t); /* EOS, EOT, ... */
PLM_API bool plm_vocab_add_bos(const plm_model *model);

/* Tokenize `len` bytes of UTF-8.  add_special: BOS/EOS as the vocabulary asks.
 * parse_special: text like "<|im_start|>" becomes the control token.
 * Returns the number of tokens written; if `max` is too small, returns
 * -(tokens needed) and writes nothing useful; INT_MIN if it failed (out of
 * memory).  plm_tokenize_alloc does the sizing for you. */
PLM_API int plm_tokenize(const plm_model *model, const char *text, size_t len,
                 plm_token *out, int max, bool add_special, bool parse_special);

/* Tokenizes into an array the caller frees with plm_free; *n_out gets the
 * count.  NULL on failure (plm_tokenize_alloc_ex says why). */
PLM_API plm_token *plm_tokenize_alloc(const plm_model *model, const char *text, size_t len, int *n_out,
                              bool add_special, bool parse_special);
PLM_API plm_status plm_tokenize_alloc_ex(const plm_model *model, const char *text, size_t len, bool add_special,
                                 bool parse_special, plm_token **out, int *n_out, plm_error *err);

/* Bytes of one token's text, written to buf (not NUL-terminated).  Returns
 * the byte count, or -(bytes needed) when `size` is too small.  Control
 * tokens render as empty unless `special`. */
PLM_API int plm_token_to_piece(const plm_model *model, plm_token t, char *buf,
                       int size, bool special);

/* ---- contexts --------------------------------------------------------- */

typedef struct plm_context plm_context;

/* Storage format of the KV cache: f16, or ggml's q8_0 / q4_0 blocks, which
 * cut its memory to 53% / 28% of f16 at some cost in quality. */
typedef enum { PLM_KV_F16 = 0, PLM_KV_Q8_0, PLM_KV_Q4_0 } plm_kv_type;

PLM_API const char *plm_kv_type_name(plm_kv_type t);      /* "f16", "q8_0", "q4_0" */
PLM_API int plm_kv_type_from_name(const char *name);      /* -1 when unknown */

typedef struct plm_context_params {
    size_t struct_size;   /* see "parameter structs" above */
    uint32_t n_ctx;       /* KV cache length in tokens; 0 = min(trained, 4096) */
    uint32_t n_batch;     /* prompt tokens evaluated per forward pass; default 512 */
    uint32_t n_threads;   /* 0 = default */
    bool logits_all;      /* keep logits of every token of a decode, not just the last */
    plm_kv_type type_k;   /* default PLM_KV_F16 */
    plm_kv_type type_v;   /* default PLM_KV_F16 */
    bool flash_attn;      /* one-pass (flash) attention softmax: fewer key reads,
                             f32 weights; default false: two passes with
                             llama.cpp's f16-rounded weights (see ops.h) */
    /* Polled by plm_decode before each n_batch piece and each layer of the
     * forward pass; true = stop: plm_decode returns PLM_ERR_ABORTED, the
     * pieces already evaluated stay cached (plm_context_n_past says how many
     * tokens) and there are no logits.  Optional. */
    bool (*abort)(void *user);
    void *abort_user;
    uint32_t n_seq;       /* sequences the KV cache holds, n_ctx positions each; 0 = 1 (see below) */
    bool coarse_prefill;  /* default false: every product in the format's own arithmetic, as
                             llama.cpp; true: batches of 32+ tokens multiply K-quant (Q2_K..Q6_K,
                             IQ4_XS) weights requantized to int8 with one scale per row and 256
                             elements (faster prefill, logits move slightly; AVX-512 VNNI) */
} plm_context_params;

PLM_API void plm_context_params_init(plm_context_params *p, size_t struct_size);
static inline plm_context_params plm_context_default_params(void) {
    plm_context_params p;
    plm_context_params_init(&p, sizeof p);
    return p;
}
PLM_API plm_status plm_context_new(plm_model *model, const plm_context_params *params,
                           plm_context **out, plm_error *err);
PLM_API void plm_context_free(plm_context *ctx);

PLM_API uint32_t plm_context_n_ctx(const plm_context *ctx);
PLM_API uint32_t plm_context_n_past(const plm_context *ctx);  /* tokens in the KV cache */

/* Append `n` tokens at position n_past: run the forward pass in chunks of
 * n_batch tokens and store keys/values.  Fails with PLM_ERR_CONTEXT_FULL,
 * changing nothing, when they do not fit. */
PLM_API plm_status plm_decode(plm_context *ctx, const plm_token *tokens, int n,
                      plm_error *err);

/* Logits (n_vocab floats) of token i of the last plm_decode call; i = -1 is
 * the last token.  Without logits_all only the last token has logits. */
PLM_API const float *plm_get_logits(const plm_context *ctx, int i);

/* Forget cached tokens from position `pos` on (0 clears everything). */
PLM_API void plm_kv_truncate(plm_context *ctx, uint32_t pos);

/* Context shift: drop the n_discard cached tokens after the first n_keep,
 * slide the rest down and re-rotate their keys to their new positions, so
 * generation can go on in a full context without re-evaluating anything.
 * Sliding-window layers (gemma2/3) shift too, giving what llama.cpp gives
 * with a full-size SWA cache (--swa-full; with its default one llama.cpp
 * turns context shift off); PLM_ERR_UNSUPPORTED when fewer than window - 1
 * tokens would follow the kept ones (a window's ring no longer holds them). */
PLM_API plm_status plm_kv_shift(plm_context *ctx, uint32_t n_keep, uint32_t n_discard, plm_error *err);

/* Saves the KV cache (the positions it holds, with the n_tokens token ids
 * the caller fed it, n_tokens == plm_context_n_past) to a versioned,
 * checksummed file, written to a temp file and renamed.  Load refuses a file
 * of another model or other KV cache types, checks the checksum, and on
 * success fills tokens (room for max_tokens) and *n_tokens; the next decode
 * appends after them.  On a failed load the cache is left empty or as it
 * was. */
PLM_API plm_status plm_context_state_save(const plm_context *ctx, const char *path, const plm_token *tokens, int n_tokens,
                                  plm_error *err);
PLM_API plm_status plm_context_state_load(plm_context *ctx, const char *path, plm_token *tokens, int max_tokens,
                                  int *n_tokens, plm_error *err);

/* ---- sampling --------------------------------------------------------- */

typedef struct plm_sampler plm_sampler;

typedef struct plm_sampler_params {
    size_t struct_size;       /* see "parameter structs" above */
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

PLM_API void plm_sampler_params_init(plm_sampler_params *p, size_t struct_size);
static inline plm_sampler_params plm_sampler_default_params(void) {
    plm_sampler_params p;
    plm_sampler_params_init(&p, sizeof p);
    return p;
}
/* Checks every field's range (temperature finite, top_k >= 0, top_p
 * and min_p in [0, 1], repeat_penalty finite and > 0, presence/frequency
 * penalties finite, penalty_last_n >= -1); the message names the parameter
 * and its valid range. */
PLM_API plm_status plm_sampler_params_check(const plm_sampler_params *params, plm_error *err);
/* plm_sampler_new with the parameters checked first. */
PLM_API plm_status plm_sampler_create(const plm_model *model, const plm_sampler_params *params,
                              plm_sampler **out, plm_error *err);
/* NULL when the model is NULL, a parameter is out of range or memory runs
 * out; plm_sampler_create says which. */
PLM_API plm_sampler *plm_sampler_new(const plm_model *model, const plm_sampler_params *params);
PLM_API void plm_sampler_free(plm_sampler *s);
/* Pick a token from `logits` (n_vocab floats; not modified). */
PLM_API plm_token plm_sampler_sample(plm_sampler *s, const float *logits);
/* Record a token (prompt or generated) for the repetition penalties. */
PLM_API void plm_sampler_accept(plm_sampler *s, plm_token t);
PLM_API void plm_sampler_reset(plm_sampler *s);

/* ---- generation -----------------------------------------------------------
 * The token loop every front end shares (run, serve, an app): evaluate the
 * prompt, then sample, stream and evaluate one token at a time until a limit,
 * an end-of-generation token, a stop string, an abort or a full context.
 *
 * Text reaches `on_piece` in whole UTF-8 characters: the bytes of a token
 * that ends inside a character are held back until the character completes
 * (an invalid sequence is passed on as it is, never held forever).  Stop
 * strings match across pieces; the text of a stop string, and any tail that
 * might still become one, is never released.  Whatever is held at the end is
 * released before plm_generate returns (unless a stop string ended it).
 *
 * The prompt is appended at the context's current position, so a caller that
 * keeps a cached prefix passes only the rest; every prompt token is also fed
 * to the sampler's penalty window (a caller that reuses a prefix accepts the
 * prefix itself).  `abort` is polled before every forward pass, including
 * each n_batch piece of a long prompt. */

typedef enum {
    PLM_FINISH_LENGTH = 0, /* max_tokens generated */
    PLM_FINISH_EOG,        /* the model produced an end-of-generation token */
    PLM_FINISH_STOP,       /* a stop string completed (result.stop_index) */
    PLM_FINISH_ABORT,      /* abort() or on_piece()/on_token() asked to stop */
    PLM_FINISH_CONTEXT,    /* the context filled and ctx_shift was off */
} plm_finish_reason;

PLM_API const char *plm_finish_reason_name(plm_finish_reason r); /* "length", "eog", "stop", "abort", "context" */

/* Receives released text; return false to stop (PLM_FINISH_ABORT). */
typedef bool (*plm_piece_cb)(void *user, const char *text, size_t len);
/* Each sampled token with the logits it was drawn from (n_vocab floats),
 * before its text is released; return false to stop. */
typedef bool (*plm_token_cb)(void *user, plm_token token, const float *logits);
/* Polled before each forward pass; true = stop now. */
typedef bool (*plm_abort_cb)(void *user);

typedef struct plm_generate_params {
    size_t struct_size;           /* see "parameter structs" above */
    int max_tokens;               /* tokens to generate; < 0 = no limit */
    const char *const *stops;     /* stop strings (copied); may be NULL */
    int n_stops;
    bool ignore_eos;              /* keep going past end-of-generation tokens */
    bool ctx_shift;               /* full context: drop half of what follows n_keep, go on */
    int n_keep;                   /* tokens kept at a shift, from the start; < 0 = everything
                                     cached before the first generated token */
    plm_token_cb on_token;        /* optional */
    plm_abort_cb abort;           /* optional */
    void *user;                   /* passed to the three callbacks and on_piece */
    struct plm_spec *spec;        /* speculative decoding (plm_spec_new on this context), or NULL;
                                     on_token then gets NULL logits for the tokens a step accepted */
} plm_generate_params;

PLM_API void plm_generate_params_init(plm_generate_params *p, size_t struct_size);
static inline plm_generate_params plm_generate_default_params(void) {
    plm_generate_params p;
    plm_generate_params_init(&p, sizeof p);
    return p;
}

typedef struct plm_generate_result {
    plm_finish_reason finish;
    int stop_index;      /* which stop string, or -1 */
    int n_prompt;        /* prompt tokens evaluated (< the count passed if aborted in prefill) */
    int n_generated;     /* tokens sampled, end-of-generation token excluded */
    int n_shifts;        /* context shifts made */
    double t_prompt_s;   /* seconds evaluating the prompt */
    double t_gen_s;      /* seconds from the first sample to the end */
} plm_generate_result;

/* PLM_OK whenever generation ran, however it finished (see result.finish).
 * Fails with PLM_ERR_CONTEXT_FULL when the prompt does not fit (leaving a
 * context position for one generated token), PLM_ERR_INVALID_ARG for no
 * prompt tokens or a NULL argument, or the error of a forward pass. */
PLM_API plm_status plm_generate(plm_context *ctx, const plm_token *prompt, int n_prompt, plm_sampler *sampler,
                        const plm_generate_params *params, plm_piece_cb on_piece,
                        plm_generate_result *result, plm_error *err);

/* ---- sequences and batched generation -----------------------------------
 * A context made with n_seq > 1 holds that many independent sequences
 * (llama.cpp's seq_id), ids 0..n_seq-1, each with its own positions
 * 0..n_ctx-1 in its own part of the KV cache; a token attends only to its
 * own sequence.  The single-sequence calls above (plm_decode,
 * plm_context_n_past, plm_kv_truncate, plm_kv_shift, plm_generate) act on
 * sequence 0.
 *
 * plm_gen runs plm_generate's loop one step at a time, so a caller (a
 * server's slots) can run several generations, each in its own sequence,
 * with the tokens of all of them (the next token of those generating, a
 * piece of the prompt of those starting) evaluated in one forward pass: the
 * weights are read once for all.  Text, stop strings, limits and callbacks
 * behave exactly as in plm_generate. */

typedef int32_t plm_seq_id;

PLM_API int plm_context_n_seq(const plm_context *ctx);
PLM_API uint32_t plm_seq_n_past(const plm_context *ctx, plm_seq_id seq);   /* 0 for an unknown id */
PLM_API void plm_seq_truncate(plm_context *ctx, plm_seq_id seq, uint32_t pos); /* forget pos.. (0: clear) */
/* dst becomes a copy of src (a shared prefix evaluated once, then forked). */
PLM_API plm_status plm_seq_copy(plm_context *ctx, plm_seq_id src, plm_seq_id dst, plm_error *err);

/* Appends each token to its sequence (seqs[i]) at that sequence's next
 * position, in n_batch pieces, and keeps the logits of the last n_logits
 * tokens (plm_get_logits(ctx, i) for i in [n - n_logits, n)).  Fails,
 * changing nothing, when a sequence id is unknown or a sequence would
 * overflow (PLM_ERR_CONTEXT_FULL). */
PLM_API plm_status plm_decode_seqs(plm_context *ctx, const plm_token *tokens, const plm_seq_id *seqs, int n,
                                   int n_logits, plm_error *err);

/* Batch invariance: every forward pass row by row with the single-token
 * kernels (prompts too, at some cost in prefill speed), so a token's
 * results never depend on how its sequence was split into batches — by a
 * reused cached prefix, or by what else shared the pass.  Off by default:
 * a batched prompt is then summed in another order, which changes the last
 * bits and, at a near tie, a greedy choice. */
PLM_API void plm_context_set_batch_invariant(plm_context *ctx, bool on);

typedef struct plm_gen plm_gen;

/* Starts a generation in sequence seq: the prompt is appended at the
 * sequence's current position (keep a cached prefix, pass the rest), as in
 * plm_generate, whose checks it makes.  params->spec: NULL, or a
 * speculative decoder made for this context and sequence (plm_spec_new_seq;
 * plm_spec_begin for the tokens the sequence holds before the prompt: the
 * generation begins it for the prompt itself).  The
 * sampler, params' stop strings... are used until plm_gen_free; `result`
 * is filled as it goes and is final once plm_gen_done. */
PLM_API plm_status plm_gen_new(plm_context *ctx, plm_seq_id seq, const plm_token *prompt, int n_prompt,
                               plm_sampler *sampler, const plm_generate_params *params, plm_piece_cb on_piece,
                               plm_generate_result *result, plm_gen **out, plm_error *err);
/* One step of n generations of one context, in one forward pass of up to
 * n_batch tokens: each generation whose prompt is evaluated samples its
 * next token, streams its text and ends or goes on (its token joins the
 * pass); the others add the next piece of their prompt that fits (abort is
 * polled first).  A speculating generation first streams the tokens its
 * last verification accepted, then adds its pending token and its
 * proposals, all verified in the same pass (greedy: that pass runs every
 * row with the single-token kernel, so the output is plain decoding's).
 * Done generations are skipped.  On an error every
 * generation of the pass is left done. */
PLM_API plm_status plm_gen_step(plm_gen *const *gens, int n, plm_error *err);
PLM_API bool plm_gen_done(const plm_gen *g);
PLM_API void plm_gen_free(plm_gen *g);

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

/* Copies the strings; empty ones are ignored.  NULL only when out of memory
 * or given NULL stops with n_stops > 0; plm_stop_create says which. */
PLM_API plm_stop *plm_stop_new(const char *const *stops, int n_stops);
PLM_API plm_status plm_stop_create(const char *const *stops, int n_stops, plm_stop **out, plm_error *err);
PLM_API void plm_stop_free(plm_stop *m);
PLM_API void plm_stop_reset(plm_stop *m);
PLM_API plm_stop_out plm_stop_feed(plm_stop *m, const char *piece, size_t len);
PLM_API plm_stop_out plm_stop_flush(plm_stop *m);
PLM_API size_t plm_stop_held(const plm_stop *m);

/* ---- living inside an app's memory --------------------------------------
 * A phone app is not given the machine's free RAM: Android puts it in a
 * per-app memory cgroup and its low-memory killer reclaims it, iOS's Jetsam
 * kills it past a per-process footprint limit.  These calls plan against the
 * process's real limit (plm_probe_budget, pocketlm_plan.h), let an app hand
 * memory back under pressure, and keep a model file that shrinks under the
 * process from killing it. */

/* Memory pressure: give back what can be rebuilt, so an app can answer
 * Android's onTrimMemory / iOS's didReceiveMemoryWarning instead of being
 * killed.  Nothing the caller can observe changes: cached tokens, logits
 * and the results of later decodes stay the same; the released pages are
 * faulted back in (zeroed, or re-read from the model file) when used.
 *   SCRATCH:  the forward pass's scratch buffers and the idle worker
 *             threads (restarted by the next decode);
 *   KV:       + KV cache pages past the tokens now cached;
 *   WEIGHTS:  + this process's resident pages of the mapped weights (shared
 *             by every context on the model; re-read from storage next token).
 * Returns the bytes of address space handed back to the kernel (an upper
 * bound on the RSS it frees).  Not concurrently with a decode on ctx. */
typedef enum { PLM_TRIM_SCRATCH = 0, PLM_TRIM_KV, PLM_TRIM_WEIGHTS } plm_trim_level;
PLM_API uint64_t plm_context_trim(plm_context *ctx, plm_trim_level level);

/* A mapped model file that shrinks under the process (deleted and replaced
 * by an update, truncated) makes the next read of a vanished page raise
 * SIGBUS.  The library catches it in any thread of a decode (a handler
 * installed once on the first mmap'd model; faults outside its mappings or
 * outside a decode go to the handler that was there before): plm_decode
 * returns PLM_ERR_IO naming the file, and the context is poisoned — every
 * later decode fails the same way; free it and load the model again. */
PLM_API bool plm_context_poisoned(const plm_context *ctx);

/* ---- speculative decoding ----------------------------------------------
 * Decode is bound by reading the weights once per token; verifying several
 * guessed tokens in one batch reads them once for all.  A speculative step
 * proposes up to k tokens (a small draft model run ahead, or a lookup in
 * the text so far / an n-gram cache), evaluates the pending token and the
 * proposals in one target batch, keeps the longest prefix the target agrees
 * with plus the target's own next token, and drops the rest from both KV
 * caches.  Greedy output is the same as plain decoding token for token;
 * with temperature, a proposal is accepted with probability min(1, p/q) and
 * a rejection resamples from max(0, p - q) normalised (q one-hot for lookup
 * proposals), so the output distribution is the plain sampler's.
 *
 *     plm_spec_new(target_ctx, draft_ctx_or_NULL, &params, &spec, &err);
 *     plm_decode(target_ctx, prompt, n_prompt, &err);
 *     plm_spec_begin(spec, prompt, n_prompt, &err);
 *     plm_token t = plm_sampler_sample(smp, plm_get_logits(target_ctx, -1));
 *     plm_sampler_accept(smp, t);
 *     for (;;) {                                  // t: sampled, not yet decoded
 *         plm_token out[64]; int n;
 *         plm_spec_step(spec, smp, t, out, 64, &n, &err);  // n >= 1, all accepted into smp
 *         ... use out[0..n); t = out[n - 1];
 *     }
 */

typedef struct plm_spec plm_spec;

typedef struct plm_spec_params {
    int draft_max;           /* most tokens proposed per step; default 16 */
    int draft_min;           /* a step with fewer proposals verifies none; default 0 */
    float draft_p_min;       /* the draft model stops proposing when its top probability falls
                                below this; default 0.6 */
    int lookup_ngram;        /* prompt lookup: longest n-gram matched in prompt + output
                                (shorter ones down to 1 are tried next); 0 = off */
    const char *lookup_cache;/* n-gram cache file: loaded by plm_spec_new when present, learned
                                from prompt and output, written by plm_spec_save_cache */
    bool adaptive;           /* default true: the draft length follows the measured acceptance,
                                and speculation pauses while it does not pay */
    uint64_t seed;           /* the draft model's sampler, with temperature */
} plm_spec_params;

PLM_API plm_spec_params plm_spec_default_params(void);

/* Whether `draft` can propose tokens for `target`, as llama.cpp's
 * speculative example decides: same tokenizer type, same BOS/EOS ids and
 * add-BOS/EOS flags, vocabulary sizes within 128, and the same token text
 * for every id from 5 up to the smaller size.  PLM_ERR_UNSUPPORTED naming
 * the first difference otherwise. */
PLM_API plm_status plm_spec_vocab_compatible(const plm_model *target, const plm_model *draft, plm_error *err);

/* `draft` may be NULL (lookup only); when given, it must be at least as long
 * as the target context, and from then on it runs on the target's threads
 * (the two decode one after the other), so free it before the target.
 * Fails when no proposer is set (no draft, lookup_ngram 0, no cache), the
 * vocabularies differ, or the cache file is corrupt. */
PLM_API plm_status plm_spec_new(plm_context *target, plm_context *draft, const plm_spec_params *params, plm_spec **out,
                        plm_error *err);
PLM_API void plm_spec_free(plm_spec *spec);

/* plm_spec_new for sequence `seq` of the target and `draft_seq` of the draft
 * (contexts with n_seq > 1, e.g. a server's slots: one decoder per slot, one
 * draft context with a sequence per slot).  cache_of: share that decoder's
 * n-gram cache (learned by both; it must outlive this one, and only it
 * saves the file) instead of opening params.lookup_cache, and the costs its
 * adaptive control measured (of passes of 1, 2, ... sequences).  Pass such a
 * decoder to plm_gen_new (params.spec) for its sequence: plm_gen_step then
 * verifies the proposals of every speculating generation in one forward
 * pass, and the draft model drafts for all of them in shared passes. */
PLM_API plm_status plm_spec_new_seq(plm_context *target, plm_seq_id seq, plm_context *draft, plm_seq_id draft_seq,
                                    const plm_spec_params *params, plm_spec *cache_of, plm_spec **out,
                                    plm_error *err);

/* Starts a sequence: tokens[0..n) are what the target context holds now
 * (the prompt just decoded), or only its newest n when the decoder followed
 * the ones before (a chat turn that kept the cached start of the
 * conversation).  The draft context catches up by itself. */
PLM_API plm_status plm_spec_begin(plm_spec *spec, const plm_token *tokens, int n, plm_error *err);

/* One step.  `last` is the newest token, sampled but not yet decoded.
 * Writes n_out >= 1 tokens that follow it (max_out >= 1), each already
 * passed to plm_sampler_accept; out[n_out - 1] is the new `last`.  The
 * target then holds `last` and out[0..n_out - 1).  Needs room in the target
 * context for at least `last` (PLM_ERR_CONTEXT_FULL otherwise). */
PLM_API plm_status plm_spec_step(plm_spec *spec, plm_sampler *smp, plm_token last, plm_token *out, int max_out,
                         int *n_out, plm_error *err);

/* plm_kv_shift of the target and the draft, keeping the history in step. */
PLM_API plm_status plm_spec_kv_shift(plm_spec *spec, uint32_t n_keep, uint32_t n_discard, plm_error *err);

/* Writes the n-gram cache to params.lookup_cache (temp file + rename). */
PLM_API plm_status plm_spec_save_cache(plm_spec *spec, plm_error *err);

typedef struct plm_spec_stats {
    uint64_t steps;          /* plm_spec_step calls */
    uint64_t verifications;  /* steps that verified at least one proposal */
    uint64_t proposed;       /* tokens proposed and verified */
    uint64_t accepted;       /* of which the target accepted */
    uint64_t generated;      /* tokens returned */
    uint64_t paused_steps;   /* steps the adaptive control ran plain decoding */
    int draft_len;           /* the draft length the adaptive control chose last */
} plm_spec_stats;

PLM_API void plm_spec_get_stats(const plm_spec *spec, plm_spec_stats *out);

/* ---- misc ------------------------------------------------------------- */

/* Peak resident set size of this process in bytes (VmHWM), 0 if unknown. */
PLM_API uint64_t plm_peak_rss_bytes(void);

/* This process's memory right now (Linux /proc; fields 0 when unknown). */
typedef struct plm_mem_sample {
    uint64_t rss_bytes, peak_rss_bytes;
    uint64_t rss_file_bytes;  /* file-backed: mapped weights that are resident */
    uint64_t rss_anon_bytes;  /* anonymous: KV cache, buffers, heap */
    uint64_t minor_faults, major_faults;  /* since start; major = read from storage */
} plm_mem_sample;

PLM_API void plm_mem_sample_now(plm_mem_sample *out);

#ifdef __cplusplus
}
#endif
#endif
