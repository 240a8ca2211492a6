/*
 * A speculative step in phases (speculative.c), so that plm_gen_step
 * (gen_step.c) can run the steps of several sequences together: each
 * sequence prepares its step (takes `last`, proposes by lookup), the draft
 * model proposes for all of them in shared draft passes, the caller puts
 * every sequence's rows ([last, proposals...]) into ONE target pass with
 * logits for all of them, and each sequence then accepts from its own rows.
 * plm_spec_step is these phases for one sequence.
 */
#ifndef PLM_RUNTIME_SPEC_H
#define PLM_RUNTIME_SPEC_H

#include "pocketlm.h"
#include "runtime/spec_adapt.h"

/* Phase 1: `last` (sampled, not decoded) joins the history; the draft
 * length is chosen (at most max_out - 1 proposals; none when the pass,
 * shared by n_seqs sequences' tokens, is one where proposals do not pay)
 * and a lookup proposer proposes.  Fails when the target sequence is not
 * where the decoder left it or is full. */
plm_status spec_prepare(plm_spec *s, plm_sampler *smp, plm_token last, int max_out, int n_seqs, plm_error *err);

/* Phase 2: the draft model proposes for every prepared s[i] that has one;
 * those sharing a draft context run their draft passes together (each
 * sequence's catch-up and next token in one batch).  A failure leaves every
 * s[i] without proposals (spec_abandon them). */
plm_status spec_draft_all(plm_spec *const *s, int n, plm_error *err);

/* The rows to verify: last + the proposals (*n >= 1), in order; and
 * whether they need the single-token kernel's bit-exact logits (greedy
 * verification of proposals). */
const plm_token *spec_rows(const plm_spec *s, int *n);
bool spec_rows_exact(const plm_spec *s);

/* Phase 3, after the target pass that evaluated spec_rows in the target's
 * sequence (their logits at batch indices first_row..): accepts, writes the
 * tokens that follow `last` to out (n_out >= 1, each passed to
 * plm_sampler_accept), drops the rejected from both caches and learns.
 * pass: what the pass held and its seconds (< 0: not comparable), for the
 * adaptive control. */
void spec_accept(plm_spec *s, plm_sampler *smp, int first_row, const spec_pass *pass, plm_token *out, int *n_out);

/* The pass failed: the step is undone (history and both caches). */
void spec_abandon(plm_spec *s);

/* A new generation in the decoder's sequence (a server's next request):
 * the adaptive control keeps what it measured but ends a pause
 * (spec_adapt_new_request), and the draft's sampler is made again from the
 * next sampler's settings. */
void spec_restart(plm_spec *s);

/* The target context and sequence the decoder follows. */
plm_context *spec_target(const plm_spec *s, plm_seq_id *seq);

#endif
