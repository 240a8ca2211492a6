/*
 * The forward pass of the decoder-only transformers the descriptors in
 * model/arch/ describe (llama, qwen2, qwen3, granite, phi3, gemma2, gemma3):
 *
 *   x = embed(tokens) * embd_scale                       (gemma: sqrt(n_embd))
 *   for each layer:
 *       attention step:  h = rmsnorm(x) * attn_norm
 *                        q, k, v = Wq h (+bq), Wk h (+bk), Wv h (+bv)
 *                        q, k = per-head rmsnorm (qwen3, gemma3);  rope(q, k)
 *                               (the layer's base and scale; / rope_freqs or LongRoPE's factors)
 *                        y = Wo attention(q, cache(k), cache(v))
 *                               (causal, grouped-query, scores x attn_scale, soft-capped
 *                                (gemma2), over the layer's window if it has one)
 *                        x += residual_scale * rmsnorm(y) * post_attn_norm   (norm: gemma)
 *       FFN step:        h = rmsnorm(x) * ffn_norm
 *                        y = Wdown (act(Wgate h) * Wup h)   (act: SiLU, or GELU for gemma; dense)
 *                            or the routed experts' sum of the same (MoE: model/moe.c)
 *                        x += residual_scale * rmsnorm(y) * post_ffn_norm    (norm: gemma)
 *   logits = Woutput (rmsnorm(x) * output_norm) / logit_scale, soft-capped (gemma2)
 *
 * The scales are granite's (1 elsewhere); phi3's fused matrices are bound as
 * their parts (bind.c), so they need no step of their own.
 *
 * The descriptor selects the steps and their options (RoPE style, biases
 * present or not); plm_forward_check refuses the options not written yet.
 * Each line is one step over all the batch's tokens, split over the thread
 * pool, with the passes fused where that saves a trip through memory: the
 * rmsnorm and the quantization of its output (row by row, still in L1),
 * Q/K/V as one step, gate/up/SiLU as one step.
 *
 * `ctx` in this file is the forward state (model/forward.h): model, KV
 * cache, scratch, kernels and pool; not a runtime context.
 */
#include "model/forward.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/chunks.h"
#include "core/error.h"
#include "kernels/attn_quant.h"
#include "kernels/ops.h"
#include "model/moe.h"
#include "quant/fp16.h"
#include "quant/repack.h"

/* The first choice of the descriptor this file has no step for, or NULL.
 * The families of issue 9 each remove a line here as they add the step. */
static const char *unimplemented(const plm_arch *a) {
    if (a->norm != PLM_NORM_RMS) return "a norm other than RMSNorm";
    if (a->act != PLM_ACT_SILU && a->act != PLM_ACT_GELU_TANH) return "this FFN activation";
    return NULL;
}

plm_status plm_forward_check(const plm_arch *a, plm_error *err) {
    const char *missing = unimplemented(a);
    if (!missing) return PLM_OK;
    return plm_fail(err, PLM_ERR_UNSUPPORTED, "architecture '%s' needs %s, which this build does not implement",
                    a->name, missing);
}

enum { MAX_JOB_WEIGHTS = 3, ROW_ALIGN = 16, MAX_PAIRS = 256 };
/* Chunks of repacked matrices must be whole row groups. */
_Static_assert(ROW_ALIGN % PLM_REPACK_ROWS == 0, "row chunks split repacked groups");

/* One step of matrix products: up to three weights reading the same input
 * rows (Q, K, V or gate, up), their rows handed out to threads in chunks. */
typedef struct matmul_job {
    const plm_kernels *kt;
    int n_w;
    const plm_weight *w[MAX_JOB_WEIGHTS];
    float *out[MAX_JOB_WEIGHTS];          /* [n_tok][w->rows] */
    const void *act[MAX_JOB_WEIGHTS];     /* input rows in w's vec_dot type */
    size_t act_stride[MAX_JOB_WEIGHTS];
    int n_tok;
    bool swiglu;                          /* w = gate, up: out[0] = act(gate) * up */
    plm_act_kind gate_act;                /* of swiglu's gate: SiLU or GELU */
    bool paired;                          /* swiglu by pairs of chunks (matmul_task) */
    atomic_int pair_done[MAX_PAIRS];      /* paired: chunks of the pair's rows finished, of 2 */
    bool rowwise;                         /* each token by the single-token kernel (see forward.h) ... */
    int rowwise_from;                     /* ... from this one on; the ones before batched */
    bool coarse;                          /* K-quants in coarse int8 when the batch is large (coarse.h) */
    int64_t chunk;                        /* rows per chunk */
    plm_chunks chunks;
} matmul_job;

static void matmul_rows(const matmul_job *j, int i, int64_t r0, int64_t r1) {
    const plm_weight *w = j->w[i];
    if (w->repacked) { /* one kernel for any batch: decoded blocks serve every token */
        plm_matmul_repacked(j->kt, w->type, w->data, w->cols, r0, r1, j->act[i], j->act_stride[i], j->n_tok,
                            j->out[i], w->rows);
        return;
    }
    if (j->coarse && plm_coarse_applies(j->kt, w->type, j->n_tok)) {
        plm_matmul_coarse(j->kt, w->type, w->data, w->cols, r0, r1, j->act[i], j->act_stride[i], j->n_tok,
                          j->out[i], w->rows);
        return;
    }
    const int n_batched = j->rowwise ? j->rowwise_from : j->n_tok;
    if (n_batched > 0)
        plm_matmul(j->kt, w->type, w->data, w->cols, r0, r1, j->act[i], j->act_stride[i], n_batched, j->out[i],
                   w->rows);
    if (n_batched == j->n_tok) return;
    /* the rest while this chunk of rows is still in cache */
    plm_matmul_exact(j->kt, w->type, w->data, w->cols, r0, r1, (const char *)j->act[i] + n_batched * j->act_stride[i],
                     j->act_stride[i], j->n_tok - n_batched, j->out[i] + (int64_t)n_batched * w->rows, w->rows);
}

/* g = act(g) * u: the gated FFN's activation, SiLU (SwiGLU) or GELU. */
static void gate_times_up(const plm_kernels *kt, plm_act_kind act, float *g, const float *u, int n) {
    if (act == PLM_ACT_GELU_TANH) kt->geglu(g, u, n);
    else kt->swiglu(g, u, n);
}

/* Chunks number the rows of w[0], then w[1]... (each weight's rows start a
 * fresh chunk).  With swiglu, a chunk is the same rows of gate and up,
 * combined while they are still in cache; or, paired, gate's and up's
 * chunks are handed out apart, so that each thread streams whole runs of
 * one matrix, and whichever thread finishes the second of a row range's two
 * chunks applies the activation to those rows. */
static void matmul_task(void *arg, int ith, int nth) {
    (void)nth;
    matmul_job *j = arg;
    const int n_parts = j->swiglu && !j->paired ? 1 : j->n_w;
    for (int64_t c; plm_chunks_take(&j->chunks, ith, &c);) {
        int i = 0;
        for (; i < n_parts; i++) {
            const int64_t chunks = (j->w[i]->rows + j->chunk - 1) / j->chunk;
            if (c < chunks) break;
            c -= chunks;
        }
        if (i == n_parts) return;
        const int64_t r0 = c * j->chunk, end = r0 + j->chunk;
        const int64_t r1 = end < j->w[i]->rows ? end : j->w[i]->rows;
        matmul_rows(j, i, r0, r1);
        if (j->paired) {
            /* acq_rel: the second finisher sees the first one's rows */
            if (atomic_fetch_add_explicit(&j->pair_done[c], 1, memory_order_acq_rel) == 1)
                gate_times_up(j->kt, j->gate_act, j->out[0] + r0, j->out[1] + r0, (int)(r1 - r0));
            continue;
        }
        if (!j->swiglu) continue;
        matmul_rows(j, 1, r0, r1);
        for (int t = 0; t < j->n_tok; t++) {
            const int64_t off = (int64_t)t * j->w[0]->rows + r0;
            gate_times_up(j->kt, j->gate_act, j->out[0] + off, j->out[1] + off, (int)(r1 - r0));
        }
    }
}

/* RMSNorm in front of a matmul step: x = rmsnorm(raw) * w, row by row. */
typedef struct row_norm {
    const float *raw;
    const float *w;
    float eps;
} row_norm;

/* Converts n rows of k floats (x_stride apart) for the job's weights: into
 * the activation slots when a weight dots quantized rows, or used as they
 * are for F32/F16/BF16 weights.  Each format is converted once.  With a
 * norm, each row is normalized into x first and quantized while it is
 * still in L1 (and the norms run on every thread). */
typedef struct quant_job {
    const plm_kernels *kt;
    const row_norm *norm;
    float *x;
    int64_t k, x_stride;
    int n;
    int n_slots;
    plm_type type[MAX_JOB_WEIGHTS];
    void *dst[MAX_JOB_WEIGHTS];
    size_t dst_stride;
    atomic_int next;  /* next row to convert */
} quant_job;

static void quant_task(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    quant_job *q = arg;
    for (int t; (t = atomic_fetch_add_explicit(&q->next, 1, memory_order_relaxed)) < q->n;) {
        if (q->norm)
            plm_rmsnorm(q->x + t * q->x_stride, q->norm->raw + t * q->x_stride, q->norm->w, (int)q->k,
                        q->norm->eps);
        for (int s = 0; s < q->n_slots; s++)
            q->kt->quantize_row[q->type[s]](q->x + t * q->x_stride, (char *)q->dst[s] + t * q->dst_stride, q->k);
    }
}

static void prepare_inputs(plm_forward_state *ctx, matmul_job *j, const row_norm *norm, float *x, int n,
                           int64_t x_stride) {
    plm_scratch *s = &ctx->s;
    quant_job q = {.kt = ctx->kt, .norm = norm, .x = x, .k = j->w[0]->cols, .x_stride = x_stride, .n = n,
                   .dst_stride = s->act_row_cap};
    for (int i = 0; i < j->n_w; i++) {
        const plm_type vt = plm_type_info_get(j->w[i]->type)->vec_dot_type;
        if (vt == PLM_TYPE_F32) {
            j->act[i] = x;
            j->act_stride[i] = (size_t)x_stride * sizeof(float);
            continue;
        }
        int slot = 0;
        while (slot < q.n_slots && q.type[slot] != vt) slot++;
        if (slot == q.n_slots) {
            q.type[slot] = vt;
            q.dst[slot] = s->act[slot];
            q.n_slots++;
        }
        j->act[i] = s->act[slot];
        j->act_stride[i] = s->act_row_cap;
    }
    if (q.n_slots == 0 && !norm) return;
    atomic_init(&q.next, 0);
    if (n == 1) quant_task(&q, 0, 1);  /* one row: not worth waking the pool */
    else plm_pool_run(ctx->pool, quant_task, &q);
}

/* out_i = W_i x for up to three weights sharing input x ([n][k], x_stride
 * apart); with a norm, x is first written as the normalized norm->raw. */
static void matmul_step(plm_forward_state *ctx, const row_norm *norm, float *x, int n, int64_t x_stride,
                        bool swiglu, int n_w, const plm_weight *const *w, float *const *out) {
    matmul_job j = {.kt = ctx->kt, .n_w = n_w, .n_tok = n, .swiglu = swiglu, .gate_act = ctx->model->arch->act,
                    .rowwise = ctx->rowwise_matmul, .coarse = ctx->coarse_prefill && !ctx->rowwise_matmul,
                    .rowwise_from = ctx->rowwise_from < n ? ctx->rowwise_from : n};
    /* Decode's gate and up go paired: a thread that switched between the
     * two matrices every chunk read two interleaved streams; apart, each
     * thread streams whole runs of one (gemma-3-1b Q4_K_M tg64, 2 threads,
     * alternating: 73-78 -> 78-85 t/s).  A batch keeps the combined chunks,
     * whose activation then covers every token while the rows are in cache. */
    j.paired = swiglu && n == 1 && n_w == 2 && w[0]->rows == w[1]->rows;
    int64_t rows = 0; /* to hand out: with swiglu unpaired a chunk is gate's and up's same rows */
    for (int i = 0; i < n_w; i++) {
        j.w[i] = w[i];
        j.out[i] = out[i];
        if (!swiglu || j.paired || i == 0) rows += w[i]->rows;
    }
    /* Not the output matrix: its requantization error would reach the
     * logits unaveraged, and a prompt's pass asks it for one token anyway
     * (only logits_all passes, perplexity and kld, give it a batch). */
    if (n_w == 1 && w[0] == &ctx->model->output) j.coarse = false;
    prepare_inputs(ctx, &j, norm, x, n, x_stride);
    for (int i = 0; ctx->observe && i < n_w; i++) ctx->observe(ctx->observe_user, w[i], x, n, x_stride);
    /* Each thread streams its own share of the chunks (chunks.h) and a fast
     * one takes a slow one's chunks one at a time. */
    const int nth = plm_pool_size(ctx->pool);
    int64_t chunk = rows / (plm_chunks_per_thread(n) * nth);
    chunk = (chunk + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
    j.chunk = chunk < ROW_ALIGN ? ROW_ALIGN : chunk;
    if (j.paired && (w[0]->rows + j.chunk - 1) / j.chunk > MAX_PAIRS) /* many threads: fewer, larger chunks */
        j.chunk = (w[0]->rows + MAX_PAIRS * ROW_ALIGN - 1) / (MAX_PAIRS * ROW_ALIGN) * ROW_ALIGN;
    int64_t n_chunks = 0;
    for (int i = 0; i < (swiglu && !j.paired ? 1 : n_w); i++) n_chunks += (w[i]->rows + j.chunk - 1) / j.chunk;
    plm_chunks_init(&j.chunks, n_chunks, nth);
    plm_pool_run(ctx->pool, matmul_task, &j);
}

static void matmul1(plm_forward_state *ctx, float *x, int n, int64_t x_stride, const plm_weight *w, float *out) {
    matmul_step(ctx, NULL, x, n, x_stride, false, 1, &w, &out);
}

static void add_bias(float *y, const float *b, int n_rows, int64_t dim) {
    if (!b) return;
    for (int t = 0; t < n_rows; t++)
        for (int64_t i = 0; i < dim; i++) y[t * dim + i] += b[i];
}

/* Whether a multiplier of the hyperparameters does anything: 1 is the
 * neutral value, and 0 in a file means "none", as in llama.cpp (granite). */
static bool scales(float s) { return s != 1.0f && s != 0.0f; }

/* Row r of w as floats.  A repacked matrix (a tied output's embedding,
 * repacked for the logits) gives its row back block by block from the
 * row's 16-row group. */
static void weight_row(const plm_kernels *kt, const plm_weight *w, int64_t r, float *x) {
    if (!w->repacked) {
        kt->dequantize_row[w->type]((const char *)w->data + (size_t)r * w->row_bytes, x, w->cols);
        return;
    }
    const plm_type_info *ti = plm_type_info_get(w->type);
    _Alignas(16) uint8_t block[PLM_REPACK_MAX_BLOCK_BYTES];
    for (int64_t b = 0; b < w->cols / ti->block_size; b++) {
        plm_repack_row_block(w->type, w->data, w->row_bytes, r, b, block);
        ti->dequantize_row(block, x + b * ti->block_size, ti->block_size);
    }
}

static void embed(plm_forward_state *ctx, const plm_token *tokens, int n) {
    const plm_weight *e = &ctx->model->tok_embd;
    const float scale = ctx->model->hp.embd_scale;
    for (int t = 0; t < n; t++) {
        float *x = ctx->s.x + (int64_t)t * e->cols;
        weight_row(ctx->kt, e, tokens[t], x);
        if (scales(scale)) plm_scale(x, scale, (int)e->cols);
    }
}

/* Causal grouped-query attention of n new tokens (already in the cache),
 * token t over positions [0, pos_t] of its own sequence, with an online
 * softmax, exact or flash (ops.h): keys are met a block at a time, so the only score buffer is one
 * block long.  A unit of work is one token and a group of query heads
 * sharing a KV head, which then share each key and value row while it is
 * in L1; the group is split when there would be too few units to keep
 * every thread busy (decoding a single token).
 * Like llama.cpp, the query is rounded to f16 (or quantized, for a
 * quantized cache) before it meets the cached keys. */
typedef struct attn_job {
    plm_forward_state *ctx;
    int il, n;
    const plm_ubatch *b;  /* each token's position and sequence */
    int heads_per_unit;   /* query heads per unit of work */
    int tile_tokens;      /* > 0: units are tiles of this many tokens x one KV head's heads */
    float *kept;          /* tiles, exact mode: kept_floats per thread for the first pass's scores */
    size_t kept_floats;   /* (plm_attn_tile.kept), in scratch; NULL: the second pass recomputes them */
    float scale;          /* of the scores: attn_scale, or 1/sqrt(head_dim) */
    float *out;           /* [n][q_dim] */
    int split_stage;      /* > 0: one token's keys in runs (attend_split), this stage of them */
    plm_attn_split split; /* ... its runs: stats and parts in scratch */
    const plm_softmax_run *merged; /* ... stage 2: every head's merged run */
    atomic_int next;      /* next unit */
} attn_job;

/* Bytes from the start of a cache row to kv-head element `off`. */
static size_t row_offset(plm_type type, int off) {
    const plm_type_info *ti = plm_type_info_get(type);
    return (size_t)(off / (int)ti->block_size) * ti->type_size;
}

/* Query values one unit holds at most (its f16 copy lives on the stack). */
#define ATTN_UNIT_ELEMS 4096

/* gemma2's soft-capped scores, cap * tanh(s / cap) before the softmax, in
 * llama.cpp's order: the query scaled in f32, then rounded to f16 (or to
 * the quantized cache's dot format: here its keys are converted to f32
 * instead), its dot with each key, the cap, then the exact mode's two
 * passes with f16 weights (ops.h).  The SIMD kernels have no cap step, so
 * this path goes key by key; only a soft-capped model takes it. */
static float capped_score(const plm_forward_state *ctx, const uint16_t *qh, const float *qs, const uint8_t *krow) {
    const plm_kv_cache *kv = &ctx->kv;
    const int hd = ctx->model->hp.head_dim;
    const float cap = ctx->model->hp.attn_softcap;
    float s;
    if (kv->type_k == PLM_TYPE_F16) {
        s = plm_dot_f16(qh, (const uint16_t *)(const void *)krow, hd);
    } else {
        float k[1024];  /* head_dim <= 1024, checked at load */
        ctx->kt->dequantize_row[kv->type_k](krow, k, hd);
        s = 0.0f;
        for (int i = 0; i < hd; i++) s += qs[i] * k[i];
    }
    return cap * tanhf(s / cap);
}

static void add_value(const plm_forward_state *ctx, float *o, float w, const uint8_t *vrow) {
    const plm_kv_cache *kv = &ctx->kv;
    const int hd = ctx->model->hp.head_dim;
    if (kv->type_v == PLM_TYPE_F16) {
        plm_axpy_f16(o, w, (const uint16_t *)(const void *)vrow, hd);
        return;
    }
    float v[1024];
    ctx->kt->dequantize_row[kv->type_v](vrow, v, hd);
    for (int i = 0; i < hd; i++) o[i] += w * v[i];
}

/* One query head (q: hd floats) over n_keys cached rows from K, V on. */
static void attend_capped(const attn_job *a, const float *q, const uint8_t *K, const uint8_t *V, int n_keys,
                          float *o) {
    const plm_forward_state *ctx = a->ctx;
    const plm_kv_cache *kv = &ctx->kv;
    const int hd = ctx->model->hp.head_dim;
    float qs[1024], s[PLM_ATTN_BLOCK];
    uint16_t qh[1024];
    for (int i = 0; i < hd; i++) qs[i] = q[i] * a->scale;
    ctx->kt->quantize_row[PLM_TYPE_F16](qs, qh, hd);
    plm_softmax_run run = {-INFINITY, 0.0};
    for (int i = 0; i < hd; i++) o[i] = 0.0f;
    for (int j0 = 0; j0 < n_keys; j0 += PLM_ATTN_BLOCK) {
        const int nb = n_keys - j0 < PLM_ATTN_BLOCK ? n_keys - j0 : PLM_ATTN_BLOCK;
        for (int j = 0; j < nb; j++) s[j] = capped_score(ctx, qh, qs, K + (size_t)(j0 + j) * kv->k_row);
        plm_softmax_run_block(&run, s, nb, NULL, 0);
    }
    const float inv = (float)(1.0 / run.sum);
    for (int j = 0; j < n_keys; j++) {
        const float w = plm_softmax_weight(capped_score(ctx, qh, qs, K + (size_t)j * kv->k_row), run.max, inv);
        add_value(ctx, o, w, V + (size_t)j * kv->v_row);
    }
}

/* ---- one token's keys split over the threads ------------------------------
 * A decoding token's units are groups of its query heads, each reading the
 * whole of its KV head's cache: with few KV heads (gemma3 has one, for
 * four query heads) the units were single heads that read the same cache
 * four times, two threads apiece.  gemma-3-1b at 4K positions spent a third
 * of its token there.  Over a long cache the keys go in runs instead
 * (plm_attn_split in ops.h), a thread's unit being one run of every KV
 * head, and the exact mode keeps its first pass's scores for the second.
 * A quantized cache splits as the f16 one does, through the table's
 * attn_quant_pass (qwen3-1.7b, Q8_0 cache, 3000 keys: 16-17 -> 26-28
 * tokens/s).  The number of runs follows from the key count and the model
 * alone, and any other pass over the same token (a batch verified
 * row by row, attend_unit) splits it the same way in one thread, so a
 * token's attention is the same bits however it is computed. */
enum { ATTN_SPLIT_MAX = 16 }; /* runs at most */

int plm_attn_split_max_runs(const plm_hparams *hp) {
    const int group = hp->n_head / hp->n_head_kv;
    const bool fits = group <= PLM_ATTN_MAX_Q && group * hp->head_dim <= ATTN_UNIT_ELEMS; /* a unit's heads */
    return fits ? ATTN_SPLIT_MAX : 0;
}

uint64_t plm_attn_split_bytes(const plm_hparams *hp, uint32_t n_keys) {
    const uint64_t runs = (uint64_t)plm_attn_split_max_runs(hp), heads = (uint64_t)hp->n_head;
    if (runs == 0) return 0;
    /* each run's stats and part of every head, the merged stats, then (the
     * exact mode) every head's score of each key, kept from stage 1 for stage
     * 2: the keys are not read twice */
    return runs * heads * (sizeof(plm_softmax_run) + (uint64_t)hp->head_dim * sizeof(float)) +
           heads * sizeof(plm_softmax_run) + (uint64_t)n_keys * heads * sizeof(float);
}

/* Runs of keys for a token with n_keys keys (1: not split).  gemma2's
 * soft-capped scores (attend_capped) are not split. */
static int attn_split_runs(const plm_forward_state *ctx, int n_keys) {
    const int most = ctx->split_runs, runs = n_keys / PLM_ATTN_SPLIT_KEYS;
    return most < 2 || runs < 2 || ctx->model->hp.attn_softcap != 0.0f ? 1 : runs < most ? runs : most;
}

/* Whether the layer's cache is f16 through and through (else at least one
 * of K and V is quantized: attn_quant). */
static bool kv_is_f16(const plm_kv_cache *kv) { return kv->type_k == PLM_TYPE_F16 && kv->type_v == PLM_TYPE_F16; }

/* The split's shape for one token: its keys, runs, mode and the pass that
 * reads the cache. */
static plm_attn_split attn_split_of(const attn_job *a, int n_keys, int n_runs) {
    const plm_forward_state *ctx = a->ctx;
    const plm_kv_cache *kv = &ctx->kv;
    const bool f16 = kv_is_f16(kv);
    return (plm_attn_split){.pass = f16 ? ctx->kt->attn_f16_pass : NULL,
                            .quant_pass = f16 ? NULL : ctx->kt->attn_quant_pass, .kt = ctx->kt,
                            .type_k = kv->type_k, .type_v = kv->type_v, .n_keys = n_keys, .n_runs = n_runs,
                            .hd = ctx->model->hp.head_dim, .scale = a->scale, .flash = ctx->flash_attn};
}

/* nh query heads from q as the split's pass takes them, into buf: in f16,
 * or in the quantized keys' vec_dot format (Q8_0 for the cache types,
 * plm_kv_type: at most 2 bytes a value). */
static const void *split_query(const plm_forward_state *ctx, const float *q, int nh, void *buf) {
    const plm_kv_cache *kv = &ctx->kv;
    const int hd = ctx->model->hp.head_dim;
    if (kv_is_f16(kv)) ctx->kt->quantize_row[PLM_TYPE_F16](q, buf, (int64_t)nh * hd);
    else plm_attn_quant_query(ctx->kt, kv->type_k, q, nh, hd, buf);
    return buf;
}

/* Query heads [h0, h0 + nh) of token t, all on one KV head, over the
 * positions the layer lets it see (its window, or all before it). */
static void attend_unit(const attn_job *a, int t, int h0, int nh) {
    const plm_forward_state *ctx = a->ctx;
    const plm_kv_cache *kv = &ctx->kv;
    const plm_hparams *hp = &ctx->model->hp;
    const int hd = hp->head_dim, q_dim = hp->n_head * hd;
    const int kv_off = (h0 / (hp->n_head / hp->n_head_kv)) * hd;
    const uint32_t pos = plm_ubatch_pos(a->b, t), first = plm_kv_first_seen(kv, a->il, pos);
    const int n_keys = (int)(pos + 1 - first);
    const plm_kv_seq seq = plm_ubatch_seq(a->b, t);
    const uint8_t *K = plm_kv_keys(kv, a->il, seq, first) + row_offset(kv->type_k, kv_off);
    const uint8_t *V = plm_kv_values(kv, a->il, seq, first) + row_offset(kv->type_v, kv_off);
    const float *q = ctx->s.q + (int64_t)t * q_dim + h0 * hd;
    float *o = a->out + (int64_t)t * q_dim + h0 * hd;
    if (hp->attn_softcap != 0.0f) {
        for (int h = 0; h < nh; h++) attend_capped(a, q + h * hd, K, V, n_keys, o + h * hd);
        return;
    }
    const int n_runs = attn_split_runs(ctx, n_keys);
    if (n_runs > 1) { /* the decode split's arithmetic (above), here in one thread */
        _Alignas(64) uint16_t qbuf[ATTN_UNIT_ELEMS]; /* f16 or Q8_0 (split_query): 2 bytes a value at most */
        plm_softmax_run runs[ATTN_SPLIT_MAX * PLM_ATTN_MAX_Q];
        float part[ATTN_UNIT_ELEMS]; /* every run's part where they fit, else one at a time */
        plm_attn_split sp = attn_split_of(a, n_keys, n_runs);
        const size_t unit = (size_t)nh * hd;
        sp.runs = runs, sp.parts = part, sp.run_stride = (size_t)nh;
        sp.part_stride = (size_t)n_runs * unit <= ATTN_UNIT_ELEMS ? unit : 0;
        plm_attn_split_all(&sp, o, split_query(ctx, q, nh, qbuf), nh, K, V, kv->k_row, kv->v_row);
        return;
    }
    if (kv_is_f16(kv)) {
        uint16_t qh[ATTN_UNIT_ELEMS];
        ctx->kt->quantize_row[PLM_TYPE_F16](q, qh, (int64_t)nh * hd);
        ctx->kt->attn_f16(o, qh, nh, K, V, kv->k_row, kv->v_row, n_keys, hd, a->scale, ctx->flash_attn);
        return;
    }
    ctx->kt->attn_quant(ctx->kt, o, q, nh, kv->type_k, K, kv->k_row, kv->type_v, V, kv->v_row, n_keys, hd,
                        a->scale, ctx->flash_attn);
}

/* Tokens [t0, t1) of one sequence on KV head g, one tile (kt->attn_tile):
 * their keys are runs of a full layer's stream from its first position. */
static void attend_tile(const attn_job *a, int t0, int t1, int g, float *kept) {
    const plm_forward_state *ctx = a->ctx;
    const plm_kv_cache *kv = &ctx->kv;
    const plm_hparams *hp = &ctx->model->hp;
    const int hd = hp->head_dim, q_dim = hp->n_head * hd, n_q = hp->n_head / hp->n_head_kv;
    const plm_kv_seq seq = plm_ubatch_seq(a->b, t0);
    uint32_t first[PLM_ATTN_TILE_ROWS], kmin = UINT32_MAX;
    int begin[PLM_ATTN_TILE_ROWS], end[PLM_ATTN_TILE_ROWS];
    uint16_t qh[PLM_ATTN_TILE_ELEMS];
    for (int t = t0; t < t1; t++) {
        first[t - t0] = plm_kv_first_seen(kv, a->il, plm_ubatch_pos(a->b, t));
        if (first[t - t0] < kmin) kmin = first[t - t0];
        ctx->kt->quantize_row[PLM_TYPE_F16](ctx->s.q + (int64_t)t * q_dim + g * n_q * hd, qh + (t - t0) * n_q * hd,
                                            (int64_t)n_q * hd);
    }
    for (int t = t0; t < t1; t++) {
        begin[t - t0] = (int)(first[t - t0] - kmin);
        end[t - t0] = (int)(plm_ubatch_pos(a->b, t) + 1 - kmin);
    }
    const plm_attn_tile tile = {
        .o = a->out + (int64_t)t0 * q_dim + g * n_q * hd, .o_stride = (size_t)q_dim, .q = qh,
        .n_tok = t1 - t0, .n_q = n_q, .hd = hd, .key_begin = begin, .key_end = end,
        .k = plm_kv_keys(kv, a->il, seq, kmin) + row_offset(kv->type_k, g * hd),
        .v = plm_kv_values(kv, a->il, seq, kmin) + row_offset(kv->type_v, g * hd),
        .type_k = kv->type_k, .type_v = kv->type_v, .k_stride = kv->k_row, .v_stride = kv->v_row,
        .scale = a->scale, .flash = ctx->flash_attn, .kept = kept, .kept_floats = kept ? a->kept_floats : 0};
    ctx->kt->attn_tile(&tile);
}

/* Unit i of a tiled pass: tokens [t0, t0 + tile_tokens) on one KV head,
 * a tile per run of one sequence; the last tokens (the most keys) first. */
static void attend_tile_unit(const attn_job *a, int i, float *kept) {
    const int n_kv = a->ctx->model->hp.n_head_kv, n_tiles = (a->n + a->tile_tokens - 1) / a->tile_tokens;
    const int t0 = (n_tiles - 1 - i / n_kv) * a->tile_tokens;
    const int t_end = t0 + a->tile_tokens < a->n ? t0 + a->tile_tokens : a->n;
    for (int t1 = t0; t1 < t_end;) {
        int t2 = t1 + 1;
        while (t2 < t_end && plm_ubatch_seq(a->b, t2) == plm_ubatch_seq(a->b, t1)) t2++;
        attend_tile(a, t1, t2, i % n_kv, kept);
        t1 = t2;
    }
}

/* A split stage of KV head g's query heads over run r of the one token's
 * keys.  A thread's unit is a run of every KV head, so that it reads whole
 * cache rows, not one head's slice of each (llama-3.2-1b and qwen3-1.7b
 * at 3000 keys: 5-17% faster decoding than with a unit per head). */
static void attend_split_unit(const attn_job *a, int r, int g) {
    const plm_forward_state *ctx = a->ctx;
    const plm_kv_cache *kv = &ctx->kv;
    const plm_hparams *hp = &ctx->model->hp;
    const int hd = hp->head_dim, group = hp->n_head / hp->n_head_kv, h0 = g * group;
    const uint32_t pos = plm_ubatch_pos(a->b, 0), first = plm_kv_first_seen(kv, a->il, pos);
    const plm_kv_seq seq = plm_ubatch_seq(a->b, 0);
    const uint8_t *K = plm_kv_keys(kv, a->il, seq, first) + row_offset(kv->type_k, g * hd);
    const uint8_t *V = plm_kv_values(kv, a->il, seq, first) + row_offset(kv->type_v, g * hd);
    _Alignas(64) uint16_t qbuf[ATTN_UNIT_ELEMS]; /* f16 or Q8_0 (split_query): 2 bytes a value at most */
    const void *q = split_query(ctx, ctx->s.q + (int64_t)h0 * hd, group, qbuf);
    plm_attn_split_stage(&a->split, a->split_stage, r, h0, group, q, K, V, kv->k_row, kv->v_row,
                         a->merged ? a->merged + h0 : NULL);
}

static void attn_task(void *arg, int ith, int nth) {
    (void)nth;
    attn_job *a = arg;
    const plm_hparams *hp = &a->ctx->model->hp;
    if (a->split_stage > 0) {
        for (int r; (r = atomic_fetch_add_explicit(&a->next, 1, memory_order_relaxed)) < a->split.n_runs;)
            for (int g = 0; g < hp->n_head_kv; g++) attend_split_unit(a, r, g);
        return;
    }
    if (a->tile_tokens > 0) {
        const int units = (a->n + a->tile_tokens - 1) / a->tile_tokens * hp->n_head_kv;
        float *kept = a->kept ? a->kept + (size_t)ith * a->kept_floats : NULL;
        for (int i; (i = atomic_fetch_add_explicit(&a->next, 1, memory_order_relaxed)) < units;)
            attend_tile_unit(a, i, kept);
        return;
    }
    const int per = a->heads_per_unit, units = hp->n_head / per;
    for (;;) {
        const int i = atomic_fetch_add_explicit(&a->next, 1, memory_order_relaxed);
        if (i >= a->n * units) return;
        attend_unit(a, i / units, (i % units) * per, per);
    }
}

/* Batches from this size may go by tiles: a tile's stack (its queries and
 * outputs in f32, the staged keys, values and scores: ~90 KiB touched for
 * TinyLlama's 64 rows of 64) reuses the pages the panel gemm's stack
 * touched, which the memory plan counts from the same batch size (plan.c:
 * GEMM_STACK_MIN_BATCH, 128 KiB a thread). */
#define ATTN_TILE_MIN_BATCH 16

/* Tokens of a tile when layer il's attention of this batch goes by tiles,
 * else 0: without soft-capping, on layers without a window (every token's
 * keys begin at position 0, so over an f16 cache a tile's rows are bit for
 * bit attn_f16's: kernels.h), and when there are enough tiles for every
 * thread; not in the passes that must match decoding (rowwise_matmul:
 * speculative verification, batch-invariant serving), which keep the
 * single-token units.  Over a quantized cache too: a tile dequantizes a
 * block of keys and values once for all its rows, where token by token
 * each token reads every block (qwen3-1.7b, a 2876-token prompt over a q8_0
 * cache, 2 threads: 73-90 -> 117-130 tokens/s, about the f16 cache's). */
static int attn_tile_tokens(const plm_forward_state *ctx, int il, int n) {
    const plm_hparams *hp = &ctx->model->hp;
    const plm_kv_cache *kv = &ctx->kv;
    if (!ctx->kt->attn_tile || ctx->rowwise_matmul || hp->attn_softcap != 0.0f || kv->window[il]) return 0;
    const int n_q = hp->n_head / hp->n_head_kv, tokens = plm_attn_tile_tokens(n_q, hp->head_dim);
    if (tokens == 0 || n_q > PLM_ATTN_MAX_Q) return 0;
    const int units = (n + tokens - 1) / tokens * hp->n_head_kv;
    return n >= 2 * tokens && n >= ATTN_TILE_MIN_BATCH && units >= 2 * plm_pool_size(ctx->pool) ? tokens : 0;
}

/* The largest divisor of the group size that fits a unit (PLM_ATTN_MAX_Q
 * heads, ATTN_UNIT_ELEMS values) and still leaves about four units per
 * thread, or for one token a unit per thread: each unit reads its KV
 * head's cache, which a decoding gemma3 (one KV head, four query heads, 2
 * threads) read four times in single heads, twice in pairs (at 512 keys,
 * before they split: 108 -> 87-99 us a layer).  One head per unit at the
 * least (head_dim <= 1024 always fits). */
static int heads_per_unit(const plm_hparams *hp, int n, int n_threads) {
    const int group = hp->n_head / hp->n_head_kv, units = n == 1 ? n_threads : 4 * n_threads;
    for (int per = group; per > 1; per--)
        if (group % per == 0 && per <= PLM_ATTN_MAX_Q && per * hp->head_dim <= ATTN_UNIT_ELEMS &&
            n * (hp->n_head / per) >= units)
            return per;
    return 1;
}

/* One token over runs of its keys (n_runs > 1, see attn_split_runs): stage 1
 * of every run on the threads, the runs merged here, stage 2 (the exact
 * mode's) on the threads, the parts summed here, all in the scratch the
 * plan counts (attn_split). */
static void attend_split(plm_forward_state *ctx, attn_job *a, int n_keys, int n_runs) {
    const plm_hparams *hp = &ctx->model->hp;
    plm_softmax_run *runs = ctx->s.attn_split, *merged = runs + (size_t)n_runs * hp->n_head;
    a->split = attn_split_of(a, n_keys, n_runs);
    a->split.runs = runs, a->split.run_stride = (size_t)hp->n_head;
    a->split.parts = (float *)(void *)(merged + hp->n_head), a->split.part_stride = (size_t)hp->n_head * hp->head_dim;
    a->split.scores = a->split.parts + (size_t)ATTN_SPLIT_MAX * a->split.part_stride;
    a->split_stage = 1;
    atomic_init(&a->next, 0);
    plm_pool_run(ctx->pool, attn_task, a);
    for (int h = 0; h < hp->n_head; h++) plm_attn_split_merge(&a->split, h, &merged[h]);
    if (!ctx->flash_attn) {
        a->split_stage = 2;
        a->merged = merged;
        atomic_init(&a->next, 0);
        plm_pool_run(ctx->pool, attn_task, a);
    }
    for (int h = 0; h < hp->n_head; h++) plm_attn_split_finish(&a->split, h, &merged[h], a->out + (size_t)h * hp->head_dim);
}

static void attention(plm_forward_state *ctx, int il, const plm_ubatch *b, float *out) {
    const int n = b->n;
    const plm_hparams *hp = &ctx->model->hp;
    /* Row by row, the units are a single token's (grouping heads may sum
     * in another order), so a token's result does not depend on the batch. */
    attn_job a = {.ctx = ctx, .il = il, .n = n, .b = b, .out = out,
                  .heads_per_unit = heads_per_unit(hp, ctx->rowwise_matmul ? 1 : n, plm_pool_size(ctx->pool)),
                  .tile_tokens = attn_tile_tokens(ctx, il, n),
                  .scale = hp->attn_scale != 0.0f ? hp->attn_scale : 1.0f / sqrtf((float)hp->head_dim)};
    if (a.tile_tokens > 0 && !ctx->flash_attn && hp->n_expert == 0) {
        /* The exact mode keeps a tile's scores (span: at most the batch's
         * last position + 1) in `up`, free until the FFN, when the rows of
         * it this batch's FFN writes anyway hold every thread's share (so
         * no page the memory plan does not count is touched); else the
         * second pass recomputes them. */
        uint32_t span = 0;
        for (int t = 0; t < n; t++)
            if (plm_ubatch_pos(b, t) + 1 > span) span = plm_ubatch_pos(b, t) + 1;
        a.kept_floats = (size_t)PLM_ATTN_TILE_ROWS * (span + 16);
        if (a.kept_floats * (size_t)plm_pool_size(ctx->pool) <= (size_t)n * (size_t)hp->n_ff) a.kept = ctx->s.up;
    }
    if (n == 1 && a.tile_tokens == 0) {
        const uint32_t pos = plm_ubatch_pos(b, 0);
        const int n_keys = (int)(pos + 1 - plm_kv_first_seen(&ctx->kv, il, pos));
        const int n_runs = attn_split_runs(ctx, n_keys);
        if (n_runs > 1) {
            attend_split(ctx, &a, n_keys, n_runs);
            return;
        }
    }
    atomic_init(&a.next, 0);
    plm_pool_run(ctx->pool, attn_task, &a);
}

/* qwen3's Q/K norms: each head of each token's q (and k) normalized on its
 * own, with one [head_dim] weight shared by all heads. */
static void head_norm(float *x, const float *w, int n_rows, int n_heads, int head_dim, float eps) {
    if (!w) return;
    for (int64_t h = 0; h < (int64_t)n_rows * n_heads; h++)
        plm_rmsnorm(x + h * head_dim, x + h * head_dim, w, head_dim, eps);
}

/* The RoPE of one layer: its base and scale (a windowed layer may have its
 * own: gemma3), the frequency factors if any, and the magnitude scale. */
typedef struct rope_params {
    float base, scale;
    const float *factors;  /* [n_rot / 2]: frequency i is divided by factors[i]; NULL = none */
    float attn_factor;     /* cos and sin multiplied by it (LongRoPE); 1 = none */
} rope_params;

/* Which factors apply: Llama 3.1+'s rope_freqs, or LongRoPE's long ones
 * when a sequence may hold more positions than the original context
 * (llama.cpp's n_ctx_seq > n_ctx_orig_yarn), else its short ones. */
static rope_params layer_rope(const plm_forward_state *ctx, int il) {
    const plm_model *m = ctx->model;
    const plm_hparams *hp = &m->hp;
    const bool windowed = plm_arch_layer_window(m->arch, hp, il) != 0;
    rope_params r = {windowed ? hp->rope_freq_base_swa : hp->rope_freq_base,
                     windowed ? hp->rope_freq_scale_swa : hp->rope_freq_scale, m->rope_freqs, hp->rope_attn_factor};
    if (!r.factors && m->rope_long) r.factors = ctx->kv.n_ctx > (uint32_t)hp->n_ctx_orig ? m->rope_long : m->rope_short;
    return r;
}

/* cos/sin of RoPE's angles at position pos.  With frequency factors, pair
 * i turns at its frequency divided by factors[i], and the angle is formed
 * as ggml_rope_ext forms it: (pos * step^i / factor) * scale. */
static void rope_angles(const plm_model *m, const rope_params *r, float pos, float *cos_t, float *sin_t) {
    const plm_hparams *hp = &m->hp;
    if (!r->factors) {
        plm_rope_angles(cos_t, sin_t, hp->n_rot, pos, r->base, r->scale);
    } else {
        const float step = powf(r->base, -2.0f / (float)hp->n_rot);
        float theta = pos;
        for (int i = 0; i < hp->n_rot / 2; i++) {
            const float a = r->scale * (theta / r->factors[i]);
            cos_t[i] = cosf(a);
            sin_t[i] = sinf(a);
            theta *= step;
        }
    }
    if (r->attn_factor == 1.0f) return;
    for (int i = 0; i < hp->n_rot / 2; i++) {
        cos_t[i] *= r->attn_factor;
        sin_t[i] *= r->attn_factor;
    }
}

static void rope(plm_forward_state *ctx, int il, const plm_ubatch *b) {
    const plm_hparams *hp = &ctx->model->hp;
    float cos_t[512], sin_t[512];  /* n_rot <= head_dim <= 1024, checked at load */
    const int q_dim = hp->n_head * hp->head_dim, kv_dim = ctx->kv.kv_dim;
    const int neox = hp->rope_type == PLM_ROPE_NEOX;
    const rope_params r = layer_rope(ctx, il);
    for (int t = 0; t < b->n; t++) {
        rope_angles(ctx->model, &r, (float)plm_ubatch_pos(b, t), cos_t, sin_t);
        plm_rope_apply(ctx->s.q + (int64_t)t * q_dim, hp->n_head, hp->head_dim, hp->n_rot, cos_t, sin_t, neox);
        plm_rope_apply(ctx->s.k + (int64_t)t * kv_dim, hp->n_head_kv, hp->head_dim, hp->n_rot, cos_t, sin_t,
                       neox);
    }
}

void plm_forward_rerotate(void *state, plm_kv_cache *kv, plm_kv_seq seq, uint32_t first, uint32_t n, int delta) {
    const plm_forward_state *ctx = state;
    const plm_hparams *hp = &ctx->model->hp;
    if (n == 0 || delta == 0) return;
    float cos_t[512], sin_t[512];
    /* A rotation by delta composes with the one already applied: keys are
     * converted to f32, rotated, and stored back in the cache's format.
     * (A pure rotation: LongRoPE's magnitude factor is in the keys already.) */
    float *row = ctx->s.k;  /* scratch: at least kv_dim floats */
    for (int il = 0; il < hp->n_layer; il++) {
        rope_params r = layer_rope(ctx, il);
        r.attn_factor = 1.0f;
        rope_angles(ctx->model, &r, (float)delta, cos_t, sin_t);
        for (uint32_t pos = plm_kv_first_held(kv, il, first, first + n); pos < first + n; pos++) {
            uint8_t *k = plm_kv_keys(kv, il, seq, pos);
            ctx->kt->dequantize_row[kv->type_k](k, row, kv->kv_dim);
            plm_rope_apply(row, hp->n_head_kv, hp->head_dim, hp->n_rot, cos_t, sin_t, hp->rope_type == PLM_ROPE_NEOX);
            ctx->kt->quantize_row[kv->type_k](row, k, kv->kv_dim);
        }
    }
}

/* The norm of a block's output before its residual add (gemma's
 * post_attention_norm, post_ffw_norm): y = rmsnorm(y) * w, row by row. */
static void post_norm(const plm_hparams *hp, float *y, const float *w, int n_rows) {
    if (!w) return;
    for (int t = 0; t < n_rows; t++) {
        float *row = y + (int64_t)t * hp->n_embd;
        plm_rmsnorm(row, row, w, hp->n_embd, hp->rms_eps);
    }
}

/* The residual add of a block's output y, scaled first (granite). */
static void add_rows(const plm_hparams *hp, float *x, const float *y, int64_t count) {
    if (!scales(hp->residual_scale)) {
        for (int64_t i = 0; i < count; i++) x[i] += y[i];
        return;
    }
    for (int64_t i = 0; i < count; i++) x[i] += y[i] * hp->residual_scale;
}

/* The attention step: x += Wo attention(rope(Wq h), rope(Wk h), Wv h) with
 * h = rmsnorm(x) * attn_norm, the new keys and values joining the cache. */
static void attention_step(plm_forward_state *ctx, const plm_layer *L, int il, const plm_ubatch *b) {
    const plm_hparams *hp = &ctx->model->hp;
    plm_scratch *s = &ctx->s;
    const int E = hp->n_embd, q_dim = hp->n_head * hp->head_dim, kv_dim = ctx->kv.kv_dim, n = b->n;

    const row_norm attn_norm = {s->x, L->attn_norm, hp->rms_eps};
    const plm_weight *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *qkv_out[3] = {s->q, s->k, s->v};
    matmul_step(ctx, &attn_norm, s->xn, n, E, false, 3, qkv, qkv_out);
    add_bias(s->q, L->bq, n, q_dim);
    add_bias(s->k, L->bk, n, kv_dim);
    add_bias(s->v, L->bv, n, kv_dim);
    head_norm(s->q, L->q_norm, n, hp->n_head, hp->head_dim, hp->rms_eps);
    head_norm(s->k, L->k_norm, n, hp->n_head_kv, hp->head_dim, hp->rms_eps);
    rope(ctx, il, b);
    plm_kv_store(&ctx->kv, ctx->kt, il, b, s->k, s->v);

    attention(ctx, il, b, s->xn);        /* xn is free again: reuse it */
    matmul1(ctx, s->xn, n, q_dim, &L->wo, s->gate);  /* gate is free until the FFN */
    post_norm(hp, s->gate, L->post_attn_norm, n);
    add_rows(hp, s->x, s->gate, (int64_t)n * E);
}

/* The dense FFN step: x += Wdown (silu(Wgate h) * Wup h), h = rmsnorm(x) * ffn_norm. */
static void ffn_dense_step(plm_forward_state *ctx, const plm_layer *L, int n) {
    const plm_hparams *hp = &ctx->model->hp;
    plm_scratch *s = &ctx->s;
    const int E = hp->n_embd;

    const row_norm ffn_norm = {s->x, L->ffn_norm, hp->rms_eps};
    const plm_weight *gate_up[2] = {&L->w_gate, &L->w_up};
    float *gate_up_out[2] = {s->gate, s->up};
    matmul_step(ctx, &ffn_norm, s->xn, n, E, true, 2, gate_up, gate_up_out);
    matmul1(ctx, s->gate, n, hp->n_ff, &L->w_down, s->up);  /* up is free after swiglu */
    post_norm(hp, s->up, L->post_ffn_norm, n);
    add_rows(hp, s->x, s->up, (int64_t)n * E);
}

/* One block: the steps its descriptor selects (the MoE FFN: model/moe.c). */
static void layer_forward(plm_forward_state *ctx, int il, const plm_ubatch *b) {
    const plm_layer *L = &ctx->model->layers[il];
    attention_step(ctx, L, il, b);
    switch (ctx->model->arch->ffn) {
    case PLM_FFN_DENSE: ffn_dense_step(ctx, L, b->n); break;
    case PLM_FFN_MOE: plm_moe_ffn_step(ctx, L, b->n); break;
    }
}

bool plm_forward(plm_forward_state *ctx, const plm_ubatch *b, int first_logit, float *out_logits) {
    const plm_model *m = ctx->model;
    const int E = m->hp.n_embd, n = b->n;
    plm_scratch *s = &ctx->s;

    embed(ctx, b->tokens, n);
    for (int il = 0; il < m->hp.n_layer; il++) {
        if (ctx->abort && ctx->abort(ctx->abort_user)) return false;
        layer_forward(ctx, il, b);
    }
    if (first_logit >= n) return true;

    const int n_out = n - first_logit;
    const row_norm out_norm = {s->x + (int64_t)first_logit * E, m->output_norm, m->hp.rms_eps};
    const plm_weight *output = &m->output;
    matmul_step(ctx, &out_norm, s->xn, n_out, E, false, 1, &output, &out_logits);
    if (m->hp.logit_scale != 1.0f)  /* granite: logits / logit_scale, as a product like llama.cpp's */
        plm_scale(out_logits, 1.0f / m->hp.logit_scale, (int)((int64_t)n_out * output->rows));
    const float cap = m->hp.final_softcap;  /* gemma2: cap * tanh(logit / cap) */
    if (cap != 0.0f)
        for (int64_t i = 0; i < (int64_t)n_out * output->rows; i++)
            out_logits[i] = cap * tanhf(out_logits[i] * (1.0f / cap));
    return true;
}
