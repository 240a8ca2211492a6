/*
 * The scheduler: requests wait in a bounded queue; a worker thread owns the
 * context, whose sequences are the slots (slot.c), and runs the jobs in
 * them.  Each round it gives queued jobs the idle slots with the longest
 * common prefix, then runs one forward pass (plm_gen_step) with the next
 * token of every generating slot and the prompt pieces of the others that
 * fit in n_batch, so the weights are read once for all of them.  A job whose
 * client left is cancelled at the next round and frees its slot.
 *
 * With speculation each slot has its own decoder (plm_spec_new_seq: its
 * sequence of the context, its sequence of one draft context); the n-gram
 * cache is slot 0's, shared by all, so what one request taught serves the
 * next.  plm_gen_step verifies every slot's drafts in the round's pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/slot.h"

struct srv_sched {
    slot_env env;
    uint32_t n_ctx;

    pthread_mutex_t mu;
    pthread_cond_t cv_work;   /* a job was queued, or the worker should stop */
    pthread_cond_t cv_idle;   /* a job finished */
    srv_job **queue;          /* ring of queue_cap */
    int queue_cap, queue_head, n_queued;
    srv_slot *slots;
    int n_slots, n_busy;
    uint64_t n_started;       /* jobs given a slot: the slots' clock */
    bool accepting, stop_worker;
    pthread_t worker;
    bool worker_started;
    plm_gen **step;           /* [n_slots]: the generations of one step */
};

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the worker ----------------------------------------------------------- */

/* Gives queued jobs idle slots (under mu); returns how many started. */
static int admit(srv_sched *s, srv_slot **started) {
    int n = 0;
    while (s->n_queued > 0 && s->n_busy < s->n_slots) {
        srv_job *j = s->queue[s->queue_head];
        s->queue_head = (s->queue_head + 1) % s->queue_cap;
        s->n_queued--;
        srv_slot *sl = slot_pick(s->slots, s->n_slots, j);
        sl->job = j;  /* reserved; slot_start fills in the rest outside the lock */
        s->n_busy++;
        started[n++] = sl;
    }
    return n;
}

/* One round: one forward pass with the next token of every generating
 * slot and the next prompt piece of those still reading their prompt. */
static void run_round(srv_sched *s) {
    int n = 0;
    for (int i = 0; i < s->n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        sl->generating = slot_generating(sl);
        if (sl->gen && !plm_gen_done(sl->gen)) s->step[n++] = sl->gen;
    }
    if (n == 0) return;
    plm_error err;
    plm_status st = plm_gen_step(s->step, n, &err);
    int decoded = 0;  /* generating slots that went on: their tokens were in the pass */
    for (int i = 0; i < s->n_slots; i++) decoded += s->slots[i].generating && !plm_gen_done(s->slots[i].gen);
    if (decoded) {
        pthread_mutex_lock(&s->env.metrics->mu);
        s->env.metrics->decode_steps++;
        s->env.metrics->decode_step_tokens += (uint64_t)decoded;
        pthread_mutex_unlock(&s->env.metrics->mu);
    }
    for (int i = 0; st && i < s->n_slots; i++)  /* a failed forward pass ends every generation in it */
        for (int k = 0; k < n; k++)
            if (s->slots[i].gen == s->step[k] && s->slots[i].status == PLM_OK) {
                s->slots[i].status = st;
                s->slots[i].err = err;
            }
}

/* Hands back the jobs that ended this round. */
static void finish_done(srv_sched *s) {
    for (int i = 0; i < s->n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        if (!sl->job || !slot_done(sl)) continue;
        srv_job *j = sl->job;
        slot_finish(sl);
        pthread_mutex_lock(&s->mu);
        sl->job = NULL;  /* under mu: cancel_all reads it */
        s->n_busy--;
        pthread_cond_broadcast(&s->cv_idle);
        pthread_mutex_unlock(&s->mu);
        job_unref(j);
    }
}

static void *worker_main(void *arg) {
    srv_sched *s = arg;
    srv_slot **started = malloc((size_t)s->n_slots * sizeof *started);
    if (!started) return NULL;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (s->n_queued == 0 && s->n_busy == 0 && !s->stop_worker) pthread_cond_wait(&s->cv_work, &s->mu);
        if (s->n_queued == 0 && s->n_busy == 0) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        const int n = admit(s, started);
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < n; i++) slot_start(started[i], started[i]->job, ++s->n_started);
        run_round(s);
        finish_done(s);
    }
    free(started);
    return NULL;
}

/* ---- speculation ------------------------------------------------------------ */

/* The draft context (a sequence per slot, as long as the model's) and a
 * decoder per slot. */
static plm_status open_speculation(srv_sched *s, const plm_context_params *cp, const srv_config *cfg,
                                   plm_error *err) {
    plm_status st = PLM_OK;
    if (cfg->draft) {
        plm_context_params dp = *cp;
        dp.n_ctx = s->n_ctx;
        dp.logits_all = false;
        if ((st = plm_context_new(cfg->draft, &dp, &s->env.dctx, err))) return st;
    }
    for (int i = 0; i < s->n_slots && !st; i++)
        st = plm_spec_new_seq(s->env.ctx, i, s->env.dctx, i, &cfg->spec, i ? s->slots[0].spec : NULL,
                              &s->slots[i].spec, err);
    return st;
}

/* Saves the shared n-gram cache (--lookup-cache) and frees the decoders,
 * slot 0's (which owns the cache) last. */
static void close_speculation(srv_sched *s) {
    if (s->slots && s->slots[0].spec) {
        plm_error err;
        if (plm_spec_save_cache(s->slots[0].spec, &err))
            fprintf(stderr, "pocketlm serve: n-gram cache: %s\n", err.message);
    }
    for (int i = s->slots ? s->n_slots - 1 : -1; i >= 0; i--) {
        plm_spec_free(s->slots[i].spec);
        s->slots[i].spec = NULL;
    }
    plm_context_free(s->env.dctx);
    s->env.dctx = NULL;
}

/* ---- the queue -------------------------------------------------------------- */

plm_status sched_new(plm_model *model, const plm_context_params *cp, const srv_config *cfg, srv_metrics *metrics,
                     srv_sched **out, plm_error *err) {
    *out = NULL;
    srv_sched *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->env.model = model;
    s->env.metrics = metrics;
    s->env.n_vocab = plm_model_n_vocab(model);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv_idle, &ca);
    pthread_condattr_destroy(&ca);
    plm_context_params p = *cp;
    p.n_seq = (uint32_t)cfg->n_parallel;  /* a sequence per slot */
    plm_status st = plm_context_new(model, &p, &s->env.ctx, err);
    if (st) {
        sched_free(s);
        return st;
    }
    s->n_ctx = plm_context_n_ctx(s->env.ctx);
    plm_context_set_batch_invariant(s->env.ctx, cfg->batch_invariant);
    s->queue_cap = cfg->queue_size > 0 ? cfg->queue_size : 1;
    s->queue = calloc((size_t)s->queue_cap, sizeof *s->queue);
    s->n_slots = cfg->n_parallel;
    s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
    s->step = calloc((size_t)s->n_slots, sizeof *s->step);
    if (!s->queue || !s->slots || !s->step) goto oom;
    for (int i = 0; i < s->n_slots; i++) {
        s->slots[i].env = &s->env;
        s->slots[i].seq = i;
        if (!(s->slots[i].cached = malloc((size_t)s->n_ctx * sizeof(plm_token)))) goto oom;
    }
    if (cfg->speculate && (st = open_speculation(s, &p, cfg, err))) {
        sched_free(s);
        return st;
    }
    s->accepting = true;
    if (pthread_create(&s->worker, NULL, worker_main, s)) {
        sched_free(s);
        snprintf(err->message, sizeof err->message, "cannot start the worker thread");
        return err->code = PLM_ERR_NOMEM;
    }
    s->worker_started = true;
    *out = s;
    return PLM_OK;
oom:
    sched_free(s);
    snprintf(err->message, sizeof err->message, "out of memory for the scheduler");
    return err->code = PLM_ERR_NOMEM;
}

sched_result sched_submit(srv_sched *s, srv_job *j) {
    pthread_mutex_lock(&s->mu);
    sched_result r = SCHED_OK;
    if (!s->accepting) r = SCHED_STOPPING;
    else if (s->n_queued == s->queue_cap) r = SCHED_FULL;
    else {
        job_ref(j);
        j->t_queued = mono_now();
        s->queue[(s->queue_head + s->n_queued) % s->queue_cap] = j;
        s->n_queued++;
        pthread_cond_signal(&s->cv_work);
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

int sched_queue_depth(srv_sched *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_queued;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int sched_slots_busy(srv_sched *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_busy;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int sched_n_slots(srv_sched *s) { return s->n_slots; }
uint32_t sched_n_ctx(srv_sched *s) { return s->n_ctx; }

static void cancel_all(srv_sched *s) {
    for (int i = 0; i < s->n_queued; i++) atomic_store(&s->queue[(s->queue_head + i) % s->queue_cap]->cancel, true);
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].job) atomic_store(&s->slots[i].job->cancel, true);
}

void sched_shutdown(srv_sched *s, double grace_s) {
    if (!s || !s->worker_started) return;
    pthread_mutex_lock(&s->mu);
    s->accepting = false;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double end = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + (grace_s > 0 ? grace_s : 0);
    ts.tv_sec = (time_t)end;
    ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
    while (s->n_queued + s->n_busy > 0)
        if (pthread_cond_timedwait(&s->cv_idle, &s->mu, &ts)) break;
    cancel_all(s);
    s->stop_worker = true;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->worker, NULL);
    s->worker_started = false;
}

void sched_free(srv_sched *s) {
    if (!s) return;
    sched_shutdown(s, 0);
    close_speculation(s);
    if (s->slots)
        for (int i = 0; i < s->n_slots; i++) free(s->slots[i].cached);
    free(s->slots);
    free(s->step);
    free(s->queue);
    plm_context_free(s->env.ctx);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_idle);
    free(s);
}
