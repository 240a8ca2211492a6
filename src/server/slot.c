/*
 * One slot's side of a job: the prefix it reuses, the generation
 * (plm_gen, stepped by the scheduler together with the other slots'), the
 * records each token leaves in the job, and what the cache holds after.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/slot.h"

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int common_prefix(const plm_token *a, int na, const plm_token *b, int nb) {
    int n = 0;
    while (n < na && n < nb && a[n] == b[n]) n++;
    return n;
}

srv_slot *slot_pick(srv_slot *slots, int n, const srv_job *j) {
    srv_slot *best = NULL;
    int best_n = -1;
    for (int i = 0; i < n; i++) {
        srv_slot *sl = &slots[i];
        if (sl->job) continue;
        int m = common_prefix(sl->cached, sl->n_cached, j->prompt, j->n_prompt);
        if (m > best_n || (m == best_n && sl->last_used < best->last_used)) best = sl, best_n = m;
    }
    return best;
}

/* ---- the generation's callbacks ----------------------------------------- */

static bool on_piece(void *user, const char *text, size_t len) {
    srv_slot *sl = user;
    return job_append_text(sl->job, text, len);
}

/* Log-probability of each token, and the top alternatives when asked. */
static void token_record(const srv_slot *sl, plm_token t, const float *logits, srv_token_rec *rec) {
    memset(rec, 0, sizeof *rec);
    rec->token = t;
    if (sl->job->logprobs < 0 || !logits) return;
    const int n = sl->env->n_vocab;
    float max = logits[0];
    for (int i = 1; i < n; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp((double)logits[i] - max);
    const double lse = max + log(sum);
    rec->logprob = (float)(logits[t] - lse);
    const int k = sl->job->logprobs < SRV_TOP_LOGPROBS_MAX ? sl->job->logprobs : SRV_TOP_LOGPROBS_MAX;
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
    srv_slot *sl = user;
    srv_token_rec rec;
    token_record(sl, t, logits, &rec);
    /* An end-of-generation token is cached but is no part of the answer. */
    job_append_token(sl->job, &rec, !plm_token_is_eog(sl->env->model, t));
    return !atomic_load(&sl->job->cancel);
}

static bool on_abort(void *user) {
    srv_slot *sl = user;
    return atomic_load(&sl->job->cancel);
}

/* ---- a job's life in the slot ------------------------------------------- */

void slot_start(srv_slot *sl, srv_job *j, uint64_t now) {
    sl->job = j;
    sl->last_used = now;
    sl->status = PLM_OK;
    memset(&sl->result, 0, sizeof sl->result);
    sl->result.stop_index = -1;
    j->t_started = mono_now();
    if (atomic_load(&j->cancel)) {  /* its client left while it waited */
        sl->result.finish = PLM_FINISH_ABORT;
        return;
    }
    /* Keep the cached prefix, but evaluate at least the last prompt token:
     * its logits give the first generated one. */
    plm_context *ctx = sl->env->ctx;
    int common = common_prefix(sl->cached, sl->n_cached, j->prompt, j->n_prompt);
    if (common >= j->n_prompt) common = j->n_prompt - 1;
    plm_seq_truncate(ctx, sl->seq, (uint32_t)common);
    sl->n_cached = common;
    j->n_cached = common;

    sl->status = plm_sampler_create(sl->env->model, &j->sp, &sl->smp, &sl->err);
    if (sl->status) return;
    for (int i = 0; i < common; i++) plm_sampler_accept(sl->smp, j->prompt[i]);
    plm_generate_params gp = plm_generate_default_params();
    /* Speculation: the decoder follows the slot's sequence from the prefix
     * it keeps.  A job that asks for logprobs runs plain: its records need
     * each token's own logits row, which accepted drafts do not keep. */
    sl->speculating = sl->spec && j->logprobs < 0;
    if (sl->speculating) {
        sl->status = plm_spec_begin(sl->spec, j->prompt, common, &sl->err);
        if (sl->status) return;
        plm_spec_get_stats(sl->spec, &sl->spec_at_start);
        gp.spec = sl->spec;
    }
    gp.max_tokens = j->max_tokens;
    gp.ignore_eos = j->ignore_eos;
    gp.stops = (const char *const *)j->stops;
    gp.n_stops = j->n_stops;
    gp.on_token = on_token;
    gp.abort = on_abort;
    gp.user = sl;
    sl->status = plm_gen_new(ctx, sl->seq, j->prompt + common, j->n_prompt - common, sl->smp, &gp, on_piece,
                             &sl->result, &sl->gen, &sl->err);
}

bool slot_generating(const srv_slot *sl) {
    return sl->gen && !plm_gen_done(sl->gen) && sl->result.n_prompt == sl->job->n_prompt - sl->job->n_cached;
}

bool slot_done(const srv_slot *sl) { return !sl->gen || plm_gen_done(sl->gen); }

/* After a generation the sequence holds prompt + generated tokens, as many
 * as were evaluated; a shift or an error leaves it unknown: start over. */
static void remember_cache(srv_slot *sl, bool valid) {
    const srv_job *j = sl->job;
    plm_context *ctx = sl->env->ctx;
    const uint32_t n_past = plm_seq_n_past(ctx, sl->seq);
    if (!valid || n_past > (uint32_t)j->n_prompt + (uint32_t)j->n_generated_toks) {
        plm_seq_truncate(ctx, sl->seq, 0);
        sl->n_cached = 0;
        return;
    }
    int n = 0;
    for (; n < j->n_prompt && (uint32_t)n < n_past; n++) sl->cached[n] = j->prompt[n];
    for (int g = 0; (uint32_t)n < n_past; g++) sl->cached[n++] = j->generated[g];
    sl->n_cached = n;
}

static void account(const srv_slot *sl) {
    const srv_job *j = sl->job;
    const plm_generate_result *r = &sl->result;
    srv_metrics *m = sl->env->metrics;
    pthread_mutex_lock(&m->mu);
    if (r->n_prompt > 0 || j->n_cached > 0) {  /* it ran: a prompt was (partly) cached or evaluated */
        m->prompt_tokens += (uint64_t)j->n_prompt;
        m->prompt_tokens_cached += (uint64_t)j->n_cached;
    }
    m->generated_tokens += (uint64_t)r->n_generated;
    m->prompt_seconds += r->t_prompt_s;
    m->generate_seconds += r->t_gen_s;
    if (r->n_generated > 0 && r->t_gen_s > 0) m->last_decode_tps = r->n_generated / r->t_gen_s;
    if (sl->speculating) {
        plm_spec_stats st;
        plm_spec_get_stats(sl->spec, &st);
        m->spec_verifications += st.verifications - sl->spec_at_start.verifications;
        m->spec_drafted += st.proposed - sl->spec_at_start.proposed;
        m->spec_accepted += st.accepted - sl->spec_at_start.accepted;
    }
    m->jobs_done++;
    if (r->finish == PLM_FINISH_ABORT) m->jobs_cancelled++;
    pthread_mutex_unlock(&m->mu);
}

void slot_finish(srv_slot *sl) {
    srv_job *j = sl->job;
    const plm_generate_result *r = &sl->result;
    /* One line per request: what the prefix cache saved is visible (and tested). */
    fprintf(stderr, "pocketlm serve: slot %d: prompt %d tokens, %d cached, %d evaluated; %d generated (%s)%s%s\n",
            sl->seq, j->n_prompt, j->n_cached, r->n_prompt, r->n_generated, plm_finish_reason_name(r->finish),
            sl->status ? ": " : "", sl->status ? sl->err.message : "");
    if (sl->gen) remember_cache(sl, sl->status == PLM_OK && r->n_shifts == 0);  /* else: untouched */
    account(sl);
    job_finish(j, sl->status, sl->status ? sl->err.message : NULL, r);
    plm_gen_free(sl->gen);
    plm_sampler_free(sl->smp);
    sl->gen = NULL;
    sl->smp = NULL;
}
