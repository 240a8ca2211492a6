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
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "quant/fp16.h"
#include "runtime/context.h"

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

/* Activation rows converted for one weight's dot products.  Q, K and V (and
 * gate and up) read the same input: it is converted once per format. */
typedef struct acts {
    plm_context *ctx;
    const float *x;    /* n rows of k floats, x_stride apart */
    int n;
    int64_t k, x_stride;
    int have;          /* vec_dot type converted into ctx->s.act, or -1 */
} acts;

static acts acts_of(plm_context *ctx, const float *x, int n, int64_t k, int64_t x_stride) {
    return (acts){ctx, x, n, k, x_stride, -1};
}

/* out[t * out_stride + r] = W row r . x row t */
static void project(acts *a, const plm_weight *w, float *out, int64_t out_stride) {
    const plm_kernels *kt = a->ctx->kt;
    const plm_type vt = plm_type_info_get(w->type)->vec_dot_type;
    const size_t stride = a->ctx->s.act_row_cap;
    if (a->have != (int)vt) {
        for (int t = 0; t < a->n; t++)
            kt->quantize_row[vt](a->x + t * a->x_stride, (char *)a->ctx->s.act + t * stride, a->k);
        a->have = (int)vt;
    }
    plm_matmul(kt, w->type, w->data, w->cols, 0, w->rows, a->ctx->s.act, stride, a->n, out, out_stride);
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
 * over positions [0, pos0 + t]; writes [n][q_dim] into out.
 * Like llama.cpp with an f16 cache, the query and the softmax weights are
 * rounded to f16 before they meet the f16 keys and values: matching that
 * rounding keeps our logits within a few thousandths of llama.cpp's. */
static void attention(plm_context *ctx, int il, int n, uint32_t pos0, float *out) {
    const plm_hparams *hp = &ctx->model->hp;
    const int hd = hp->head_dim, q_dim = hp->n_head * hd, kv_dim = ctx->kv.kv_dim;
    const int group = hp->n_head / hp->n_head_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    const size_t layer_off = (size_t)il * ctx->kv.n_ctx * kv_dim;
    const uint16_t *K = ctx->kv.k + layer_off, *V = ctx->kv.v + layer_off;
    float *scores = ctx->s.scores;
    uint16_t q16[1024];  /* head_dim <= 1024, checked at load */

    for (int t = 0; t < n; t++) {
        const int n_keys = (int)pos0 + t + 1;
        for (int h = 0; h < hp->n_head; h++) {
            plm_fp32_to_fp16_row(ctx->s.q + (int64_t)t * q_dim + h * hd, q16, hd);
            const int kv_off = (h / group) * hd;
            for (int j = 0; j < n_keys; j++)
                scores[j] = plm_dot_f16(q16, K + (size_t)j * kv_dim + kv_off, hd) * scale;
            plm_softmax(scores, n_keys);
            float *o = out + (int64_t)t * q_dim + h * hd;
            for (int i = 0; i < hd; i++) o[i] = 0.0f;
            for (int j = 0; j < n_keys; j++) {
                const float w = plm_fp16_to_fp32(plm_fp32_to_fp16(scores[j]));
                plm_axpy_f16(o, w, V + (size_t)j * kv_dim + kv_off, hd);
            }
        }
    }
}

static void store_kv(plm_context *ctx, int il, int n, uint32_t pos0) {
    const int kv_dim = ctx->kv.kv_dim;
    const size_t base = ((size_t)il * ctx->kv.n_ctx + pos0) * kv_dim;
    const plm_kernels *kt = ctx->kt;
    kt->quantize_row[PLM_TYPE_F16](ctx->s.k, ctx->kv.k + base, (int64_t)n * kv_dim);
    kt->quantize_row[PLM_TYPE_F16](ctx->s.v, ctx->kv.v + base, (int64_t)n * kv_dim);
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

static void layer_forward(plm_context *ctx, int il, int n, uint32_t pos0) {
    const plm_hparams *hp = &ctx->model->hp;
    const plm_layer *L = &ctx->model->layers[il];
    plm_scratch *s = &ctx->s;
    const int E = hp->n_embd, q_dim = hp->n_head * hp->head_dim, kv_dim = ctx->kv.kv_dim;

    for (int t = 0; t < n; t++) plm_rmsnorm(s->xn + (int64_t)t * E, s->x + (int64_t)t * E, L->attn_norm, E, hp->rms_eps);
    acts in = acts_of(ctx, s->xn, n, E, E);
    project(&in, &L->wq, s->q, q_dim);
    project(&in, &L->wk, s->k, kv_dim);
    project(&in, &L->wv, s->v, kv_dim);
    add_bias(s->q, L->bq, n, q_dim);
    add_bias(s->k, L->bk, n, kv_dim);
    add_bias(s->v, L->bv, n, kv_dim);
    rope(ctx, n, pos0);
    store_kv(ctx, il, n, pos0);

    attention(ctx, il, n, pos0, s->xn);  /* xn is free again: reuse it */
    acts att = acts_of(ctx, s->xn, n, q_dim, q_dim);
    project(&att, &L->wo, s->gate, E);   /* gate is free until the FFN */
    for (int64_t i = 0; i < (int64_t)n * E; i++) s->x[i] += s->gate[i];

    for (int t = 0; t < n; t++) plm_rmsnorm(s->xn + (int64_t)t * E, s->x + (int64_t)t * E, L->ffn_norm, E, hp->rms_eps);
    acts ffn = acts_of(ctx, s->xn, n, E, E);
    project(&ffn, &L->w_gate, s->gate, hp->n_ff);
    project(&ffn, &L->w_up, s->up, hp->n_ff);
    for (int t = 0; t < n; t++) plm_swiglu(s->gate + (int64_t)t * hp->n_ff, s->up + (int64_t)t * hp->n_ff, hp->n_ff);
    acts down = acts_of(ctx, s->gate, n, hp->n_ff, hp->n_ff);
    project(&down, &L->w_down, s->up, E);  /* up is free after swiglu */
    for (int64_t i = 0; i < (int64_t)n * E; i++) s->x[i] += s->up[i];
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
    for (int t = 0; t < n_out; t++)
        plm_rmsnorm(s->xn + (int64_t)t * E, s->x + (int64_t)(first_logit + t) * E, m->output_norm, E, m->hp.rms_eps);
    acts fin = acts_of(ctx, s->xn, n_out, E, E);
    project(&fin, &m->output, out_logits, m->hp.n_vocab);
}
