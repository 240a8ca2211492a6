/*
 * The adaptive control of speculative decoding, on simulated workloads (no
 * clocks: each step's cost follows a fixed cost model, and proposals are
 * accepted by a seeded generator with a fixed probability).  The controller
 * must lose at most 5% against plain decoding where guesses never land,
 * even when verifying is expensive, and must find the speedup the cost model
 * allows where they do.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/spec_adapt.h"
#include "test.h"

typedef struct workload {
    const char *name;
    double accept;       /* probability that each proposal is right */
    double verify_tok;   /* extra cost of one more verified token, in plain steps */
    double draft_tok;    /* cost of drafting one token, in plain steps */
    int draft_max;
    double stall;        /* probability that a step takes 3x (a machine busy elsewhere) */
} workload;

static double uniform(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) * (1.0 / 9007199254740992.0);
}

/* Simulated time to generate n tokens, in plain steps (plain decoding: n). */
static double simulate(const workload *w, int n, int *max_k) {
    spec_adapt a;
    spec_adapt_init(&a, w->draft_max);
    uint64_t rng = 12345;
    double t = 0.0;
    int tokens = 0;
    *max_k = 0;
    while (tokens < n) {
        const int k = spec_adapt_next_k(&a, 1);
        if (k > *max_k) *max_k = k;
        const double slow = uniform(&rng) < w->stall ? 3.0 : 1.0;
        const double t_verify = slow * (1.0 + k * w->verify_tok), t_draft = k * w->draft_tok;
        int j = 0;
        while (j < k && uniform(&rng) < w->accept) j++;
        t += t_verify + t_draft;
        tokens += j + 1;
        const spec_pass pass = {.n_seqs = 1, .n_proposed = k, .seconds = t_verify, .first = true, .first_proposer = true};
        spec_adapt_record(&a, k, j, t_draft, true, &pass);
    }
    return t * n / tokens;
}

/* A server's slots sharing every pass (plm_gen_step), answering requests
 * of 24 tokens one after the other: a pass of R rows
 * costs max(1, R x row) plain steps (bandwidth-bound until R x row = 1,
 * then compute-bound) and each drafted token `draft_tok`.  Returns the
 * tokens per unit of time against plain decoding's (b tokens a pass). */
enum { MAX_SLOTS = 8 };
typedef struct shared_load {
    const char *name;
    int n_slots;
    double accept, row, draft_tok;
} shared_load;

static double pass_cost(const shared_load *w, int rows) { return rows * w->row > 1.0 ? rows * w->row : 1.0; }

static double simulate_shared(const shared_load *w, int rounds, int *drafted) {
    spec_adapt a[MAX_SLOTS];
    for (int i = 0; i < w->n_slots; i++) spec_adapt_init(&a[i], 16);
    for (int i = 1; i < w->n_slots; i++) spec_adapt_share_costs(&a[i], &a[0]);  /* as a server's slots do */
    uint64_t rng = 777;
    double t = 0.0;
    long tokens = 0;
    int made[MAX_SLOTS] = {0};  /* tokens of each slot's request: a new one every 24 */
    *drafted = 0;
    for (int r = 0; r < rounds; r++) {
        int k[MAX_SLOTS], j[MAX_SLOTS], total = 0;
        for (int i = 0; i < w->n_slots; i++) {
            k[i] = spec_adapt_next_k(&a[i], w->n_slots);
            for (j[i] = 0; j[i] < k[i] && uniform(&rng) < w->accept;) j[i]++;
            total += k[i];
            tokens += j[i] + 1;
            if ((made[i] += j[i] + 1) >= 24) made[i] = 0, spec_adapt_new_request(&a[i]);  /* the next request */
        }
        spec_pass pass = {.n_seqs = w->n_slots, .n_proposed = total, .seconds = pass_cost(w, w->n_slots + total),
                          .first = true, .first_proposer = true};
        t += pass.seconds + total * w->draft_tok;
        *drafted += total;
        for (int i = 0; i < w->n_slots; i++) {  /* one records the pass, one the drafting (gen_step's rule) */
            const bool proposer = k[i] > 0 && pass.first_proposer;
            pass.first_proposer = proposer;
            spec_adapt_record(&a[i], k[i], j[i], k[i] * w->draft_tok, true, &pass);
            pass.first = false;
            if (proposer) pass.first_proposer = false;
        }
    }
    const double plain_rate = w->n_slots / pass_cost(w, w->n_slots);
    return tokens / t / plain_rate;
}

int main(void) {
    /* A pass shared by 8 slots that is compute-bound already: every verified
     * row costs what a plain token does, so drafting cannot pay even when
     * every proposal is right; the same slots decoding alone gain. */
    const shared_load shared[] = {
        {"8 slots, compute-bound pass, 95% acceptance", 8, 0.95, 0.25, 0.02},
        {"8 slots, compute-bound pass, 0% acceptance", 8, 0.0, 0.25, 0.02},
        {"4 slots, at the knee, 90% acceptance", 4, 0.9, 0.25, 0.02},
    };
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++) {
        int drafted;
        const double r = simulate_shared(&shared[i], 2000, &drafted);
        CHECK(r >= 0.95, "%s: %.3fx plain decoding's tokens per second", shared[i].name, r);
        printf("%-48s %.3fx plain throughput, %d tokens drafted\n", shared[i].name, r, drafted);
    }
    const shared_load alone = {"1 slot, bandwidth-bound, 90% acceptance", 1, 0.9, 0.05, 0.02};
    int drafted;
    const double r1 = simulate_shared(&alone, 2000, &drafted);
    CHECK(r1 >= 2.0, "%s: %.3fx plain decoding's tokens per second", alone.name, r1);
    printf("%-48s %.3fx plain throughput\n", alone.name, r1);
    const shared_load two = {"2 slots, bandwidth-bound, 90% acceptance", 2, 0.9, 0.05, 0.02};
    const double r2 = simulate_shared(&two, 2000, &drafted);
    CHECK(r2 >= 1.5, "%s: %.3fx plain decoding's tokens per second", two.name, r2);
    printf("%-48s %.3fx plain throughput\n", two.name, r2);

    const workload never[] = {
        {"no acceptance, lookup (free drafts)", 0.0, 0.15, 0.0, 16, 0.0},
        {"no acceptance, draft model", 0.0, 0.15, 0.1, 16, 0.0},
        {"no acceptance, compute-bound verify", 0.0, 1.0, 0.1, 16, 0.0},
        {"no acceptance, 10% of steps stalled 3x", 0.0, 0.3, 0.1, 16, 0.1},
        {"2% acceptance, expensive verify", 0.02, 0.6, 0.2, 16, 0.0},
    };
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        int max_k;
        const double t = simulate(&never[i], 2000, &max_k) / (1.0 + 2.0 * never[i].stall);  /* plain stalls too */
        CHECK(t <= 1.05 * 2000, "%s: %.3fx the time of plain decoding", never[i].name, t / 2000);
        printf("%-40s %.3fx plain time\n", never[i].name, t / 2000);
    }

    /* Where it pays: close to the best fixed draft length's speed. */
    const workload good[] = {
        {"90% acceptance, bandwidth-bound", 0.9, 0.05, 0.05, 16, 0.0},
        {"70% acceptance, bandwidth-bound", 0.7, 0.05, 0.05, 16, 0.0},
        {"80% acceptance, lookup", 0.8, 0.1, 0.0, 16, 0.0},
        {"90% acceptance, 10% of steps stalled 3x", 0.9, 0.05, 0.05, 16, 0.1},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        const workload *w = &good[i];
        double best = 1e30;
        const double stall = 1.0 + 2.0 * w->stall;  /* the mean slowdown, plain decoding's too */
        for (int k = 1; k <= w->draft_max; k++) {
            const double cost = 1.0 + k * (w->verify_tok + w->draft_tok);
            const double per_tok = cost / spec_expected_tokens(w->accept, k);
            if (per_tok < best) best = per_tok;
        }
        int max_k;
        const double t = simulate(w, 4000, &max_k) / 4000 / stall;
        CHECK(t <= best * 1.15, "%s: %.3f plain steps a token, the best fixed length gives %.3f", w->name, t, best);
        CHECK(max_k > 2, "%s: the draft length never grew (%d)", w->name, max_k);
        printf("%-40s speedup %.2fx (best fixed length %.2fx), longest draft %d\n", w->name, 1.0 / t, 1.0 / best,
               max_k);
    }
    CHECK(fabs(spec_expected_tokens(0.5, 2) - 1.75) < 1e-12 && spec_expected_tokens(1.0, 4) == 5.0,
          "expected tokens per verification");
    return test_summary();
}
