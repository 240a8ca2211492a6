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
 *
 * Shared passes (a server's slots, plm_gen_step): when b sequences put their
 * tokens in one pass, a plain token costs that pass's time / b, which falls
 * as b grows while the pass stays bandwidth-bound and stops falling once it
 * is compute-bound; a proposal's extra row then costs as much compute as a
 * plain token's.  So the costs are kept per b ("share"): t_plain[b] is a
 * plain pass's seconds per sequence, t_verify_tok[b] the extra seconds per
 * proposal of any sequence in the pass.  A pass of a b not measured yet is
 * plain (it measures t_plain[b]); at a new b, or a new request, speculation
 * resumes only if it would pay at b with every proposal accepted.  Until a
 * proposal's cost at b is known (measured, or a plain row's from plain
 * passes of two sizes), a pass of several sequences counts as compute-bound,
 * where drafting cannot pay: a server probes a large batch only after a
 * pause, and then measures what a proposal costs there.
 */
#ifndef PLM_RUNTIME_SPEC_ADAPT_H
#define PLM_RUNTIME_SPEC_ADAPT_H

#include <stdbool.h>

enum { SPEC_SHARE_MAX = 16 };  /* passes of more sequences are costed as this many */

/* What passes cost, by the number b of sequences sharing them: the
 * machine's and the models', the same for every decoder of one server
 * (spec_adapt_share_costs), so a slot's first request already knows them. */
typedef struct spec_costs {
    double t_plain[SPEC_SHARE_MAX];      /* [b-1]: seconds per sequence of a pass of b that verifies nothing */
    double t_verify_tok[SPEC_SHARE_MAX]; /* [b-1]: extra seconds per verified proposal in such a pass */
    double t_draft_tok[SPEC_SHARE_MAX];  /* [b-1]: seconds per drafted token */
    bool have_plain[SPEC_SHARE_MAX], have_verify[SPEC_SHARE_MAX], have_draft[SPEC_SHARE_MAX];
} spec_costs;

typedef struct spec_adapt {
    int draft_max;
    double accepted, rejected;  /* decayed counts of proposals */
    spec_costs own, *c;         /* c: own, or another decoder's */
    int share;                  /* sequences in the pass of the step under way (1 ..) */
    bool fresh;                 /* a new request: resume at the next step if it can pay */
    bool guessed;               /* paused on guessed costs: the step after the pause probes */
    int pause_left, pause_len;
    int strikes;                /* verdicts against speculating in a row */
    int k;                      /* the draft length to use next */
} spec_adapt;

void spec_adapt_init(spec_adapt *a, int draft_max);

/* a learns and uses owner's costs from now on (owner must outlive a). */
void spec_adapt_share_costs(spec_adapt *a, spec_adapt *owner);

/* The draft length for the next step, whose pass n_seqs sequences share
 * (1 when decoding alone): 0 while paused. */
int spec_adapt_next_k(spec_adapt *a, int n_seqs);

/* A new request in the same decoder (a server's slot): what was measured
 * (costs, acceptance) stays, a pause ends if speculating can pay, so every
 * request starts speculating at the learned draft length (and pauses again,
 * after two verdicts against it, if it does not pay). */
void spec_adapt_new_request(spec_adapt *a);

/* What a step's pass held: n_seqs sequences (the one of next_k), n_proposed
 * proposals in all (this decoder's and the others'); seconds < 0 when the
 * pass also read prompts, so its time says nothing about decoding.  first:
 * this decoder records the pass's costs, first_proposer: the drafting's
 * (one decoder per pass records each, since the decoders in it may share
 * their costs; the draft passes are shared as well). */
typedef struct spec_pass {
    int n_seqs, n_proposed;
    double seconds;
    bool first, first_proposer;
} spec_pass;

/* Records a step: n_proposed of this decoder's proposals verified (0 = a
 * plain step), n_accepted of them accepted, seconds spent drafting them
 * (only when it was comparable: no long catch-up), and the pass. */
void spec_adapt_record(spec_adapt *a, int n_proposed, int n_accepted, double t_draft, bool draft_timed,
                       const spec_pass *pass);

/* Expected tokens per verification with acceptance a and k proposals. */
double spec_expected_tokens(double a, int k);

#endif
