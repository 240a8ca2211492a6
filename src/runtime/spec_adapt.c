/* The adaptive draft length and the pause when speculation does not pay
 * (see spec_adapt.h). */
#include "runtime/spec_adapt.h"

#include <math.h>

enum {
    FIRST_K = 1,       /* before anything is measured: a wrong guess costs little */
    PAUSE_FIRST = 16,  /* plain steps after the first verdict against speculating */
    PAUSE_MAX = 512,   /* the pause doubles on each failed probe up to this */
};
#define DECAY 0.9      /* weight of the past in the acceptance counts, per step */
#define EMA 0.2        /* weight of a new time measurement */

void spec_adapt_init(spec_adapt *a, int draft_max) {
    *a = (spec_adapt){.draft_max = draft_max, .accepted = 1.0, .rejected = 1.0};
    a->k = draft_max < FIRST_K ? draft_max : FIRST_K;
    a->pause_left = 2;  /* the first steps are plain: they measure t_plain */
    a->pause_len = PAUSE_FIRST;
}

void spec_adapt_new_request(spec_adapt *a) {
    if (!a->have_plain) return;  /* the first steps still measure plain decoding */
    a->pause_left = 0;
    a->strikes = 0;
    a->pause_len = PAUSE_FIRST;
}

double spec_expected_tokens(double a, int k) {
    if (a >= 1.0) return k + 1.0;
    return (1.0 - pow(a, k + 1)) / (1.0 - a);
}

int spec_adapt_next_k(spec_adapt *a) {
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
    if (!a->have_plain || !a->have_verify || a->t_plain <= 0.0) return;
    const double acc = a->accepted / (a->accepted + a->rejected);
    const double per_tok = a->t_verify_tok + a->t_draft_tok;
    double best_rate = 0.0;
    int best_k = 1;
    for (int k = 1; k <= a->draft_max; k++) {
        double rate = spec_expected_tokens(acc, k) / (a->t_plain + k * (per_tok > 0.0 ? per_tok : 0.0));
        if (rate > best_rate) best_rate = rate, best_k = k;
    }
    a->k = best_k;
    /* Speculating pauses after two verdicts against it in a row, so one noisy
     * measurement does not stop it; a probe after a pause needs only one. */
    if (best_rate * a->t_plain >= 1.0) {
        a->strikes = 0;
        a->pause_len = PAUSE_FIRST;
    } else if (++a->strikes >= 2) {
        a->strikes = 1;
        a->pause_left = a->pause_len;
        a->pause_len = a->pause_len * 2 < PAUSE_MAX ? a->pause_len * 2 : PAUSE_MAX;
    }
}

void spec_adapt_record(spec_adapt *a, int n_proposed, int n_accepted, double t_draft, bool draft_timed,
                       double t_verify) {
    if (n_proposed == 0) {
        ema(&a->t_plain, t_verify, &a->have_plain);
        return;
    }
    a->accepted = DECAY * a->accepted + n_accepted;
    a->rejected = DECAY * a->rejected + (n_accepted < n_proposed ? 1.0 : 0.0);
    if (draft_timed) ema(&a->t_draft_tok, t_draft / n_proposed, &a->have_draft);
    if (a->have_plain) {
        double extra = (t_verify - a->t_plain) / n_proposed;
        ema(&a->t_verify_tok, extra > 0.0 ? extra : 0.0, &a->have_verify);
    }
    decide(a);
}
