#include "kernels/ops.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "quant/fp16.h"

void plm_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    /* ggml accumulates the squares in double.  Four chains, not one: with
     * a single chain each element waits for the previous add, and a decode
     * step's other threads wait for the norm. */
    double part[4] = {0.0, 0.0, 0.0, 0.0};
    int i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) part[k] += (double)x[i + k] * x[i + k];
    double sum = (part[0] + part[1]) + (part[2] + part[3]);
    for (; i < n; i++) sum += (double)x[i] * x[i];
    const float scale = 1.0f / sqrtf((float)(sum / n) + eps);
    for (i = 0; i < n; i++) out[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

void plm_rope_angles(float *cos_out, float *sin_out, int n_rot, float pos, float freq_base,
                     float freq_scale) {
    /* Same recurrence as ggml: theta is multiplied by a constant step, which
     * rounds differently from computing each power afresh. */
    const float step = powf(freq_base, -2.0f / (float)n_rot);
    float theta = pos * freq_scale;
    for (int i = 0; i < n_rot / 2; i++) {
        cos_out[i] = cosf(theta);
        sin_out[i] = sinf(theta);
        theta *= step;
    }
}

void plm_rope_apply(float *x, int n_heads, int head_dim, int n_rot, const float *cos_t,
                    const float *sin_t, int neox) {
    const int half = n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * cos_t[i] - x1 * sin_t[i];
            v[b] = x0 * sin_t[i] + x1 * cos_t[i];
        }
    }
}

void plm_swiglu(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* ggml's GELU on the CPU is a table of f16 inputs to f16 outputs: the
 * tanh formula at x rounded to f16, the result rounded to f16; 0 below -10
 * and x above 10.  The same table here (128 KiB, built once): a lookup
 * instead of a tanhf per element of every FFN row. */
static uint16_t gelu_table[(1 << 16) + 1]; /* + 1: SIMD gathers read 4 bytes at an entry */
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void build_gelu_table(void) {
    for (uint32_t i = 0; i < (1u << 16); i++) {
        const float h = plm_fp16_to_fp32((plm_fp16_t)i);
        const float y = 0.5f * h * (1.0f + tanhf(0.79788456080286535588f * h * (1.0f + 0.044715f * h * h)));
        gelu_table[i] = plm_fp32_to_fp16(y);
    }
}

const uint16_t *plm_gelu_table(void) {
    pthread_once(&gelu_once, build_gelu_table);
    return gelu_table;
}

void plm_geglu(float *g, const float *u, int n) {
    pthread_once(&gelu_once, build_gelu_table);
    for (int i = 0; i < n; i++) {
        const float x = g[i];
        const float y = x <= -10.0f ? 0.0f : x >= 10.0f ? x : plm_fp16_to_fp32(gelu_table[plm_fp32_to_fp16(x)]);
        g[i] = y * u[i];
    }
}

float plm_dot_f16(const uint16_t *a, const uint16_t *b, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += plm_fp16_to_fp32(a[i]) * plm_fp16_to_fp32(b[i]);
    return sum;
}

void plm_axpy_f16(float *y, float a, const uint16_t *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * plm_fp16_to_fp32(x[i]);
}

void plm_scale(float *y, float a, int n) {
    for (int i = 0; i < n; i++) y[i] *= a;
}

void plm_softmax_run_raise(plm_softmax_run *r, float max, float *o, int hd) {
    if (!(max > r->max)) return;
    /* exp(-inf) is 0: before the first block o and sum are 0 anyway. */
    const float shrink = r->max == -INFINITY ? 0.0f : expf(r->max - max);
    plm_scale(o, shrink, hd);
    r->sum *= shrink;
    r->max = max;
}

void plm_softmax_run_block(plm_softmax_run *r, float *s, int n, float *o, int hd) {
    float max = r->max;
    for (int j = 0; j < n; j++)
        if (s[j] > max) max = s[j];
    plm_softmax_run_raise(r, max, o, hd);
    double sum = 0.0;
    for (int j = 0; j < n; j++) {
        s[j] = expf(s[j] - max);
        sum += s[j];
    }
    r->sum += sum;
}

void plm_attn_f16_passes(plm_attn_pass_fn pass, float *o, const uint16_t *q, int n_q, const void *k, const void *v,
                         size_t ks, size_t vs, int n_keys, int hd, float scale, bool flash) {
    plm_softmax_run run[PLM_ATTN_MAX_Q];
    for (int i = 0; i < n_q; i++) run[i] = (plm_softmax_run){-INFINITY, 0.0};
    for (int i = 0; i < n_q * hd; i++) o[i] = 0.0f;
    if (flash) {
        pass(o, q, n_q, k, v, ks, vs, n_keys, hd, scale, run, 0, NULL);
        for (int i = 0; i < n_q; i++) plm_scale(o + (size_t)i * hd, (float)(1.0 / run[i].sum), hd);
        return;
    }
    pass(o, q, n_q, k, v, ks, vs, n_keys, hd, scale, run, 1, NULL);
    pass(o, q, n_q, k, v, ks, vs, n_keys, hd, scale, run, 2, NULL);
}

float plm_softmax_weight(float s, float max, float inv_sum) {
    return plm_fp16_to_fp32(plm_fp32_to_fp16(expf(s - max) * inv_sum));
}

/* scale * q . k_j for the nb keys from j0 on. */
static void block_scores(float *s, const uint16_t *q, const void *k, size_t k_stride, int j0, int nb, int hd,
                         float scale) {
    for (int j = 0; j < nb; j++)
        s[j] = plm_dot_f16(q, (const uint16_t *)(const void *)((const char *)k + (size_t)(j0 + j) * k_stride), hd) *
               scale;
}

static void block_values(float *o, const float *w, const void *v, size_t v_stride, int j0, int nb, int hd) {
    for (int j = 0; j < nb; j++)
        plm_axpy_f16(o, w[j], (const uint16_t *)(const void *)((const char *)v + (size_t)(j0 + j) * v_stride), hd);
}

/* The reference pass (plm_attn_pass_fn): each query head over the blocks. */
void plm_attn_f16_ref_pass(float *o, const uint16_t *q, int n_q, const char *k, const char *v, size_t ks, size_t vs,
                           int n_keys, int hd, float scale, plm_softmax_run *run, int pass, float *kept) {
    float s[PLM_ATTN_BLOCK];
    for (int i = 0; i < n_q; i++)
        for (int j0 = 0; j0 < n_keys; j0 += PLM_ATTN_BLOCK) {
            const int nb = n_keys - j0 < PLM_ATTN_BLOCK ? n_keys - j0 : PLM_ATTN_BLOCK;
            float *oi = o + (size_t)i * hd, *ki = kept ? kept + (size_t)i * n_keys + j0 : NULL;
            if (ki && pass == 2) memcpy(s, ki, sizeof(float) * (size_t)nb);
            else block_scores(s, q + (size_t)i * hd, k, ks, j0, nb, hd, scale);
            if (ki && pass == 1) memcpy(ki, s, sizeof(float) * (size_t)nb);
            if (pass == 2) {
                const float inv = (float)(1.0 / run[i].sum);
                for (int j = 0; j < nb; j++) s[j] = plm_softmax_weight(s[j], run[i].max, inv);
            } else {
                plm_softmax_run_block(&run[i], s, nb, oi, pass == 0 ? hd : 0);
            }
            if (pass != 1) block_values(oi, s, v, vs, j0, nb, hd);
        }
}

void plm_attn_f16(float *o, const uint16_t *q, int n_q, const void *k, const void *v, size_t k_stride,
                  size_t v_stride, int n_keys, int hd, float scale, bool flash) {
    plm_attn_f16_passes(plm_attn_f16_ref_pass, o, q, n_q, k, v, k_stride, v_stride, n_keys, hd, scale, flash);
}

/* Run r's first key and key count. */
static int split_run(const plm_attn_split *sp, int r, int *n) {
    const int j0 = (int)((int64_t)sp->n_keys * r / sp->n_runs);
    *n = (int)((int64_t)sp->n_keys * (r + 1) / sp->n_runs) - j0;
    return j0;
}

/* One pass of run r's n keys, over whichever cache the split reads. */
static void split_pass(const plm_attn_split *sp, float *o, const void *q, int n_q, const char *k, const char *v,
                       size_t ks, size_t vs, int n, plm_softmax_run *run, int pass, float *kept) {
    if (sp->quant_pass)
        sp->quant_pass(sp->kt, o, q, n_q, sp->type_k, k, ks, sp->type_v, v, vs, n, sp->hd, sp->scale, run, pass, kept);
    else
        sp->pass(o, q, n_q, k, v, ks, vs, n, sp->hd, sp->scale, run, pass, kept);
}

void plm_attn_split_stage(const plm_attn_split *sp, int stage, int r, int h0, int n_q, const void *q,
                          const void *k, const void *v, size_t ks, size_t vs, const plm_softmax_run *merged) {
    int n;
    const int j0 = split_run(sp, r, &n);
    const char *kr = (const char *)k + (size_t)j0 * ks, *vr = (const char *)v + (size_t)j0 * vs;
    float *o = sp->parts + r * sp->part_stride + (size_t)h0 * sp->hd;
    float *kept = sp->scores && !sp->flash ? sp->scores + (size_t)j0 * sp->run_stride + (size_t)h0 * n : NULL;
    if (stage == 1) {
        plm_softmax_run *run = sp->runs + r * sp->run_stride + h0;
        for (int i = 0; i < n_q; i++) run[i] = (plm_softmax_run){-INFINITY, 0.0};
        for (int i = 0; sp->flash && i < n_q * sp->hd; i++) o[i] = 0.0f;
        /* the exact mode's first pass leaves o alone */
        split_pass(sp, o, q, n_q, kr, vr, ks, vs, n, run, sp->flash ? 0 : 1, kept);
        return;
    }
    plm_softmax_run run[PLM_ATTN_MAX_Q];
    for (int i = 0; i < n_q; i++) run[i] = merged[i];
    for (int i = 0; i < n_q * sp->hd; i++) o[i] = 0.0f;
    split_pass(sp, o, q, n_q, kr, vr, ks, vs, n, run, 2, kept);
}

void plm_attn_split_merge(const plm_attn_split *sp, int h, plm_softmax_run *out) {
    float max = -INFINITY;
    for (int r = 0; r < sp->n_runs; r++)
        if (sp->runs[r * sp->run_stride + h].max > max) max = sp->runs[r * sp->run_stride + h].max;
    double sum = 0.0;
    for (int r = 0; r < sp->n_runs; r++) {
        const plm_softmax_run *x = &sp->runs[r * sp->run_stride + h];
        sum += x->sum * exp((double)x->max - (double)max);
    }
    *out = (plm_softmax_run){max, sum};
}

/* Head h's output o += run r's part p, weighted (flash: each run's output
 * is relative to its own max). */
static void split_add(const plm_attn_split *sp, int h, int r, const plm_softmax_run *merged, const float *p, float *o) {
    const float w = sp->flash ? (float)exp((double)sp->runs[r * sp->run_stride + h].max - (double)merged->max) : 1.0f;
    for (int i = 0; i < sp->hd; i++) o[i] += w * p[i];
}

void plm_attn_split_finish(const plm_attn_split *sp, int h, const plm_softmax_run *merged, float *o) {
    for (int i = 0; i < sp->hd; i++) o[i] = 0.0f;
    for (int r = 0; r < sp->n_runs; r++) split_add(sp, h, r, merged, sp->parts + r * sp->part_stride + (size_t)h * sp->hd, o);
    if (sp->flash) plm_scale(o, (float)(1.0 / merged->sum), sp->hd);
}

/* The same steps in the same order as the stages and
 * plm_attn_split_finish, so the same bits.  With part_stride 0 the runs'
 * parts take turns in one buffer of n_q * hd floats, not n_runs times that
 * (a thread's stack: plan.c), and flash computes each run's stage 1 twice
 * (its part is summed only once the merged max is known); with room for
 * every run's part, once. */
void plm_attn_split_all(const plm_attn_split *sp, float *o, const void *q, int n_q, const void *k, const void *v,
                        size_t ks, size_t vs) {
    const size_t ps = sp->part_stride;
    plm_softmax_run merged[PLM_ATTN_MAX_Q];
    for (int r = 0; r < sp->n_runs; r++) plm_attn_split_stage(sp, 1, r, 0, n_q, q, k, v, ks, vs, NULL);
    for (int i = 0; i < n_q; i++) plm_attn_split_merge(sp, i, &merged[i]);
    for (int i = 0; i < n_q * sp->hd; i++) o[i] = 0.0f;
    for (int r = 0; r < sp->n_runs; r++) {
        if (!sp->flash) plm_attn_split_stage(sp, 2, r, 0, n_q, q, k, v, ks, vs, merged);
        else if (ps == 0) plm_attn_split_stage(sp, 1, r, 0, n_q, q, k, v, ks, vs, NULL);
        for (int i = 0; i < n_q; i++)
            split_add(sp, i, r, &merged[i], sp->parts + r * ps + (size_t)i * sp->hd, o + (size_t)i * sp->hd);
    }
    for (int i = 0; sp->flash && i < n_q; i++) plm_scale(o + (size_t)i * sp->hd, (float)(1.0 / merged[i].sum), sp->hd);
}
