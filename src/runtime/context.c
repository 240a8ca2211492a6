/* Contexts: KV cache and scratch allocation, batched decode, logits. */
#include "runtime/context.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fault_guard.h"
#include "core/params.h"
#include "runtime/plan.h"
#include "core/threadpool.h"

static plm_context_params context_defaults(void) {
    return (plm_context_params){.struct_size = sizeof(plm_context_params), .n_ctx = 0, .n_batch = 512,
                                .n_threads = 0, .logits_all = false, .type_k = PLM_KV_F16, .type_v = PLM_KV_F16,
                                .flash_attn = false, .n_seq = 1};
}

void plm_context_params_init(plm_context_params *p, size_t struct_size) {
    plm_context_params d = context_defaults();
    plm_params_give(p, struct_size, &d, sizeof d);
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
    free(s->moe);
    free(s->attn_split);
}

/* Every buffer is sized by the memory plan (runtime/plan.c), the same
 * numbers `pocketlm plan` prints: prediction and allocation cannot drift. */
static plm_status scratch_alloc(plm_scratch *s, const plm_plan_buffers *b, uint32_t n_batch, plm_error *err) {
    s->act_row_cap = b->act_row;
    s->moe_batch = n_batch;
    if (b->moe && !(s->moe = malloc(b->moe))) return plm_fail(err, PLM_ERR_NOMEM, "out of memory allocating MoE buffers");
    if (b->attn_split && !(s->attn_split = malloc(b->attn_split)))
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory allocating attention buffers");
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

/* The KV cache this model and these (resolved) params get: the same spec
 * the plan sizes it from. */
static plm_kv_spec kv_spec(const plm_model *m, const plm_context_params *p) {
    return (plm_kv_spec){m->arch, &m->hp, p->n_ctx, p->n_batch, p->type_k, p->type_v, p->n_seq};
}

/* The plan's buffer sizes for this model and these (resolved) params. */
static plm_status plan_buffers(const plm_model *m, const plm_context_params *p, plm_plan_buffers *b,
                               plm_error *err) {
    if ((unsigned)p->type_k > PLM_KV_Q4_0 || (unsigned)p->type_v > PLM_KV_Q4_0)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "unknown KV cache type");
    const plm_kv_spec kv = kv_spec(m, p);
    if (!plm_plan_buffers_for(&kv, p->logits_all, b))
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "a %s/%s KV cache needs a head size divisible by 32 (this model: %d)",
                        plm_kv_type_name(p->type_k), plm_kv_type_name(p->type_v), m->hp.head_dim);
    return PLM_OK;
}

plm_status plm_context_new(plm_model *model, const plm_context_params *params, plm_context **out,
                           plm_error *err) {
    *out = NULL;
    if (!model || !model->layers)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "a context needs a model loaded with weights");
    plm_context_params p = context_defaults();
    plm_status st = plm_params_take(&p, sizeof p, params, "plm_context_params", err);
    if (st) return st;
    const plm_hparams *hp = &model->hp;
    if (p.n_ctx == 0) p.n_ctx = hp->n_ctx_train < 4096 ? (uint32_t)hp->n_ctx_train : 4096;
    if (p.n_ctx > (1u << 24)) return plm_fail(err, PLM_ERR_INVALID_ARG, "context length %u is too large", p.n_ctx);
    if (p.n_batch == 0) p.n_batch = 512;
    if (p.n_batch > p.n_ctx) p.n_batch = p.n_ctx;
    if (p.n_seq == 0) p.n_seq = 1;
    if (p.n_seq > PLM_MAX_SEQ)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "%u sequences: at most %d", p.n_seq, PLM_MAX_SEQ);

    const plm_kernels *kt = plm_kernels_select(NULL);
    if (!kt) return plm_fail(err, PLM_ERR_INVALID_ARG, "PLM_KERNELS names a kernel set this CPU cannot run");

    plm_context *c = calloc(1, sizeof *c);
    if (!c) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    c->model = model;
    c->fwd.model = model;
    c->fwd.kt = kt;
    if (p.n_threads == 0) p.n_threads = plm_default_threads();
    if (p.n_threads > 256) p.n_threads = 256;
    c->params = p;
    c->fwd.flash_attn = p.flash_attn;
    c->fwd.split_runs = plm_attn_split_max_runs(&model->hp);
    c->fwd.coarse_prefill = p.coarse_prefill;
    c->fwd.abort = p.abort;
    c->fwd.abort_user = p.abort_user;
    plm_plan_buffers b;
    st = plan_buffers(model, &p, &b, err);
    if (!st) {
        c->fwd.pool = plm_pool_shared((int)p.n_threads);  /* one set of workers for every context */
        if (!c->fwd.pool) st = plm_fail(err, PLM_ERR_NOMEM, "cannot start %u threads", p.n_threads);
    }
    if (!st) {
        const plm_kv_spec kv = kv_spec(model, &p);
        st = plm_kv_init(&c->fwd.kv, &kv, err);
    }
    if (!st) st = scratch_alloc(&c->fwd.s, &b, p.n_batch, err);
    if (!st) {
        c->logits_cap = plm_plan_logits_rows(p.n_batch, p.n_seq, p.logits_all);
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
    plm_pool_free(c->fwd.pool);
    plm_kv_free(&c->fwd.kv);
    scratch_free(&c->fwd.s);
    free(c->logits);
    free(c->poisoned);
    free(c);
}

/* The single-sequence calls act on sequence 0. */
enum { SEQ = 0 };

uint32_t plm_context_n_ctx(const plm_context *c) { return c->fwd.kv.n_ctx; }
uint32_t plm_context_n_past(const plm_context *c) { return plm_kv_seq_len(&c->fwd.kv, SEQ); }

void plm_context_set_batch_invariant(plm_context *c, bool on) { c->batch_invariant = on; }

int plm_context_n_seq(const plm_context *c) { return (int)c->fwd.kv.n_seq; }

static bool seq_known(const plm_context *c, plm_seq_id seq) { return seq >= 0 && (uint32_t)seq < c->fwd.kv.n_seq; }

uint32_t plm_seq_n_past(const plm_context *c, plm_seq_id seq) {
    return seq_known(c, seq) ? plm_kv_seq_len(&c->fwd.kv, seq) : 0;
}

void plm_seq_truncate(plm_context *c, plm_seq_id seq, uint32_t pos) {
    if (seq_known(c, seq)) plm_kv_seq_truncate(&c->fwd.kv, seq, pos);
}

plm_status plm_seq_copy(plm_context *c, plm_seq_id src, plm_seq_id dst, plm_error *err) {
    return plm_kv_seq_copy(&c->fwd.kv, src, dst, err);
}

void plm_kv_truncate(plm_context *c, uint32_t pos) { plm_kv_seq_truncate(&c->fwd.kv, SEQ, pos); }

plm_status plm_kv_shift(plm_context *c, uint32_t n_keep, uint32_t n_discard, plm_error *err) {
    return plm_kv_seq_shift(&c->fwd.kv, SEQ, n_keep, n_discard, plm_forward_rerotate, &c->fwd, err);
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

typedef struct decode_job {
    plm_context *c;
    const plm_token *tokens;
    const plm_seq_id *seqs;  /* NULL: every token in sequence 0 */
    uint32_t *pos;           /* [n_batch] positions of a chunk with seqs */
    int n, n_logits;
    int n_done;              /* tokens evaluated and committed */
    bool aborted;            /* the abort callback stopped it */
} decode_job;

/* A chunk's batch: positions follow each token's sequence. */
static plm_ubatch chunk_batch(const decode_job *j, int i, int m) {
    const plm_kv_cache *kv = &j->c->fwd.kv;
    plm_ubatch b = {.tokens = j->tokens + i, .n = m};
    if (!j->seqs) {
        b.pos0 = plm_kv_seq_len(kv, SEQ);
        return b;
    }
    b.seq = j->seqs + i;
    for (int t = 0; t < m; t++) {
        uint32_t p = plm_kv_seq_len(kv, b.seq[t]);
        for (int u = 0; u < t; u++) p += b.seq[u] == b.seq[t];
        j->pos[t] = p;
    }
    b.pos = j->pos;
    return b;
}

/* Evaluates the tokens in chunks of n_batch; each chunk attends to
 * everything cached before it and writes the logits it has of the last
 * n_logits tokens. */
static void decode_chunks(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    decode_job *j = arg;
    plm_context *c = j->c;
    const int B = (int)c->params.n_batch, n = j->n, n_vocab = c->model->hp.n_vocab;
    const int first_kept = n - j->n_logits;
    for (int i = 0; i < n; i += B) {
        const int m = n - i < B ? n - i : B;
        const int first = first_kept > i ? (first_kept - i < m ? first_kept - i : m) : 0;
        float *dst = first < m ? c->logits + (size_t)(i + first - first_kept) * n_vocab : c->logits;
        const plm_ubatch b = chunk_batch(j, i, m);
        const bool rowwise = c->fwd.rowwise_matmul;
        const int from = c->fwd.rowwise_from;  /* of the whole pass: this chunk's share */
        c->fwd.rowwise_matmul = rowwise || c->batch_invariant;
        c->fwd.rowwise_from = c->batch_invariant ? 0 : from - i < 0 ? 0 : from - i > m ? m : from - i;
        const bool done = plm_forward(&c->fwd, &b, first, dst);  /* polls abort before each layer */
        c->fwd.rowwise_matmul = rowwise;
        c->fwd.rowwise_from = from;
        if (!done) {
            j->aborted = true;
            return;
        }
        plm_kv_commit(&c->fwd.kv, &b);
        j->n_done += m;
    }
}

plm_status plm_decode(plm_context *c, const plm_token *tokens, int n, plm_error *err) {
    return plm_decode_tail(c, tokens, n, c->params.logits_all ? n : 1, err);
}

plm_status plm_decode_tail(plm_context *c, const plm_token *tokens, int n, int n_logits, plm_error *err) {
    return plm_decode_seqs(c, tokens, NULL, n, n_logits, err);
}

/* Room in every sequence the batch appends to. */
static plm_status check_room(const plm_context *c, const plm_seq_id *seqs, int n, plm_error *err) {
    const plm_kv_cache *kv = &c->fwd.kv;
    if (!seqs) {
        const uint32_t n_past = plm_kv_seq_len(kv, SEQ);
        if ((uint64_t)n_past + (uint64_t)n > kv->n_ctx)
            return plm_fail(err, PLM_ERR_CONTEXT_FULL,
                            "context full: %u cached + %d new tokens exceed the context length %u (use a larger -c)",
                            n_past, n, kv->n_ctx);
        return PLM_OK;
    }
    for (int i = 0; i < n; i++)
        if (seqs[i] < 0 || (uint32_t)seqs[i] >= kv->n_seq)
            return plm_fail(err, PLM_ERR_INVALID_ARG, "token %d is in sequence %d; the context has %u", i, seqs[i],
                            kv->n_seq);
    for (int i = 0; i < n; i++) {
        uint64_t need = plm_kv_seq_len(kv, seqs[i]);
        for (int k = 0; k < n; k++) need += seqs[k] == seqs[i];
        if (need > kv->n_ctx)
            return plm_fail(err, PLM_ERR_CONTEXT_FULL, "sequence %d full: %u cached + new tokens exceed %u", seqs[i],
                            plm_kv_seq_len(kv, seqs[i]), kv->n_ctx);
    }
    return PLM_OK;
}

plm_status plm_decode_in_seq(plm_context *c, plm_seq_id seq, const plm_token *tokens, int n, plm_error *err) {
    if (seq == SEQ) return plm_decode(c, tokens, n, err);
    plm_seq_id *seqs = n > 0 ? malloc((size_t)n * sizeof *seqs) : NULL;
    if (n > 0 && !seqs) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for a batch's sequence ids");
    for (int i = 0; i < n; i++) seqs[i] = seq;
    plm_status st = plm_decode_seqs(c, tokens, seqs, n, c->params.logits_all ? n : 1, err);
    free(seqs);
    return st;
}

plm_status plm_decode_seqs(plm_context *c, const plm_token *tokens, const plm_seq_id *seqs, int n, int n_logits,
                           plm_error *err) {
    if (n <= 0) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_decode needs at least one token");
    if (n_logits < 1 || n_logits > n)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "logits of %d of %d tokens asked for", n_logits, n);
    const int first_kept = n - n_logits;
    const int n_vocab = c->model->hp.n_vocab;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return plm_fail(err, PLM_ERR_INVALID_ARG, "token %d at index %d is outside the vocabulary (0..%d)",
                            tokens[i], i, n_vocab - 1);
    plm_status st = check_room(c, seqs, n, err);
    if (st) return st;
    if (c->poisoned) return plm_fail(err, PLM_ERR_IO, "%s", c->poisoned);
    st = reserve_logits(c, n_logits, err);
    if (!st && !c->fwd.pool && !(c->fwd.pool = plm_pool_shared((int)c->params.n_threads)))  /* trimmed: restart */
        st = plm_fail(err, PLM_ERR_NOMEM, "cannot start %u threads", c->params.n_threads);
    if (st) return st;

    /* The forward pass runs under a SIGBUS recovery point (core/fault_guard):
     * a model file that shrank under its mapping poisons the context instead
     * of killing the process. */
    uint32_t *pos = seqs ? malloc(c->params.n_batch * sizeof *pos) : NULL;
    if (seqs && !pos) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for a batch's positions");
    decode_job job = {c, tokens, seqs, pos, n, n_logits, 0, false};
    const void *addr = NULL;
    const bool ok = plm_fault_guard_call(decode_chunks, &job, 0, 1, &addr);
    free(pos);
    if (!ok) {
        char msg[1024];
        plm_fault_guard_describe(addr, msg, sizeof msg);
        c->poisoned = strdup(msg);
        c->n_logits = 0;
        return plm_fail(err, PLM_ERR_IO, "%s", msg);
    }
    if (job.aborted) {
        c->n_logits = 0;
        return plm_fail(err, PLM_ERR_ABORTED, "decode aborted after %d of %d tokens", job.n_done, n);
    }
    c->n_logits = n_logits;
    c->logits_first = first_kept;
    return PLM_OK;
}

bool plm_context_poisoned(const plm_context *c) { return c && c->poisoned; }

/* ---- memory pressure ------------------------------------------------------- */

/* Hands the whole pages inside [p, p + n) back to the kernel; they read as
 * zeros when next touched.  Returns the bytes released. */
static uint64_t release(void *p, size_t n) {
    if (!p || !n) return 0;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + n) & ~(page - 1);
    if (b <= a || madvise((void *)a, b - a, MADV_DONTNEED) != 0) return 0;
    return b - a;
}

uint64_t plm_context_trim(plm_context *c, plm_trim_level level) {
    if (!c) return 0;
    plm_plan_buffers b;
    if (plan_buffers(c->model, &c->params, &b, NULL)) return 0;
    /* Scratch: rewritten before it is read by every forward pass. */
    plm_scratch *s = &c->fwd.s;
    uint64_t n = release(s->x, b.x) + release(s->xn, b.xn) + release(s->q, b.q) + release(s->k, b.k) +
                 release(s->v, b.v) + release(s->gate, b.gate) + release(s->up, b.up) + release(s->moe, b.moe) +
                 release(s->attn_split, b.attn_split);
    for (int i = 0; i < 3; i++) n += release(s->act[i], b.act);
    /* Idle workers: this context's hold on them (the last holder's release
     * stops the threads); plm_decode takes them again. */
    plm_pool_free(c->fwd.pool);
    c->fwd.pool = NULL;
    if (level >= PLM_TRIM_KV) n += plm_kv_release_unused(&c->fwd.kv);
    if (level >= PLM_TRIM_WEIGHTS && c->model->file->mapped)
        n += release((void *)c->model->file->image, (size_t)c->model->file->size);
    return n;
}

const float *plm_get_logits(const plm_context *c, int i) {
    if (c->n_logits == 0) return NULL;
    const int last = c->logits_first + c->n_logits - 1;
    if (i < 0) i = last;
    if (i < c->logits_first || i > last) return NULL;
    return c->logits + (size_t)(i - c->logits_first) * c->model->hp.n_vocab;
}
