/* Sampler, stop-string matcher and peak-RSS tests.  Everything here runs on
 * crafted logits: no model needed. */
#include <math.h>
#include <string.h>

#include "runtime/sampler.h"
#include "runtime/stop.h"
#include "test.h"

static uint64_t test_rng = 0x1234567;

static uint64_t next_u64(void) {
    uint64_t z = (test_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float next_float(float lo, float hi) {
    return lo + (hi - lo) * (float)((next_u64() >> 40) * (1.0 / 16777216.0));
}

static plm_sampler_params plain_params(float temp) {
    plm_sampler_params p = plm_sampler_default_params();
    p.temperature = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

static void test_defaults(void) {
    plm_sampler_params p = plm_sampler_default_params();
    CHECK(p.temperature == 0.8f && p.top_k == 40 && p.top_p == 0.95f && p.min_p == 0.05f,
          "sampling defaults");
    CHECK(p.repeat_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f &&
          p.penalty_last_n == 64, "penalty defaults");
    CHECK(p.seed == PLM_SAMPLER_DEFAULT_SEED, "default seed is the documented fixed value");
    CHECK(plm_sampler_new_n_vocab(0, &p) == NULL, "n_vocab 0 refused");
    CHECK(plm_sampler_new(NULL, &p) == NULL, "NULL model refused");
    plm_sampler_free(NULL);
}

static void test_greedy(void) {
    enum { N = 1000 };
    static float l[N];
    plm_sampler_params p = plm_sampler_default_params();
    p.temperature = 0.0f;
    plm_sampler *s = plm_sampler_new_n_vocab(N, &p);
    int bad = 0;
    for (int r = 0; r < 200; r++) {
        for (int i = 0; i < N; i++) l[i] = next_float(-10, 10);
        if (plm_sampler_sample(s, l) != argmax(l, N)) bad++;
    }
    CHECK(bad == 0, "greedy differs from argmax %d times", bad);
    /* Ties go to the lowest id. */
    for (int i = 0; i < N; i++) l[i] = 0.0f;
    l[17] = l[5] = l[900] = 3.0f;
    CHECK(plm_sampler_sample(s, l) == 5, "tie -> lowest id");
    for (int i = 0; i < N; i++) l[i] = 1.0f;
    CHECK(plm_sampler_sample(s, l) == 0, "all equal -> 0");
    /* Negative temperature is greedy too. */
    plm_sampler_free(s);
    p.temperature = -1.0f;
    s = plm_sampler_new_n_vocab(N, &p);
    for (int i = 0; i < N; i++) l[i] = next_float(-10, 10);
    CHECK(plm_sampler_sample(s, l) == argmax(l, N), "negative temperature is greedy");
    plm_sampler_free(s);
}

static void test_top_k(void) {
    enum { N = 500 };
    static float l[N];
    for (uint64_t seed = 0; seed < 50; seed++) {
        plm_sampler_params p = plain_params(1.5f);
        p.top_k = 1;
        p.seed = seed;
        plm_sampler *s = plm_sampler_new_n_vocab(N, &p);
        int bad = 0;
        for (int r = 0; r < 20; r++) {
            for (int i = 0; i < N; i++) l[i] = next_float(-1, 1);
            if (plm_sampler_sample(s, l) != argmax(l, N)) bad++;
        }
        CHECK(bad == 0, "top_k=1 seed %d: %d non-argmax", (int)seed, bad);
        plm_sampler_free(s);
    }

    /* top_k = 7: never outside the 7 best, and every one of them shows up. */
    plm_sampler_params p = plain_params(2.0f);
    p.top_k = 7;
    plm_sampler *s = plm_sampler_new_n_vocab(N, &p);
    for (int i = 0; i < N; i++) l[i] = next_float(-0.5f, 0.5f);
    int rank[N];
    for (int i = 0; i < N; i++) {
        rank[i] = 0;
        for (int j = 0; j < N; j++)
            if (l[j] > l[i] || (l[j] == l[i] && j < i)) rank[i]++;
    }
    int outside = 0, seen[7] = {0};
    for (int r = 0; r < 20000; r++) {
        plm_token t = plm_sampler_sample(s, l);
        if (t < 0 || t >= N || rank[t] >= 7) outside++;
        else seen[rank[t]]++;
    }
    CHECK(outside == 0, "top_k=7 sampled %d tokens outside the 7 best", outside);
    for (int k = 0; k < 7; k++) CHECK(seen[k] > 0, "rank %d never drawn", k);
    plm_sampler_free(s);

    /* Ties at the k-th place go to the lower id. */
    p = plain_params(1.0f);
    p.top_k = 2;
    s = plm_sampler_new_n_vocab(6, &p);
    float t[6] = {0, 5, 1, 1, 1, 0};
    int bad = 0;
    for (int r = 0; r < 2000; r++) {
        plm_token x = plm_sampler_sample(s, t);
        if (x != 1 && x != 2) bad++;
    }
    CHECK(bad == 0, "top_k tie break by lowest id: %d bad", bad);
    plm_sampler_free(s);
}

/* Draws `n` samples and returns the chi-square statistic against `prob`
 * (tokens with prob 0 must never appear: counted in *forbidden). */
static double chi_square(plm_sampler *s, const float *l, int n_vocab, const double *prob,
                         int n, int *forbidden) {
    int count[64] = {0};
    *forbidden = 0;
    for (int r = 0; r < n; r++) {
        plm_token t = plm_sampler_sample(s, l);
        if (t < 0 || t >= n_vocab || prob[t] == 0.0) (*forbidden)++;
        else count[t]++;
    }
    double chi = 0.0;
    for (int i = 0; i < n_vocab; i++) {
        if (prob[i] == 0.0) continue;
        double e = prob[i] * n;
        chi += (count[i] - e) * (count[i] - e) / e;
    }
    return chi;
}

/* Critical values of chi-square at p = 0.001 by degrees of freedom. */
static double chi_crit(int dof) {
    static const double c[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88};
    return c[dof];
}

/* probabilities 0.5 0.25 0.15 0.07 0.03 */
static const double P5[5] = {0.5, 0.25, 0.15, 0.07, 0.03};

static void set_log_probs(float *l) {
    for (int i = 0; i < 5; i++) l[i] = (float)log(P5[i]) + 3.0f; /* shift: irrelevant */
}

/* Checks that sampling with p (temperature 1) draws exactly from the tokens
 * keep[], with probabilities P5 renormalised over them. */
static void check_truncation(plm_sampler_params p, const int *keep, int nkeep, const char *what) {
    float l[5];
    set_log_probs(l);
    double prob[5] = {0}, sum = 0;
    for (int i = 0; i < nkeep; i++) sum += P5[keep[i]];
    for (int i = 0; i < nkeep; i++) prob[keep[i]] = P5[keep[i]] / sum;
    plm_sampler *s = plm_sampler_new_n_vocab(5, &p);
    int forbidden;
    double chi = chi_square(s, l, 5, prob, 50000, &forbidden);
    CHECK(forbidden == 0, "%s: %d draws of excluded tokens", what, forbidden);
    if (nkeep > 1) CHECK(chi < chi_crit(nkeep - 1), "%s: chi-square %.2f", what, chi);
    plm_sampler_free(s);
}

static void test_top_p_min_p(void) {
    plm_sampler_params p = plain_params(1.0f);
    /* cumulative 0.5 0.75 0.9 0.97 1.0 */
    p.top_p = 0.8f;
    check_truncation(p, (int[]){0, 1, 2}, 3, "top_p 0.8");
    p.top_p = 0.7f;
    check_truncation(p, (int[]){0, 1}, 2, "top_p 0.7");
    p.top_p = 0.95f;
    check_truncation(p, (int[]){0, 1, 2, 3}, 4, "top_p 0.95");
    p.top_p = 0.4f;
    check_truncation(p, (int[]){0}, 1, "top_p 0.4");
    /* After top_k=3 the mass is renormalised: 0.556 0.833 -> top_p 0.8 keeps 2. */
    p.top_p = 0.8f;
    p.top_k = 3;
    check_truncation(p, (int[]){0, 1}, 2, "top_k 3 + top_p 0.8");
    p.top_k = 0;
    p.top_p = 1.0f;
    /* min_p: keep p >= min_p * 0.5 */
    p.min_p = 0.25f;  /* >= 0.125 */
    check_truncation(p, (int[]){0, 1, 2}, 3, "min_p 0.25");
    p.min_p = 0.4f;   /* >= 0.2 */
    check_truncation(p, (int[]){0, 1}, 2, "min_p 0.4");
    p.min_p = 0.1f;   /* >= 0.05 */
    check_truncation(p, (int[]){0, 1, 2, 3}, 4, "min_p 0.1");
    p.min_p = 0.9f;
    check_truncation(p, (int[]){0}, 1, "min_p 0.9");
    /* Shortest prefix wins: top_p 0.95 keeps 4, min_p 0.25 keeps 3. */
    p.min_p = 0.25f;
    p.top_p = 0.95f;
    check_truncation(p, (int[]){0, 1, 2}, 3, "top_p 0.95 + min_p 0.25");
    p.min_p = 0.1f;
    p.top_p = 0.8f;
    check_truncation(p, (int[]){0, 1, 2}, 3, "top_p 0.8 + min_p 0.1");
    /* Token order in the vocabulary does not matter. */
    {
        float l[5];
        set_log_probs(l);
        float perm[5] = {l[3], l[0], l[4], l[2], l[1]};  /* ids: 3->0 0->1 4->2 2->3 1->4 */
        plm_sampler_params q = plain_params(1.0f);
        q.top_p = 0.8f;
        plm_sampler *s = plm_sampler_new_n_vocab(5, &q);
        int bad = 0;
        for (int r = 0; r < 5000; r++) {
            plm_token t = plm_sampler_sample(s, perm);
            if (t != 1 && t != 4 && t != 3) bad++;
        }
        CHECK(bad == 0, "permuted top_p: %d bad", bad);
        plm_sampler_free(s);
    }
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x > y ? -1 : x < y;
}

/* top-p over a vocabulary large enough for the histogram narrowing: the set
 * drawn from is exactly the brute-force prefix. */
static void test_top_p_large(void) {
    enum { N = 5000, HEAD = 30 };
    static float l[N];
    static double sorted[N];
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < N; i++) l[i] = next_float(-5, 0);
        for (int h = 0; h < HEAD; h++) l[next_u64() % N] = next_float(5, 6);
        float top_p = round < 2 ? 0.8f : 0.5f;
        /* Reference: sort probabilities, walk to p. */
        double max = -1e30, denom = 0;
        for (int i = 0; i < N; i++) max = l[i] > max ? l[i] : max;
        for (int i = 0; i < N; i++) denom += sorted[i] = exp((double)l[i] - max);
        qsort(sorted, N, sizeof sorted[0], cmp_desc);
        double cum = 0, cut = 0;
        int keep = 0;
        for (int i = 0; i < N; i++) {
            cum += sorted[i] / denom;
            if (cum >= top_p) {
                keep = i + 1;
                cut = sorted[i];
                break;
            }
        }
        plm_sampler_params p = plain_params(1.0f);
        p.top_p = top_p;
        p.seed = (uint64_t)round;
        plm_sampler *s = plm_sampler_new_n_vocab(N, &p);
        static int seen[N];
        memset(seen, 0, sizeof seen);
        int outside = 0, distinct = 0;
        for (int r = 0; r < 5000; r++) {
            plm_token t = plm_sampler_sample(s, l);
            if (exp((double)l[t] - max) < cut) outside++;
            else distinct += !seen[t]++;
        }
        CHECK(outside == 0, "large top_p: %d draws outside the prefix", outside);
        CHECK(distinct == keep, "large top_p: drew %d distinct of the %d kept", distinct, keep);
        plm_sampler_free(s);
    }
}

/* The sampler with temperature 0 picks `tok` (whose penalised logit is E)
 * against a competitor at E - 0.01 and loses to one at E + 0.01. */
static void check_penalised(plm_sampler_params p, const plm_token *history, int nh, float logit,
                            float expected, const char *what) {
    float l[4] = {-100, -100, -100, -100};
    l[0] = logit;
    p.temperature = 0.0f;
    plm_sampler *s = plm_sampler_new_n_vocab(4, &p);
    for (int i = 0; i < nh; i++) plm_sampler_accept(s, history[i]);
    l[3] = expected - 0.01f;
    CHECK(plm_sampler_sample(s, l) == 0, "%s: penalised logit below %g", what, expected - 0.01);
    l[3] = expected + 0.01f;
    CHECK(plm_sampler_sample(s, l) == 3, "%s: penalised logit above %g", what, expected + 0.01);
    plm_sampler_free(s);
}

static void test_penalties(void) {
    plm_sampler_params p = plain_params(0.0f);
    plm_token h0[] = {0}, h000[] = {0, 0, 0}, h1[] = {1, 2, 1};
    p.repeat_penalty = 1.5f;
    check_penalised(p, h0, 1, 3.0f, 2.0f, "repeat, positive logit divided");
    check_penalised(p, h0, 1, -2.0f, -3.0f, "repeat, negative logit multiplied");
    check_penalised(p, h000, 3, 3.0f, 2.0f, "repeat does not stack with count");
    check_penalised(p, h1, 3, 3.0f, 3.0f, "repeat: unseen token untouched");
    p.repeat_penalty = 1.0f;
    p.frequency_penalty = 0.25f;
    check_penalised(p, h0, 1, 1.0f, 0.75f, "frequency x1");
    check_penalised(p, h000, 3, 1.0f, 0.25f, "frequency x3");
    p.frequency_penalty = 0.0f;
    p.presence_penalty = 0.5f;
    check_penalised(p, h0, 1, 1.0f, 0.5f, "presence x1");
    check_penalised(p, h000, 3, 1.0f, 0.5f, "presence x3 = presence x1");
    /* All three: repeat first, then subtract. */
    p.repeat_penalty = 2.0f;
    p.frequency_penalty = 0.1f;
    p.presence_penalty = 0.2f;
    check_penalised(p, h000, 3, 4.0f, 4.0f / 2 - 0.3f - 0.2f, "all, positive");
    check_penalised(p, h000, 3, -1.0f, -2.0f - 0.3f - 0.2f, "all, negative");
    /* The window: only the last penalty_last_n accepted tokens count. */
    p.penalty_last_n = 2;
    plm_token w[] = {0, 0, 1, 2};
    check_penalised(p, w, 4, 4.0f, 4.0f, "token left the window");
    plm_token w2[] = {0, 1, 0, 0};
    check_penalised(p, w2, 4, 4.0f, 4.0f / 2 - 0.2f - 0.2f, "window counts 2 of 3");
    p.penalty_last_n = 0;
    check_penalised(p, h000, 3, 4.0f, 4.0f, "penalty_last_n 0 disables");

    /* reset forgets history; out-of-range tokens are ignored. */
    p.penalty_last_n = 64;
    p.repeat_penalty = 1.0f;
    p.frequency_penalty = 0.0f;
    p.presence_penalty = 10.0f;
    plm_sampler *s = plm_sampler_new_n_vocab(4, &p);
    float l[4] = {1, 0.5f, 0, 0};
    plm_sampler_accept(s, 0);
    plm_sampler_accept(s, -1);
    plm_sampler_accept(s, 4);
    CHECK(plm_sampler_sample(s, l) == 1, "presence applied");
    plm_sampler_reset(s);
    CHECK(plm_sampler_sample(s, l) == 0, "reset clears the history");
    plm_sampler_free(s);
}

static void test_seeds(void) {
    enum { N = 64, T = 200 };
    float l[N];
    for (int i = 0; i < N; i++) l[i] = next_float(-1, 1);
    plm_token a[T], b[T], c[T], d[T];
    plm_sampler_params p = plm_sampler_default_params();
    p.temperature = 1.0f;
    p.repeat_penalty = 1.1f;
    p.seed = 1234;
    plm_sampler *s1 = plm_sampler_new_n_vocab(N, &p);
    plm_sampler *s2 = plm_sampler_new_n_vocab(N, &p);
    p.seed = 1235;
    plm_sampler *s3 = plm_sampler_new_n_vocab(N, &p);
    for (int i = 0; i < T; i++) {
        a[i] = plm_sampler_sample(s1, l);
        plm_sampler_accept(s1, a[i]);
        b[i] = plm_sampler_sample(s2, l);
        plm_sampler_accept(s2, b[i]);
        c[i] = plm_sampler_sample(s3, l);
        plm_sampler_accept(s3, c[i]);
    }
    CHECK(!memcmp(a, b, sizeof a), "same seed, same sequence");
    CHECK(memcmp(a, c, sizeof a) != 0, "different seed, different sequence");
    plm_sampler_reset(s1);
    for (int i = 0; i < T; i++) {
        d[i] = plm_sampler_sample(s1, l);
        plm_sampler_accept(s1, d[i]);
    }
    CHECK(!memcmp(a, d, sizeof a), "reset restarts the random sequence");
    plm_sampler_free(s1);
    plm_sampler_free(s2);
    plm_sampler_free(s3);
}

static void test_distribution(void) {
    enum { N = 8 };
    float l[N] = {1.0f, 0.5f, 2.0f, -1.0f, 0.0f, 1.5f, -0.5f, 0.25f};
    const float temps[] = {1.0f, 0.5f, 2.0f};
    for (int ti = 0; ti < 3; ti++) {
        double prob[N], sum = 0;
        for (int i = 0; i < N; i++) sum += prob[i] = exp(l[i] / temps[ti]);
        for (int i = 0; i < N; i++) prob[i] /= sum;
        plm_sampler_params p = plain_params(temps[ti]);
        p.seed = 7 + (uint64_t)ti;
        plm_sampler *s = plm_sampler_new_n_vocab(N, &p);
        int forbidden;
        double chi = chi_square(s, l, N, prob, 200000, &forbidden);
        CHECK(forbidden == 0, "temperature %.1f: out of range tokens", temps[ti]);
        CHECK(chi < chi_crit(N - 1), "temperature %.1f: chi-square %.2f (7 dof)", temps[ti], chi);
        plm_sampler_free(s);
    }
    /* Truncation then temperature: top_k 4 at temperature 0.7. */
    {
        const int keep[4] = {2, 5, 0, 1};
        double prob[N] = {0}, sum = 0;
        for (int i = 0; i < 4; i++) sum += exp(l[keep[i]] / 0.7);
        for (int i = 0; i < 4; i++) prob[keep[i]] = exp(l[keep[i]] / 0.7) / sum;
        plm_sampler_params p = plain_params(0.7f);
        p.top_k = 4;
        plm_sampler *s = plm_sampler_new_n_vocab(N, &p);
        int forbidden;
        double chi = chi_square(s, l, N, prob, 200000, &forbidden);
        CHECK(forbidden == 0, "top_k 4 at T 0.7: %d excluded draws", forbidden);
        CHECK(chi < chi_crit(3), "top_k 4 at T 0.7: chi-square %.2f", chi);
        plm_sampler_free(s);
    }
}

static void test_big_vocab(void) {
    /* A real-sized vocabulary with the default chain; -inf and NaN logits. */
    enum { N = 151936 };
    float *l = malloc(N * sizeof *l);
    for (int i = 0; i < N; i++) l[i] = next_float(-5, 5);
    l[1000] = 20.0f;
    l[5] = -INFINITY;
    l[6] = NAN;
    plm_sampler *s = plm_sampler_new_n_vocab(N, NULL);
    int hits = 0;
    for (int r = 0; r < 50; r++) {
        plm_token t = plm_sampler_sample(s, l);
        plm_sampler_accept(s, t);
        hits += t == 1000;
    }
    CHECK(hits == 50, "dominant token drawn %d/50", hits);
    /* No truncation at all: full sort path. */
    plm_sampler_params p = plain_params(1.0f);
    p.top_p = 0.999f;
    plm_sampler *s2 = plm_sampler_new_n_vocab(N, &p);
    l[1000] = 0.0f;
    int bad = 0;
    for (int r = 0; r < 20; r++) {
        plm_token t = plm_sampler_sample(s2, l);
        if (t < 0 || t >= N || t == 5 || t == 6) bad++;
    }
    CHECK(bad == 0, "full-vocab top_p: %d bad tokens", bad);
    for (int i = 0; i < N; i++) l[i] = -INFINITY;
    l[77] = 0.0f;
    CHECK(plm_sampler_sample(s2, l) == 77, "single finite logit");
    plm_sampler_free(s);
    plm_sampler_free(s2);
    free(l);
}

/* ---- stop strings ------------------------------------------------------- */

typedef struct {
    char text[256];
    size_t len;
    int stop;
} stream;

static void feed(plm_stop *m, stream *st, const char *piece) {
    plm_stop_out o = plm_stop_feed(m, piece, strlen(piece));
    memcpy(st->text + st->len, o.text, o.len);
    st->len += o.len;
    st->text[st->len] = 0;
    st->stop = o.stop;
}

static void flush(plm_stop *m, stream *st) {
    plm_stop_out o = plm_stop_flush(m);
    memcpy(st->text + st->len, o.text, o.len);
    st->len += o.len;
    st->text[st->len] = 0;
}

static void test_stop(void) {
    const char *stops[] = {"</s>", "", "\nUser:"};
    plm_stop *m = plm_stop_new(stops, 3);
    stream st = {{0}, 0, -1};
    feed(m, &st, "Hello <");
    CHECK(!strcmp(st.text, "Hello ") && st.stop == -1 && plm_stop_held(m) == 1, "partial held: '%s'", st.text);
    feed(m, &st, "/");
    CHECK(!strcmp(st.text, "Hello ") && plm_stop_held(m) == 2, "still held");
    feed(m, &st, "s> and more");
    CHECK(!strcmp(st.text, "Hello ") && st.stop == 0, "stop 0 across 3 pieces: '%s' %d", st.text, st.stop);
    feed(m, &st, "later");
    CHECK(!strcmp(st.text, "Hello ") && st.stop == 0, "nothing after a stop");

    plm_stop_reset(m);
    st = (stream){{0}, 0, -1};
    feed(m, &st, "a<");
    feed(m, &st, "b<");
    CHECK(!strcmp(st.text, "a<b") && st.stop == -1, "false partial released: '%s'", st.text);
    feed(m, &st, "/x");
    CHECK(!strcmp(st.text, "a<b</x"), "released after mismatch: '%s'", st.text);
    feed(m, &st, "\nUs");
    feed(m, &st, "er");
    CHECK(!strcmp(st.text, "a<b</x"), "newline held: '%s'", st.text);
    feed(m, &st, ": hi");
    CHECK(!strcmp(st.text, "a<b</x") && st.stop == 2, "stop index is the caller's: %d", st.stop);

    plm_stop_reset(m);
    st = (stream){{0}, 0, -1};
    feed(m, &st, "end <");
    flush(m, &st);
    CHECK(!strcmp(st.text, "end <") && plm_stop_held(m) == 0, "flush releases: '%s'", st.text);
    feed(m, &st, "x</s>y");
    CHECK(!strcmp(st.text, "end <x") && st.stop == 0, "stop inside one piece: '%s'", st.text);
    plm_stop_free(m);

    /* Overlapping self-prefix: "aab" in "aaab" one byte at a time. */
    const char *s2[] = {"aab"};
    m = plm_stop_new(s2, 1);
    st = (stream){{0}, 0, -1};
    feed(m, &st, "a");
    feed(m, &st, "a");
    feed(m, &st, "a");
    CHECK(!strcmp(st.text, "a"), "one 'a' released: '%s'", st.text);
    feed(m, &st, "b");
    CHECK(!strcmp(st.text, "a") && st.stop == 0, "aab found: '%s'", st.text);
    plm_stop_free(m);

    /* Earliest start wins within one piece. */
    const char *s3[] = {"bc", "abcd"};
    m = plm_stop_new(s3, 2);
    st = (stream){{0}, 0, -1};
    feed(m, &st, "xabcd");
    CHECK(!strcmp(st.text, "x") && st.stop == 1, "earliest: '%s' %d", st.text, st.stop);
    plm_stop_free(m);

    /* No stops: passthrough, nothing held. */
    m = plm_stop_new(NULL, 0);
    st = (stream){{0}, 0, -1};
    feed(m, &st, "abc");
    CHECK(!strcmp(st.text, "abc") && plm_stop_held(m) == 0, "passthrough");
    plm_stop_free(m);

    /* A piece longer than the initial buffer. */
    const char *s4[] = {"STOP"};
    m = plm_stop_new(s4, 1);
    char big[1200];
    memset(big, 'z', sizeof big);
    memcpy(big + 1000, "STOP", 4);
    plm_stop_out o = plm_stop_feed(m, big, sizeof big);
    CHECK(o.len == 1000 && o.stop == 0, "long piece: %zu %d", o.len, o.stop);
    plm_stop_free(m);

    /* Random texts and random splits against the whole-text answer.  No stop
     * string is a substring of another, so the answer does not depend on
     * where the pieces break. */
    const char *s5[] = {"abc", "cab", "bb", "cccc"};
    m = plm_stop_new(s5, 4);
    int bad = 0;
    for (int r = 0; r < 2000; r++) {
        char text[41];
        int n = 1 + (int)(next_u64() % 40);
        for (int i = 0; i < n; i++) text[i] = "abc"[next_u64() % 3];
        text[n] = 0;
        size_t want = (size_t)n;
        int want_stop = -1;
        for (int k = 0; k < 4; k++) {
            const char *p = strstr(text, s5[k]);
            if (p && (size_t)(p - text) < want) {
                want = (size_t)(p - text);
                want_stop = k;
            }
        }
        plm_stop_reset(m);
        st = (stream){{0}, 0, -1};
        int pos = 0;
        while (pos < n && st.stop < 0) {
            int len = 1 + (int)(next_u64() % 5);
            if (len > n - pos) len = n - pos;
            char piece[8];
            memcpy(piece, text + pos, (size_t)len);
            piece[len] = 0;
            feed(m, &st, piece);
            pos += len;
        }
        if (st.stop < 0) flush(m, &st);
        if (st.len != want || memcmp(st.text, text, want) || st.stop != want_stop) {
            if (bad++ < 5)
                fprintf(stderr, "text %s: got '%s' stop %d, want %zu stop %d\n", text, st.text,
                        st.stop, want, want_stop);
        }
    }
    CHECK(bad == 0, "random stop streams: %d wrong", bad);
    plm_stop_free(m);
}

/* The public constructor takes n_vocab from a model. */
static void test_with_model(void) {
    plm_model_params mp = plm_model_default_params();
    mp.vocab_only = true;
    plm_model *model = NULL;
    plm_error err;
    CHECK(plm_model_load(SHARED("models/stories260K.gguf"), &mp, &model, &err) == PLM_OK, "load: %s",
          err.message);
    if (!model) return;
    int n = plm_model_n_vocab(model);
    CHECK(n == 512, "n_vocab %d", n);
    plm_sampler_params p = plm_sampler_default_params();
    p.temperature = 0.0f;
    plm_sampler *s = plm_sampler_new(model, &p);
    CHECK(s != NULL, "plm_sampler_new");
    float l[512];
    for (int i = 0; i < 512; i++) l[i] = next_float(-3, 3);
    l[511] = 4.0f;
    CHECK(s && plm_sampler_sample(s, l) == 511, "last token of the vocabulary reachable");
    plm_sampler_free(s);
    plm_model_free(model);
}

static void test_rss(void) {
    uint64_t rss = plm_peak_rss_bytes();
    CHECK(rss > 1024 * 1024 && rss < (uint64_t)1 << 40, "peak rss %llu", (unsigned long long)rss);
}

int main(void) {
    test_defaults();
    test_greedy();
    test_top_k();
    test_top_p_min_p();
    test_top_p_large();
    test_penalties();
    test_seeds();
    test_distribution();
    test_big_vocab();
    test_stop();
    test_with_model();
    test_rss();
    return test_summary();
}
