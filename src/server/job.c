/*
 * A job: one request's generation, shared by the HTTP thread that waits on
 * it (or streams it) and the worker that runs it.  Reference counted, since
 * either side may finish first: a client that disconnects leaves the worker
 * holding the job until its generation stops.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

srv_job *job_new(void) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    j->max_tokens = -1;
    j->logprobs = -1;
    j->sp = plm_sampler_default_params();
    atomic_init(&j->cancel, false);
    atomic_init(&j->refs, 1);
    return j;
}

void job_ref(srv_job *j) { atomic_fetch_add(&j->refs, 1); }

void job_unref(srv_job *j) {
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1) return;
    for (int i = 0; i < j->n_stops; i++) free(j->stops[i]);
    free(j->stops);
    free(j->prompt);
    free(j->text);
    free(j->recs);
    free(j->generated);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* Grows *buf to hold `need` elements of `size` bytes. */
static bool grow(void **buf, int *cap, int need, size_t size) {
    if (need <= *cap) return true;
    int c = *cap ? *cap * 2 : 64;
    while (c < need) c *= 2;
    void *nb = realloc(*buf, (size_t)c * size);
    if (!nb) return false;
    *buf = nb;
    *cap = c;
    return true;
}

bool job_append_text(srv_job *j, const char *text, size_t len) {
    pthread_mutex_lock(&j->mu);
    bool ok = true;
    if (j->len + len + 1 > j->cap) {
        size_t c = j->cap ? j->cap * 2 : 256;
        while (c < j->len + len + 1) c *= 2;
        char *nb = realloc(j->text, c);
        if (nb) {
            j->text = nb;
            j->cap = c;
        } else {
            ok = false;
        }
    }
    if (ok) {
        memcpy(j->text + j->len, text, len);
        j->len += len;
        j->text[j->len] = '\0';
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return ok && !atomic_load(&j->cancel);
}

void job_append_token(srv_job *j, const srv_token_rec *rec, bool in_text) {
    pthread_mutex_lock(&j->mu);
    if (grow((void **)&j->generated, &j->cap_generated, j->n_generated_toks + 1, sizeof *j->generated))
        j->generated[j->n_generated_toks++] = rec->token;
    if (in_text && j->logprobs >= 0 && grow((void **)&j->recs, &j->cap_recs, j->n_recs + 1, sizeof *j->recs))
        j->recs[j->n_recs++] = *rec;
    pthread_mutex_unlock(&j->mu);
}

srv_token_rec *job_recs_since(srv_job *j, int from, int *n) {
    pthread_mutex_lock(&j->mu);
    *n = j->n_recs > from ? j->n_recs - from : 0;
    srv_token_rec *copy = *n ? malloc((size_t)*n * sizeof *copy) : NULL;
    if (copy) memcpy(copy, j->recs + from, (size_t)*n * sizeof *copy);
    else *n = 0;
    pthread_mutex_unlock(&j->mu);
    return copy;
}

void job_finish(srv_job *j, plm_status st, const char *error, const plm_generate_result *r) {
    /* A cancelled generation is no answer.  Its client has left (nobody
     * reads this), or the server is stopping past its grace period: then
     * the client must not take the cut text for a whole answer. */
    if (st == PLM_OK && r && r->finish == PLM_FINISH_ABORT) {
        st = PLM_ERR_ABORTED;
        error = "cancelled: the server is shutting down";
    }
    pthread_mutex_lock(&j->mu);
    j->status = st;
    if (error) snprintf(j->error, sizeof j->error, "%s", error);
    if (r) j->result = *r;
    j->done = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void deadline(struct timespec *ts, int timeout_ms) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += timeout_ms / 1000;
    ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) ts->tv_sec++, ts->tv_nsec -= 1000000000L;
}

char *job_next_text(srv_job *j, size_t *seen, int timeout_ms, size_t *n, bool *done) {
    struct timespec ts;
    deadline(&ts, timeout_ms);
    pthread_mutex_lock(&j->mu);
    while (!j->done && j->len <= *seen)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT) break;
    char *copy = NULL;
    *n = 0;
    if (j->len > *seen && (copy = malloc(j->len - *seen + 1))) {
        *n = j->len - *seen;
        memcpy(copy, j->text + *seen, *n);
        copy[*n] = '\0';
        *seen = j->len;
    }
    *done = j->done && *seen == j->len;
    pthread_mutex_unlock(&j->mu);
    return copy;
}

bool job_wait_done(srv_job *j, int timeout_ms) {
    struct timespec ts;
    deadline(&ts, timeout_ms);
    pthread_mutex_lock(&j->mu);
    while (!j->done)
        if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT) break;
    bool done = j->done;
    pthread_mutex_unlock(&j->mu);
    return done;
}
