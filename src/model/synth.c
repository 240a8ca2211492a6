/*
 * Synthetic models: a GGUF with the exact tensor names, shapes, types and
 * hyperparameters llama.cpp's converter writes for a real model, filled with
 * random weights.  It is for benchmarks and memory planning, where only the
 * shapes matter: a 7B model can be measured without downloading one.
 *
 * The tensors and hyperparameter keys are the architecture descriptor's
 * (model/arch/): every required tensor of its tables, in their order, and
 * the output matrix unless the shape ties it; every key it lists.
 *
 * Weights (deterministic functions of the seed, the tensor's index and the
 * element's position; not of the thread count), by the table's kind:
 *   norms (attn_norm, ffn_norm, output_norm)  exactly 1.0, F32
 *   biases (qwen2 attn_q/k/v.bias)            N(0, 0.02), F32
 *   token_embd.weight                         N(0, 0.1)
 *   every other matrix                        N(0, 0.02)
 * Matrices are F16 (general.file_type 1) or, with params->f32, F32 (0).
 * Normals come from Box-Muller on xoshiro256**; each run of CHUNK elements
 * has its own generator, so chunks are produced in parallel and a tensor
 * never needs more memory than the writer's buffer for it.
 *
 * The vocabulary (every tokenizer.* key) is copied from another GGUF and its
 * token count sets n_vocab, so the embedding and output matrices match it.
 *
 * Hyperparameters are the models' config.json values.  The Qwen2.5 shapes use
 * the -Instruct configs (context 32768; the 1.5B and 7B base configs say
 * 131072).  Llama 3.2's llama3 RoPE scaling is written as the converter
 * writes it: a rope_freqs.weight tensor computed from config.json's
 * rope_scaling (factor 32, low/high_freq_factor 1/4, original 8192).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/rng.h"
#include "gguf/gguf_internal.h"
#include "model/arch.h"
#include "pocketlm_gguf.h"
#include "pocketlm_tools.h"
#include "quant/fp16.h"
#include "quant/types.h"

/* Llama 3.1+'s rope_scaling in config.json ("rope_type": "llama3"), from
 * which the converter computes rope_freqs.weight; factor 0 = none. */
typedef struct llama3_rope {
    float factor, low_freq_factor, high_freq_factor;
    uint32_t original_ctx;
} llama3_rope;
#define NO_LLAMA3 {0, 0, 0, 0}

/* Granite's multipliers (config.json embedding_multiplier,
 * residual_multiplier, attention_multiplier, logits_scaling). */
typedef struct granite_scales {
    float embedding, residual, attention, logit;
} granite_scales;
#define NO_GRANITE {1, 1, 0, 1}

/* What the newer families add (config.json): the sliding window, the
 * windowed layers' RoPE base and the soft-caps (gemma), linear RoPE
 * scaling (gemma-3-4b's global layers), and LongRoPE's original context
 * (phi3 128k: rope_factors_long/short and their attention factor).  A
 * window on a llama shape is written as Mistral's converter writes it
 * (llama.attention.sliding_window), which llama.cpp ignores. */
typedef struct synth_extra {
    uint32_t window;
    float rope_base_swa, attn_softcap, final_softcap, rope_linear;
    uint32_t longrope_orig_ctx;
    uint32_t swa_pattern;  /* attention.sliding_window_pattern, written when > 0 (the
                              converters write none for gemma2/3: the family's default) */
} synth_extra;
#define NO_EXTRA {0, 0, 0, 0, 0, 0, 0}

typedef struct synth_shape {
    const char *name;
    const plm_arch *arch;
    uint32_t n_layer, n_embd, n_head, n_head_kv, n_ff, n_ctx;
    float rope_theta, rms_eps;
    bool tied;         /* output shares token_embd: no output.weight */
    uint32_t head_dim; /* attention.key_length; 0: n_embd / n_head */
    llama3_rope llama3;
    granite_scales granite;
    synth_extra extra;
} synth_shape;

/* Real models first; the "test-" shapes are tiny, for the unit tests. */
static const synth_shape shapes[] = {
    {"tinyllama-1.1b", &plm_arch_llama, 22, 2048, 32, 4, 5632, 2048, 10000.0f, 1e-5f, false, 0, NO_LLAMA3,
     NO_GRANITE, NO_EXTRA},
    {"llama-3.2-1b", &plm_arch_llama, 16, 2048, 32, 8, 8192, 131072, 500000.0f, 1e-5f, true, 0, {32, 1, 4, 8192},
     NO_GRANITE, NO_EXTRA},
    {"llama-3.2-3b", &plm_arch_llama, 28, 3072, 24, 8, 8192, 131072, 500000.0f, 1e-5f, true, 0, {32, 1, 4, 8192},
     NO_GRANITE, NO_EXTRA},
    {"qwen2.5-0.5b", &plm_arch_qwen2, 24, 896, 14, 2, 4864, 32768, 1000000.0f, 1e-6f, true, 0, NO_LLAMA3,
     NO_GRANITE, NO_EXTRA},
    {"qwen2.5-1.5b", &plm_arch_qwen2, 28, 1536, 12, 2, 8960, 32768, 1000000.0f, 1e-6f, true, 0, NO_LLAMA3,
     NO_GRANITE, NO_EXTRA},
    {"qwen2.5-7b", &plm_arch_qwen2, 28, 3584, 28, 4, 18944, 32768, 1000000.0f, 1e-6f, false, 0, NO_LLAMA3,
     NO_GRANITE, NO_EXTRA},
    {"qwen3-0.6b", &plm_arch_qwen3, 28, 1024, 16, 8, 3072, 40960, 1000000.0f, 1e-6f, true, 128, NO_LLAMA3,
     NO_GRANITE, NO_EXTRA},
    {"qwen3-1.7b", &plm_arch_qwen3, 28, 2048, 16, 8, 6144, 40960, 1000000.0f, 1e-6f, true, 128, NO_LLAMA3,
     NO_GRANITE, NO_EXTRA},
    {"qwen3-4b", &plm_arch_qwen3, 36, 2560, 32, 8, 9728, 40960, 1000000.0f, 1e-6f, true, 128, NO_LLAMA3,
     NO_GRANITE, NO_EXTRA},
    {"qwen3-8b", &plm_arch_qwen3, 36, 4096, 32, 8, 12288, 40960, 1000000.0f, 1e-6f, false, 128, NO_LLAMA3,
     NO_GRANITE, NO_EXTRA},
    {"granite-3.1-2b", &plm_arch_granite, 40, 2048, 32, 8, 8192, 131072, 5000000.0f, 1e-5f, true, 0, NO_LLAMA3,
     {12.0f, 0.22f, 0.015625f, 8.0f}, NO_EXTRA},
    {"phi-3-mini-4k", &plm_arch_phi3, 32, 3072, 32, 32, 8192, 4096, 10000.0f, 1e-5f, false, 0, NO_LLAMA3,
     NO_GRANITE, NO_EXTRA},
    {"phi-3.5-mini", &plm_arch_phi3, 32, 3072, 32, 32, 8192, 131072, 10000.0f, 1e-5f, false, 0, NO_LLAMA3, NO_GRANITE,
     {0, 0, 0, 0, 0, 4096, 0}},
    {"gemma-2-2b", &plm_arch_gemma2, 26, 2304, 8, 4, 9216, 8192, 10000.0f, 1e-6f, true, 256, NO_LLAMA3, NO_GRANITE,
     {4096, 10000.0f, 50.0f, 30.0f, 0, 0, 0}},
    {"gemma-3-1b", &plm_arch_gemma3, 26, 1152, 4, 1, 6912, 32768, 1000000.0f, 1e-6f, true, 256, NO_LLAMA3, NO_GRANITE,
     {512, 10000.0f, 0, 0, 0, 0, 0}},
    {"gemma-3-4b", &plm_arch_gemma3, 34, 2560, 8, 4, 10240, 131072, 1000000.0f, 1e-6f, true, 256, NO_LLAMA3,
     NO_GRANITE, {1024, 10000.0f, 0, 0, 8.0f, 0, 0}},
    {"test-llama-tiny", &plm_arch_llama, 2, 64, 4, 2, 128, 256, 10000.0f, 1e-5f, false, 0, NO_LLAMA3,
     NO_GRANITE, NO_EXTRA},
    {"test-qwen2-tiny", &plm_arch_qwen2, 2, 64, 4, 2, 128, 256, 1000000.0f, 1e-6f, true, 0, NO_LLAMA3,
     NO_GRANITE, NO_EXTRA},
    /* tied as Llama 3.2, with llama3 RoPE factors that matter within a few dozen
     * positions: most of its 16 frequency pairs are slowed by 8 */
    {"test-llama3-tiny", &plm_arch_llama, 2, 256, 8, 2, 512, 256, 10000.0f, 1e-5f, true, 0, {8, 1, 4, 64},
     NO_GRANITE, NO_EXTRA},
    /* scales chosen so that each one moves the logits well past the
     * tolerances, and logits divided by 0.5 stay spread out */
    {"test-granite-tiny", &plm_arch_granite, 2, 256, 8, 2, 512, 256, 10000.0f, 1e-5f, true, 0, NO_LLAMA3,
     {3.0f, 0.5f, 0.05f, 0.5f}, NO_EXTRA},
    {"test-phi3-tiny", &plm_arch_phi3, 2, 256, 8, 2, 512, 256, 10000.0f, 1e-5f, true, 0, NO_LLAMA3,
     NO_GRANITE, NO_EXTRA},
    /* head_dim 64 with n_embd 256 / 8 heads: q_dim != n_embd, as in Qwen3; rows of 256 for K-quants */
    {"test-qwen3-tiny", &plm_arch_qwen3, 2, 256, 8, 2, 512, 256, 1000000.0f, 1e-6f, true, 64, NO_LLAMA3,
     NO_GRANITE, NO_EXTRA},
    /* Mixture-of-Experts (their experts: moe_shapes below) */
    {"qwen3-30b-a3b", &plm_arch_qwen3moe, 48, 2048, 32, 4, 6144, 40960, 1000000.0f, 1e-6f, false, 128, NO_LLAMA3, NO_GRANITE,
     NO_EXTRA},
    {"mixtral-8x7b", &plm_arch_llama_moe, 32, 4096, 32, 8, 14336, 32768, 1000000.0f, 1e-5f, false, 0, NO_LLAMA3, NO_GRANITE,
     NO_EXTRA},
    /* rows of 256 for K-quants; tied, so that the logits spread out (see test-llama-tiny) */
    {"test-qwen3moe-tiny", &plm_arch_qwen3moe, 2, 256, 8, 2, 512, 256, 1000000.0f, 1e-6f, true, 64, NO_LLAMA3, NO_GRANITE,
     NO_EXTRA},
    {"test-mixtral-tiny", &plm_arch_llama_moe, 2, 256, 8, 2, 512, 256, 1000000.0f, 1e-5f, true, 0, NO_LLAMA3, NO_GRANITE,
     NO_EXTRA},
    /* experts of 512 KiB (F16) each, far above the kernel's 64 KiB fault-around:
     * which experts' pages a run touches shows in its RSS (test_plan) */
    {"test-qwen3moe-pages", &plm_arch_qwen3moe, 1, 512, 8, 2, 512, 256, 1000000.0f, 1e-6f, true, 64, NO_LLAMA3, NO_GRANITE,
     NO_EXTRA},
    /* Mistral-style: a window of 8 that llama.cpp ignores for llama */
    {"test-mistral-tiny", &plm_arch_llama, 2, 256, 8, 2, 512, 256, 10000.0f, 1e-5f, true, 0, NO_LLAMA3, NO_GRANITE,
     {8, 0, 0, 0, 0, 0, 0}},
    /* LongRoPE beyond an original context of 512 (above the 256 llama.cpp
     * pads a small context to): factors that differ between long and
     * short; attention factor sqrt(1 + ln 16 / ln 512) */
    {"test-phi3-longrope-tiny", &plm_arch_phi3, 2, 256, 8, 2, 512, 8192, 10000.0f, 1e-5f, true, 0, NO_LLAMA3,
     NO_GRANITE, {0, 0, 0, 0, 0, 512, 0}},
    /* gemma2: window 8 on layer 0 (layer 1 global), soft-caps small enough
     * to bend the scores and the logits */
    {"test-gemma2-tiny", &plm_arch_gemma2, 2, 256, 4, 2, 512, 256, 10000.0f, 1e-6f, true, 64, NO_LLAMA3, NO_GRANITE,
     {8, 10000.0f, 0.1f, 5.0f, 0, 0, 0}},
    /* gemma3: 7 layers so that one (5) is global; window 8; local RoPE base 10000, global 1e6 */
    {"test-gemma3-tiny", &plm_arch_gemma3, 7, 256, 4, 2, 512, 256, 1000000.0f, 1e-6f, true, 64, NO_LLAMA3, NO_GRANITE,
     {8, 10000.0f, 0, 0, 0, 0, 0}},
    /* gemma3 with attention.sliding_window_pattern 3 (layers 2 and 5 global,
     * where the default 6 makes only 5 global) */
    {"test-gemma3-pattern-tiny", &plm_arch_gemma3, 6, 256, 4, 2, 512, 256, 1000000.0f, 1e-6f, true, 64, NO_LLAMA3,
     NO_GRANITE, {8, 10000.0f, 0, 0, 0, 0, 3}},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

static const char *const shape_names[N_SHAPES + 1] = {
    "tinyllama-1.1b", "llama-3.2-1b", "llama-3.2-3b", "qwen2.5-0.5b",
    "qwen2.5-1.5b", "qwen2.5-7b", "qwen3-0.6b", "qwen3-1.7b", "granite-3.1-2b", "phi-3-mini-4k",
    "test-llama-tiny", "test-qwen2-tiny", "test-llama3-tiny", "test-granite-tiny", "test-phi3-tiny",
    "test-qwen3-tiny", "qwen3-30b-a3b", "mixtral-8x7b", "test-qwen3moe-tiny", "test-mixtral-tiny",
    "test-qwen3moe-pages", "phi-3.5-mini", "gemma-2-2b", "gemma-3-1b", "gemma-3-4b", "test-mistral-tiny",
    "test-phi3-longrope-tiny", "test-gemma2-tiny", "test-gemma3-tiny", "test-gemma3-pattern-tiny", "qwen3-4b",
    "qwen3-8b", NULL,
};

/* The experts of the Mixture-of-Experts shapes (config.json's
 * num_experts / num_local_experts, num_experts_per_tok and
 * moe_intermediate_size; 0: as wide as n_ff, Mixtral's). */
typedef struct synth_moe {
    const char *shape;
    uint32_t n_expert, n_expert_used, n_ff_expert;
} synth_moe;

static const synth_moe moe_shapes[] = {
    {"qwen3-30b-a3b", 128, 8, 768},
    {"mixtral-8x7b", 8, 2, 0},
    /* 16 experts, 4 chosen: the expert_count == 8 quantization rules do not apply */
    {"test-qwen3moe-tiny", 16, 4, 256},
    /* 8 experts: llama.cpp's quantizer treats attn_v, attn_k, attn_output as for Mixtral-8x7B */
    {"test-mixtral-tiny", 8, 2, 0},
    {"test-qwen3moe-pages", 64, 4, 512},
};

static void shape_experts(const synth_shape *sh, plm_hparams *hp) {
    for (size_t i = 0; i < sizeof moe_shapes / sizeof moe_shapes[0]; i++)
        if (!strcmp(moe_shapes[i].shape, sh->name)) {
            hp->n_expert = (int)moe_shapes[i].n_expert;
            hp->n_expert_used = (int)moe_shapes[i].n_expert_used;
            hp->n_ff_expert = (int)(moe_shapes[i].n_ff_expert ? moe_shapes[i].n_ff_expert : sh->n_ff);
        }
}

const char *const *plm_synth_shapes(void) { return shape_names; }

/* ---- tensor table ---------------------------------------------------------- */

typedef struct synth_tensor {
    char name[64];
    uint32_t type;  /* PLM_TYPE_F32 / PLM_TYPE_F16 */
    uint32_t n_dims;
    uint64_t ne[3];
    plm_tensor_kind init;
} synth_tensor;

typedef struct synth_job {
    const synth_shape *shape;
    const plm_hparams *hp;
    const synth_tensor *tensors;
    uint64_t n_tensors;
    uint64_t seed;
    int n_threads;
    float layer_scale;  /* multiplies PLM_T_MATRIX's deviation in the layers (not output.weight) */
} synth_job;

/* Elements generated by one generator; even, so Box-Muller pairs align. */
#define CHUNK ((uint64_t)1 << 16)
#define SUB 1024

static float init_std(plm_tensor_kind k) {
    return k == PLM_T_EMBEDDING ? 0.1f : 0.02f;
}

/* Writes elements [c*CHUNK, c*CHUNK + n) of tensor `index` into dst (already
 * offset to that chunk), as F32 or F16. */
static void fill_chunk(const synth_job *job, uint64_t index, uint64_t c, void *dst, uint64_t n) {
    const synth_tensor *t = &job->tensors[index];
    uint64_t x = job->seed ^ (index * 0xD1B54A32D192ED03ull) ^ (c * 0x8CB92BA72F3D8DD7ull);
    uint64_t s[4];
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);
    const bool in_layer = !strncmp(t->name, "blk.", 4);
    const float sd = init_std(t->init) * (in_layer && t->init == PLM_T_MATRIX ? job->layer_scale : 1.0f);
    float buf[SUB];
    for (uint64_t done = 0; done < n; done += SUB) {
        uint64_t m = n - done < SUB ? n - done : SUB;
        for (uint64_t i = 0; i < m; i += 2) {
            uint64_t r = xoshiro_next(s);
            float u1 = (float)((r >> 40) + 1) * 0x1p-24f;      /* (0, 1] */
            float u2 = (float)(r & 0xFFFFFFu) * 0x1p-24f;       /* [0, 1) */
            float rad = sd * sqrtf(-2.0f * logf(u1));
            float a = 6.28318530717958647692f * u2;
            buf[i] = rad * cosf(a);
            if (i + 1 < m) buf[i + 1] = rad * sinf(a);
        }
        if (t->type == PLM_TYPE_F16)
            plm_fp32_to_fp16_row(buf, (plm_fp16_t *)dst + done, (int64_t)m);
        else
            memcpy((float *)dst + done, buf, m * sizeof(float));
    }
}

typedef struct fill_worker {
    const synth_job *job;
    uint64_t index;
    void *dst;
    uint64_t n;        /* elements */
    size_t elem_size;
    int ith, nth;
} fill_worker;

static void *fill_worker_run(void *arg) {
    const fill_worker *w = arg;
    uint64_t n_chunks = (w->n + CHUNK - 1) / CHUNK;
    for (uint64_t c = (uint64_t)w->ith; c < n_chunks; c += (uint64_t)w->nth) {
        uint64_t start = c * CHUNK;
        uint64_t m = w->n - start < CHUNK ? w->n - start : CHUNK;
        fill_chunk(w->job, w->index, c, (char *)w->dst + start * w->elem_size, m);
    }
    return NULL;
}

/* rope_freqs.weight as llama.cpp's converter computes it for "llama3"
 * scaling: high frequencies (wavelength below original_ctx /
 * high_freq_factor) kept, low ones (above original_ctx / low_freq_factor)
 * slowed by `factor`, and a smooth blend between. */
static void llama3_factors(const llama3_rope *r, const plm_hparams *hp, float *out, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        const double freq = 1.0 / pow(hp->rope_freq_base, (double)(2 * i) / hp->n_rot);
        const double wavelen = 2 * M_PI / freq;
        const double low_wavelen = r->original_ctx / r->low_freq_factor;
        const double high_wavelen = r->original_ctx / r->high_freq_factor;
        if (wavelen < high_wavelen) {
            out[i] = 1.0f;
        } else if (wavelen > low_wavelen) {
            out[i] = r->factor;
        } else {
            const double smooth = (r->original_ctx / wavelen - r->low_freq_factor) /
                                  (r->high_freq_factor - r->low_freq_factor);
            out[i] = (float)(1.0 / ((1 - smooth) / r->factor + smooth));
        }
    }
}

/* LongRoPE's factors, one per rotated pair: 1 for the fastest pair rising
 * to 1.5 (short) or to 40 (long) for the slowest, the shape of Phi-3.5's. */
static void longrope_factors(bool long_ctx, float *out, uint64_t n) {
    const float top = long_ctx ? 40.0f : 1.5f;
    for (uint64_t i = 0; i < n; i++) out[i] = 1.0f + (top - 1.0f) * (float)i / (float)(n > 1 ? n - 1 : 1);
}

static bool is_longrope(const char *name) { return !strncmp(name, "rope_factors_", 13); }

static plm_status synth_fill(void *user, uint64_t index, void *dst, uint64_t nbytes, plm_error *err) {
    const synth_job *job = user;
    if (index >= job->n_tensors)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "synth: no tensor %llu", (unsigned long long)index);
    const synth_tensor *t = &job->tensors[index];
    size_t esize = t->type == PLM_TYPE_F16 ? 2 : 4;
    uint64_t n = t->ne[0] * t->ne[1] * t->ne[2];
    if (nbytes != n * esize)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "synth: %s: writer asks %llu bytes, expected %llu",
                        t->name, (unsigned long long)nbytes, (unsigned long long)(n * esize));
    if (t->init == PLM_T_ROPE_FACTORS) {
        if (is_longrope(t->name)) longrope_factors(!strcmp(t->name, "rope_factors_long.weight"), dst, n);
        else llama3_factors(&job->shape->llama3, job->hp, dst, n);
        return PLM_OK;
    }
    if (t->init == PLM_T_NORM) {
        float *f = dst;
        for (uint64_t i = 0; i < n; i++) f[i] = 1.0f;
        return PLM_OK;
    }
    uint64_t n_chunks = (n + CHUNK - 1) / CHUNK;
    int nth = job->n_threads;
    if ((uint64_t)nth > n_chunks) nth = (int)n_chunks;
    if (nth < 1) nth = 1;
    if (nth > 64) nth = 64;
    fill_worker w[64];
    pthread_t th[64];
    bool started[64] = {false};
    for (int i = 0; i < nth; i++) w[i] = (fill_worker){job, index, dst, n, esize, i, nth};
    for (int i = 1; i < nth; i++) started[i] = pthread_create(&th[i], NULL, fill_worker_run, &w[i]) == 0;
    fill_worker_run(&w[0]);
    for (int i = 1; i < nth; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else fill_worker_run(&w[i]);  /* no thread: do its share here */
    }
    return PLM_OK;
}

/* The shape's hyperparameters, as the descriptor's keys name them. */
static plm_hparams shape_hparams(const synth_shape *sh, uint64_t n_vocab) {
    plm_hparams hp = {0};
    hp.n_vocab = (int)n_vocab;
    hp.n_layer = (int)sh->n_layer;
    hp.n_embd = (int)sh->n_embd;
    hp.n_head = (int)sh->n_head;
    hp.n_head_kv = (int)sh->n_head_kv;
    hp.head_dim = hp.head_dim_v = hp.n_rot = (int)(sh->head_dim ? sh->head_dim : sh->n_embd / sh->n_head);
    hp.n_ff = (int)sh->n_ff;
    hp.n_ctx_train = (int)sh->n_ctx;
    hp.rms_eps = sh->rms_eps;
    hp.rope_freq_base = sh->rope_theta;
    hp.embd_scale = sh->granite.embedding;
    hp.residual_scale = sh->granite.residual;
    hp.attn_scale = sh->granite.attention;
    hp.logit_scale = sh->granite.logit;
    hp.n_swa = (int)sh->extra.window;
    hp.swa_pattern = (int)sh->extra.swa_pattern;
    hp.rope_freq_base_swa = sh->extra.rope_base_swa;
    hp.attn_softcap = sh->extra.attn_softcap;
    hp.final_softcap = sh->extra.final_softcap;
    hp.n_ctx_orig = (int)(sh->extra.longrope_orig_ctx ? sh->extra.longrope_orig_ctx : sh->n_ctx);
    /* as the converter computes it for LongRoPE ("su"/"longrope") */
    const double scale = (double)sh->n_ctx / hp.n_ctx_orig;
    hp.rope_attn_factor = scale > 1.0 ? (float)sqrt(1.0 + log(scale) / log((double)hp.n_ctx_orig)) : 1.0f;
    return hp;
}

static void add_tensor(synth_tensor *list, uint64_t *n, const plm_tensor_spec *spec, int il,
                       const plm_hparams *hp, uint32_t wtype) {
    synth_tensor *t = &list[(*n)++];
    snprintf(t->name, sizeof t->name, spec->name, il);
    const bool vector = spec->ne1 == PLM_DIM_NONE;
    const int64_t experts = plm_dim_experts(hp, spec->ne1);
    /* the converter writes the MoE router in F32 whatever the output type */
    t->type = vector || spec->kind == PLM_T_ROUTER ? PLM_TYPE_F32 : wtype;
    t->n_dims = vector ? 1 : experts ? 3 : 2;
    t->ne[0] = (uint64_t)plm_dim_size(hp, spec->ne0);
    t->ne[1] = (uint64_t)plm_dim_size(hp, spec->ne1);
    t->ne[2] = experts ? (uint64_t)experts : 1;
    t->init = spec->kind;
}

/* Whether a shape's file has this table entry: the required ones, and the
 * output matrix unless the shape ties it. */
static bool shape_has(const synth_shape *sh, const plm_tensor_spec *spec) {
    if (spec->kind == PLM_T_ROPE_FACTORS)
        return is_longrope(spec->name) ? sh->extra.longrope_orig_ctx > 0 : sh->llama3.factor > 0;
    return spec->need == PLM_REQUIRED || (spec->need == PLM_TIED && !sh->tied);
}

/* The tensors in the order of the descriptor's tables, which is the order
 * llama.cpp's converter writes them. */
static uint64_t build_tensors(const synth_shape *sh, const plm_hparams *hp, uint32_t wtype, synth_tensor *list) {
    uint64_t n = 0;
    for (const plm_tensor_spec *t = sh->arch->globals; t->name; t++)
        if (shape_has(sh, t)) add_tensor(list, &n, t, 0, hp, wtype);
    for (int il = 0; il < hp->n_layer; il++)
        for (const plm_tensor_spec *t = sh->arch->layer; t->name; t++)
            if (shape_has(sh, t)) add_tensor(list, &n, t, il, hp, wtype);
    return n;
}

static uint64_t max_tensors(const synth_shape *sh) {
    uint64_t n_global = 0, n_layer = 0;
    for (const plm_tensor_spec *t = sh->arch->globals; t->name; t++) n_global++;
    for (const plm_tensor_spec *t = sh->arch->layer; t->name; t++) n_layer++;
    return n_global + sh->n_layer * n_layer;
}

static bool arch_has_key(const plm_arch *arch, const char *key) {
    for (const plm_hp_key *k = arch->hparams; k->key; k++)
        if (!strcmp(k->key, key)) return true;
    return false;
}

/* Keys outside the descriptor's table: linear RoPE scaling, and a window
 * the family does not read (Mistral's, for llama). */
static void write_extra(plm_gguf_writer *w, const synth_shape *sh) {
    char key[128];
    const char *arch = sh->arch->name;
    if (sh->extra.window && !arch_has_key(sh->arch, "attention.sliding_window")) {
        snprintf(key, sizeof key, "%s.attention.sliding_window", arch);
        plm_gguf_writer_set_u32(w, key, sh->extra.window);
    }
    if (sh->extra.rope_linear > 0) {
        snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
        plm_gguf_writer_set_str(w, key, "linear");
        snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
        plm_gguf_writer_set_f32(w, key, sh->extra.rope_linear);
    }
}

/* Every hyperparameter key of the descriptor, with the shape's value; the
 * window pattern only when the shape sets one (the converters leave it out). */
static void write_hparams(plm_gguf_writer *w, const plm_arch *arch, const plm_hparams *hp) {
    char key[128];
    for (const plm_hp_key *k = arch->hparams; k->key; k++) {
        if (k->offset == offsetof(plm_hparams, swa_pattern) && hp->swa_pattern <= 0) continue;
        snprintf(key, sizeof key, "%s.%s", arch->name, k->key);
        const void *field = (const char *)hp + k->offset;
        if (k->kind == PLM_HP_F32) plm_gguf_writer_set_f32(w, key, *(const float *)field);
        else plm_gguf_writer_set_u32(w, key, (uint32_t)*(const int *)field);
    }
    snprintf(key, sizeof key, "%s.vocab_size", arch->name);
    plm_gguf_writer_set_u32(w, key, (uint32_t)hp->n_vocab);
}

static bool starts_with(plm_gguf_str s, const char *prefix) {
    size_t n = strlen(prefix);
    return s.len >= n && !memcmp(s.ptr, prefix, n);
}

static int n_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

static plm_status synth_write(const plm_synth_params *params, uint32_t n_layer, float layer_scale, bool sparse,
                              plm_error *err);

plm_status plm_synth(const plm_synth_params *params, plm_error *err) { return synth_write(params, 0, 1.0f, false, err); }

plm_status plm_synth_ex(const plm_synth_params *params, uint32_t n_layer, float layer_scale, plm_error *err) {
    return synth_write(params, n_layer, layer_scale, false, err);
}

plm_status plm_synth_sparse(const plm_synth_params *params, plm_error *err) {
    return synth_write(params, 0, 1.0f, true, err);
}

static plm_status synth_write(const plm_synth_params *params, uint32_t n_layer, float layer_scale, bool sparse,
                              plm_error *err) {
    plm_error_clear(err);
    if (!params || !params->shape || !params->vocab_path || !params->out_path)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "synth: shape, vocab path and output path are required");
    const synth_shape *sh = NULL;
    for (size_t i = 0; i < N_SHAPES; i++)
        if (!strcmp(shapes[i].name, params->shape)) sh = &shapes[i];
    if (!sh) {
        char list[256] = "";
        for (size_t i = 0; i < N_SHAPES; i++) {
            size_t len = strlen(list);
            snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", shapes[i].name);
        }
        return plm_fail(err, PLM_ERR_INVALID_ARG, "unknown shape '%s' (known: %s)", params->shape, list);
    }

    plm_error verr;
    plm_gguf_open_params op = {true, false};
    plm_gguf_file *vocab = plm_gguf_open(params->vocab_path, &op, &verr);
    if (!vocab)
        return plm_fail(err, verr.code, "vocabulary: %s", verr.message);
    const plm_gguf_array *tokens = plm_gguf_get_arr(vocab, "tokenizer.ggml.tokens");
    if (!tokens || tokens->type != PLM_GGUF_TYPE_STRING || tokens->n == 0 || tokens->n > INT32_MAX) {
        plm_gguf_close(vocab);
        return plm_fail(err, PLM_ERR_FORMAT, "vocabulary %s: no tokenizer.ggml.tokens string array",
                        params->vocab_path);
    }
    uint64_t n_vocab = tokens->n;
    synth_shape shape = *sh;  /* with the caller's layer count */
    if (n_layer) shape.n_layer = n_layer;
    sh = &shape;

    uint32_t wtype = params->f32 ? PLM_TYPE_F32 : PLM_TYPE_F16;
    synth_tensor *list = calloc(max_tensors(sh), sizeof *list);
    plm_gguf_writer *w = plm_gguf_writer_new();
    if (!list || !w) {
        free(list);
        plm_gguf_writer_free(w);
        plm_gguf_close(vocab);
        return plm_fail(err, PLM_ERR_NOMEM, "synth: out of memory");
    }
    plm_hparams hp = shape_hparams(sh, n_vocab);
    shape_experts(sh, &hp);
    uint64_t n_tensors = build_tensors(sh, &hp, wtype, list);

    char name[128];
    snprintf(name, sizeof name, "synthetic %s", sh->name);
    plm_gguf_writer_set_str(w, "general.architecture", sh->arch->name);
    plm_gguf_writer_set_str(w, "general.type", "model");
    plm_gguf_writer_set_str(w, "general.name", name);
    write_hparams(w, sh->arch, &hp);
    write_extra(w, sh);
    plm_gguf_writer_set_u32(w, "general.file_type", params->f32 ? 0 : 1);
    plm_gguf_writer_set_u32(w, "general.quantization_version", 2);
    for (uint64_t i = 0; i < vocab->n_kv; i++)
        if (starts_with(vocab->kv[i].key, "tokenizer.")) plm_gguf_writer_copy_kv(w, &vocab->kv[i]);
    for (uint64_t i = 0; i < n_tensors; i++)
        plm_gguf_writer_add_tensor(w, list[i].name, list[i].type, list[i].n_dims, list[i].ne, NULL);

    synth_job job = {sh, &hp, list, n_tensors, params->seed, n_cpus(), layer_scale > 0.0f ? layer_scale : 1.0f};
    plm_status st = sparse ? plm_gguf_writer_write_sparse(w, params->out_path, err)
                                   : plm_gguf_writer_write(w, params->out_path, synth_fill, &job, err);
    plm_gguf_writer_free(w);
    free(list);
    plm_gguf_close(vocab);
    return st;
}
