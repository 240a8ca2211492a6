/*
 * When speculation pays, and how far to draft.
 *
 * A step that verifies k proposals costs about t_plain (one target token:
 * the weights read once) plus k x (the extra compute of one more verified
 * token + drafting one token), and yields on average
 *     E(a, k) = (1 - a^(k+1)) / (1 - a)
 * tokens when each proposal is accepted with probability a (the accepted
 * prefix is geometric).  Every step updates the estimates: a from decayed
 * counts of accepted and rejected proposals, the costs as moving averages of
 * measured times (a stalled step raises them at most 2x; a fast one is
 * believed at once).  The draft length is
 * the k that maximises E / cost; when even the best k yields fewer tokens
 * per second than plain decoding twice in a row, the controller pauses speculation for a while (plain steps, which refresh
 * t_plain) and then probes with one speculative step; each failed probe
 * doubles the pause, so a workload where guesses never land pays one probe
 * every few hundred tokens.
 */
#ifndef PLM_RUNTIME_SPEC_ADAPT_H
#define PLM_RUNTIME_SPEC_ADAPT_H

#include <stdbool.h>

typedef struct spec_adapt {
    int draft_max;
    double accepted, rejected;  /* decayed counts of proposals */
    double t_plain;             /* seconds of a step that verifies nothing */
    double t_verify_tok;        /* extra seconds per verified proposal */
    double t_draft_tok;         /* seconds per drafted token */
    bool have_plain, have_verify, have_draft;
    int pause_left, pause_len;
    int strikes;                /* verdicts against speculating in a row */
    int k;                      /* the draft length to use next */
} spec_adapt;

void spec_adapt_init(spec_adapt *a, int draft_max);

/* The draft length for the next step: 0 while paused. */
int spec_adapt_next_k(spec_adapt *a);

/* A new request in the same decoder (a server's slot): what was measured
 * (costs, acceptance) stays, a pause ends, so every request starts
 * speculating at the learned draft length (and pauses again, after two
 * verdicts against it, if it does not pay). */
void spec_adapt_new_request(spec_adapt *a);

/* Records a step: n_proposed proposals verified (0 = a plain step),
 * n_accepted of them accepted, seconds spent drafting (only when it was
 * comparable: no long catch-up) and verifying. */
void spec_adapt_record(spec_adapt *a, int n_proposed, int n_accepted, double t_draft, bool draft_timed,
                       double t_verify);

/* Expected tokens per verification with acceptance a and k proposals. */
double spec_expected_tokens(double a, int k);

#endif
