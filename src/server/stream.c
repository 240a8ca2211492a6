/*
 * Streaming responses: libmicrohttpd pulls bytes from reader() on the
 * connection's own thread, which waits for the job's next text (at most
 * 100 ms at a time, so a client that has gone is noticed and its job
 * cancelled), formats it as the API's chunk (an SSE `data:` event or an
 * NDJSON line) and, once the job is done, its closing chunks.  The idle
 * timeout is off while it waits (conn_hold_timeout): a queued request or a
 * slow token is no idle client.  The response
 * is chunked HTTP/1.1 of unknown length.
 */
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "server/server.h"

/* Waits for the job's next chunk into st->out; false at the end of the
 * stream or when the client left. */
static bool next_chunk(srv_stream *st, bool *error) {
    while (!st->out) {
        if (st->final_sent) return false;
        size_t n;
        bool done;
        char *text = job_next_text(st->job, &st->text_seen, 100, &n, &done);
        if (text) {
            st->out = st->fmt->text_chunk(st, text, n);
            free(text);
        } else if (done) {
            st->out = st->fmt->final_chunks(st);
            st->final_sent = true;
        } else if (client_gone(&st->rq)) {
            atomic_store(&st->job->cancel, true);
            *error = true;
            return false;
        }
    }
    st->out_len = strlen(st->out);
    return true;
}

/* Refills st->out.  The wait is our time, not the client's: no idle
 * timeout runs during it, and the client's silence counts from its end. */
static bool refill(srv_stream *st, bool *error) {
    free(st->out);
    st->out = NULL;
    st->out_len = st->out_pos = 0;
    conn_hold_timeout(&st->rq);
    bool more = next_chunk(st, error);
    conn_release_timeout(&st->rq);
    return more;
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    srv_stream *st = cls;
    bool error = false;
    while (st->out_pos == st->out_len)
        if (!refill(st, &error)) return error ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = st->out_len - st->out_pos;
    if (n > max) n = max;
    memcpy(buf, st->out + st->out_pos, n);
    st->out_pos += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    srv_stream *st = cls;
    atomic_fetch_sub(&st->rq.srv->open_streams, 1);
    atomic_store(&st->job->cancel, true);  /* a no-op once it is done */
    job_unref(st->job);
    if (st->fmt->free_user) st->fmt->free_user(st->user);
    else free(st->user);
    free(st->out);
    free(st);
}

int reply_stream(srv_request *rq, srv_job *j, const srv_stream_format *fmt, void *user) {
    srv_stream *st = calloc(1, sizeof *st);
    if (!st) {
        if (fmt->free_user) fmt->free_user(user);
        else free(user);
        return reply_error(rq, API_OPENAI, 500, NULL, "out of memory");
    }
    st->rq = *rq;
    st->job = j;
    job_ref(j);
    st->fmt = fmt;
    st->user = user;
    atomic_fetch_add(&rq->srv->open_streams, 1);  /* stream_free takes it back */
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, reader, st, stream_free);
    if (!r) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", fmt->content_type);
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    int ret = MHD_queue_response(rq->conn, 200, r);
    MHD_destroy_response(r);
    metrics_response(&rq->srv->metrics, 200);
    return ret;
}
