/*
 * A slot: one sequence of the scheduler's context, the tokens its KV cache
 * holds, and the job running in it (scheduler.c drives the slots; this is
 * what one slot does).  A slot keeps its cache after a job, so a request
 * whose prompt begins with it (a chat client resending the conversation, a
 * shared system prompt) evaluates only the rest.
 */
#ifndef PLM_SERVER_SLOT_H
#define PLM_SERVER_SLOT_H

#include "server/server.h"

/* What every slot shares. */
typedef struct slot_env {
    plm_model *model;
    plm_context *ctx;
    srv_metrics *metrics;
    int n_vocab;
    plm_context *dctx;         /* the draft model's context, a sequence per slot (speculation), or NULL */
} slot_env;

typedef struct srv_slot {
    const slot_env *env;
    plm_seq_id seq;            /* its sequence of the context */
    plm_token *cached;         /* tokens in its sequence, in order (room for n_ctx) */
    int n_cached;
    uint64_t last_used;        /* when it last took a job: the least recent goes first among equals */
    srv_job *job;              /* the running job, NULL when idle */
    plm_sampler *smp;
    plm_gen *gen;
    plm_generate_result result;
    bool generating;           /* its prompt is evaluated (as a round began) */
    plm_status status;         /* of the job's generation so far */
    plm_error err;
    plm_spec *spec;            /* its speculative decoder (serve --draft-model/--lookup), or NULL */
    bool speculating;          /* the job runs with it (not when it asks for logprobs) */
    plm_spec_stats spec_at_start;  /* the decoder's counters when the job started */
} srv_slot;

/* The idle slot whose cache shares the longest prefix with the job's
 * prompt (ties: the least recently used); NULL when every slot is busy. */
srv_slot *slot_pick(srv_slot *slots, int n, const srv_job *j);
/* Starts j in sl: keeps the common prefix of the slot's cache, evaluates
 * nothing yet.  A job that cannot start is done at once (slot_done). */
void slot_start(srv_slot *sl, srv_job *j, uint64_t now);
/* Its generation has evaluated the prompt and runs. */
bool slot_generating(const srv_slot *sl);
/* The job's generation has ended (or never started): slot_finish. */
bool slot_done(const srv_slot *sl);
/* Reports the job's end to its waiter, accounts it and keeps what the
 * cache holds; the caller then clears sl->job (under its lock) and drops
 * its job reference. */
void slot_finish(srv_slot *sl);

#endif
