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
} plm_status;

typedef struct plm_error {
    plm_status code;
    char message[512];
} plm_error;

PLM_API const char *plm_status_name(plm_status s);

/* ---- models ---------------------------------------------------------- */

typedef struct plm_model plm_model;

typedef struct plm_model_params {
    bool use_mmap;   /* default true: weights are paged in from the file */
    bool use_mlock;  /* default false: pin the weights in RAM */
    bool vocab_only; /* load only the tokenizer (no weights needed in the file) */
    bool repack;     /* default false: copy Q4_0/Q8_0 matrices into a row-interleaved
                        layout in anonymous memory (faster kernels; the file pages
                        copied are released): see plm_plan_params.repack */
} plm_model_params;

PLM_API plm_model_params plm_model_default_params(void);
PLM_API plm_status plm_model_load(const char *path, const plm_model_params *params,
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

/* Tokenizes into a malloc'd array (free() it); *n_out gets the count.
 * NULL on failure. */
PLM_API plm_token *plm_tokenize_alloc(const plm_model *model, const char *text, size_t len, int *n_out,
                              bool add_special, bool parse_special);

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
    uint32_t n_ctx;       /* KV cache length in tokens; 0 = min(trained, 4096) */
    uint32_t n_batch;     /* prompt tokens evaluated per forward pass; default 512 */
    uint32_t n_threads;   /* 0 = default */
    bool logits_all;      /* keep logits of every token of a decode, not just the last */
    plm_kv_type type_k;   /* default PLM_KV_F16 */
    plm_kv_type type_v;   /* default PLM_KV_F16 */
    bool flash_attn;      /* one-pass (flash) attention softmax: fewer key reads,
                             f32 weights; default false: two passes with
                             llama.cpp's f16-rounded weights (see ops.h) */
} plm_context_params;

PLM_API plm_context_params plm_context_default_params(void);
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
 * generation can go on in a full context without re-evaluating anything. */
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

PLM_API plm_sampler_params plm_sampler_default_params(void);
/* Checks every field's range (temperature finite, top_k >= 0, top_p
 * and min_p in [0, 1], repeat_penalty finite and > 0, presence/frequency
 * penalties finite, penalty_last_n >= -1); the message names the parameter
 * and its valid range. */
PLM_API plm_status plm_sampler_params_check(const plm_sampler_params *params, plm_error *err);
/* plm_sampler_new with the parameters checked first. */
PLM_API plm_status plm_sampler_create(const plm_model *model, const plm_sampler_params *params,
                              plm_sampler **out, plm_error *err);
/* NULL when the model is NULL, a parameter is out of range or memory runs out. */
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

PLM_API plm_generate_params plm_generate_default_params(void);

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

/* ---- quantization -------------------------------------------------------
 * Writes `in_path` re-encoded as llama.cpp's llama-quantize does without an
 * importance matrix, bit-identical to it.  `type` is a llama-quantize file
 * type (case-insensitive):
 *   - the K-quant mixtures "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S",
 *     "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K" ("Q3_K", "Q4_K", "Q5_K" are
 *     aliases of the _M ones): each weight matrix's type by llama.cpp's rules
 *     (the output in Q6_K, some attn_v/ffn_down layers with more bits...);
 *   - "Q8_0", "Q5_1", "Q5_0", "Q4_1", "Q4_0", "IQ4_NL", "F16", "BF16",
 *     "F32": every 2-D weight matrix in that type, as with --pure.
 * A matrix whose rows are not whole blocks of its type falls back as in
 * llama.cpp (Q4_K -> Q5_0, Q6_K -> Q8_0, ..., else F16).  Norms and biases
 * are copied as they are.  The file appears under out_path only when
 * complete (written to out_path.tmp, then renamed). */
typedef struct plm_quantize_params {
    bool pure;      /* every 2-D weight matrix in the type's base format
                       (Q4_K for "Q4_K_M"), as llama-quantize --pure */
    int n_threads;  /* 0 = every online core; the output does not depend on it */
} plm_quantize_params;

PLM_API plm_quantize_params plm_quantize_default_params(void);
PLM_API plm_status plm_quantize_ex(const char *in_path, const char *out_path, const char *type,
                           const plm_quantize_params *params, plm_error *err);  /* params NULL: defaults */
/* plm_quantize_ex with the default parameters. */
PLM_API plm_status plm_quantize(const char *in_path, const char *out_path, const char *type, plm_error *err);

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
PLM_API plm_stop *plm_stop_new(const char *const *stops, int n_stops);
PLM_API void plm_stop_free(plm_stop *m);
PLM_API void plm_stop_reset(plm_stop *m);
PLM_API plm_stop_out plm_stop_feed(plm_stop *m, const char *piece, size_t len);
PLM_API plm_stop_out plm_stop_flush(plm_stop *m);
PLM_API size_t plm_stop_held(const plm_stop *m);

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
PLM_API const char *const *plm_synth_shapes(void);
PLM_API plm_status plm_synth(const plm_synth_params *params, plm_error *err);

/* plm_synth with two knobs for speculative-decoding pairs.  Two files written
 * with the same seed share token_embd and output exactly (a tensor's values
 * depend on the seed and its place in the table, and those come before the
 * layers).  n_layer: 0 = the shape's; fewer makes a shallow draft of the same
 * model.  layer_scale: 0 = 1; scales the layer matrices' N(0, 0.02), so small
 * values leave the residual stream to the embeddings and deep and shallow
 * copies agree on most tokens. */
PLM_API plm_status plm_synth_ex(const plm_synth_params *params, uint32_t n_layer, float layer_scale, plm_error *err);

/* ---- hardware probe -----------------------------------------------------
 * What this device offers an LLM: cores (big.LITTLE clusters by maximum
 * frequency, physical cores on SMT machines), RAM, the memory read bandwidth
 * that bounds token generation, and how fast a model file streams from
 * storage.  Linux /sys and /proc; fields read as 0 where unknown. */

#define PLM_PROBE_MAX_CPUS 512
#define PLM_PROBE_MAX_CLUSTERS 8

typedef struct plm_cpu_core {
    uint32_t cpu;      /* logical CPU number (cpuN) */
    int32_t core;      /* topology/core_id, -1 if unknown */
    int32_t package;   /* topology/physical_package_id, -1 if unknown */
    uint32_t max_khz;  /* cpufreq/cpuinfo_max_freq, 0 if unknown */
} plm_cpu_core;

typedef struct plm_cpu_cluster {
    uint32_t max_khz;  /* 0 if unknown */
    uint32_t n_cpus;   /* logical CPUs */
    uint32_t n_cores;  /* physical cores */
} plm_cpu_cluster;

typedef struct plm_cpu_info {
    char model[128];      /* "AMD EPYC", "Qualcomm ..."; "" if unknown */
    char arch[72];        /* uname machine: "x86_64", "aarch64" */
    char features[160];   /* SIMD we care about: "avx2 fma f16c avx512f", "neon dotprod i8mm" */
    uint32_t n_cpus;      /* online logical CPUs listed */
    uint32_t n_cores;     /* physical cores (SMT siblings counted once) */
    uint32_t n_allowed;   /* logical CPUs this process may run on (affinity) */
    uint32_t n_perf;      /* performance cores: what plm_default_threads returns */
    uint32_t n_clusters;  /* by maximum frequency, fastest first */
    plm_cpu_cluster clusters[PLM_PROBE_MAX_CLUSTERS];
    plm_cpu_core cpus[PLM_PROBE_MAX_CPUS];  /* n_cpus entries */
} plm_cpu_info;

typedef struct plm_mem_info {
    uint64_t total_bytes;      /* MemTotal */
    uint64_t available_bytes;  /* MemAvailable */
    uint64_t page_size;
} plm_mem_info;

PLM_API plm_status plm_probe_cpu(plm_cpu_info *out, plm_error *err);
PLM_API plm_status plm_probe_memory(plm_mem_info *out, plm_error *err);

/* Threads to use by default: the performance cores.  On big.LITTLE, the
 * physical cores whose maximum frequency is within 20% of the fastest (so a
 * 1+3+4 phone counts 4; a tiny boost difference between x86 cores does not
 * split them); elsewhere the physical cores.  Never more than the CPUs the
 * process may run on; at least 1. */
PLM_API uint32_t plm_default_threads(void);

/* Multi-threaded memory read bandwidth.  One buffer is allocated and written
 * once, then for t = 1..max_threads, t threads each sum a 1/t slice of it with
 * the widest loads the CPU has; gbps[t-1] gets the median over `passes` of
 * bytes / seconds / 1e9. */
typedef struct plm_bandwidth_params {
    uint64_t buffer_bytes;  /* 0 = 1 GiB; never above plm_probe_budget / 4 */
    uint32_t max_threads;   /* 0 = physical cores */
    uint32_t passes;        /* 0 = 3 */
} plm_bandwidth_params;

typedef struct plm_bandwidth_result {
    uint64_t buffer_bytes;
    uint32_t passes;
    uint32_t n;                  /* entries in gbps: thread counts 1..n */
    double gbps[PLM_PROBE_MAX_CPUS];
    double best_gbps;            /* max over gbps */
    uint32_t best_threads;
    const char *method;          /* "avx2", "neon", "scalar" */
} plm_bandwidth_result;

PLM_API plm_status plm_probe_bandwidth(const plm_bandwidth_params *params, plm_bandwidth_result *out,
                               plm_error *err);

/* Sequential read speed of a file from a cold page cache: asks the kernel
 * to drop the file's cached pages (posix_fadvise DONTNEED), checks with
 * mincore how much stayed resident, then read()s it start to end. */
typedef struct plm_file_read_result {
    uint64_t bytes;
    double seconds;
    double mbps;                /* bytes / seconds / 1e6 */
    double resident_before;     /* fraction of the file in the page cache when the read began */
    bool cache_dropped;         /* resident_before < 5%: the number is a cold read */
} plm_file_read_result;

PLM_API plm_status plm_probe_file_read(const char *path, plm_file_read_result *out, plm_error *err);
/* The same, stopping after max_bytes (0 = the whole file): a quick figure
 * for the paging speed of a file too large to read whole. */
PLM_API plm_status plm_probe_file_read_n(const char *path, uint64_t max_bytes, plm_file_read_result *out,
                                 plm_error *err);

/* ---- memory planning ----------------------------------------------------
 * The bill for running a model, computed from a GGUF header alone (a model
 * far too large for this machine can be planned on it) or from bare numbers
 * (--shape): weights by type, the KV cache, the context's scratch buffers,
 * tokenizer tables, fixed process overhead.  plm_plan_buffers holds the exact
 * size of every buffer plm_context_new allocates, so the runtime can allocate
 * from the plan and the prediction cannot drift from reality.
 *
 * peak_rss predicts VmHWM of `pocketlm run` once the context is full and a
 * whole batch has been evaluated (every buffer touched).  With mmap the weights
 * count as file-backed pages (all of them: a dense model reads every tensor
 * per token), except an untied token embedding, of which only the rows of
 * tokens seen are touched; with use_mmap false they are an anonymous copy of
 * the whole file. */

#define PLM_PLAN_MAX_TYPES 16

typedef struct plm_plan_params {
    uint32_t n_ctx;       /* 0 = min(trained, 4096), as plm_context_new */
    uint32_t n_batch;     /* 0 = 512; clamped to n_ctx */
    uint32_t n_threads;   /* 0 = plm_default_threads() */
    plm_kv_type type_k, type_v;
    bool use_mmap;        /* default true */
    bool logits_all;
    bool repack;          /* plm_model_params.repack: the interleaved copies are
                             anonymous memory, the file pages they replace are not */
} plm_plan_params;

PLM_API plm_plan_params plm_plan_default_params(void);

/* Bytes of each buffer of a context (what plm_context_new mallocs). */
typedef struct plm_plan_buffers {
    uint64_t kv_k, kv_v;          /* [n_layer][n_ctx] rows of kv_row_k / kv_row_v bytes */
    uint64_t kv_row_k, kv_row_v;  /* one token's keys / values in one layer */
    uint64_t x;                   /* [n_batch][n_embd] f32 */
    uint64_t xn;                  /* [n_batch][max(n_embd, q_dim)] f32 */
    uint64_t q;                   /* [n_batch][q_dim] f32 */
    uint64_t k, v;                /* [n_batch][kv_dim] f32 each */
    uint64_t gate, up;            /* [n_batch][max(n_ff, n_embd)] f32 each */
    uint64_t act_row;             /* bytes of one quantized activation row */
    uint64_t act;                 /* each of PLM_PLAN_ACT_SLOTS slots: [n_batch][act_row] */
    uint64_t logits;              /* [logits_all ? n_batch : 1][n_vocab] f32 */
} plm_plan_buffers;

#define PLM_PLAN_ACT_SLOTS 3

typedef struct plm_plan_weights {
    char type[12];        /* "Q4_K", or the shape quant ("Q4_K_M") */
    uint32_t n_tensors;
    uint64_t n_elements, bytes;
} plm_plan_weights;

typedef struct plm_plan {
    char arch[32], name[128];
    bool from_shape;      /* numbers only, no file */
    bool estimated_dims;  /* from_shape and some of n_embd/n_head/n_ff/n_vocab were guessed */
    plm_plan_params params;  /* resolved: n_ctx, n_batch, n_threads filled in */
    uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx_train;
    bool tied_output;     /* output matrix is token_embd */
    uint64_t n_params, n_params_active;  /* active: per token (MoE); dense = all */
    double bits_per_weight;              /* weight_bytes * 8 / n_params */
    int n_types;
    plm_plan_weights types[PLM_PLAN_MAX_TYPES];
    uint64_t weight_bytes;  /* tensor data */
    uint64_t embd_bytes;    /* token_embd.weight's share of it */
    uint64_t embd_row_bytes;
    uint64_t file_bytes;    /* the whole GGUF (= header + tensor data for a shape) */
    uint64_t header_bytes;  /* metadata and tensor table: bytes before the data */
    plm_plan_buffers buf;
    int act_slots;           /* activation slots the weights' formats use (of PLM_PLAN_ACT_SLOTS) */
    uint64_t act_used[PLM_PLAN_ACT_SLOTS]; /* bytes written per row in each slot */

    /* The bill, in resident bytes; peak_rss is the sum of the six. */
    uint64_t weights_resident;  /* mmap: file pages touched; else the anonymous copy of the file */
    uint64_t kv_bytes;          /* buf.kv_k + buf.kv_v, page-rounded */
    uint64_t scratch_bytes;     /* every other context buffer, page-rounded, and the kernels' stacks */
    uint64_t vocab_bytes;       /* tokenizer tables and the parsed metadata */
    uint64_t model_bytes;       /* layer tables, norms converted to f32, thread stacks */
    uint64_t overhead_bytes;    /* process baseline: code, libc, stack, allocator */
    uint64_t repack_bytes;      /* params.repack: the interleaved copies (anonymous; the
                                   file pages they replace leave weights_resident) */
    uint64_t repackable_bytes;  /* the file's bytes that repack would copy */
    uint64_t peak_rss;          /* the six above plus repack_bytes */
    uint64_t anon_bytes;        /* the part that cannot be paged back to the file */

    /* Traffic per generated token. */
    uint64_t decode_bytes;      /* weights read per token (active ones, one embedding row) */
    uint64_t kv_read_full;      /* KV cache read per token at a full context */
    double decode_flops;        /* 2 x active parameters + attention at a full context */
} plm_plan;

/* Plans `path` from its header (the tensor data is never read). */
PLM_API plm_status plm_plan_file(const char *path, const plm_plan_params *params, plm_plan *out,
                         plm_error *err);

/* A model that exists only as numbers: total parameters, layers, KV heads,
 * head size and a quant name from plm_plan_quants(); bits_per_weight > 0
 * overrides the quant's figure.  Zero dims are estimated (llama-like:
 * n_embd from parameters and layers, n_ff = 8/3 n_embd, n_vocab 32000). */
typedef struct plm_shape {
    double n_params;
    double n_params_active;  /* MoE: parameters used per token; 0 = dense */
    uint32_t n_layer, n_head_kv, head_dim;
    uint32_t n_embd, n_head, n_ff, n_vocab, n_ctx_train;
    const char *quant;       /* "Q4_K_M"; NULL = Q4_K_M */
    double bits_per_weight;  /* 0 = the quant's */
} plm_shape;

PLM_API plm_status plm_plan_shape(const plm_shape *shape, const plm_plan_params *params, plm_plan *out,
                          plm_error *err);

/* Recomputes a plan for another context length (weights unchanged). */
PLM_API void plm_plan_set_ctx(plm_plan *plan, uint32_t n_ctx);

/* Predicted resident bytes after `n_tokens` tokens were cached with batches
 * of at most `max_batch`, for a runtime that does not touch its buffers
 * before use (n_tokens = n_ctx, max_batch = n_batch gives peak_rss). */
PLM_API uint64_t plm_plan_rss_at(const plm_plan *plan, uint32_t n_tokens, uint32_t max_batch);

/* Whole-model quant mixtures for shapes, with the average bits per weight
 * llama.cpp's quantize reports for them (Llama-2-7B). */
typedef struct plm_quant {
    const char *name;        /* "Q4_K_M" */
    double bits_per_weight;
} plm_quant;

PLM_API const plm_quant *plm_plan_quants(int *n);  /* best quality first */
PLM_API const plm_quant *plm_plan_quant_find(const char *name);

/* ---- device profiles ---------------------------------------------------- */

typedef struct plm_device {
    char name[32];           /* "iphone-15-pro", "this" */
    char label[96];
    uint64_t ram_bytes;
    uint64_t used_bytes;     /* already in use (this machine: MemTotal - MemAvailable) */
    double app_share;        /* share of RAM one app can really use */
    double bandwidth_gbs;    /* DRAM bandwidth, GB/s (1e9 bytes) */
    double storage_gbs;      /* flash sequential read, GB/s: the mmap paging speed */
    double compute_gops;     /* CPU int8 dot-product peak, all cores, GOPS */
    bool phone;
    /* A process limit below the RAM share (plm_probe_budget, --mem-limit, the
     * app's figure): 0 = none.  The budget is the smaller of the two. */
    uint64_t limit_bytes;
    char limit_source[48];   /* which limit: "cgroup memory.max", "RLIMIT_AS", ... */
    bool limit_maps_count;   /* mapped files count against it (RLIMIT_AS): no paging */
} plm_device;

PLM_API int plm_device_count(void);
PLM_API const plm_device *plm_device_at(int i);
PLM_API const plm_device *plm_device_find(const char *name);  /* NULL when unknown */

/* This machine: RAM from /proc/meminfo; bandwidth from `bw` when given, else
 * measured with plm_probe_bandwidth.  app_share 0 = all of MemAvailable. */
typedef double (*plm_bandwidth_fn)(void *user);  /* GB/s; <= 0 on failure */
PLM_API plm_status plm_device_this(plm_device *out, plm_bandwidth_fn bw, void *user, plm_error *err);

typedef enum { PLM_FITS = 0, PLM_FITS_MMAP, PLM_NO_FIT } plm_fit;

typedef struct plm_plan_verdict {
    uint64_t budget_bytes;   /* ram x app_share - used */
    plm_fit fit;             /* FITS_MMAP: all but the file-backed weights fit; pages stream from flash */
    double decode_tps;       /* ceiling: bandwidth / bytes per token, empty context */
    double decode_tps_full;  /* ... at a full context */
    double decode_tps_paged; /* FITS_MMAP: ceiling when the weights stream from storage */
    double prefill_tps;      /* estimate: compute x efficiency / flops per token */
    uint32_t max_ctx;        /* largest context (multiple of 256) that fits; 0 = none */
    char quant_for_ctx[16];  /* best plm_plan_quants() entry that fits at this context; "" none */
    char budget_source[48];  /* what bound the budget: "RAM x app share", "cgroup memory.max", ... */
    double storage_gbs;      /* the read speed decode_tps_paged assumed */
} plm_plan_verdict;

#define PLM_PLAN_PREFILL_EFFICIENCY 0.25  /* share of peak int8 throughput a CPU matmul reaches */

PLM_API plm_status plm_plan_evaluate(const plm_plan *plan, const plm_device *dev, plm_plan_verdict *out,
                             plm_error *err);
/* "fits in RAM", "runs only by paging weights from storage", "does not fit" */
PLM_API const char *plm_fit_name(plm_fit f);

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

/* ---- living inside an app's memory --------------------------------------
 * A phone app is not given the machine's free RAM: Android puts it in a
 * per-app memory cgroup and its low-memory killer reclaims it, iOS's Jetsam
 * kills it past a per-process footprint limit.  These calls plan against the
 * process's real limit, let an app hand memory back under pressure, and keep
 * a model file that shrinks under the process from killing it. */

/* The smallest of every limit this process can see.  An app passes what its
 * OS reports, which the library cannot read itself:
 *   Android: ActivityManager.MemoryInfo.availMem (minus threshold, to stay
 *            clear of the low-memory killer), or getMemoryClass() x 1 MiB for
 *            the Java heap's own class (a floor, not the native limit);
 *   iOS:     os_proc_available_memory() (<os/proc.h>, iOS 13+): bytes left
 *            before Jetsam, already net of what the app uses.
 * The cgroup limit is counted net of the cgroup's usage less its page cache
 * (reclaimable); rlimits net of what the process already uses of them. */
typedef struct plm_mem_budget {
    uint64_t bytes;               /* the budget: the smallest limit below */
    char source[48];              /* which one: "cgroup memory.max", "RLIMIT_AS", ... */
    uint64_t available_bytes;     /* MemAvailable */
    uint64_t cgroup_limit_bytes;  /* memory.max / memory.limit_in_bytes; 0 = none */
    uint64_t cgroup_used_bytes;   /* its usage less page cache */
    char cgroup_file[256];        /* the file the limit came from */
    uint64_t rlimit_as_left;      /* RLIMIT_AS - VmSize; 0 = unlimited */
    uint64_t rlimit_data_left;    /* RLIMIT_DATA - VmData; 0 = unlimited */
    uint64_t app_limit_bytes;     /* as passed; 0 = none */
    bool maps_count;              /* bound by RLIMIT_AS: mapped weights count too */
} plm_mem_budget;

PLM_API plm_status plm_probe_budget(uint64_t app_limit_bytes, plm_mem_budget *out, plm_error *err);

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

/* Starts a sequence: tokens[0..n) are what the target context holds now
 * (the prompt just decoded).  The draft context catches up by itself. */
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
