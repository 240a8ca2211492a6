/*
 * Memory planning: the bill for running a model, from its GGUF header or
 * from bare numbers.  See docs/MEMORY.md for the model and its accuracy.
 *
 * Every line of the bill is counted the way Linux counts resident memory:
 * in pages, for the bytes a run actually touches.  Allocations of 128 KiB or
 * more come from mmap (glibc's threshold), so their untouched pages never
 * become resident; smaller ones come from the heap.
 */
#include "runtime/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/moe.h"
#include "pocketlm_gguf.h"
#include "pocketlm_plan.h"
#include "quant/repack.h"
#include "quant/types.h"

/* Process baseline of `pocketlm run`, measured on x86_64 Linux (glibc) with
 * stories260K (F32 weights): code and data pages of the binary, libc, libm,
 * PCRE2 and utf8proc that a run touches, the main stack, stdio buffers and
 * the allocator's own pages.  How it was measured: docs/MEMORY.md. */
#define PLAN_OVERHEAD_BYTES (3830u * 1024u)  /* text 2004 KB (size(1)); grows with it */
/* The binary's code that quantized or f16 weights touch beyond F32's float
 * kernels (activation quantizers, integer dots and gemms, f16 conversion):
 * 120-176 KiB more resident text, measured in /proc/PID/smaps. */
#define PLAN_KERNEL_CODE_BYTES (128u * 1024u)
/* Stack of a prefill gemm on quantized weights, per thread: the AVX-512
 * panel kernel's packed 16-row panel (24 KiB), its activation table (80 KiB)
 * and K-quant decode buffers (9 KiB), rounded up; the other tables use less.
 * Touched once a batch reaches GEMM_STACK_MIN_BATCH tokens (the panel
 * kernel's threshold; smaller batches go row by row). */
#define PLAN_GEMM_STACK_BYTES (128u * 1024u)
#define GEMM_STACK_MIN_BATCH 16u
/* Stack of the attention, per thread: a block of keys and one of values
 * staged in f32 (32 KiB; AVX-512 stages only the keys and holds the query
 * in f32, 20 KiB), the query heads of a unit in f16 or Q8_0 (8 KiB), a block of
 * scores per head (4 KiB), and over a split token's keys (forward.c,
 * attend_unit) one run's output in f32 (16 KiB) and the runs' stats (4
 * KiB): 64 KiB at most.  It reuses the pages a gemm's stack touched, so a
 * thread counts the larger of the two. */
#define PLAN_ATTN_STACK_BYTES (64u * 1024u)
/* A worker thread of the pool: touched stack pages, TLS, guard bookkeeping. */
#define PLAN_THREAD_BYTES (24u * 1024u)
/* PCRE2 patterns compiled (with JIT) for a BPE pre-tokenizer: an estimate. */
#define PLAN_PRETOK_BYTES (256u * 1024u)
#define MMAP_THRESHOLD (128u * 1024u)

/* Kernel stack pages a thread touches with batches of `batch` tokens. */
static uint64_t stack_bytes(int act_slots, uint64_t batch, uint32_t n_threads) {
    const bool gemm = act_slots > 0 && batch >= GEMM_STACK_MIN_BATCH;
    return (uint64_t)n_threads * (gemm ? PLAN_GEMM_STACK_BYTES : PLAN_ATTN_STACK_BYTES);
}

static const plm_quant quants[] = {
    /* Average bits per weight of llama.cpp's mixtures, as its quantize README
     * reports them for Llama-2-7B (tools/quantize/README.md); F16, Q8_0 and
     * Q4_0 are their block sizes (every tensor in that type). */
    {"F16", 16.0},  {"Q8_0", 8.5},    {"Q6_K", 6.56},   {"Q5_K_M", 5.68},
    {"Q4_K_M", 4.84}, {"Q4_0", 4.5}, {"Q3_K_M", 3.91}, {"Q2_K", 3.35},
};

const plm_quant *plm_plan_quants(int *n) {
    if (n) *n = (int)(sizeof quants / sizeof quants[0]);
    return quants;
}

const plm_quant *plm_plan_quant_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof quants / sizeof quants[0]; i++) {
        const char *a = quants[i].name, *b = name;
        while (*a && *b && (*a | 0x20) == (*b | 0x20)) a++, b++;
        if (!*a && !*b) return &quants[i];
    }
    return NULL;
}

static uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }
static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Resident bytes of a malloc of n bytes once all of it has been written. */
static uint64_t alloc_resident(uint64_t n) {
    if (n == 0) return 0;
    if (n >= MMAP_THRESHOLD) return round_up(n + 16, PLM_PLAN_PAGE);
    return round_up(n + 8, 16);
}

/* Resident bytes of a malloc of n bytes of which only [0, used) was written. */
static uint64_t alloc_touched(uint64_t n, uint64_t used) {
    if (used >= n) return alloc_resident(n);
    if (n < MMAP_THRESHOLD) return alloc_resident(n); /* heap pages: shared with others, count all */
    return used ? round_up(used + 16, PLM_PLAN_PAGE) : 0;
}

/* Pages touched by `rows` rows `stride` bytes apart, each written for its
 * first `used` bytes, in an mmap'd block (payload 16 bytes into its page). */
static uint64_t rows_touched(uint64_t alloc, uint64_t rows, uint64_t stride, uint64_t used) {
    if (rows == 0 || used == 0) return 0;
    if (alloc < MMAP_THRESHOLD) return alloc_resident(alloc);
    if (used >= stride) return alloc_touched(alloc, rows * stride);
    uint64_t pages = 0, last = UINT64_MAX;
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t a = (16 + r * stride) / PLM_PLAN_PAGE, b = (16 + r * stride + used - 1) / PLM_PLAN_PAGE;
        if (last != UINT64_MAX && a <= last) a = last + 1;
        if (b >= a) pages += b - a + 1;
        if (last == UINT64_MAX || b > last) last = b;
    }
    return pages * PLM_PLAN_PAGE;
}

plm_plan_params plm_plan_default_params(void) {
    return (plm_plan_params){.n_ctx = 0, .n_batch = 512, .n_threads = 0, .type_k = PLM_KV_F16,
                             .type_v = PLM_KV_F16, .use_mmap = true, .logits_all = false, .n_seq = 1};
}

bool plm_plan_buffers_for(const plm_kv_spec *spec, bool logits_all, plm_plan_buffers *o) {
    memset(o, 0, sizeof *o);
    const plm_hparams *d = spec->hp;
    /* gate/up also hold the attention output (n_embd wide); a MoE model's
     * FFN has buffers of its own (moe), so they need nothing wider */
    const uint64_t B = spec->n_batch, E = (uint64_t)d->n_embd, q_dim = (uint64_t)d->n_head * d->head_dim,
                   kv_dim = (uint64_t)d->n_head_kv * d->head_dim,
                   ff = d->n_expert > 0 ? E : max_u64((uint64_t)d->n_ff, E);
    plm_kv_size kv;
    if (!plm_kv_size_of(spec, &kv)) return false;
    o->kv_row_k = kv.k_row;
    o->kv_row_v = kv.v_row;
    o->kv_k = kv.k_bytes;
    o->kv_v = kv.v_bytes;
    o->x = B * E * 4;
    o->xn = B * max_u64(E, q_dim) * 4;
    o->q = B * q_dim * 4;
    o->k = o->v = B * kv_dim * 4;
    o->gate = o->up = B * ff * 4;
    /* The widest input row, in the largest activation format (Q8_K). */
    o->act_row = (max_u64(max_u64(E, q_dim), ff) + 255) / 256 * 292;
    o->act = B * o->act_row;
    o->logits = (uint64_t)plm_plan_logits_rows(spec->n_batch, spec->n_seq, logits_all) * (uint64_t)d->n_vocab * 4;
    o->moe = plm_moe_scratch_bytes(d, spec->n_batch);
    o->attn_split = plm_attn_split_bytes(d, spec->n_ctx);
    return true;
}

/* ---- what a file's weights ask of the activation slots ------------------- */

typedef struct act_use {
    int n_slots;             /* slots a step ever needs */
    uint64_t used[PLM_PLAN_ACT_SLOTS]; /* widest row written into each slot */
} act_use;

/* One matmul step: weights sharing an input of k elements.  Mirrors
 * prepare_inputs() in model/forward.c: F32-consuming weights read the input in
 * place; others get a slot per distinct activation format, in order. */
static void step_use(act_use *u, const uint32_t *types, int n, uint64_t k) {
    uint32_t seen[PLM_PLAN_ACT_SLOTS];
    int n_seen = 0;
    for (int i = 0; i < n; i++) {
        const plm_type_info *ti = plm_type_info_get(types[i]);
        if (!ti || ti->vec_dot_type == PLM_TYPE_F32) continue;
        int s = 0;
        while (s < n_seen && seen[s] != ti->vec_dot_type) s++;
        if (s == n_seen) {
            if (n_seen == PLM_PLAN_ACT_SLOTS) continue;
            seen[n_seen++] = ti->vec_dot_type;
        }
        uint64_t bytes = plm_row_size(ti->vec_dot_type, (int64_t)k);
        if (bytes > u->used[s]) u->used[s] = bytes;
    }
    if (n_seen > u->n_slots) u->n_slots = n_seen;
}

/* ---- the bill -------------------------------------------------------------- */

/* The descriptor a plan stands for: its file's, or llama's for a shape. */
static const plm_arch *plan_arch(const plm_plan *p) {
    const plm_arch *a = plm_arch_find(p->arch);
    return a ? a : &plm_arch_llama;
}

/* The hyperparameters the buffers depend on, back from the plan's fields
 * (a plan is a plain value: plm_plan_set_ctx recomputes from it alone). */
static plm_hparams plan_hparams(const plm_plan *p) {
    plm_hparams hp = {0};
    hp.n_layer = (int)p->n_layer;
    hp.n_embd = (int)p->n_embd;
    hp.n_head = (int)p->n_head;
    hp.n_head_kv = (int)p->n_head_kv;
    hp.head_dim = (int)p->head_dim;
    hp.n_ff = (int)p->n_ff;
    hp.n_vocab = (int)p->n_vocab;
    hp.n_expert = (int)p->n_expert;
    hp.n_expert_used = (int)p->n_expert_used;
    hp.n_ff_expert = (int)p->n_ff_expert;
    hp.n_swa = (int)p->n_swa;
    hp.swa_pattern = (int)p->swa_pattern;
    return hp;
}

static plm_kv_spec plan_kv_spec(const plm_plan *p, const plm_hparams *hp) {
    const plm_plan_params *pp = &p->params;
    return (plm_kv_spec){plan_arch(p), hp, pp->n_ctx, pp->n_batch, pp->type_k, pp->type_v, pp->n_seq};
}

/* Resident bytes of the scratch buffers when `rows` rows of each were
 * written (a MoE model's `up` is never written: its FFN has its own buffers,
 * of which a run with quantized experts never touches the spare input slot,
 * and one with F16/F32 experts none of the input slots). */
static uint64_t buffers_touched(const plm_plan *p, uint64_t rows) {
    const plm_plan_buffers *b = &p->buf;
    const uint64_t B = p->params.n_batch ? p->params.n_batch : 1;
    uint64_t s = alloc_touched(b->x, b->x / B * rows) + alloc_touched(b->xn, b->xn / B * rows) +
                 alloc_touched(b->q, b->q / B * rows) + alloc_touched(b->k, b->k / B * rows) +
                 alloc_touched(b->v, b->v / B * rows) + alloc_touched(b->gate, b->gate / B * rows) +
                 alloc_touched(b->up, p->n_expert ? 0 : b->up / B * rows) + alloc_resident(b->logits);
    if (b->moe) {
        const plm_hparams hp = plan_hparams(p);
        s += alloc_touched(b->moe, plm_moe_scratch_touched(&hp, p->params.n_batch, (uint32_t)rows,
                                                           p->moe_quantized));
    }
    return s;
}

/* The split attention's scratch once a token attends to enough keys to
 * split them (forward.h): its runs, and the scores of the keys so far (the
 * exact mode's; flash leaves them untouched). */
static uint64_t split_touched(const plm_plan *p, uint64_t n_tokens) {
    if (n_tokens < 2 * PLM_ATTN_SPLIT_KEYS) return alloc_touched(p->buf.attn_split, 0);
    const plm_hparams hp = plan_hparams(p);
    const uint32_t keys = (uint32_t)min_u64(n_tokens, p->params.n_ctx);
    return alloc_touched(p->buf.attn_split, plm_attn_split_bytes(&hp, keys));
}

static void finish(plm_plan *p);

/* The verification's logits: draft_max + 1 rows of the target's vocabulary
 * for each sequence (serve --parallel verifies every slot's drafts in one
 * pass). */
static uint64_t verify_logits(const plm_plan *p) {
    const uint64_t n_seq = p->params.n_seq ? p->params.n_seq : 1;
    return alloc_resident(n_seq * (uint64_t)(p->draft_max + 1) * p->n_vocab * sizeof(float));
}

/* The draft at the target's context length, its overhead already counted. */
static void add_draft_bill(plm_plan *p) {
    p->draft_bytes = p->draft_anon_bytes = 0;
    if (!p->draft) return;
    plm_plan d = *p->draft;
    d.draft = NULL;
    d.params.n_ctx = p->params.n_ctx;
    if (d.params.n_batch > d.params.n_ctx) d.params.n_batch = d.params.n_ctx;
    finish(&d);
    p->draft_bytes = d.peak_rss - d.overhead_bytes + verify_logits(p);
    p->draft_anon_bytes = d.anon_bytes - d.overhead_bytes + verify_logits(p);
    p->peak_rss += p->draft_bytes;
    p->anon_bytes += p->draft_anon_bytes;
}

/* Facts about a plan that do not depend on the context: kept in the struct
 * so plm_plan_set_ctx can recompute the rest. */
static void finish(plm_plan *p) {
    const plm_plan_params *pp = &p->params;
    const plm_hparams hp = plan_hparams(p);
    const plm_kv_spec kv = plan_kv_spec(p, &hp);
    plm_plan_buffers_for(&kv, pp->logits_all, &p->buf);
    const plm_plan_buffers *b = &p->buf;
    p->kv_bytes = alloc_resident(b->kv_k) + alloc_resident(b->kv_v);
    uint64_t s = buffers_touched(p, pp->n_batch);
    for (int i = 0; i < PLM_PLAN_ACT_SLOTS; i++)
        s += i < p->act_slots ? rows_touched(b->act, pp->n_batch, b->act_row, p->act_used[i])
                               : (b->act < MMAP_THRESHOLD ? alloc_resident(b->act) : 0);
    s += stack_bytes(p->act_slots, pp->n_batch, pp->n_threads) + split_touched(p, pp->n_ctx);
    p->scratch_bytes = s;

    /* Weights.  mmap: the header was parsed (touched), every tensor is read
     * per token, except an untied token_embd: one row per token seen. */
    if (pp->use_mmap) {
        uint64_t embd_untouched = 0;
        if (!p->tied_output && p->embd_bytes) {
            uint64_t rows = min_u64(p->n_vocab, pp->n_ctx);
            uint64_t per_row = (p->embd_row_bytes + PLM_PLAN_PAGE - 1) / PLM_PLAN_PAGE * PLM_PLAN_PAGE +
                               (p->embd_row_bytes % PLM_PLAN_PAGE ? PLM_PLAN_PAGE : 0);
            uint64_t touched = min_u64(p->embd_bytes, rows * per_row);
            embd_untouched = p->embd_bytes - touched;
        }
        p->weights_resident = round_up(p->file_bytes, PLM_PLAN_PAGE) - embd_untouched;
    } else {
        p->weights_resident = alloc_resident(p->file_bytes);
    }
    /* Repacked: the copies are anonymous; with mmap the file pages they
     * came from are released (model/repack.c), the rest stay. */
    p->repack_bytes = pp->repack ? p->repackable_bytes : 0;
    if (pp->use_mmap) p->weights_resident -= min_u64(p->weights_resident, p->repack_bytes);
    p->peak_rss = p->weights_resident + p->kv_bytes + p->scratch_bytes + p->vocab_bytes + p->model_bytes +
                  p->overhead_bytes + p->repack_bytes;
    p->anon_bytes = p->peak_rss - (pp->use_mmap ? p->weights_resident : 0);
    add_draft_bill(p);

    /* Traffic per token: the active weights (a file's exact bytes; a shape's
     * share of its parameters), one row of an untied embedding. */
    const double active = p->n_params ? (double)p->n_params_active / (double)p->n_params : 1.0;
    if (p->weight_bytes_active)
        p->decode_bytes = p->tied_output ? p->weight_bytes_active
                                         : p->weight_bytes_active - p->embd_bytes + p->embd_row_bytes;
    else
        p->decode_bytes = (uint64_t)((double)(p->tied_output ? p->weight_bytes
                                                             : p->weight_bytes - p->embd_bytes + p->embd_row_bytes) *
                                     active);
    /* A full context: each layer reads the positions it sees (a windowed
     * layer: its window) of keys and values. */
    uint64_t seen = 0;
    for (uint32_t il = 0; il < p->n_layer; il++) {
        const uint32_t w = plm_arch_layer_window(kv.arch, &hp, (int)il);
        seen += w && w < pp->n_ctx ? w : pp->n_ctx;
    }
    p->kv_read_full = seen * (b->kv_row_k + b->kv_row_v);
    p->decode_flops = 2.0 * (double)p->n_params_active + 4.0 * (double)seen * p->n_head * p->head_dim;
}

static plm_status check_kv(const plm_plan *p, plm_error *err) {
    const plm_plan_params *pp = &p->params;
    if ((unsigned)pp->type_k > PLM_KV_Q4_0 || (unsigned)pp->type_v > PLM_KV_Q4_0)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "unknown KV cache type");
    if ((pp->type_k != PLM_KV_F16 || pp->type_v != PLM_KV_F16) && p->head_dim % 32)
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "a %s/%s KV cache needs a head size divisible by 32 (this model: %u)",
                        plm_kv_type_name(pp->type_k), plm_kv_type_name(pp->type_v), p->head_dim);
    return PLM_OK;
}

static void resolve_params(plm_plan *p, const plm_plan_params *in) {
    plm_plan_params pp = in ? *in : plm_plan_default_params();
    if (pp.n_ctx == 0) pp.n_ctx = p->n_ctx_train && p->n_ctx_train < 4096 ? p->n_ctx_train : 4096;
    if (pp.n_batch == 0) pp.n_batch = 512;
    if (pp.n_batch > pp.n_ctx) pp.n_batch = pp.n_ctx;
    if (pp.n_seq == 0) pp.n_seq = 1;
    if (pp.n_threads == 0) pp.n_threads = plm_default_threads();
    if (pp.n_threads > 256) pp.n_threads = 256;
    p->params = pp;
}

void plm_plan_set_ctx(plm_plan *p, uint32_t n_ctx) {
    p->params.n_ctx = n_ctx ? n_ctx : p->params.n_ctx;
    if (p->params.n_batch > p->params.n_ctx) p->params.n_batch = p->params.n_ctx;
    finish(p);
}

/* ---- from a file ----------------------------------------------------------- */

static uint64_t pow2_at_least(uint64_t n, uint64_t min) {
    uint64_t c = min;
    while (c < n) c <<= 1;
    return c;
}

/* Parsed metadata (plm_gguf_file) and tokenizer tables, as gguf_read.c and
 * tokenizer/ allocate them. */
static uint64_t vocab_bill(const plm_gguf_file *f) {
    uint64_t heap = 0, big = 0;
#define ADD(n) do { uint64_t n_ = (n); if (n_ >= MMAP_THRESHOLD) big += alloc_resident(n_); else heap += n_ + 16; } while (0)
    ADD(sizeof(plm_gguf_file));
    ADD(f->n_kv * sizeof(plm_gguf_kv));
    ADD(pow2_at_least(2 * f->n_kv, 8) * 8);
    ADD(f->n_tensors * sizeof(plm_gguf_tensor));
    ADD(pow2_at_least(2 * f->n_tensors, 8) * 8);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const plm_gguf_value *v = &f->kv[i].value;
        if (v->type == PLM_GGUF_TYPE_ARRAY && v->v.arr.items) ADD(v->v.arr.n * sizeof(plm_gguf_value));
    }
    const plm_gguf_array *toks = plm_gguf_get_arr(f, "tokenizer.ggml.tokens");
    if (toks && toks->type == PLM_GGUF_TYPE_STRING) {
        uint64_t n = toks->n, bytes = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t len = plm_gguf_arr_str(toks, i).len;
            bytes += len ? len : 16;
        }
        ADD(bytes);                         /* strtab bytes */
        ADD((n + 1) * 4);                   /* offsets */
        ADD(pow2_at_least(2 * n, 16) * 8);  /* hash slots */
        ADD(n * 4);                         /* scores */
        ADD(n * 4);                         /* attributes */
        const plm_gguf_array *ty = plm_gguf_get_arr(f, "tokenizer.ggml.token_type");
        uint64_t special = 0;
        if (ty)
            for (uint64_t i = 0; i < ty->n && i < n; i++) {
                int64_t t = plm_gguf_arr_i64(ty, i);
                special += t == 2 || t == 3 || t == 4;
            }
        ADD(special * 4);
    }
    const plm_gguf_array *merges = plm_gguf_get_arr(f, "tokenizer.ggml.merges");
    plm_gguf_str model;
    if (plm_gguf_get_str(f, "tokenizer.ggml.model", &model) && plm_gguf_str_eq(model, "gpt2")) {
        if (merges && merges->type == PLM_GGUF_TYPE_STRING) {
            uint64_t bytes = 0;
            for (uint64_t i = 0; i < merges->n; i++) bytes += plm_gguf_arr_str(merges, i).len;
            ADD(bytes);
            ADD((merges->n + 1) * 4);
            ADD(pow2_at_least(2 * merges->n, 16) * 8);
        }
        big += PLAN_PRETOK_BYTES;
    }
#undef ADD
    return round_up(heap, PLM_PLAN_PAGE) + big;
}

static int add_type(plm_plan *p, const char *name) {
    for (int i = 0; i < p->n_types; i++)
        if (!strcmp(p->types[i].type, name)) return i;
    if (p->n_types == PLM_PLAN_MAX_TYPES) return PLM_PLAN_MAX_TYPES - 1;
    snprintf(p->types[p->n_types].type, sizeof p->types[0].type, "%s", name);
    return p->n_types++;
}

/* Activation slots the file's weights need: each step of the descriptor's
 * layer table (the matrices that share one input), then the output. */
static act_use acts_from_file(const plm_gguf_file *f, const plm_arch *arch, const plm_hparams *hp) {
    act_use u = {0};
    char nm[96];
    for (int il = 0; il < hp->n_layer; il++)
        for (plm_step step = PLM_STEP_QKV; step <= PLM_STEP_FFN_OUT; step++) {
            uint32_t types[8];
            int n = 0;
            uint64_t k = 0;
            for (const plm_tensor_spec *t = arch->layer; t->name && n < 8; t++) {
                /* the MoE step converts its inputs in its own buffers (model/moe.c) */
                if (t->step != step || t->kind == PLM_T_ROUTER || plm_dim_experts(hp, t->ne1)) continue;
                snprintf(nm, sizeof nm, t->name, il);
                const plm_gguf_tensor *g = plm_gguf_find_tensor(f, nm);
                if (!g) continue;
                types[n++] = g->type;
                k = (uint64_t)plm_dim_size(hp, t->ne0);
            }
            if (n) step_use(&u, types, n, k);
        }
    for (const plm_tensor_spec *t = arch->globals; t->name; t++) {
        if (t->step != PLM_STEP_OUTPUT) continue;
        const plm_gguf_tensor *g = plm_gguf_find_tensor(f, t->name);
        if (!g && t->need == PLM_TIED) g = plm_gguf_find_tensor(f, t->tied_to);
        if (g) step_use(&u, &g->type, 1, (uint64_t)plm_dim_size(hp, t->ne0));
    }
    return u;
}

/* The file's architecture and hyperparameters, as loading reads them (the
 * descriptor's keys and defaults), into the plan's fields. */
static plm_status plan_hparams_from_file(plm_plan *p, const char *path, const plm_gguf_file *f, const plm_arch **arch,
                                         plm_hparams *hp, plm_error *err) {
    plm_gguf_str s;
    if (!plm_gguf_get_str(f, "general.architecture", &s))
        return plm_fail(err, PLM_ERR_FORMAT, "%s: metadata general.architecture is missing", path);
    plm_gguf_str_copy(s, p->arch, sizeof p->arch);
    if (plm_gguf_get_str(f, "general.name", &s)) plm_gguf_str_copy(s, p->name, sizeof p->name);
    *arch = plm_arch_find(p->arch);
    if (*arch) *arch = plm_arch_for_file(*arch, f);
    if (!*arch) {
        char names[256];
        plm_arch_names(names, sizeof names);
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "%s: unknown architecture '%s'; supported: %s", path, p->arch,
                        names);
    }
    plm_status st = plm_hparams_read(*arch, f, hp, err);
    if (st) return st;
    if (hp->n_vocab <= 0) {
        const plm_gguf_array *toks = plm_gguf_get_arr(f, "tokenizer.ggml.tokens");
        hp->n_vocab = toks && toks->n <= INT32_MAX ? (int)toks->n : 0;
    }
    p->n_embd = (uint32_t)hp->n_embd;
    p->n_layer = (uint32_t)hp->n_layer;
    p->n_head = (uint32_t)hp->n_head;
    p->n_head_kv = (uint32_t)hp->n_head_kv;
    p->head_dim = (uint32_t)hp->head_dim;
    p->n_ff = (uint32_t)hp->n_ff;
    p->n_ctx_train = (uint32_t)hp->n_ctx_train;
    p->n_vocab = (uint32_t)hp->n_vocab;
    p->n_expert = (uint32_t)hp->n_expert;
    p->n_expert_used = (uint32_t)hp->n_expert_used;
    p->n_ff_expert = (uint32_t)hp->n_ff_expert;
    p->n_swa = (uint32_t)hp->n_swa;
    p->swa_pattern = (uint32_t)hp->swa_pattern;
    for (int il = 0; il < hp->n_layer; il++) p->n_layer_swa += plm_arch_layer_window(*arch, hp, il) != 0;
    return PLM_OK;
}

bool plm_plan_repack_pays(const plm_plan *p) {
    int best = -1;
    for (int i = 0; i < p->n_types; i++)
        if (best < 0 || p->types[i].bytes > p->types[best].bytes) best = i;
    if (best < 0) return false;
    const char *type = p->types[best].type;
    if (strcmp(type, "Q4_0") == 0) return true;
    const plm_kernels *kt = plm_kernels_select(NULL);
    if (!kt || strcmp(kt->name, "avx512") != 0) return false;
    const int t = plm_type_from_name(type);
    return t >= 0 && plm_kernels_repacks(kt, (plm_type)t);
}

plm_status plm_plan_file(const char *path, const plm_plan_params *params, plm_plan *p, plm_error *err) {
    memset(p, 0, sizeof *p);
    plm_gguf_open_params gp = {.use_mmap = true};
    plm_gguf_file *f = plm_gguf_open(path, &gp, err);
    if (!f) return err ? err->code : PLM_ERR_IO;
    plm_status st = PLM_OK;
    const plm_arch *arch;
    plm_hparams hp;
    if ((st = plan_hparams_from_file(p, path, f, &arch, &hp, err))) goto done;
    const plm_gguf_tensor *te = plm_gguf_find_tensor(f, "token_embd.weight");
    p->tied_output = plm_gguf_find_tensor(f, "output.weight") == NULL;
    if (te) {
        p->embd_bytes = te->nbytes;
        p->embd_row_bytes = plm_row_size((plm_type)te->type, (int64_t)te->ne[0]);
    }

    /* Weights by type; a 3-D tensor holds n_expert experts, of which a
     * token reads n_expert_used. */
    const plm_kernels *kt = plm_kernels_select(NULL);
    uint64_t non_f32_vectors = 0, non_f32_matrices = 0, vectors = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const plm_gguf_tensor *t = &f->tensors[i];
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) n *= t->ne[d];
        int k = add_type(p, plm_gguf_tensor_type_name(t->type));
        p->types[k].n_tensors++;
        p->types[k].n_elements += n;
        p->types[k].bytes += t->nbytes;
        p->n_params += n;
        p->weight_bytes += t->nbytes;
        const bool experts = t->n_dims == 3 && p->n_expert && t->ne[2] == p->n_expert;
        p->n_params_active += experts ? n / t->ne[2] * p->n_expert_used : n;
        p->weight_bytes_active += experts ? t->nbytes / t->ne[2] * p->n_expert_used : t->nbytes;
        if (experts && plm_type_info_get(t->type) && plm_type_info_get(t->type)->vec_dot_type != PLM_TYPE_F32)
            p->moe_quantized = true;
        if (t->n_dims == 1 && (t->type != PLM_TYPE_F32 || ((uintptr_t)t->data % 4))) non_f32_vectors++;
        vectors += t->n_dims == 1;
        if (t->n_dims >= 2 && t->type != PLM_TYPE_F32) non_f32_matrices++;
        /* what model/repack.c copies: every repackable matrix, experts too,
         * but an embedding that is not also the output */
        if ((t->n_dims == 2 || experts) && (t != te || p->tied_output) &&
            plm_repack_fits((plm_type)t->type, (int64_t)t->ne[1], (int64_t)t->ne[0]) &&
            plm_kernels_repacks(kt, (plm_type)t->type))
            p->repackable_bytes += round_up(t->nbytes, PLM_PLAN_PAGE);
    }
    p->bits_per_weight = p->n_params ? 8.0 * (double)p->weight_bytes / (double)p->n_params : 0;
    p->file_bytes = f->size;
    p->header_bytes = f->data_offset;

    p->vocab_bytes = vocab_bill(f);
    /* model.c: layer table, vectors converted to f32 (only those touched). */
    const uint64_t slot = max_u64(p->n_embd, (uint64_t)p->n_head * p->head_dim);
    resolve_params(p, params);
    /* Repacking with mmap copies every vector too (plm_model.own_vectors). */
    const uint64_t owned = plm_model_owned_f32_floats(arch, &hp) * 4;
    const uint64_t copied = p->params.repack && p->params.use_mmap ? vectors : non_f32_vectors;
    p->model_bytes = round_up((uint64_t)p->n_layer * sizeof(plm_layer) + sizeof(plm_model), 16) +
                     alloc_touched(owned, min_u64(owned, copied * slot * 4));
    p->model_bytes += (uint64_t)(p->params.n_threads - 1) * PLAN_THREAD_BYTES;
    p->overhead_bytes = PLAN_OVERHEAD_BYTES + (non_f32_matrices ? PLAN_KERNEL_CODE_BYTES : 0);

    act_use acts = acts_from_file(f, arch, &hp);
    p->act_slots = acts.n_slots;
    memcpy(p->act_used, acts.used, sizeof acts.used);
    if ((st = check_kv(p, err)) == PLM_OK) finish(p);
done:
    plm_gguf_close(f);
    return st;
}

/* ---- from numbers ------------------------------------------------------------ */

plm_status plm_plan_shape(const plm_shape *sh, const plm_plan_params *params, plm_plan *p, plm_error *err) {
    memset(p, 0, sizeof *p);
    if (!sh || !(sh->n_params > 0) || !sh->n_layer || !sh->n_head_kv || !sh->head_dim)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "a shape needs parameters, layers, KV heads and a head size");
    const plm_quant *q = plm_plan_quant_find(sh->quant ? sh->quant : "Q4_K_M");
    if (!q && !(sh->bits_per_weight > 0))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "unknown quant type '%s'", sh->quant);
    const double bpw = sh->bits_per_weight > 0 ? sh->bits_per_weight : q->bits_per_weight;
    p->from_shape = true;
    snprintf(p->arch, sizeof p->arch, "shape");
    p->n_layer = sh->n_layer;
    p->n_head_kv = sh->n_head_kv;
    p->head_dim = sh->head_dim;
    p->n_vocab = sh->n_vocab ? sh->n_vocab : 32000;
    p->n_ctx_train = sh->n_ctx_train;
    const double P = sh->n_params, L = sh->n_layer, kv = (double)sh->n_head_kv * sh->head_dim;
    p->n_embd = sh->n_embd;
    if (!p->n_embd) {
        /* llama-like: per layer 2E^2 (q, o) + 2E kv (k, v) + 3E ff with
         * ff = 8/3 E, plus embeddings and output 2 V E. */
        const double a = 10.0 * L, b = 2.0 * L * kv + 2.0 * p->n_vocab;
        double e = (-b + sqrt(b * b + 4.0 * a * P)) / (2.0 * a);
        p->n_embd = (uint32_t)(llround(e / 128.0) * 128);
        if (p->n_embd < 128) p->n_embd = 128;
        p->estimated_dims = true;
    }
    p->n_head = sh->n_head ? sh->n_head : (p->n_embd + p->head_dim - 1) / p->head_dim;
    if (!sh->n_head || !sh->n_ff || !sh->n_vocab) p->estimated_dims = true;
    p->n_ff = sh->n_ff ? sh->n_ff : (uint32_t)(llround(p->n_embd * 8.0 / 3.0 / 256.0) * 256);
    p->n_params = (uint64_t)P;
    p->n_params_active = sh->n_params_active > 0 ? (uint64_t)sh->n_params_active : p->n_params;
    p->bits_per_weight = bpw;
    p->weight_bytes = (uint64_t)(P * bpw / 8.0);
    snprintf(p->types[0].type, sizeof p->types[0].type, "%s", q && !(sh->bits_per_weight > 0) ? q->name : "custom");
    p->types[0].n_elements = p->n_params;
    p->types[0].bytes = p->weight_bytes;
    p->n_types = 1;
    p->tied_output = false;
    p->embd_row_bytes = (uint64_t)(p->n_embd * bpw / 8.0);
    p->embd_bytes = p->embd_row_bytes * p->n_vocab;
    /* Metadata: about 40 bytes of tensor table per tensor, ~10 bytes a token. */
    p->header_bytes = (uint64_t)p->n_vocab * 10 + (uint64_t)(9 * p->n_layer + 3) * 40;
    p->file_bytes = p->header_bytes + p->weight_bytes;
    /* Tokenizer tables as for an SPM vocabulary: ~90 bytes a token. */
    p->vocab_bytes = round_up((uint64_t)p->n_vocab * 90, PLM_PLAN_PAGE);
    resolve_params(p, params);
    p->model_bytes = round_up((uint64_t)p->n_layer * sizeof(plm_layer) + sizeof(plm_model), 16) +
                     (uint64_t)(p->params.n_threads - 1) * PLAN_THREAD_BYTES;
    /* One activation format for a whole-model quant (none for F16). */
    const bool f16 = q && !strcmp(q->name, "F16") && !(sh->bits_per_weight > 0);
    const bool f32 = q && !strcmp(q->name, "F32") && !(sh->bits_per_weight > 0);
    p->overhead_bytes = PLAN_OVERHEAD_BYTES + (f32 ? 0 : PLAN_KERNEL_CODE_BYTES);
    if (!f16) {
        p->act_slots = 1;
        p->act_used[0] = (max_u64(max_u64(p->n_embd, (uint64_t)p->n_head * p->head_dim), p->n_ff) + 255) / 256 * 292;
    }
    plm_status st = check_kv(p, err);
    if (!st) finish(p);
    return st;
}

plm_status plm_plan_add_draft(plm_plan *target, const plm_plan *draft, int draft_max, plm_error *err) {
    if (!target || !draft || draft == target || draft->draft)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_plan_add_draft needs a target and a plan without a draft");
    if (draft_max < 1 || draft_max > 64)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "draft_max %d is outside 1..64", draft_max);
    target->draft = draft;
    target->draft_max = draft_max;
    finish(target);
    return PLM_OK;
}

/* ---- partly filled contexts ------------------------------------------------- */

uint64_t plm_plan_rss_at(const plm_plan *p, uint32_t n_tokens, uint32_t max_batch) {
    const plm_plan_params *pp = &p->params;
    const plm_plan_buffers *b = &p->buf;
    if (n_tokens >= pp->n_ctx && max_batch >= pp->n_batch) return p->peak_rss;
    if (max_batch > pp->n_batch) max_batch = pp->n_batch;
    if (max_batch > n_tokens) max_batch = n_tokens;
    const uint64_t rows = max_batch;
    /* KV: each layer's cells are written from its first on, n_tokens of
     * them (a windowed layer's wrap around: at most all of them). */
    uint64_t kv = 0;
    if (b->kv_k >= MMAP_THRESHOLD) {
        const plm_hparams hp = plan_hparams(p);
        const plm_kv_spec spec = plan_kv_spec(p, &hp);
        for (uint32_t il = 0; il < p->n_layer; il++) {
            const uint64_t rows = min_u64(n_tokens, plm_kv_layer_cells(&spec, (int)il));
            kv += pp->n_seq * (round_up(rows * b->kv_row_k, PLM_PLAN_PAGE) + round_up(rows * b->kv_row_v, PLM_PLAN_PAGE));
        }
    } else {
        kv = alloc_resident(b->kv_k) + alloc_resident(b->kv_v);
    }
    kv = min_u64(kv, p->kv_bytes);
    uint64_t s = buffers_touched(p, rows);
    for (int i = 0; i < PLM_PLAN_ACT_SLOTS; i++)
        s += i < p->act_slots ? rows_touched(b->act, rows, b->act_row, p->act_used[i])
                              : (b->act < MMAP_THRESHOLD ? alloc_resident(b->act) : 0);
    s += stack_bytes(p->act_slots, rows, pp->n_threads) + split_touched(p, n_tokens);
    uint64_t w = p->weights_resident;
    if (pp->use_mmap && !p->tied_output && p->embd_bytes) {
        uint64_t per_row = round_up(p->embd_row_bytes, PLM_PLAN_PAGE) +
                           (p->embd_row_bytes % PLM_PLAN_PAGE ? PLM_PLAN_PAGE : 0);
        uint64_t full = min_u64(p->embd_bytes, min_u64(p->n_vocab, pp->n_ctx) * per_row);
        uint64_t now = min_u64(p->embd_bytes, (uint64_t)n_tokens * per_row);
        w -= full - min_u64(full, now);
    }
    uint64_t draft = 0;
    if (p->draft) {  /* the draft has seen as many tokens, in batches as large */
        plm_plan d = *p->draft;
        d.draft = NULL;
        d.params.n_ctx = pp->n_ctx;
        if (d.params.n_batch > d.params.n_ctx) d.params.n_batch = d.params.n_ctx;
        finish(&d);
        draft = plm_plan_rss_at(&d, n_tokens, max_batch) - d.overhead_bytes + verify_logits(p);
    }
    return min_u64(p->peak_rss, w + kv + s + p->vocab_bytes + p->model_bytes + p->overhead_bytes + draft);
}

/* ---- verdicts ----------------------------------------------------------------- */

const char *plm_fit_name(plm_fit f) {
    switch (f) {
    case PLM_FITS: return "fits in RAM";
    case PLM_FITS_MMAP: return "runs only by paging weights from storage";
    default: return "does not fit";
    }
}

/* peak_rss of p with its weights re-quantized to bpw bits per weight. */
static uint64_t peak_with_bpw(const plm_plan *p, double bpw) {
    double scale = p->bits_per_weight > 0 ? bpw / p->bits_per_weight : 1.0;
    uint64_t wdata = p->weights_resident > p->header_bytes ? p->weights_resident - p->header_bytes : 0;
    return p->peak_rss - wdata + (uint64_t)((double)wdata * scale);
}

/* The budget: the device's RAM share less what is in use, or the process's
 * own limit when that is smaller; and which of them it was. */
static void budget_of(const plm_device *d, plm_plan_verdict *o) {
    double share = d->app_share > 0 && d->app_share <= 1 ? d->app_share : 1.0;
    double budget = (double)d->ram_bytes * share - (double)d->used_bytes;
    o->budget_bytes = budget > 0 ? (uint64_t)budget : 0;
    if (d->used_bytes) snprintf(o->budget_source, sizeof o->budget_source, "available RAM");
    else if (share < 1) snprintf(o->budget_source, sizeof o->budget_source, "RAM x app share %.0f%%", share * 100);
    else snprintf(o->budget_source, sizeof o->budget_source, "RAM");
    if (d->limit_bytes && d->limit_bytes < o->budget_bytes) {
        o->budget_bytes = d->limit_bytes;
        snprintf(o->budget_source, sizeof o->budget_source, "%s", d->limit_source[0] ? d->limit_source : "limit");
    }
}

plm_status plm_plan_evaluate(const plm_plan *p, const plm_device *d, plm_plan_verdict *o, plm_error *err) {
    memset(o, 0, sizeof *o);
    if (!p || !d) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_plan_evaluate needs a plan and a device");
    budget_of(d, o);
    /* Paging: the anonymous part (KV, buffers, tables) must fit; the mapped
     * weights then take what is left and the rest is read from storage again
     * every token.  Under RLIMIT_AS the mapping itself counts: no paging. */
    const bool limit_binds = d->limit_bytes && o->budget_bytes == d->limit_bytes;
    if (p->peak_rss <= o->budget_bytes) o->fit = PLM_FITS;
    else if (p->params.use_mmap && p->anon_bytes <= o->budget_bytes && !(limit_binds && d->limit_maps_count))
        o->fit = PLM_FITS_MMAP;
    else o->fit = PLM_NO_FIT;

    const double bw = d->bandwidth_gbs * 1e9;
    if (bw > 0 && p->decode_bytes) {
        o->decode_tps = bw / (double)p->decode_bytes;
        o->decode_tps_full = bw / (double)(p->decode_bytes + p->kv_read_full);
    }
    o->storage_gbs = d->storage_gbs;
    if (o->fit == PLM_FITS_MMAP && d->storage_gbs > 0) {
        /* Decode reads the weights in the same order every token: a cyclic
         * scan larger than the memory it may use, which an LRU page cache
         * evicts ahead of reuse, so every token reads them all from storage
         * again (not just the part over the budget: docs/MEMORY.md has the
         * measurement). */
        double t = (double)p->decode_bytes / (d->storage_gbs * 1e9) + (bw > 0 ? (double)p->decode_bytes / bw : 0);
        o->decode_tps_paged = t > 0 ? 1.0 / t : 0;
    }
    if (d->compute_gops > 0) {
        double flops = 2.0 * (double)p->n_params_active +
                       4.0 * p->n_layer * (p->params.n_ctx / 2.0) * p->n_head * p->head_dim;
        o->prefill_tps = d->compute_gops * 1e9 * PLM_PLAN_PREFILL_EFFICIENCY / flops;
    }

    /* Largest context that fits at these types: binary search on 256s.
     * Each probe starts from p: plm_plan_set_ctx clamps n_batch to a short
     * context, and a clamp kept from a shorter probe would bill a longer
     * one with a smaller batch than its context will have. */
    uint32_t hi = p->from_shape || !p->n_ctx_train ? (1u << 20) : p->n_ctx_train;
    if (hi < 256) hi = 256;
    uint32_t lo_k = 0, hi_k = hi / 256;
    while (lo_k < hi_k) {
        uint32_t mid = (lo_k + hi_k + 1) / 2;
        plm_plan t = *p;
        plm_plan_set_ctx(&t, mid * 256);
        if (t.peak_rss <= o->budget_bytes) lo_k = mid;
        else hi_k = mid - 1;
    }
    o->max_ctx = lo_k * 256;

    /* Best quant that fits with this context. */
    int nq;
    const plm_quant *q = plm_plan_quants(&nq);
    for (int i = 0; i < nq; i++)
        if (peak_with_bpw(p, q[i].bits_per_weight) <= o->budget_bytes) {
            snprintf(o->quant_for_ctx, sizeof o->quant_for_ctx, "%s", q[i].name);
            break;
        }
    return PLM_OK;
}
