/*
 * pocketlm planning and probing: what this device offers (cores, RAM, memory
 * bandwidth, storage speed, the process's real memory limit), the memory bill
 * of a model computed from its header alone, and whether it fits a device.
 * An app needs none of this to run a model; `pocketlm plan`, `probe` and
 * `tune` are built on it.
 */
#ifndef POCKETLM_PLAN_H
#define POCKETLM_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pocketlm.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    uint32_t n_seq;       /* sequences (server slots) the KV cache holds; 0 = 1 */
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
    uint64_t moe;                 /* Mixture-of-Experts step's buffers (0 for a dense model) */
    uint64_t attn_split;          /* a decoding token's keys split over the threads: each run's
                                     softmax stats and output (0 where they never split) */
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
    uint32_t n_swa;       /* sliding window (gemma2/3), 0 = none */
    uint32_t n_layer_swa; /* layers attending only to it: their KV cache holds the window */
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

    /* Mixture-of-Experts (0 for a dense model): experts per layer, chosen
     * per token, rows of one expert's gate/up; the weight bytes a generated
     * token reads (every tensor but the unselected experts' share). */
    uint32_t n_expert, n_expert_used, n_ff_expert;
    uint64_t weight_bytes_active;
    bool moe_quantized;         /* the experts dot quantized activations (their input buffers are written) */

    /* Speculative decoding (plm_plan_add_draft): the draft model's plan, kept
     * so a new context length recomputes both, and its share of peak_rss
     * (its weights, KV cache, buffers and tables; the target's logits for a
     * verification of draft_max + 1 tokens).  0 / NULL without a draft. */
    const struct plm_plan *draft;
    int draft_max;
    uint64_t draft_bytes;
    uint64_t draft_anon_bytes;  /* the part of draft_bytes that cannot be paged back */

    /* Which layers n_swa applies to: attention.sliding_window_pattern (the
     * family's default when the file has none), as llama.cpp reads it. */
    uint32_t swa_pattern;
} plm_plan;

/* Adds a speculative draft model to a plan: `draft` planned from its own
 * file with the same parameters; its KV cache takes the target's context
 * length (plm_plan_set_ctx moves both), the process overhead counts once.
 * The plan keeps the pointer: `draft` must outlive it. */
PLM_API plm_status plm_plan_add_draft(plm_plan *target, const plm_plan *draft, int draft_max, plm_error *err);

/* Plans `path` from its header (the tensor data is never read). */
/* Whether the row-interleaved layout (plm_model_params.repack) measured no
 * slower end to end for the plan's main format (most weight bytes) with the
 * kernels this process runs (PLM_KERNELS counts): Q4_0 everywhere; with the
 * AVX-512 VNNI kernels, every format they repack (Q8_0, Q4_K, Q5_K, Q6_K,
 * IQ4_NL, IQ4_XS): since the copies sit in huge pages, decode of Q4_K_M
 * files measured 1.3-2x the file layout, Q8_0 equal or better, batches of
 * 4-8 tokens 1.3-2x (docs/BENCHMARKS.md, 2026-12-02).  AVX2's Q4_K_M and
 * Q8_0 measured no gain: repacked only on request.  The tools repack by
 * default when this holds and the bill allows. */
PLM_API bool plm_plan_repack_pays(const plm_plan *plan);

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

/* ---- the process's memory limit ----------------------------------------
 * What a phone app may really use, for the planner's budget (see
 * "living inside an app's memory" in pocketlm.h). */

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

#ifdef __cplusplus
}
#endif
#endif
