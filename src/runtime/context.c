/* Contexts: KV cache and scratch allocation, batched decode, logits. */
#include "runtime/context.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/plan.h"
#include "runtime/threadpool.h"

plm_context_params plm_context_default_params(void) {
    return (plm_context_params){.n_ctx = 0, .n_batch = 512, .n_threads = 0, .logits_all = false,
                                .type_k = PLM_KV_F16, .type_v = PLM_KV_F16, .flash_attn = false};
}

static void scratch_free(plm_scratch *s) {
    free(s->x);
    free(s->xn);
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->gate);
    free(s->up);
    for (int i = 0; i < 3; i++) free(s->act[i]);
}

/* Every buffer is sized by the memory plan (runtime/plan.c), the same
 * numbers `pocketlm plan` prints: prediction and allocation cannot drift. */
static plm_status scratch_alloc(plm_scratch *s, const plm_plan_buffers *b, plm_error *err) {
    s->act_row_cap = b->act_row;
    s->x = malloc(b->x);
    s->xn = malloc(b->xn);
    s->q = malloc(b->q);
    s->k = malloc(b->k);
    s->v = malloc(b->v);
    s->gate = malloc(b->gate);
    s->up = malloc(b->up);
    bool acts_ok = true;
    for (int i = 0; i < 3; i++) acts_ok = (s->act[i] = malloc(b->act)) && acts_ok;
    if (!s->x || !s->xn || !s->q || !s->k || !s->v || !s->gate || !s->up || !acts_ok)
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory allocating scratch buffers");
    return PLM_OK;
}

static const char *const kv_names[] = {[PLM_KV_F16] = "f16", [PLM_KV_Q8_0] = "q8_0", [PLM_KV_Q4_0] = "q4_0"};

const char *plm_kv_type_name(plm_kv_type t) { return (unsigned)t <= PLM_KV_Q4_0 ? kv_names[t] : "?"; }

int plm_kv_type_from_name(const char *name) {
    for (int t = PLM_KV_F16; t <= PLM_KV_Q4_0; t++)
        if (!strcmp(name, kv_names[t])) return t;
    return -1;
}

static plm_status kv_alloc(plm_kv_cache *kv, const plm_hparams *hp, const plm_context_params *p,
                           const plm_plan_buffers *b, plm_error *err) {
    kv->n_ctx = p->n_ctx;
    kv->kv_dim = hp->n_head_kv * hp->head_dim;
    kv->type_k = (plm_type)plm_plan_kv_ggml_type(p->type_k);  /* the plan's mapping: one source */
    kv->type_v = (plm_type)plm_plan_kv_ggml_type(p->type_v);
    kv->k_row = b->kv_row_k;
    kv->v_row = b->kv_row_v;
    kv->k = malloc(b->kv_k);
    kv->v = malloc(b->kv_v);
    if (!kv->k || !kv->v)
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory allocating a %u-token KV cache (%llu MiB)", p->n_ctx,
                        (unsigned long long)((b->kv_k + b->kv_v) >> 20));
    return PLM_OK;
}

/* The plan's buffer sizes for this model and these (resolved) params. */
static plm_status plan_buffers(const plm_hparams *hp, const plm_context_params *p, plm_plan_buffers *b,
                               plm_error *err) {
    if ((unsigned)p->type_k > PLM_KV_Q4_0 || (unsigned)p->type_v > PLM_KV_Q4_0)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "unknown KV cache type");
    const plm_plan_dims d = {(uint32_t)hp->n_layer, (uint32_t)hp->n_embd, (uint32_t)hp->n_head,
                             (uint32_t)hp->n_head_kv, (uint32_t)hp->head_dim, (uint32_t)hp->n_ff,
                             (uint32_t)hp->n_vocab};
    if (!plm_plan_buffers_for(&d, p->n_ctx, p->n_batch, p->type_k, p->type_v, p->logits_all, b))
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "a %s/%s KV cache needs a head size divisible by 32 (this model: %d)",
                        plm_kv_type_name(p->type_k), plm_kv_type_name(p->type_v), hp->head_dim);
    return PLM_OK;
}

plm_status plm_context_new(plm_model *model, const plm_context_params *params, plm_context **out,
                           plm_error *err) {
    *out = NULL;
    if (!model || !model->layers)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "a context needs a model loaded with weights");
    plm_context_params p = params ? *params : plm_context_default_params();
    const plm_hparams *hp = &model->hp;
    if (p.n_ctx == 0) p.n_ctx = hp->n_ctx_train < 4096 ? (uint32_t)hp->n_ctx_train : 4096;
    if (p.n_ctx > (1u << 24)) return plm_fail(err, PLM_ERR_INVALID_ARG, "context length %u is too large", p.n_ctx);
    if (p.n_batch == 0) p.n_batch = 512;
    if (p.n_batch > p.n_ctx) p.n_batch = p.n_ctx;

    const plm_kernels *kt = plm_kernels_select(NULL);
    if (!kt) return plm_fail(err, PLM_ERR_INVALID_ARG, "PLM_KERNELS names a kernel set this CPU cannot run");

    plm_context *c = calloc(1, sizeof *c);
    if (!c) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    c->model = model;
    c->kt = kt;
    if (p.n_threads == 0) p.n_threads = plm_default_threads();
    if (p.n_threads > 256) p.n_threads = 256;
    c->params = p;
    plm_plan_buffers b;
    plm_status st = plan_buffers(hp, &p, &b, err);
    if (!st) {
        c->pool = plm_pool_new((int)p.n_threads);
        if (!c->pool) st = plm_fail(err, PLM_ERR_NOMEM, "cannot start %u threads", p.n_threads);
    }
    if (!st) st = kv_alloc(&c->kv, hp, &p, &b, err);
    if (!st) st = scratch_alloc(&c->s, &b, err);
    if (!st) {
        c->logits_cap = p.logits_all ? (int)p.n_batch : 1;
        c->logits = malloc(b.logits);
        if (!c->logits) st = plm_fail(err, PLM_ERR_NOMEM, "out of memory allocating logits");
    }
    if (st) {
        plm_context_free(c);
        return st;
    }
    *out = c;
    return PLM_OK;
}

void plm_context_free(plm_context *c) {
    if (!c) return;
    if (!c->pool_borrowed) plm_pool_free(c->pool);
    free(c->kv.k);
    free(c->kv.v);
    scratch_free(&c->s);
    free(c->logits);
    free(c);
}

uint32_t plm_context_n_ctx(const plm_context *c) { return c->kv.n_ctx; }
uint32_t plm_context_n_past(const plm_context *c) { return c->n_past; }

void plm_kv_truncate(plm_context *c, uint32_t pos) {
    if (pos < c->n_past) c->n_past = pos;
}

plm_status plm_kv_shift(plm_context *c, uint32_t n_keep, uint32_t n_discard, plm_error *err) {
    if ((uint64_t)n_keep + n_discard > c->n_past)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "cannot drop %u tokens after %u: only %u are cached", n_discard,
                        n_keep, c->n_past);
    if (n_discard == 0) return PLM_OK;
    const uint32_t n_move = c->n_past - n_keep - n_discard;
    const plm_kv_cache *kv = &c->kv;
    for (int il = 0; il < c->model->hp.n_layer; il++) {
        uint8_t *k = kv->k + (size_t)il * kv->n_ctx * kv->k_row, *v = kv->v + (size_t)il * kv->n_ctx * kv->v_row;
        memmove(k + (size_t)n_keep * kv->k_row, k + (size_t)(n_keep + n_discard) * kv->k_row, (size_t)n_move * kv->k_row);
        memmove(v + (size_t)n_keep * kv->v_row, v + (size_t)(n_keep + n_discard) * kv->v_row, (size_t)n_move * kv->v_row);
    }
    plm_llama_rerotate_keys(c, n_keep, n_move, -(int)n_discard);
    c->n_past -= n_discard;
    return PLM_OK;
}

/* With logits_all every token's logits are kept, so the buffer grows to the
 * longest decode call; otherwise one row suffices. */
static plm_status reserve_logits(plm_context *c, int rows, plm_error *err) {
    if (rows <= c->logits_cap) return PLM_OK;
    float *l = realloc(c->logits, (size_t)rows * c->model->hp.n_vocab * sizeof(float));
    if (!l) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for the logits of %d tokens", rows);
    c->logits = l;
    c->logits_cap = rows;
    return PLM_OK;
}

plm_status plm_decode(plm_context *c, const plm_token *tokens, int n, plm_error *err) {
    return plm_decode_tail(c, tokens, n, c->params.logits_all ? n : 1, err);
}

plm_status plm_decode_tail(plm_context *c, const plm_token *tokens, int n, int n_logits, plm_error *err) {
    if (n <= 0) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_decode needs at least one token");
    if (n_logits < 1 || n_logits > n)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "logits of %d of %d tokens asked for", n_logits, n);
    const int n_vocab = c->model->hp.n_vocab;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return plm_fail(err, PLM_ERR_INVALID_ARG, "token %d at index %d is outside the vocabulary (0..%d)",
                            tokens[i], i, n_vocab - 1);
    if ((uint64_t)c->n_past + (uint64_t)n > c->kv.n_ctx)
        return plm_fail(err, PLM_ERR_CONTEXT_FULL,
                        "context full: %u cached + %d new tokens exceed the context length %u (use a larger -c)",
                        c->n_past, n, c->kv.n_ctx);
    plm_status st = reserve_logits(c, n_logits, err);
    if (st) return st;

    /* Evaluate the tokens in chunks of n_batch; each chunk attends to
     * everything cached before it and writes the logits it has of the
     * last n_logits tokens. */
    const int B = (int)c->params.n_batch, first_kept = n - n_logits;
    for (int i = 0; i < n; i += B) {
        const int m = n - i < B ? n - i : B;
        const int first = first_kept > i ? (first_kept - i < m ? first_kept - i : m) : 0;
        float *dst = first < m ? c->logits + (size_t)(i + first - first_kept) * n_vocab : c->logits;
        plm_llama_forward(c, tokens + i, m, c->n_past, first, dst);
        c->n_past += (uint32_t)m;
    }
    c->n_logits = n_logits;
    c->logits_first = first_kept;
    return PLM_OK;
}

void plm_context_share_pool(plm_context *c, plm_context *owner) {
    if (c == owner || c->pool == owner->pool) return;
    if (!c->pool_borrowed) plm_pool_free(c->pool);
    c->pool = owner->pool;
    c->pool_borrowed = true;
}

const float *plm_get_logits(const plm_context *c, int i) {
    if (c->n_logits == 0) return NULL;
    const int last = c->logits_first + c->n_logits - 1;
    if (i < 0) i = last;
    if (i < c->logits_first || i > last) return NULL;
    return c->logits + (size_t)(i - c->logits_first) * c->model->hp.n_vocab;
}
