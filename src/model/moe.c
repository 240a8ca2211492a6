/*
 * The Mixture-of-Experts FFN step, as llama.cpp's build_moe_ffn computes it
 * with softmax gating (qwen3moe, Mixtral):
 *
 *   h   = rmsnorm(x) * ffn_norm
 *   p   = softmax(Wrouter h)                      over the n_expert experts
 *   S   = the n_expert_used largest p, best first
 *   w_e = p_e / sum_S p   (renormalized: plm_arch.moe_norm_topk), else p_e
 *   x  += sum_{e in S} w_e * Wdown_e (silu(Wgate_e h) * Wup_e h)
 *
 * Only the selected experts are computed: with mmap, the pages of the
 * others are never touched.  A batch is grouped by expert, so an expert's
 * matrices are read once for all the batch's tokens that chose it, as one
 * gemm over those tokens' gathered rows (the kernels' quantized matmul).
 *
 * The gathered rows of a batch (n x n_expert_used) would need buffers
 * n_expert_used times the dense step's; instead the experts are taken in
 * waves of at most `wave` gathered rows (max(n_batch, n_expert_used)): an
 * expert's tokens are never split across waves, so each expert is still
 * read once per batch.  A wave is two passes over the pool: gate/up with
 * SwiGLU for every expert of the wave, then down.  Each token's weighted
 * expert outputs are summed into `out`, added to x at the end (llama.cpp
 * sums them in top-k order; here they arrive by expert, which changes only
 * the rounding of that sum).
 */
#include "model/moe.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "core/chunks.h"
#include "kernels/ops.h"

enum { ALIGN = 64, ROW_ALIGN = 16 };

static uint64_t align_up(uint64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }
static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Bytes of one input row of k elements in the largest activation format
 * (Q8_K; the one the dense step's slots are sized for too). */
static uint64_t act_row_bytes(uint64_t k) { return (k + 255) / 256 * 292; }

/* Gathered rows one wave holds. */
static uint64_t wave_rows(const plm_hparams *hp, uint32_t n_batch) {
    return max_u64(n_batch, (uint64_t)hp->n_expert_used);
}

/* The buffers, carved from plm_scratch.moe in this order (the input slots
 * last: untouched with F16/F32 experts, and the second one when gate and up
 * share an activation format, as in every file llama.cpp writes). */
typedef struct moe_buffers {
    float *probs;        /* [n_batch][n_expert] router output */
    int32_t *choice;     /* [n_batch][k] experts chosen, best first */
    float *weight;       /* [n_batch][k] their weights */
    int32_t *by_expert;  /* [n_batch * k] entries t * k + j, grouped by expert */
    int32_t *first;      /* [n_expert + 1] where each expert's entries start */
    float *out;          /* [n_batch][n_embd] sum of the weighted expert outputs */
    float *rows;         /* [wave][n_embd] gathered f32 inputs, then down's outputs */
    float *gate, *up;    /* [wave][n_ff_expert] */
    void *act_down;      /* [wave] rows of n_ff_expert, in down's activation format */
    void *act_in[2];     /* [wave] rows of n_embd, in gate's and up's formats */
    size_t in_row, down_row; /* bytes per row of act_in / act_down */
    int64_t wave;
} moe_buffers;

/* Sizes of the buffers, in carving order. */
enum { PROBS, CHOICE, WEIGHT, BY_EXPERT, FIRST, OUT, ROWS, GATE, UP, ACT_DOWN, ACT_IN0, ACT_IN1, N_BUF };

static void sizes(const plm_hparams *hp, uint32_t n_batch, uint64_t *z) {
    const uint64_t B = n_batch, k = (uint64_t)hp->n_expert_used, E = (uint64_t)hp->n_embd,
                   ff = (uint64_t)hp->n_ff_expert, R = wave_rows(hp, n_batch);
    z[PROBS] = B * hp->n_expert * 4;
    z[CHOICE] = z[WEIGHT] = z[BY_EXPERT] = B * k * 4;
    z[FIRST] = ((uint64_t)hp->n_expert + 1) * 4;
    z[OUT] = B * E * 4;
    z[ROWS] = R * E * 4;
    z[GATE] = z[UP] = R * ff * 4;
    z[ACT_DOWN] = R * act_row_bytes(ff);
    z[ACT_IN0] = z[ACT_IN1] = R * act_row_bytes(E);
}

static void carve(const plm_hparams *hp, uint32_t n_batch, char *base, moe_buffers *b) {
    uint64_t z[N_BUF];
    sizes(hp, n_batch, z);
    void *p[N_BUF];
    uint64_t at = 0;
    for (int i = 0; i < N_BUF; i++) {
        p[i] = base + at;
        at += align_up(z[i]);
    }
    *b = (moe_buffers){.probs = p[PROBS], .choice = p[CHOICE], .weight = p[WEIGHT], .by_expert = p[BY_EXPERT],
                       .first = p[FIRST], .out = p[OUT], .rows = p[ROWS], .gate = p[GATE], .up = p[UP],
                       .act_down = p[ACT_DOWN], .act_in = {p[ACT_IN0], p[ACT_IN1]},
                       .in_row = act_row_bytes((uint64_t)hp->n_embd), .down_row = act_row_bytes((uint64_t)hp->n_ff_expert),
                       .wave = (int64_t)wave_rows(hp, n_batch)};
}

uint64_t plm_moe_scratch_bytes(const plm_hparams *hp, uint32_t n_batch) {
    if (hp->n_expert <= 0) return 0;
    uint64_t z[N_BUF], at = 0;
    sizes(hp, n_batch, z);
    for (int i = 0; i < N_BUF; i++) at += align_up(z[i]);
    return at;
}

uint64_t plm_moe_scratch_touched(const plm_hparams *hp, uint32_t n_batch, uint32_t rows, bool quantized) {
    if (hp->n_expert <= 0 || n_batch == 0) return 0;
    uint64_t z[N_BUF], touched = 0;
    sizes(hp, n_batch, z);
    if (rows > n_batch) rows = n_batch;
    const uint64_t R = wave_rows(hp, n_batch), gathered = (uint64_t)rows * hp->n_expert_used;
    const double per_token = (double)rows / n_batch, per_wave = gathered < R ? (double)gathered / R : 1.0;
    for (int i = 0; i < N_BUF; i++) {
        const bool wave = i >= ROWS, input = i >= ACT_DOWN;
        if (i == ACT_IN1 || (input && !quantized)) continue;
        touched += i == FIRST ? z[i] : (uint64_t)((double)z[i] * (wave ? per_wave : per_token));
    }
    return touched;
}

/* ---- converting input rows ------------------------------------------------ */

/* n rows of k floats into up to two activation formats (and, with `copy`,
 * as f32 too): row g is src row entry[g] / k_div (or g without entries). */
typedef struct convert_job {
    const plm_kernels *kt;
    const float *src;
    int64_t src_stride, k;
    const int32_t *entry;
    int k_div, n;
    int n_slots;
    plm_type type[2];
    void *dst[2];
    size_t dst_stride;
    float *copy;          /* [n][k] or NULL */
    atomic_int next;
} convert_job;

static void convert_task(void *arg, int ith, int nth) {
    (void)ith, (void)nth;
    convert_job *c = arg;
    for (int g; (g = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed)) < c->n;) {
        const int64_t r = c->entry ? c->entry[g] / c->k_div : g;
        const float *x = c->src + r * c->src_stride;
        for (int s = 0; s < c->n_slots; s++) c->kt->quantize_row[c->type[s]](x, (char *)c->dst[s] + g * c->dst_stride, c->k);
        if (c->copy) memcpy(c->copy + (int64_t)g * c->k, x, (size_t)c->k * sizeof(float));
    }
}

/* Where each weight finds its input rows: an activation slot (a distinct
 * one per format), or the f32 rows themselves (`f32`, f32_stride bytes). */
static void plan_inputs(convert_job *c, int n_w, const plm_weight *const *w, void *const *slots, const float *f32,
                        size_t f32_stride, const void **act, size_t *stride) {
    for (int i = 0; i < n_w; i++) {
        const plm_type vt = plm_type_info_get(w[i]->type)->vec_dot_type;
        if (vt == PLM_TYPE_F32) {
            act[i] = f32;
            stride[i] = f32_stride;
            continue;
        }
        int s = 0;
        while (s < c->n_slots && c->type[s] != vt) s++;
        if (s == c->n_slots) {
            c->type[s] = vt;
            c->dst[s] = slots[s];
            c->n_slots++;
        }
        act[i] = slots[s];
        stride[i] = c->dst_stride;
    }
}

static void run_convert(plm_forward_state *ctx, convert_job *c) {
    if (c->n_slots == 0 && !c->copy) return;
    atomic_init(&c->next, 0);
    if (c->n == 1) convert_task(c, 0, 1);
    else plm_pool_run(ctx->pool, convert_task, c);
}

/* ---- matrix products over experts ----------------------------------------- */

/* One expert of a wave: its local rows [g0, g0 + n_tok). */
typedef struct moe_item {
    int expert, g0, n_tok;
} moe_item;

/* Rows of each item's matrices (the same count for every expert), split in
 * chunks; with two weights (gate, up) each chunk ends with SwiGLU. */
typedef struct expert_job {
    const plm_kernels *kt;
    int n_w;
    const plm_weight *w[2];   /* 3-D */
    const void *act[2];
    size_t act_stride[2];
    float *out[2];            /* row g of out[i] at out[i] + g * rows */
    const moe_item *items;
    int n_items;
    int64_t rows, chunk, per_item;
    bool rowwise;
    plm_chunks chunks;
} expert_job;

static void expert_rows(const expert_job *j, int i, const moe_item *it, int64_t r0, int64_t r1) {
    const plm_weight m = plm_weight_expert(j->w[i], it->expert);
    const char *act = (const char *)j->act[i] + (size_t)it->g0 * j->act_stride[i];
    float *out = j->out[i] + (int64_t)it->g0 * j->rows;
    if (m.repacked) {
        plm_matmul_repacked(j->kt, m.type, m.data, m.cols, r0, r1, act, j->act_stride[i], it->n_tok, out, j->rows);
        return;
    }
    if (!j->rowwise) {
        plm_matmul(j->kt, m.type, m.data, m.cols, r0, r1, act, j->act_stride[i], it->n_tok, out, j->rows);
        return;
    }
    plm_matmul_exact(j->kt, m.type, m.data, m.cols, r0, r1, act, j->act_stride[i], it->n_tok, out, j->rows);
}

static void expert_task(void *arg, int ith, int nth) {
    (void)nth;
    expert_job *j = arg;
    for (int64_t c; plm_chunks_take(&j->chunks, ith, &c);) {
        const moe_item *it = &j->items[c / j->per_item];
        const int64_t r0 = (c % j->per_item) * j->chunk;
        const int64_t r1 = r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
        for (int i = 0; i < j->n_w; i++) expert_rows(j, i, it, r0, r1);
        if (j->n_w < 2) continue;
        for (int t = 0; t < it->n_tok; t++) {
            const int64_t off = (int64_t)(it->g0 + t) * j->rows + r0;
            j->kt->swiglu(j->out[0] + off, j->out[1] + off, (int)(r1 - r0));
        }
    }
}

static void run_experts(plm_forward_state *ctx, expert_job *j) {
    /* Chunks over the whole wave, as the dense step (chunks.h), sized by
     * the largest group of tokens an expert gets. */
    const int nth = plm_pool_size(ctx->pool);
    int most = 1;
    for (int i = 0; i < j->n_items; i++) most = j->items[i].n_tok > most ? j->items[i].n_tok : most;
    int64_t chunk = (int64_t)j->n_items * j->rows / (plm_chunks_per_thread(most) * nth);
    chunk = (chunk + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
    if (chunk < ROW_ALIGN) chunk = ROW_ALIGN;
    if (chunk > j->rows) chunk = j->rows;
    j->chunk = chunk;
    j->per_item = (j->rows + chunk - 1) / chunk;
    j->rowwise = ctx->rowwise_matmul;
    plm_chunks_init(&j->chunks, (int64_t)j->n_items * j->per_item, nth);
    plm_pool_run(ctx->pool, expert_task, j);
}

/* ---- routing -------------------------------------------------------------- */

/* The router's scores of the n tokens' normed rows h ([n][n_embd]). */
static void router(plm_forward_state *ctx, const plm_layer *L, const moe_buffers *b, float *h, int n) {
    const plm_hparams *hp = &ctx->model->hp;
    const plm_weight *wr = &L->ffn_gate_inp;
    convert_job c = {.kt = ctx->kt, .src = h, .src_stride = hp->n_embd, .k = hp->n_embd, .n = n,
                     .dst_stride = b->in_row};
    const void *act;
    size_t stride;
    plan_inputs(&c, 1, &wr, b->act_in, h, (size_t)hp->n_embd * sizeof(float), &act, &stride);
    run_convert(ctx, &c);
    moe_item all = {0, 0, n};
    expert_job j = {.kt = ctx->kt, .n_w = 1, .w = {wr}, .act = {act}, .act_stride = {stride}, .out = {b->probs},
                    .items = &all, .n_items = 1, .rows = hp->n_expert};
    run_experts(ctx, &j);
}

/* Softmax of one token's scores, then its k best experts, best first, and
 * their weights (renormalized to sum 1 when the family does, with
 * llama.cpp's floor on the sum). */
static void select_experts(const plm_hparams *hp, bool norm, float *p, int32_t *choice, float *weight) {
    const int ne = hp->n_expert, k = hp->n_expert_used;
    float mx = -INFINITY;
    for (int e = 0; e < ne; e++) mx = p[e] > mx ? p[e] : mx;
    double sum = 0;
    for (int e = 0; e < ne; e++) sum += (p[e] = expf(p[e] - mx));
    const float inv = (float)(1.0 / sum);
    for (int e = 0; e < ne; e++) p[e] *= inv;
    bool taken[PLM_MOE_MAX_EXPERTS] = {false};
    float total = 0;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < ne; e++)
            if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
        taken[best] = true;
        choice[j] = best;
        weight[j] = p[best];
        total += p[best];
    }
    if (!norm) return;
    if (total < 6.103515625e-5f) total = 6.103515625e-5f;
    for (int j = 0; j < k; j++) weight[j] /= total;
}

/* Every token's choices, then the entries (t * k + j) grouped by expert. */
static void route(const plm_hparams *hp, bool norm, const moe_buffers *b, int n) {
    const int k = hp->n_expert_used, ne = hp->n_expert;
    memset(b->first, 0, ((size_t)ne + 1) * sizeof *b->first);
    for (int t = 0; t < n; t++) {
        select_experts(hp, norm, b->probs + (int64_t)t * ne, b->choice + t * k, b->weight + t * k);
        for (int j = 0; j < k; j++) b->first[b->choice[t * k + j] + 1]++;
    }
    for (int e = 0; e < ne; e++) b->first[e + 1] += b->first[e];
    int32_t fill[PLM_MOE_MAX_EXPERTS];
    memcpy(fill, b->first, (size_t)ne * sizeof *fill);
    for (int i = 0; i < n * k; i++) b->by_expert[fill[b->choice[i]]++] = i;
}

/* ---- the step ------------------------------------------------------------- */

/* Experts [e0, e1) as one wave: gate/up/SwiGLU, down, and each gathered
 * row's weighted output summed into its token's row of out. */
static void run_wave(plm_forward_state *ctx, const plm_layer *L, const moe_buffers *b, const float *h, int e0,
                     int e1, moe_item *items) {
    const plm_hparams *hp = &ctx->model->hp;
    const int E = hp->n_embd, ff = hp->n_ff_expert, k = hp->n_expert_used;
    const int32_t *entry = b->by_expert + b->first[e0];
    const int n_rows = b->first[e1] - b->first[e0];
    int n_items = 0;
    for (int e = e0; e < e1; e++)
        if (b->first[e + 1] > b->first[e])
            items[n_items++] = (moe_item){e, b->first[e] - b->first[e0], b->first[e + 1] - b->first[e]};

    /* gate, up: the chosen tokens' normed rows, gathered */
    const plm_weight *gu[2] = {&L->ffn_gate_exps, &L->ffn_up_exps};
    convert_job in = {.kt = ctx->kt, .src = h, .src_stride = E, .k = E, .entry = entry, .k_div = k, .n = n_rows,
                      .dst_stride = b->in_row};
    expert_job j = {.kt = ctx->kt, .n_w = 2, .w = {gu[0], gu[1]}, .out = {b->gate, b->up}, .items = items,
                    .n_items = n_items, .rows = ff};
    plan_inputs(&in, 2, gu, b->act_in, b->rows, (size_t)E * sizeof(float), j.act, j.act_stride);
    if (j.act[0] == b->rows || j.act[1] == b->rows) in.copy = b->rows;
    run_convert(ctx, &in);
    run_experts(ctx, &j);

    /* down: SwiGLU's rows in down's format, outputs into `rows` */
    const plm_weight *down = &L->ffn_down_exps;
    convert_job mid = {.kt = ctx->kt, .src = b->gate, .src_stride = ff, .k = ff, .n = n_rows,
                       .dst_stride = b->down_row};
    expert_job d = {.kt = ctx->kt, .n_w = 1, .w = {down}, .out = {b->rows}, .items = items, .n_items = n_items,
                    .rows = E};
    void *const down_slot[2] = {b->act_down, NULL};
    plan_inputs(&mid, 1, &down, down_slot, b->gate, (size_t)ff * sizeof(float), d.act, d.act_stride);
    run_convert(ctx, &mid);
    run_experts(ctx, &d);

    for (int g = 0; g < n_rows; g++) {
        const int t = entry[g] / k;
        const float w = b->weight[entry[g]];
        float *o = b->out + (int64_t)t * E;
        const float *y = b->rows + (int64_t)g * E;
        for (int i = 0; i < E; i++) o[i] += w * y[i];
    }
}

void plm_moe_ffn_step(plm_forward_state *ctx, const plm_layer *L, int n) {
    const plm_model *m = ctx->model;
    const plm_hparams *hp = &m->hp;
    const int E = hp->n_embd;
    plm_scratch *s = &ctx->s;
    moe_buffers b;
    carve(hp, s->moe_batch, s->moe, &b);

    float *h = s->xn;  /* [n][n_embd]: free during the FFN */
    for (int t = 0; t < n; t++) plm_rmsnorm(h + (int64_t)t * E, s->x + (int64_t)t * E, L->ffn_norm, E, hp->rms_eps);
    router(ctx, L, &b, h, n);
    route(hp, m->arch->moe_norm_topk, &b, n);

    memset(b.out, 0, (size_t)n * E * sizeof(float));
    moe_item items[PLM_MOE_MAX_EXPERTS];
    for (int e0 = 0, e1; e0 < hp->n_expert; e0 = e1) {
        /* the longest run of experts whose rows fit a wave (one always does:
         * an expert has at most n <= wave rows) */
        for (e1 = e0 + 1; e1 < hp->n_expert && b.first[e1 + 1] - b.first[e0] <= b.wave; e1++) {}
        if (b.first[e1] > b.first[e0]) run_wave(ctx, L, &b, h, e0, e1, items);
    }
    const float rs = hp->residual_scale != 1.0f && hp->residual_scale != 0.0f ? hp->residual_scale : 1.0f;
    for (int64_t i = 0; i < (int64_t)n * E; i++) s->x[i] += rs == 1.0f ? b.out[i] : b.out[i] * rs;
}
