/*
 * The llama family: llama and its close relatives (qwen2 adds Q/K/V biases
 * and rotates NeoX-style).  Reads the hyperparameters, binds the weights and
 * runs the forward pass:
 *
 *   x = embed(tokens)
 *   for each layer:
 *       h = rmsnorm(x) * attn_norm
 *       q, k, v = Wq h (+bq), Wk h (+bk), Wv h (+bv);  rope(q, k)
 *       x += Wo attention(q, cache(k), cache(v))        (causal, grouped-query)
 *       h = rmsnorm(x) * ffn_norm
 *       x += Wdown (silu(Wgate h) * Wup h)
 *   logits = Woutput (rmsnorm(x) * output_norm)
 *
 * Each line is one step over all the batch's tokens, split over the thread
 * pool, with the passes fused where that saves a trip through memory: the
 * rmsnorm and the quantization of its output (row by row, still in L1),
 * Q/K/V as one step, gate/up/SiLU as one step.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "quant/fp16.h"
#include "runtime/context.h"
#include "runtime/threadpool.h"

static const plm_arch arch_llama = {"llama", PLM_ROPE_NORM, false};

const plm_arch *plm_arch_llama(void) { return &arch_llama; }

/* ---- hyperparameters ---------------------------------------------------- */

static bool get_arch_u32(const gguf_file *f, const char *arch, const char *suffix, uint32_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_get_u32(f, key, out);
}

static bool get_arch_f32(const gguf_file *f, const char *arch, const char *suffix, float *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return gguf_get_f32(f, key, out);
}

static plm_status read_hparams(plm_model *m, plm_error *err) {
    const gguf_file *f = m->file;
    plm_hparams *hp = &m->hp;
    const char *a = hp->arch;
    uint32_t v;

#define REQUIRE_U32(suffix, field)                                                        \
    do {                                                                                  \
        if (!get_arch_u32(f, a, suffix, &v) || v == 0 || v > (1u << 24))                  \
            return plm_fail(err, PLM_ERR_FORMAT, "missing or invalid metadata %s.%s", a, suffix); \
        hp->field = (int)v;                                                               \
    } while (0)
    REQUIRE_U32("embedding_length", n_embd);
    REQUIRE_U32("block_count", n_layer);
    REQUIRE_U32("feed_forward_length", n_ff);
    REQUIRE_U32("attention.head_count", n_head);
#undef REQUIRE_U32

    hp->n_head_kv = get_arch_u32(f, a, "attention.head_count_kv", &v) ? (int)v : hp->n_head;
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv)
        return plm_fail(err, PLM_ERR_FORMAT, "%s.attention.head_count_kv=%d does not divide head_count=%d",
                        a, hp->n_head_kv, hp->n_head);
    hp->head_dim = get_arch_u32(f, a, "attention.key_length", &v) ? (int)v : hp->n_embd / hp->n_head;
    if (hp->head_dim <= 0 || hp->head_dim % 2 || hp->head_dim > 1024)
        return plm_fail(err, PLM_ERR_FORMAT, "invalid head dimension %d", hp->head_dim);
    hp->n_rot = get_arch_u32(f, a, "rope.dimension_count", &v) ? (int)v : hp->head_dim;
    if (hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return plm_fail(err, PLM_ERR_FORMAT, "%s.rope.dimension_count=%d invalid for head dim %d", a, hp->n_rot,
                        hp->head_dim);
    hp->n_ctx_train = get_arch_u32(f, a, "context_length", &v) ? (int)v : 2048;

    hp->rms_eps = 1e-5f;
    get_arch_f32(f, a, "attention.layer_norm_rms_epsilon", &hp->rms_eps);
    hp->rope_freq_base = 10000.0f;
    get_arch_f32(f, a, "rope.freq_base", &hp->rope_freq_base);

    /* Linear RoPE scaling stretches positions: theta uses pos / factor. */
    hp->rope_freq_scale = 1.0f;
    float factor = 0;
    char key[128];
    gguf_str type = {0};
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    bool has_type = gguf_get_str(f, key, &type);
    if (get_arch_f32(f, a, "rope.scaling.factor", &factor) || get_arch_f32(f, a, "rope.scale_linear", &factor)) {
        if (has_type && !gguf_str_eq(type, "linear") && !gguf_str_eq(type, "none"))
            return plm_fail(err, PLM_ERR_UNSUPPORTED, "RoPE scaling type '%.*s' is not supported", (int)type.len,
                            type.ptr);
        if (factor > 0 && !(has_type && gguf_str_eq(type, "none"))) hp->rope_freq_scale = 1.0f / factor;
    }
    hp->rope_type = m->arch->rope_type;
    return PLM_OK;
}

/* ---- weights ------------------------------------------------------------ */

static const gguf_tensor *find(const plm_model *m, const char *name) {
    return gguf_find_tensor(m->file, name);
}

static plm_status bind_matrix(plm_model *m, const char *name, int64_t cols, int64_t rows, plm_weight *w,
                              plm_error *err) {
    const gguf_tensor *t = find(m, name);
    if (!t) return plm_fail(err, PLM_ERR_FORMAT, "tensor '%s' is missing", name);
    if (t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows || t->ne[2] != 1 || t->ne[3] != 1)
        return plm_fail(err, PLM_ERR_FORMAT,
                        "tensor '%s' has shape %llu x %llu x %llu x %llu, expected %lld x %lld", name,
                        (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                        (unsigned long long)t->ne[3], (long long)cols, (long long)rows);
    const plm_type_info *ti = plm_type_info_get(t->type);
    if (!ti || !ti->supported)
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "tensor '%s' has type %s, which pocketlm cannot compute with",
                        name, plm_type_name(t->type));
    *w = (plm_weight){t->data, (plm_type)t->type, cols, rows, plm_row_size((plm_type)t->type, cols)};
    m->n_params += (uint64_t)cols * rows;
    m->weight_bytes += t->nbytes;
    return PLM_OK;
}

/* A 1-D tensor as f32: points into the file when stored as F32, else is
 * converted into `spare` (n floats the caller owns). */
static plm_status bind_vector(plm_model *m, const char *name, int64_t n, const float **out, float *spare,
                              bool optional, plm_error *err) {
    const gguf_tensor *t = find(m, name);
    if (!t) {
        *out = NULL;
        return optional ? PLM_OK : plm_fail(err, PLM_ERR_FORMAT, "tensor '%s' is missing", name);
    }
    if (t->n_dims != 1 || t->ne[0] != (uint64_t)n)
        return plm_fail(err, PLM_ERR_FORMAT, "tensor '%s' has %llu elements, expected %lld", name,
                        (unsigned long long)t->ne[0], (long long)n);
    m->n_params += (uint64_t)n;
    m->weight_bytes += t->nbytes;
    if (t->type == PLM_TYPE_F32 && ((uintptr_t)t->data % sizeof(float)) == 0) {
        *out = t->data;
        return PLM_OK;
    }
    const plm_type_info *ti = plm_type_info_get(t->type);
    if (!ti || !ti->supported || n % ti->block_size)
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "tensor '%s' has type %s, unsupported for a vector", name,
                        plm_type_name(t->type));
    plm_kernels_ref()->dequantize_row[t->type](t->data, spare, n);
    *out = spare;
    return PLM_OK;
}

/* Vectors per layer: attn_norm, ffn_norm and up to three biases. */
enum { VECTORS_PER_LAYER = 5 };

static plm_status bind_layer(plm_model *m, int il, float *spare, size_t slot, plm_error *err) {
    const plm_hparams *hp = &m->hp;
    plm_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, q_dim = (int64_t)hp->n_head * hp->head_dim,
                  kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    char name[96];
    plm_status st;

#define MATRIX(suffix, cols, rows, field)                                                 \
    snprintf(name, sizeof name, "blk.%d.%s.weight", il, suffix);                          \
    if ((st = bind_matrix(m, name, cols, rows, &L->field, err)) != PLM_OK) return st;
#define VECTOR(tname, n, field, idx, optional)                                           \
    snprintf(name, sizeof name, "blk.%d.%s", il, tname);                                  \
    if ((st = bind_vector(m, name, n, &L->field, spare + (idx) * slot, optional, err)) != PLM_OK) \
        return st;

    VECTOR("attn_norm.weight", E, attn_norm, 0, false);
    VECTOR("ffn_norm.weight", E, ffn_norm, 1, false);
    VECTOR("attn_q.bias", q_dim, bq, 2, !m->arch->qkv_bias);
    VECTOR("attn_k.bias", kv_dim, bk, 3, !m->arch->qkv_bias);
    VECTOR("attn_v.bias", kv_dim, bv, 4, !m->arch->qkv_bias);
    MATRIX("attn_q", E, q_dim, wq);
    MATRIX("attn_k", E, kv_dim, wk);
    MATRIX("attn_v", E, kv_dim, wv);
    MATRIX("attn_output", q_dim, E, wo);
    MATRIX("ffn_gate", E, hp->n_ff, w_gate);
    MATRIX("ffn_up", E, hp->n_ff, w_up);
    MATRIX("ffn_down", hp->n_ff, E, w_down);
#undef MATRIX
#undef VECTOR
    return PLM_OK;
}

plm_status plm_model_bind(plm_model *m, plm_error *err) {
    plm_status st = read_hparams(m, err);
    if (st) return st;
    plm_hparams *hp = &m->hp;

    const gguf_tensor *te = find(m, "token_embd.weight");
    if (!te || te->n_dims != 2) return plm_fail(err, PLM_ERR_FORMAT, "tensor 'token_embd.weight' is missing or not 2-D");
    hp->n_vocab = (int)te->ne[1];
    if ((st = bind_matrix(m, "token_embd.weight", hp->n_embd, hp->n_vocab, &m->tok_embd, err))) return st;

    /* Vectors not stored as f32 get converted once, into one allocation of
     * equal slots, each big enough for the longest vector (n_embd or q_dim). */
    size_t slot = (size_t)hp->n_head * hp->head_dim;
    if ((size_t)hp->n_embd > slot) slot = (size_t)hp->n_embd;
    m->owned_f32 = calloc(((size_t)hp->n_layer * VECTORS_PER_LAYER + 1) * slot, sizeof(float));
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->owned_f32 || !m->layers) return plm_fail(err, PLM_ERR_NOMEM, "out of memory binding weights");
    float *spare = m->owned_f32;
    if ((st = bind_vector(m, "output_norm.weight", hp->n_embd, &m->output_norm, spare, false, err))) return st;
    spare += slot;
    for (int il = 0; il < hp->n_layer; il++, spare += VECTORS_PER_LAYER * slot)
        if ((st = bind_layer(m, il, spare, slot, err))) return st;

    if (find(m, "output.weight")) {
        if ((st = bind_matrix(m, "output.weight", hp->n_embd, hp->n_vocab, &m->output, err))) return st;
    } else {
        m->output = m->tok_embd;  /* tied embeddings */
    }
    return PLM_OK;
}

/* ---- forward pass ------------------------------------------------------- */

enum { MAX_JOB_WEIGHTS = 3, ROW_ALIGN = 16 };

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
    bool swiglu;                          /* w = gate, up: out[0] = silu(gate) * up */
    bool rowwise;                         /* each token by the single-token kernel (see context.h) */
    int64_t chunk;                        /* rows per chunk */
    atomic_llong next;                    /* next chunk to take */
} matmul_job;

static void matmul_rows(const matmul_job *j, int i, int64_t r0, int64_t r1) {
    const plm_weight *w = j->w[i];
    if (!j->rowwise) {
        plm_matmul(j->kt, w->type, w->data, w->cols, r0, r1, j->act[i], j->act_stride[i], j->n_tok, j->out[i],
                   w->rows);
        return;
    }
    for (int t = 0; t < j->n_tok; t++)  /* the chunk of rows stays in cache across tokens */
        plm_matmul(j->kt, w->type, w->data, w->cols, r0, r1, (const char *)j->act[i] + (size_t)t * j->act_stride[i],
                   j->act_stride[i], 1, j->out[i] + (int64_t)t * w->rows, w->rows);
}

/* Chunks number the rows of w[0], then w[1]... (each weight's rows start a
 * fresh chunk); with swiglu, a chunk is the same rows of gate and up,
 * combined while they are still in cache. */
static void matmul_task(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    matmul_job *j = arg;
    const int n_parts = j->swiglu ? 1 : j->n_w;
    for (;;) {
        int64_t c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
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
        if (!j->swiglu) continue;
        matmul_rows(j, 1, r0, r1);
        for (int t = 0; t < j->n_tok; t++) {
            const int64_t off = (int64_t)t * j->w[0]->rows + r0;
            j->kt->swiglu(j->out[0] + off, j->out[1] + off, (int)(r1 - r0));
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

static void prepare_inputs(plm_context *ctx, matmul_job *j, const row_norm *norm, float *x, int n,
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
static void matmul_step(plm_context *ctx, const row_norm *norm, float *x, int n, int64_t x_stride, bool swiglu,
                        int n_w, const plm_weight *const *w, float *const *out) {
    matmul_job j = {.kt = ctx->kt, .n_w = n_w, .n_tok = n, .swiglu = swiglu, .rowwise = ctx->rowwise_matmul};
    int64_t rows = 0;
    for (int i = 0; i < n_w; i++) {
        j.w[i] = w[i];
        j.out[i] = out[i];
        rows += w[i]->rows;
    }
    prepare_inputs(ctx, &j, norm, x, n, x_stride);
    /* About four chunks per thread balances uneven cores without making
     * chunks so small that the per-chunk overhead shows. */
    const int nth = plm_pool_size(ctx->pool);
    int64_t chunk = rows / (4 * nth);
    chunk = (chunk + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
    j.chunk = chunk < ROW_ALIGN ? ROW_ALIGN : chunk;
    atomic_init(&j.next, 0);
    plm_pool_run(ctx->pool, matmul_task, &j);
}

static void matmul1(plm_context *ctx, float *x, int n, int64_t x_stride, const plm_weight *w, float *out) {
    matmul_step(ctx, NULL, x, n, x_stride, false, 1, &w, &out);
}

static void add_bias(float *y, const float *b, int n_rows, int64_t dim) {
    if (!b) return;
    for (int t = 0; t < n_rows; t++)
        for (int64_t i = 0; i < dim; i++) y[t * dim + i] += b[i];
}

static void embed(plm_context *ctx, const plm_token *tokens, int n) {
    const plm_weight *e = &ctx->model->tok_embd;
    for (int t = 0; t < n; t++)
        ctx->kt->dequantize_row[e->type]((const char *)e->data + (size_t)tokens[t] * e->row_bytes,
                                         ctx->s.x + (int64_t)t * e->cols, e->cols);
}

/* Causal grouped-query attention of n new tokens (already in the cache)
 * over positions [0, pos0 + t], with an online softmax, exact or flash
 * (ops.h): keys are met a block at a time, so the only score buffer is one
 * block long.  A unit of work is one token and a group of query heads
 * sharing a KV head, which then share each key and value row while it is
 * in L1; the group is split when there would be too few units to keep
 * every thread busy (decoding a single token).
 * Like llama.cpp, the query is rounded to f16 (or quantized, for a
 * quantized cache) before it meets the cached keys. */
typedef struct attn_job {
    plm_context *ctx;
    int il, n;
    uint32_t pos0;
    int heads_per_unit;   /* query heads per unit of work */
    float *out;           /* [n][q_dim] */
    atomic_int next;      /* next unit */
} attn_job;

/* Bytes from the start of a cache row to kv-head element `off`. */
static size_t row_offset(plm_type type, int off) {
    const plm_type_info *ti = plm_type_info_get(type);
    return (size_t)(off / (int)ti->block_size) * ti->type_size;
}

/* Scores of the nb keys from j0 on against a query in the keys' vec_dot format. */
static void quantized_scores(const plm_context *ctx, const uint8_t *K, const void *qbuf, int j0, int nb, float *s) {
    const plm_kv_cache *kv = &ctx->kv;
    const int hd = ctx->model->hp.head_dim;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int j = 0; j < nb; j++) {
        ctx->kt->vec_dot[kv->type_k](hd, &s[j], K + (size_t)(j0 + j) * kv->k_row, qbuf);
        s[j] *= scale;
    }
}

/* o += sum_j w[j] v_j over the nb value rows from j0 on, each dequantized on
 * its own: never a dequantized copy of the cache. */
static void quantized_values(const plm_context *ctx, const uint8_t *V, const float *w, int j0, int nb, float *o) {
    const plm_kv_cache *kv = &ctx->kv;
    const int hd = ctx->model->hp.head_dim;
    float vrow[1024];
    for (int j = 0; j < nb; j++) {
        ctx->kt->dequantize_row[kv->type_v](V + (size_t)(j0 + j) * kv->v_row, vrow, hd);
        for (int i = 0; i < hd; i++) o[i] += w[j] * vrow[i];
    }
}

/* One query head over a quantized cache, or one of K and V quantized (K and
 * V at the head's offset): the keys meet the query in their vec_dot format
 * (Q8_0, or F16), as weights do.  The same two modes as plm_attn_f16. */
static void attend_quantized(const plm_context *ctx, const float *q, const uint8_t *K, const uint8_t *V,
                             int n_keys, float *o) {
    const int hd = ctx->model->hp.head_dim;
    const bool flash = ctx->params.flash_attn;
    uint8_t qbuf[2048];  /* head_dim <= 1024 in the keys' vec_dot format: F16 or Q8_0 blocks */
    float s[PLM_ATTN_BLOCK];
    ctx->kt->quantize_row[plm_type_info_get(ctx->kv.type_k)->vec_dot_type](q, qbuf, hd);
    plm_softmax_run run = {-INFINITY, 0.0};
    for (int i = 0; i < hd; i++) o[i] = 0.0f;
    for (int j0 = 0; j0 < n_keys; j0 += PLM_ATTN_BLOCK) {
        const int nb = n_keys - j0 < PLM_ATTN_BLOCK ? n_keys - j0 : PLM_ATTN_BLOCK;
        quantized_scores(ctx, K, qbuf, j0, nb, s);
        plm_softmax_run_block(&run, s, nb, o, flash ? hd : 0);
        if (flash) quantized_values(ctx, V, s, j0, nb, o);
    }
    const float inv = (float)(1.0 / run.sum);
    if (flash) {
        plm_scale(o, inv, hd);
        return;
    }
    for (int j0 = 0; j0 < n_keys; j0 += PLM_ATTN_BLOCK) {
        const int nb = n_keys - j0 < PLM_ATTN_BLOCK ? n_keys - j0 : PLM_ATTN_BLOCK;
        quantized_scores(ctx, K, qbuf, j0, nb, s);
        for (int j = 0; j < nb; j++) s[j] = plm_softmax_weight(s[j], run.max, inv);
        quantized_values(ctx, V, s, j0, nb, o);
    }
}

/* Query values one unit holds at most (its f16 copy lives on the stack). */
#define ATTN_UNIT_ELEMS 4096

/* Query heads [h0, h0 + nh) of token t, all on one KV head. */
static void attend_unit(const attn_job *a, int t, int h0, int nh) {
    const plm_context *ctx = a->ctx;
    const plm_kv_cache *kv = &ctx->kv;
    const plm_hparams *hp = &ctx->model->hp;
    const int hd = hp->head_dim, q_dim = hp->n_head * hd;
    const int kv_off = (h0 / (hp->n_head / hp->n_head_kv)) * hd;
    const int n_keys = (int)a->pos0 + t + 1;
    const uint8_t *K = kv->k + (size_t)a->il * kv->n_ctx * kv->k_row + row_offset(kv->type_k, kv_off);
    const uint8_t *V = kv->v + (size_t)a->il * kv->n_ctx * kv->v_row + row_offset(kv->type_v, kv_off);
    const float *q = ctx->s.q + (int64_t)t * q_dim + h0 * hd;
    float *o = a->out + (int64_t)t * q_dim + h0 * hd;
    if (kv->type_k == PLM_TYPE_F16 && kv->type_v == PLM_TYPE_F16) {
        uint16_t qh[ATTN_UNIT_ELEMS];
        ctx->kt->quantize_row[PLM_TYPE_F16](q, qh, (int64_t)nh * hd);
        ctx->kt->attn_f16(o, qh, nh, K, V, kv->k_row, kv->v_row, n_keys, hd, 1.0f / sqrtf((float)hd),
                          ctx->params.flash_attn);
        return;
    }
    for (int h = 0; h < nh; h++) attend_quantized(ctx, q + h * hd, K, V, n_keys, o + h * hd);
}

static void attn_task(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    attn_job *a = arg;
    const int n_head = a->ctx->model->hp.n_head, per = a->heads_per_unit, units = n_head / per;
    for (;;) {
        const int i = atomic_fetch_add_explicit(&a->next, 1, memory_order_relaxed);
        if (i >= a->n * units) return;
        attend_unit(a, i / units, (i % units) * per, per);
    }
}

/* The largest divisor of the group size that fits a unit (PLM_ATTN_MAX_Q
 * heads, ATTN_UNIT_ELEMS values) and still leaves about four units per
 * thread; one head per unit at the least (head_dim <= 1024 always fits). */
static int heads_per_unit(const plm_hparams *hp, int n, int n_threads) {
    const int group = hp->n_head / hp->n_head_kv;
    for (int per = group; per > 1; per--)
        if (group % per == 0 && per <= PLM_ATTN_MAX_Q && per * hp->head_dim <= ATTN_UNIT_ELEMS &&
            n * (hp->n_head / per) >= 4 * n_threads)
            return per;
    return 1;
}

static void attention(plm_context *ctx, int il, int n, uint32_t pos0, float *out) {
    attn_job a = {.ctx = ctx, .il = il, .n = n, .pos0 = pos0, .out = out,
                  .heads_per_unit = heads_per_unit(&ctx->model->hp, n, plm_pool_size(ctx->pool))};
    atomic_init(&a.next, 0);
    plm_pool_run(ctx->pool, attn_task, &a);
}

static void store_kv(plm_context *ctx, int il, int n, uint32_t pos0) {
    const plm_kv_cache *kv = &ctx->kv;
    const size_t pos = (size_t)il * kv->n_ctx + pos0;
    for (int t = 0; t < n; t++) {
        ctx->kt->quantize_row[kv->type_k](ctx->s.k + (int64_t)t * kv->kv_dim, kv->k + (pos + t) * kv->k_row, kv->kv_dim);
        ctx->kt->quantize_row[kv->type_v](ctx->s.v + (int64_t)t * kv->kv_dim, kv->v + (pos + t) * kv->v_row, kv->kv_dim);
    }
}

static void rope(plm_context *ctx, int n, uint32_t pos0) {
    const plm_hparams *hp = &ctx->model->hp;
    float cos_t[512], sin_t[512];  /* n_rot <= head_dim <= 1024, checked at load */
    const int q_dim = hp->n_head * hp->head_dim, kv_dim = ctx->kv.kv_dim;
    const int neox = hp->rope_type == PLM_ROPE_NEOX;
    for (int t = 0; t < n; t++) {
        plm_rope_angles(cos_t, sin_t, hp->n_rot, (float)(pos0 + t), hp->rope_freq_base, hp->rope_freq_scale);
        plm_rope_apply(ctx->s.q + (int64_t)t * q_dim, hp->n_head, hp->head_dim, hp->n_rot, cos_t, sin_t, neox);
        plm_rope_apply(ctx->s.k + (int64_t)t * kv_dim, hp->n_head_kv, hp->head_dim, hp->n_rot, cos_t, sin_t,
                       neox);
    }
}

void plm_llama_rerotate_keys(plm_context *ctx, uint32_t first, uint32_t n, int delta) {
    const plm_hparams *hp = &ctx->model->hp;
    const plm_kv_cache *kv = &ctx->kv;
    if (n == 0 || delta == 0) return;
    float cos_t[512], sin_t[512];
    plm_rope_angles(cos_t, sin_t, hp->n_rot, (float)delta, hp->rope_freq_base, hp->rope_freq_scale);
    /* A rotation by delta composes with the one already applied: keys are
     * converted to f32, rotated, and stored back in the cache's format. */
    float *row = ctx->s.k;  /* scratch: at least kv_dim floats */
    for (int il = 0; il < hp->n_layer; il++) {
        uint8_t *k = kv->k + ((size_t)il * kv->n_ctx + first) * kv->k_row;
        for (uint32_t j = 0; j < n; j++, k += kv->k_row) {
            ctx->kt->dequantize_row[kv->type_k](k, row, kv->kv_dim);
            plm_rope_apply(row, hp->n_head_kv, hp->head_dim, hp->n_rot, cos_t, sin_t, hp->rope_type == PLM_ROPE_NEOX);
            ctx->kt->quantize_row[kv->type_k](row, k, kv->kv_dim);
        }
    }
}

static void add_rows(float *x, const float *y, int64_t count) {
    for (int64_t i = 0; i < count; i++) x[i] += y[i];
}

static void layer_forward(plm_context *ctx, int il, int n, uint32_t pos0) {
    const plm_hparams *hp = &ctx->model->hp;
    const plm_layer *L = &ctx->model->layers[il];
    plm_scratch *s = &ctx->s;
    const int E = hp->n_embd, q_dim = hp->n_head * hp->head_dim, kv_dim = ctx->kv.kv_dim;

    const row_norm attn_norm = {s->x, L->attn_norm, hp->rms_eps};
    const plm_weight *qkv[3] = {&L->wq, &L->wk, &L->wv};
    float *qkv_out[3] = {s->q, s->k, s->v};
    matmul_step(ctx, &attn_norm, s->xn, n, E, false, 3, qkv, qkv_out);
    add_bias(s->q, L->bq, n, q_dim);
    add_bias(s->k, L->bk, n, kv_dim);
    add_bias(s->v, L->bv, n, kv_dim);
    rope(ctx, n, pos0);
    store_kv(ctx, il, n, pos0);

    attention(ctx, il, n, pos0, s->xn);        /* xn is free again: reuse it */
    matmul1(ctx, s->xn, n, q_dim, &L->wo, s->gate);  /* gate is free until the FFN */
    add_rows(s->x, s->gate, (int64_t)n * E);

    const row_norm ffn_norm = {s->x, L->ffn_norm, hp->rms_eps};
    const plm_weight *gate_up[2] = {&L->w_gate, &L->w_up};
    float *gate_up_out[2] = {s->gate, s->up};
    matmul_step(ctx, &ffn_norm, s->xn, n, E, true, 2, gate_up, gate_up_out);
    matmul1(ctx, s->gate, n, hp->n_ff, &L->w_down, s->up);  /* up is free after swiglu */
    add_rows(s->x, s->up, (int64_t)n * E);
}

void plm_llama_forward(plm_context *ctx, const plm_token *tokens, int n, uint32_t pos0, int first_logit,
                       float *out_logits) {
    const plm_model *m = ctx->model;
    const int E = m->hp.n_embd;
    plm_scratch *s = &ctx->s;

    embed(ctx, tokens, n);
    for (int il = 0; il < m->hp.n_layer; il++) layer_forward(ctx, il, n, pos0);
    if (first_logit >= n) return;

    const int n_out = n - first_logit;
    const row_norm out_norm = {s->x + (int64_t)first_logit * E, m->output_norm, m->hp.rms_eps};
    const plm_weight *output = &m->output;
    matmul_step(ctx, &out_norm, s->xn, n_out, E, false, 1, &output, &out_logits);
}
