/* The adaptive draft length and the pause when speculation does not pay
 * (see spec_adapt.h). */
#include "runtime/spec_adapt.h"

#include <math.h>
#include <stdlib.h>

enum {
    FIRST_K = 1,       /* before anything is measured: a wrong guess costs little */
    PAUSE_FIRST = 16,  /* plain steps after the first verdict against speculating */
    PAUSE_MAX = 512,   /* the pause doubles on each failed probe up to this */
};
#define DECAY 0.9      /* weight of the past in the acceptance counts, per step */
#define EMA 0.2        /* weight of a new time measurement */
#define RESUME_GAIN 1.02  /* a new request or batch size drafts if it would gain more than this */

void spec_adapt_init(spec_adapt *a, int draft_max) {
    *a = (spec_adapt){.draft_max = draft_max, .accepted = 1.0, .rejected = 1.0, .share = 1};
    a->c = &a->own;
    a->k = draft_max < FIRST_K ? draft_max : FIRST_K;
    a->pause_left = 2;  /* the first steps are plain: they measure t_plain */
    a->pause_len = PAUSE_FIRST;
}

void spec_adapt_share_costs(spec_adapt *a, spec_adapt *owner) { a->c = owner->c; }

void spec_adapt_new_request(spec_adapt *a) { a->fresh = true; }

double spec_expected_tokens(double a, int k) {
    if (a >= 1.0) return k + 1.0;
    return (1.0 - pow(a, k + 1)) / (1.0 - a);
}

static int share_of(int n_seqs) { return n_seqs < 1 ? 1 : n_seqs > SPEC_SHARE_MAX ? SPEC_SHARE_MAX : n_seqs; }

/* A cost at share b, or from the nearest share measured (0: none).  For
 * t_plain that is a lower bound (a pass of more sequences costs no less,
 * and its time per sequence is no more), so an unmeasured share never
 * looks better for speculating than it is. */
static double cost_at(const double *t, const bool *have, int b, bool per_seq) {
    if (have[b - 1]) return t[b - 1];
    for (int d = 1; d < SPEC_SHARE_MAX; d++) {
        if (b - d >= 1 && have[b - d - 1]) return per_seq ? t[b - d - 1] * (b - d) / b : t[b - d - 1];
        if (b + d <= SPEC_SHARE_MAX && have[b + d - 1]) return t[b + d - 1];
    }
    return 0.0;
}

static bool any(const bool *have) {
    for (int i = 0; i < SPEC_SHARE_MAX; i++)
        if (have[i]) return true;
    return false;
}

static double acceptance(const spec_adapt *a) { return a->accepted / (a->accepted + a->rejected); }

/* What one more row costs a pass of b sequences, from the plain passes of
 * b and of the nearest other share measured (their times' difference per
 * row); -1 when there is no other. */
static double row_slope(const spec_adapt *a, int b) {
    for (int d = 1; d < SPEC_SHARE_MAX; d++)
        for (int j = b - d; j <= b + d; j += 2 * d)
            if (j >= 1 && j <= SPEC_SHARE_MAX && a->c->have_plain[j - 1]) {
                const double slope = (a->c->t_plain[b - 1] * b - a->c->t_plain[j - 1] * j) / (b - j);
                return slope > 0.0 ? slope : 0.0;
            }
    return -1.0;
}

/* The extra seconds per proposal at share b: measured, or else the larger
 * of the nearest share's and what a plain row costs there (a verified row
 * costs at least that once the pass is compute-bound).  With neither, a
 * pass of several sequences is taken to be compute-bound (a row costs a
 * sequence's share of it: drafting cannot pay), so a server does not probe
 * a large batch blind; a single sequence probes (-1: unknown). */
static double verify_cost(const spec_adapt *a, int b) {
    if (a->c->have_verify[b - 1]) return a->c->t_verify_tok[b - 1];
    const double slope = a->c->have_plain[b - 1] ? row_slope(a, b) : -1.0;
    if (slope < 0.0 && b > 1) return cost_at(a->c->t_plain, a->c->have_plain, b, true);
    if (!any(a->c->have_verify)) return slope;
    const double near = cost_at(a->c->t_verify_tok, a->c->have_verify, b, false);
    return near > slope ? near : slope;
}

static double best_gain(const spec_adapt *a, int b, double acc, int *k) {
    const double plain = cost_at(a->c->t_plain, a->c->have_plain, b, true), verify = verify_cost(a, b);
    if (plain <= 0.0 || verify < 0.0) return -1.0;
    const double per_tok = verify + cost_at(a->c->t_draft_tok, a->c->have_draft, b, false);
    double best_rate = 0.0;
    *k = 1;
    for (int j = 1; j <= a->draft_max; j++) {
        const double rate = spec_expected_tokens(acc, j) / (plain + j * per_tok);
        if (rate > best_rate) best_rate = rate, *k = j;
    }
    return best_rate * plain;
}

static void pause_now(spec_adapt *a) {
    if (a->pause_left == 0) a->pause_left = a->pause_len;
}

static void resume(spec_adapt *a) {
    a->pause_left = 0;
    a->strikes = 0;
    a->pause_len = PAUSE_FIRST;
}

/* The pass's share changed, or a request began: speculate at the new share
 * if it pays there (a new request: if it would with every proposal
 * accepted, since its text is new), else stay plain. */
static void reconsider(spec_adapt *a, bool new_text) {
    int k;
    const double gain = best_gain(a, a->share, new_text ? 1.0 : acceptance(a), &k);
    if (gain >= 0.0 && gain < RESUME_GAIN) {
        pause_now(a);
        return;
    }
    if (gain >= 0.0) best_gain(a, a->share, acceptance(a), &a->k);
    resume(a);
}

int spec_adapt_next_k(spec_adapt *a, int n_seqs) {
    const int b = share_of(n_seqs);
    const bool moved = b != a->share;
    a->share = b;
    if (any(a->c->have_plain) || a->pause_left == 0) {  /* past the first plain steps */
        if (!a->c->have_plain[b - 1]) return 0;        /* a plain pass measures this share first */
        if (moved || a->fresh) reconsider(a, a->fresh);
        a->fresh = false;
    }
    /* Where the costs guessed (not measured) say drafting cannot pay, a pause
     * first; the step after it probes, and measures. */
    if (a->pause_left == 0 && b > 1 && !a->c->have_verify[b - 1] && !a->guessed) {
        int k;
        const double gain = best_gain(a, b, 1.0, &k);
        if (gain >= 0.0 && gain < RESUME_GAIN) pause_now(a), a->guessed = true;
    } else if (a->pause_left == 0) {
        a->guessed = false;
    }
    if (a->pause_left > 0) {
        a->pause_left--;
        return 0;
    }
    return a->k;
}

/* A moving average that one stalled step (the machine busy elsewhere)
 * raises by at most a factor of two; a fast step is believed at once, since
 * nothing makes a step faster than it can be (a slow first pass, paying for
 * page faults, is forgotten at the next). */
static void ema(double *avg, double x, bool *have) {
    if (*have && *avg > 0.0 && x > 2.0 * *avg) x = 2.0 * *avg;
    if (*have && x < *avg) {
        *avg = x;
        return;
    }
    *avg = *have ? (1.0 - EMA) * *avg + EMA * x : x;
    *have = true;
}

/* Re-chooses k; pauses when the best k is slower than plain decoding. */
static void decide(spec_adapt *a) {
    int k;
    const double gain = best_gain(a, a->share, acceptance(a), &k);
    if (gain < 0.0) return;
    a->k = k;
    /* Speculating pauses after two verdicts against it in a row, so one noisy
     * measurement does not stop it; a probe after a pause needs only one. */
    if (gain >= 1.0) {
        a->strikes = 0;
        a->pause_len = PAUSE_FIRST;
    } else if (++a->strikes >= 2) {
        a->strikes = 1;
        a->pause_left = a->pause_len;
        a->pause_len = a->pause_len * 2 < PAUSE_MAX ? a->pause_len * 2 : PAUSE_MAX;
    }
}

/* The pass's own costs (recorded once per pass). */
static void record_pass(spec_costs *c, const spec_pass *pass, int b) {
    const int i = b - 1;
    if (pass->seconds < 0.0) return;
    if (pass->n_proposed == 0) {  /* nobody's proposals: a plain pass */
        ema(&c->t_plain[i], pass->seconds / b, &c->have_plain[i]);
    } else if (c->have_plain[i]) {
        const double extra = (pass->seconds - c->t_plain[i] * b) / pass->n_proposed;
        ema(&c->t_verify_tok[i], extra > 0.0 ? extra : 0.0, &c->have_verify[i]);
    }
}

void spec_adapt_record(spec_adapt *a, int n_proposed, int n_accepted, double t_draft, bool draft_timed,
                       const spec_pass *pass) {
    const int b = share_of(pass->n_seqs);
    if (pass->first) record_pass(a->c, pass, b);
    if (n_proposed == 0) return;
    a->accepted = DECAY * a->accepted + n_accepted;
    a->rejected = DECAY * a->rejected + (n_accepted < n_proposed ? 1.0 : 0.0);
    if (draft_timed && pass->first_proposer)
        ema(&a->c->t_draft_tok[b - 1], t_draft / n_proposed, &a->c->have_draft[b - 1]);
    decide(a);
}
