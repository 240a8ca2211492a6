/*
 * Token sampling, with the semantics of llama.cpp's default sampler chain:
 *
 *   penalties -> top-k -> top-p -> min-p -> temperature -> random draw
 *
 * Penalties (over the last penalty_last_n accepted tokens, for a token seen
 * `c` times there):
 *     logit = logit > 0 ? logit / repeat : logit * repeat      (c > 0)
 *     logit -= c * frequency + (c > 0) * presence
 * top-k keeps the k largest logits.  top-p keeps the smallest prefix of the
 * remaining tokens, in decreasing order, whose softmax mass reaches p (the
 * token that crosses p included).  min-p keeps tokens whose probability is at
 * least min_p times the largest one.  top-p and min-p see the distribution
 * before temperature, as in llama.cpp.  Temperature 0 (or less) picks the
 * argmax of the penalised logits; ties go to the lowest token id.  Ties in
 * ordering are always broken by the lower id, so a given seed and history
 * gives the same token on every platform that rounds floats the same way.
 *
 * Each of top-k, top-p and min-p keeps a prefix of the same ordering, so the
 * final set is the shortest of the three prefixes.  That lets us select the
 * top k while reading the logits (a heap of k), filter by min-p before sorting
 * (a threshold on the logit), and sort for top-p only the candidates that a
 * histogram of probability mass shows can be in its prefix, while top-p still
 * normalises over the whole top-k set as llama.cpp does.
 *
 * The sampler owns its random state (xoshiro256** seeded with splitmix64)
 * and every buffer it needs, all allocated when it is created.
 */
#include "runtime/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/params.h"
#include "core/rng.h"

/* top-p over more than TOP_P_BUCKET_MIN candidates narrows them with a
 * histogram of TOP_P_BUCKETS buckets before sorting. */
#define TOP_P_BUCKETS 1024
#define TOP_P_BUCKET_MIN 1024

typedef struct cand {
    float logit;
    int32_t id;
} cand;

struct plm_sampler {
    plm_sampler_params p;
    int n_vocab;
    bool penalize;     /* some penalty is active and the window is non-empty */
    int last_n;        /* capacity of the window of recent tokens */
    plm_token *ring;   /* the window: ring_len tokens starting at ring_head */
    int ring_head;
    int ring_len;
    int32_t *count;    /* n_vocab: occurrences of each token in the window */
    cand *cand;        /* n_vocab: work array */
    double bucket_mass[TOP_P_BUCKETS];
    uint64_t rng[4];
};

/* ---- random numbers --------------------------------------------------- */

static void rng_seed(uint64_t s[4], uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);
}

/* Uniform double in [0, 1). */
static double rng_uniform(uint64_t s[4]) {
    return (double)(xoshiro_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- parameters, creation ---------------------------------------------- */

static plm_sampler_params sampler_defaults(void) {
    plm_sampler_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    p.penalty_last_n = 64;
    p.seed = PLM_SAMPLER_DEFAULT_SEED;
    return p;
}

/* Ranges where every stage above is well defined: temperature <= 0 is greedy
 * (as in llama.cpp) but NaN or infinity would compare false everywhere; top_p/min_p are probabilities;
 * repeat_penalty divides logits. */
void plm_sampler_params_init(plm_sampler_params *p, size_t struct_size) {
    plm_sampler_params d = sampler_defaults();
    plm_params_give(p, struct_size, &d, sizeof d);
}

static plm_status check_fields(const plm_sampler_params *p, plm_error *err) {
    if (!isfinite(p->temperature))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "temperature %g is out of range: it must be a finite number (<= 0 = greedy)",
                        (double)p->temperature);
    if (p->top_k < 0)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "top_k %d is out of range: it must be >= 0 (0 = off)", (int)p->top_k);
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "top_p %g is out of range: it must be in [0, 1] (1 = off)",
                        (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "min_p %g is out of range: it must be in [0, 1] (0 = off)",
                        (double)p->min_p);
    if (!isfinite(p->repeat_penalty) || p->repeat_penalty <= 0.0f)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "repeat_penalty %g is out of range: it must be a number > 0 (1 = off)",
                        (double)p->repeat_penalty);
    if (!isfinite(p->presence_penalty))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "presence_penalty %g is out of range: it must be a finite number (0 = off)",
                        (double)p->presence_penalty);
    if (!isfinite(p->frequency_penalty))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "frequency_penalty %g is out of range: it must be a finite number (0 = off)",
                        (double)p->frequency_penalty);
    if (p->penalty_last_n < -1)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "penalty_last_n %d is out of range: it must be >= -1 (-1 = %d tokens)",
                        (int)p->penalty_last_n, PLM_SAMPLER_MAX_LAST_N);
    return PLM_OK;
}

/* The caller's parameters (any release's struct size) in this library's
 * struct, range-checked; NULL = the defaults. */
static plm_status resolve(const plm_sampler_params *in, plm_sampler_params *out, plm_error *err) {
    *out = sampler_defaults();
    plm_status st = plm_params_take(out, sizeof *out, in, "plm_sampler_params", err);
    return st ? st : check_fields(out, err);
}

plm_status plm_sampler_params_check(const plm_sampler_params *params, plm_error *err) {
    if (!params) return plm_fail(err, PLM_ERR_INVALID_ARG, "sampler parameters are NULL");
    plm_sampler_params p;
    return resolve(params, &p, err);
}

static plm_status sampler_build(int n_vocab, const plm_sampler_params *params, plm_sampler **out,
                                plm_error *err) {
    *out = NULL;
    if (n_vocab < 1) return plm_fail(err, PLM_ERR_INVALID_ARG, "a sampler needs a vocabulary (n_vocab %d)", n_vocab);
    plm_sampler_params p;
    plm_status st = resolve(params, &p, err);
    if (st) return st;
    plm_sampler *s = calloc(1, sizeof *s);
    if (!s) return plm_fail(err, PLM_ERR_NOMEM, "out of memory creating the sampler");
    s->p = p;
    s->n_vocab = n_vocab;
    s->last_n = s->p.penalty_last_n < 0 ? PLM_SAMPLER_MAX_LAST_N : s->p.penalty_last_n;
    s->penalize = s->last_n > 0 &&
                  (s->p.repeat_penalty != 1.0f || s->p.frequency_penalty != 0.0f ||
                   s->p.presence_penalty != 0.0f);
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    if (s->cand && s->penalize) {
        s->ring = malloc((size_t)s->last_n * sizeof *s->ring);
        s->count = calloc((size_t)n_vocab, sizeof *s->count);
    }
    if (!s->cand || (s->penalize && (!s->ring || !s->count))) {
        plm_sampler_free(s);
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory for a sampler over %d tokens", n_vocab);
    }
    rng_seed(s->rng, s->p.seed);
    *out = s;
    return PLM_OK;
}

plm_sampler *plm_sampler_new_n_vocab(int n_vocab, const plm_sampler_params *params) {
    plm_sampler *s;
    return sampler_build(n_vocab, params, &s, NULL) == PLM_OK ? s : NULL;
}

plm_sampler *plm_sampler_new(const plm_model *model, const plm_sampler_params *params) {
    if (!model) return NULL;
    return plm_sampler_new_n_vocab(plm_model_n_vocab(model), params);
}

plm_status plm_sampler_create(const plm_model *model, const plm_sampler_params *params, plm_sampler **out,
                              plm_error *err) {
    if (!out) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_sampler_create: out is NULL");
    *out = NULL;
    if (!model) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_sampler_create: model is NULL");
    return sampler_build(plm_model_n_vocab(model), params, out, err);
}

void plm_sampler_free(plm_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->ring);
    free(s->count);
    free(s);
}

void plm_sampler_reset(plm_sampler *s) {
    if (!s) return;
    if (s->penalize) {
        for (int i = 0; i < s->ring_len; i++) s->count[s->ring[(s->ring_head + i) % s->last_n]] = 0;
    }
    s->ring_head = 0;
    s->ring_len = 0;
    rng_seed(s->rng, s->p.seed);
}

void plm_sampler_accept(plm_sampler *s, plm_token t) {
    if (!s || !s->penalize || t < 0 || t >= s->n_vocab) return;
    if (s->ring_len == s->last_n) {
        s->count[s->ring[s->ring_head]]--;
        s->ring[s->ring_head] = t;
        s->ring_head = (s->ring_head + 1) % s->last_n;
    } else {
        s->ring[(s->ring_head + s->ring_len) % s->last_n] = t;
        s->ring_len++;
    }
    s->count[t]++;
}

/* ---- sampling ------------------------------------------------------------ */

/* a ranks before b: larger logit, or equal logit and lower id. */
static bool cand_before(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cand_cmp(const void *pa, const void *pb) {
    const cand *a = pa, *b = pb;
    if (cand_before(a, b)) return -1;
    if (cand_before(b, a)) return 1;
    return 0;
}

/* Min-heap on rank: the root is the worst of the k kept so far. */
static void heap_sift_down(cand *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && cand_before(&h[w], &h[l])) w = l;
        if (r < n && cand_before(&h[w], &h[r])) w = r;
        if (w == i) return;
        cand tmp = h[i];
        h[i] = h[w];
        h[w] = tmp;
        i = w;
    }
}

static float penalized(const plm_sampler *s, int i, float l) {
    int32_t c = s->count[i];
    if (c <= 0) return l;
    if (s->p.repeat_penalty != 1.0f) l = l > 0.0f ? l / s->p.repeat_penalty : l * s->p.repeat_penalty;
    l -= (float)c * s->p.frequency_penalty + s->p.presence_penalty;
    return l;
}

static inline float logit_at(const plm_sampler *s, const float *logits, int i) {
    float l = logits[i];
    if (isnan(l)) l = -INFINITY;
    return s->penalize ? penalized(s, i, l) : l;
}

/* Moves to the front of c[0..n) a set of candidates that holds the top-p
 * prefix, so that only those need sorting: one pass puts each logit in a
 * bucket by its distance below the max (higher logit, lower bucket) and sums
 * each bucket's probability mass; every bucket up to the one where the running
 * mass reaches p is kept, plus one more against rounding.  Returns the count
 * kept. */
static int top_p_candidates(plm_sampler *s, int n, float max, double denom) {
    cand *c = s->cand;
    double *mass = s->bucket_mass;
    float lo = max;
    for (int i = 0; i < n; i++)
        if (c[i].logit < lo && c[i].logit > -INFINITY) lo = c[i].logit;
    float range = max - lo;
    if (range > 64.0f) range = 64.0f;  /* exp(-64) is no mass at all */
    if (!(range > 0.0f)) return n;
    const float scale = (float)TOP_P_BUCKETS / range;
    for (int b = 0; b < TOP_P_BUCKETS; b++) mass[b] = 0.0;
    for (int i = 0; i < n; i++) {
        float d = (max - c[i].logit) * scale;
        int b = d < (float)(TOP_P_BUCKETS - 1) ? (int)d : TOP_P_BUCKETS - 1;
        mass[b] += exp((double)c[i].logit - max);
    }
    double want = s->p.top_p * denom, cum = 0.0;
    int last = TOP_P_BUCKETS - 1;
    for (int b = 0; b < TOP_P_BUCKETS; b++) {
        cum += mass[b];
        if (cum >= want) {
            last = b + 1 < TOP_P_BUCKETS ? b + 1 : b;
            break;
        }
    }
    if (last == TOP_P_BUCKETS - 1) return n;
    int m = 0;
    for (int i = 0; i < n; i++) {
        float d = (max - c[i].logit) * scale;
        int b = d < (float)(TOP_P_BUCKETS - 1) ? (int)d : TOP_P_BUCKETS - 1;
        if (b <= last) {
            cand t = c[m];
            c[m++] = c[i];
            c[i] = t;
        }
    }
    return m;
}

/* The candidates the temperature draw chooses from: penalties, top-k, min-p
 * and top-p applied, left in s->cand[0..n).  Returns n, or 0 when the draw
 * has nothing to choose (greedy, one token, no finite logit): then *best is
 * the answer.  *max is the largest penalised logit. */
static int keep_candidates(plm_sampler *s, const float *logits, int *best_out, float *max_out) {
    cand *c = s->cand;
    int n = s->n_vocab;
    int best = 0;
    float max = logit_at(s, logits, 0);
    *best_out = 0;
    *max_out = max;

    if (s->p.temperature <= 0.0f || n == 1) {  /* greedy */
        for (int i = 1; i < n; i++) {
            float l = logit_at(s, logits, i);
            if (l > max) max = l, best = i;
        }
        *best_out = best;
        return 0;
    }

    if (s->p.top_k > 0 && s->p.top_k < n) {
        /* top-k while reading: c[0..k) is a heap whose root is the worst
         * kept.  Ids only grow, so a later equal logit never ranks better. */
        int k = s->p.top_k;
        for (int i = 0; i < n; i++) {
            float l = logit_at(s, logits, i);
            if (l > max) max = l, best = i;
            if (i < k) {
                c[i].logit = l;
                c[i].id = i;
                if (i == k - 1)
                    for (int j = k / 2 - 1; j >= 0; j--) heap_sift_down(c, k, j);
            } else if (l > c[0].logit) {
                c[0].logit = l;
                c[0].id = i;
                heap_sift_down(c, k, 0);
            }
        }
        n = k;
    } else {
        for (int i = 0; i < n; i++) {
            float l = logit_at(s, logits, i);
            if (l > max) max = l, best = i;
            c[i].logit = l;
            c[i].id = i;
        }
    }
    *best_out = best;
    *max_out = max;
    if (!isfinite(max)) return 0;

    /* The top-p mass is normalised over the top-k set. */
    double denom = 0.0;
    bool top_p = s->p.top_p < 1.0f;
    if (top_p)
        for (int i = 0; i < n; i++) denom += exp((double)c[i].logit - max);

    /* min-p: p_i >= min_p * p_max  <=>  logit_i >= max + log(min_p). */
    if (s->p.min_p > 0.0f) {
        float thr = max + logf(s->p.min_p < 1.0f ? s->p.min_p : 1.0f);
        int m = 0;
        for (int i = 0; i < n; i++)
            if (c[i].logit >= thr) c[m++] = c[i];
        n = m;  /* the max always passes */
    }

    /* top-p */
    if (top_p && n > 1) {
        int m = n;
        if (n > TOP_P_BUCKET_MIN) m = top_p_candidates(s, n, max, denom);
        qsort(c, (size_t)m, sizeof *c, cand_cmp);
        n = m;
        double cum = 0.0;
        for (int i = 0; i < m; i++) {
            cum += exp((double)c[i].logit - max) / denom;
            if (cum >= s->p.top_p) {
                n = i + 1;
                break;
            }
        }
    }
    return n;
}

plm_token plm_sampler_sample(plm_sampler *s, const float *logits) {
    if (!s || !logits) return -1;
    const cand *c = s->cand;
    int best;
    float max;
    const int n = keep_candidates(s, logits, &best, &max);
    if (n == 0) return best;

    /* temperature, then draw */
    double inv_t = 1.0 / s->p.temperature;
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp(((double)c[i].logit - max) * inv_t);
    if (!(sum > 0.0) || !isfinite(sum)) return best;
    double u = rng_uniform(s->rng) * sum;
    double acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += exp(((double)c[i].logit - max) * inv_t);
        if (u < acc) return c[i].id;
    }
    /* Rounding left u at the very top: take the last token with mass. */
    for (int i = n - 1; i >= 0; i--)
        if (c[i].logit > -INFINITY) return c[i].id;
    return best;
}

/* ---- the distribution itself, for speculative sampling ------------------ */

plm_token plm_sampler_dist(plm_sampler *s, const float *logits, float *probs) {
    if (!s || !logits) return -1;
    const cand *c = s->cand;
    int best;
    float max;
    const int n = keep_candidates(s, logits, &best, &max);
    memset(probs, 0, (size_t)s->n_vocab * sizeof *probs);
    double sum = 0.0;
    if (n > 0) {
        const double inv_t = 1.0 / s->p.temperature;
        for (int i = 0; i < n; i++) sum += exp(((double)c[i].logit - max) * inv_t);
    }
    if (n == 0 || !(sum > 0.0) || !isfinite(sum)) {
        probs[best] = 1.0f;
        return best;
    }
    const double inv_t = 1.0 / s->p.temperature;
    for (int i = 0; i < n; i++) probs[c[i].id] = (float)(exp(((double)c[i].logit - max) * inv_t) / sum);
    return best;
}

double plm_sampler_uniform(plm_sampler *s) { return rng_uniform(s->rng); }

plm_token plm_sampler_draw(plm_sampler *s, const float *weights, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += weights[i];
    if (!(sum > 0.0)) return -1;
    const double u = rng_uniform(s->rng) * sum;
    double acc = 0.0;
    int last = -1;
    for (int i = 0; i < n; i++) {
        if (weights[i] <= 0.0f) continue;
        acc += weights[i];
        last = i;
        if (u < acc) return i;
    }
    return last;  /* rounding left u at the very top */
}

const plm_sampler_params *plm_sampler_params_of(const plm_sampler *s) { return &s->p; }
