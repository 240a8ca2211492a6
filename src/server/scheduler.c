/*
 * The scheduler: requests wait in a bounded queue; a worker thread owns the
 * context and runs them in slots.
 *
 * A slot is one sequence of the context with the tokens its KV cache holds,
 * so a request whose prompt begins with them (a client resending a
 * conversation, a shared system prompt) evaluates only the rest.  Today the
 * context has one sequence, so there is one slot and the worker runs one job
 * at a time; when contexts hold several sequences (seq_id), the worker takes
 * up to n_slots jobs, gives each the slot with the longest common prefix, and
 * batches their decode steps into one forward pass — pick_slot() and the
 * slot table already have that shape.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

typedef struct srv_slot {
    plm_token *cached;   /* tokens in this slot's KV cache, in order */
    int n_cached;
    srv_job *job;        /* running job or NULL */
} srv_slot;

struct srv_sched {
    plm_model *model;
    plm_context *ctx;
    srv_metrics *metrics;
    int n_vocab;
    uint32_t n_ctx;

    pthread_mutex_t mu;
    pthread_cond_t cv_work;   /* a job was queued, or the worker should stop */
    pthread_cond_t cv_idle;   /* a job finished */
    srv_job **queue;          /* ring of queue_cap */
    int queue_cap, queue_head, n_queued;
    srv_slot *slots;
    int n_slots, n_busy;
    bool accepting, stop_worker;
    pthread_t worker;
    bool worker_started;
};

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- one job in one slot ----------------------------------------------- */

typedef struct run_state {
    srv_sched *s;
    srv_job *job;
} run_state;

static bool on_piece(void *user, const char *text, size_t len) {
    run_state *rs = user;
    return job_append_text(rs->job, text, len);
}

/* Log-probability of each token, and the top alternatives when asked. */
static void token_record(const run_state *rs, plm_token t, const float *logits, srv_token_rec *rec) {
    memset(rec, 0, sizeof *rec);
    rec->token = t;
    if (rs->job->logprobs < 0 || !logits) return;
    int n = rs->s->n_vocab;
    float max = logits[0];
    for (int i = 1; i < n; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp((double)logits[i] - max);
    double lse = max + log(sum);
    rec->logprob = (float)(logits[t] - lse);
    int k = rs->job->logprobs < 5 ? rs->job->logprobs : 5;
    for (int i = 0; i < n; i++) {  /* insertion into a sorted top-k */
        int pos = rec->n_top;
        while (pos > 0 && logits[i] > logits[rec->top[pos - 1]]) pos--;
        if (pos >= k) continue;
        int last = rec->n_top < k ? rec->n_top : k - 1;
        for (int m = last; m > pos; m--) rec->top[m] = rec->top[m - 1];
        rec->top[pos] = i;
        if (rec->n_top < k) rec->n_top++;
    }
    for (int m = 0; m < rec->n_top; m++) rec->top_logprob[m] = (float)(logits[rec->top[m]] - lse);
}

static bool on_token(void *user, plm_token t, const float *logits) {
    run_state *rs = user;
    srv_token_rec rec;
    token_record(rs, t, logits, &rec);
    /* An end-of-generation token is cached but is no part of the answer. */
    job_append_token(rs->job, &rec, !plm_token_is_eog(rs->s->model, t));
    return !atomic_load(&rs->job->cancel);
}

static bool on_abort(void *user) {
    run_state *rs = user;
    return atomic_load(&rs->job->cancel);
}

static int common_prefix(const plm_token *a, int na, const plm_token *b, int nb) {
    int n = 0;
    while (n < na && n < nb && a[n] == b[n]) n++;
    return n;
}

/* The idle slot whose cache shares the longest prefix with the job. */
static srv_slot *pick_slot(srv_sched *s, const srv_job *j) {
    srv_slot *best = NULL;
    int best_n = -1;
    for (int i = 0; i < s->n_slots; i++) {
        srv_slot *sl = &s->slots[i];
        if (sl->job) continue;
        int n = common_prefix(sl->cached, sl->n_cached, j->prompt, j->n_prompt);
        if (n > best_n) best = sl, best_n = n;
    }
    return best;
}

/* After a generation the cache holds prompt + generated tokens, as many as
 * were evaluated; a shift or an error leaves it unknown: start over. */
static void remember_cache(srv_sched *s, srv_slot *sl, const srv_job *j, bool valid) {
    uint32_t n_past = plm_context_n_past(s->ctx);
    if (!valid || n_past > (uint32_t)j->n_prompt + (uint32_t)j->n_generated_toks) {
        plm_kv_truncate(s->ctx, 0);
        sl->n_cached = 0;
        return;
    }
    int n = 0;
    for (; n < j->n_prompt && (uint32_t)n < n_past; n++) sl->cached[n] = j->prompt[n];
    for (int g = 0; (uint32_t)n < n_past; g++) sl->cached[n++] = j->generated[g];
    sl->n_cached = n;
}

static void account(srv_sched *s, const srv_job *j, const plm_generate_result *r) {
    srv_metrics *m = s->metrics;
    pthread_mutex_lock(&m->mu);
    if (r->n_prompt > 0 || j->n_cached > 0) {  /* it ran: a prompt was (partly) cached or evaluated */
        m->prompt_tokens += (uint64_t)j->n_prompt;
        m->prompt_tokens_cached += (uint64_t)j->n_cached;
    }
    m->generated_tokens += (uint64_t)r->n_generated;
    m->prompt_seconds += r->t_prompt_s;
    m->generate_seconds += r->t_gen_s;
    if (r->n_generated > 0 && r->t_gen_s > 0) m->last_decode_tps = r->n_generated / r->t_gen_s;
    m->jobs_done++;
    if (r->finish == PLM_FINISH_ABORT) m->jobs_cancelled++;
    pthread_mutex_unlock(&m->mu);
}

static void run_job(srv_sched *s, srv_slot *sl, srv_job *j) {
    plm_generate_result r;
    memset(&r, 0, sizeof r);
    r.stop_index = -1;
    j->t_started = mono_now();
    if (atomic_load(&j->cancel)) {  /* its client left while it waited */
        r.finish = PLM_FINISH_ABORT;
        account(s, j, &r);
        job_finish(j, PLM_OK, NULL, &r);
        return;
    }
    /* Reuse the cached prefix, but evaluate at least the last prompt token:
     * its logits give the first generated one. */
    int common = common_prefix(sl->cached, sl->n_cached, j->prompt, j->n_prompt);
    if (common >= j->n_prompt) common = j->n_prompt - 1;
    plm_kv_truncate(s->ctx, (uint32_t)common);
    sl->n_cached = common;
    j->n_cached = common;

    plm_error err;
    plm_sampler *smp = NULL;
    plm_status st = plm_sampler_create(s->model, &j->sp, &smp, &err);
    if (st == PLM_OK) {
        for (int i = 0; i < common; i++) plm_sampler_accept(smp, j->prompt[i]);
        run_state rs = {s, j};
        plm_generate_params gp = plm_generate_default_params();
        gp.max_tokens = j->max_tokens;
        gp.ignore_eos = j->ignore_eos;
        gp.stops = (const char *const *)j->stops;
        gp.n_stops = j->n_stops;
        gp.on_token = on_token;
        gp.abort = on_abort;
        gp.user = &rs;
        st = plm_generate(s->ctx, j->prompt + common, j->n_prompt - common, smp, &gp, on_piece, &r, &err);
    }
    plm_sampler_free(smp);
    remember_cache(s, sl, j, st == PLM_OK && r.n_shifts == 0);
    account(s, j, &r);
    job_finish(j, st, st ? err.message : NULL, &r);
}

/* ---- the worker and the queue ------------------------------------------- */

static void *worker_main(void *arg) {
    srv_sched *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->n_queued == 0 && !s->stop_worker) pthread_cond_wait(&s->cv_work, &s->mu);
        if (s->n_queued == 0) break;
        srv_job *j = s->queue[s->queue_head];
        s->queue_head = (s->queue_head + 1) % s->queue_cap;
        s->n_queued--;
        srv_slot *sl = pick_slot(s, j);
        sl->job = j;
        s->n_busy++;
        pthread_mutex_unlock(&s->mu);

        run_job(s, sl, j);

        pthread_mutex_lock(&s->mu);
        sl->job = NULL;
        s->n_busy--;
        pthread_cond_broadcast(&s->cv_idle);
        pthread_mutex_unlock(&s->mu);
        job_unref(j);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

plm_status sched_new(plm_model *model, const plm_context_params *cp, const srv_config *cfg, srv_metrics *metrics,
                     srv_sched **out, plm_error *err) {
    *out = NULL;
    if (cfg->n_parallel != 1) {
        snprintf(err->message, sizeof err->message,
                 "--parallel %d: one slot for now (a context holds one sequence until sequences arrive)",
                 cfg->n_parallel);
        err->code = PLM_ERR_UNSUPPORTED;
        return PLM_ERR_UNSUPPORTED;
    }
    srv_sched *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->model = model;
    s->metrics = metrics;
    s->n_vocab = plm_model_n_vocab(model);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv_idle, &ca);
    pthread_condattr_destroy(&ca);
    plm_status st = plm_context_new(model, cp, &s->ctx, err);
    if (st) {
        sched_free(s);
        return st;
    }
    s->n_ctx = plm_context_n_ctx(s->ctx);
    s->queue_cap = cfg->queue_size > 0 ? cfg->queue_size : 1;
    s->queue = calloc((size_t)s->queue_cap, sizeof *s->queue);
    s->n_slots = cfg->n_parallel;
    s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
    if (!s->queue || !s->slots) goto oom;
    for (int i = 0; i < s->n_slots; i++)
        if (!(s->slots[i].cached = malloc((size_t)s->n_ctx * sizeof(plm_token)))) goto oom;
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
    if (s->slots)
        for (int i = 0; i < s->n_slots; i++) free(s->slots[i].cached);
    free(s->slots);
    free(s->queue);
    plm_context_free(s->ctx);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_idle);
    free(s);
}
