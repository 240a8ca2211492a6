/*
 * HTTP on libmicrohttpd: one thread per connection (a handler may block
 * while its job waits or runs; idle connections cost a parked thread),
 * bodies collected up to a limit, the API key checked in constant time,
 * routes dispatched to the OpenAI and Ollama handlers.
 *
 * A client that goes away cancels its job: a waiting handler polls the
 * socket for the peer's close (POLLRDHUP) between waits, and when
 * libmicrohttpd ends a request abnormally the completion callback cancels
 * it as well.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "server/server.h"

/* ---- routes --------------------------------------------------------------- */

typedef int (*route_fn)(srv_request *rq);

typedef struct route {
    const char *method, *path;
    route_fn fn;
    bool public_;  /* no API key needed */
} route;

static int handle_health(srv_request *rq);
static int handle_metrics(srv_request *rq);

static const route ROUTES[] = {
    {"POST", "/v1/completions", openai_completions, false},
    {"POST", "/v1/chat/completions", openai_chat, false},
    {"GET", "/v1/models", openai_models, false},
    {"POST", "/api/generate", ollama_generate, false},
    {"POST", "/api/chat", ollama_chat, false},
    {"GET", "/api/tags", ollama_tags, false},
    {"POST", "/api/show", ollama_show, false},
    {"GET", "/api/version", ollama_version, false},
    {"GET", "/health", handle_health, true},
    {"GET", "/metrics", handle_metrics, false},
    {"GET", "/", serve_chat_page, true},
};
#define N_ROUTES ((int)(sizeof ROUTES / sizeof ROUTES[0]))

static const char *const ROUTE_NAMES[N_ROUTES] = {
    "/v1/completions", "/v1/chat/completions", "/v1/models", "/api/generate", "/api/chat",
    "/api/tags",       "/api/show",            "/api/version", "/health",    "/metrics",
    "/"};

/* Per-request state kept across libmicrohttpd's calls. */
typedef struct conn_state {
    int route;             /* index into ROUTES, -1 unknown */
    char *body;
    size_t len, cap;
    bool too_large;
    srv_job *job;          /* the job a handler waits on, for cancellation */
} conn_state;

/* ---- replies ---------------------------------------------------------------- */

static int queue(srv_request *rq, unsigned status, struct MHD_Response *r) {
    if (!r) return MHD_NO;
    if (status == 503) MHD_add_response_header(r, "Retry-After", "1");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    int ret = MHD_queue_response(rq->conn, status, r);
    MHD_destroy_response(r);
    metrics_response(&rq->srv->metrics, status);
    return ret;
}

int reply_text(srv_request *rq, unsigned status, const char *content_type, const char *text) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (r) MHD_add_response_header(r, "Content-Type", content_type);
    return queue(rq, status, r);
}

int reply_json(srv_request *rq, unsigned status, json_t *body) {
    char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!s) return reply_text(rq, 500, "application/json", "{\"error\":{\"message\":\"out of memory\"}}");
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    return queue(rq, status, r);
}

static const char *error_type(unsigned status) {
    switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 501: return "not_implemented_error";
    case 503: return "server_busy";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

int reply_error(srv_request *rq, srv_api api, unsigned status, const char *param, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *body;
    if (api == API_OLLAMA) {
        body = json_pack("{ss}", "error", msg);
    } else {
        json_t *p = param && *param ? json_string(param) : json_null();
        body = json_pack("{s{sssssoss?}}", "error", "message", msg, "type", error_type(status), "param", p, "code",
                         NULL);
    }
    return reply_json(rq, status, body);
}

/* ---- clients, jobs ---------------------------------------------------------- */

bool client_gone(srv_request *rq) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(rq->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return true;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* The idle --timeout is for clients that go quiet, not for the time a
 * request waits on us (in the queue, or for its next token): libmicrohttpd
 * would count that as idleness and close the connection.  So a connection
 * has no timeout while its handler waits, and gets it back, counted from
 * now, when there is something to send. */
void conn_hold_timeout(srv_request *rq) {
    MHD_set_connection_option(rq->conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
}

void conn_release_timeout(srv_request *rq) {
    MHD_set_connection_option(rq->conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)rq->srv->cfg.timeout_s);
}

bool submit_or_reply(srv_request *rq, srv_api api, srv_job *j) {
    sched_result r = sched_submit(rq->srv->sched, j);
    if (r == SCHED_FULL) {
        reply_error(rq, api, 503, NULL, "the server is busy: %d requests are waiting; retry later",
                    sched_queue_depth(rq->srv->sched));
        return false;
    }
    if (r == SCHED_STOPPING) {
        reply_error(rq, api, 503, NULL, "the server is shutting down");
        return false;
    }
    if (rq->watch && !*rq->watch) {  /* cancelled when the request ends, however it ends */
        job_ref(j);
        *rq->watch = j;
    }
    conn_hold_timeout(rq);
    return true;
}

bool wait_job(srv_request *rq, srv_job *j) {
    while (!job_wait_done(j, 100)) {
        if (client_gone(rq)) {  /* the worker stops at its next forward pass, or skips it */
            atomic_store(&j->cancel, true);
            return false;
        }
    }
    conn_release_timeout(rq);
    return true;
}

/* ---- small handlers --------------------------------------------------------- */

static int handle_health(srv_request *rq) {
    if (atomic_load(&rq->srv->stopping)) return reply_text(rq, 503, "application/json", "{\"status\":\"stopping\"}");
    return reply_text(rq, 200, "application/json", "{\"status\":\"ok\"}");
}

static int handle_metrics(srv_request *rq) {
    srv_sched *s = rq->srv->sched;
    char *text = metrics_render(&rq->srv->metrics, ROUTE_NAMES, N_ROUTES, sched_queue_depth(s), sched_slots_busy(s),
                                sched_n_slots(s));
    if (!text) return reply_text(rq, 500, "text/plain", "out of memory\n");
    int ret = reply_text(rq, 200, "text/plain; version=0.0.4", text);
    free(text);
    return ret;
}

/* ---- authentication --------------------------------------------------------- */

/* Compares without an early exit, so the time taken says nothing about how
 * much of the key was right; the length only shows in whether it matched. */
static bool same_secret(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < lb; i++) diff |= (unsigned char)(a[i < la ? i : 0] ^ b[i]) | (unsigned char)(la == 0);
    return diff == 0;
}

static bool authorized(srv_request *rq) {
    const char *key = rq->srv->cfg.api_key;
    if (!key || !*key) return true;
    const char *h = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0) return false;
    return same_secret(h + 7, key);
}

/* ---- libmicrohttpd callbacks ------------------------------------------------ */

static int find_route(const char *method, const char *url, bool *path_known) {
    *path_known = false;
    for (int i = 0; i < N_ROUTES; i++) {
        if (strcmp(url, ROUTES[i].path)) continue;
        *path_known = true;
        if (!strcmp(method, ROUTES[i].method)) return i;
    }
    return -1;
}

static srv_api api_of(const char *url) { return strncmp(url, "/api/", 5) ? API_OPENAI : API_OLLAMA; }

/* Collects the body; past the limit it notes so and drops the rest, which
 * becomes a 413 once the body has been read. */
static void take_body(srv_server *srv, conn_state *cs, const char *data, size_t n) {
    if (cs->too_large || cs->len + n > srv->cfg.max_body_bytes) {
        cs->too_large = true;
        return;
    }
    if (cs->len + n + 1 > cs->cap) {
        size_t cap = cs->cap ? cs->cap * 2 : 4096;
        while (cap < cs->len + n + 1) cap *= 2;
        char *nb = realloc(cs->body, cap);
        if (!nb) {
            cs->too_large = true;
            return;
        }
        cs->body = nb;
        cs->cap = cap;
    }
    memcpy(cs->body + cs->len, data, n);
    cs->len += n;
    cs->body[cs->len] = '\0';
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls) {
    (void)version;
    srv_server *srv = cls;
    srv_request rq = {.srv = srv, .conn = conn};
    conn_state *cs = *con_cls;
    if (!cs) {  /* headers only: decide what we can before the body */
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        bool known;
        cs->route = find_route(method, url, &known);
        /* A body somewhat over the limit is read and dropped, so the client
         * (still sending) sees the 413; a huge one is refused at once, and
         * the connection closes under the client's feet. */
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) / 64 > srv->cfg.max_body_bytes)
            return (enum MHD_Result)reply_error(&rq, api_of(url), 413, NULL, "the body has %s bytes: at most %zu",
                                                cl, srv->cfg.max_body_bytes);
        return MHD_YES;
    }
    if (*upload_size) {
        take_body(srv, cs, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    srv_api api = api_of(url);
    if (cs->route >= 0) metrics_request(&srv->metrics, cs->route);
    if (cs->too_large)
        return (enum MHD_Result)reply_error(&rq, api, 413, NULL, "the body is larger than %zu bytes",
                                            srv->cfg.max_body_bytes);
    if (cs->route < 0) {
        bool known;
        find_route(method, url, &known);
        if (known) return (enum MHD_Result)reply_error(&rq, api, 405, NULL, "%s is not allowed on %s", method, url);
        return (enum MHD_Result)reply_error(&rq, api, 404, NULL, "no endpoint %s %s", method, url);
    }
    if (!ROUTES[cs->route].public_ && !authorized(&rq))
        return (enum MHD_Result)reply_error(&rq, api, 401, NULL, "a valid API key is required (Authorization: Bearer KEY)");
    rq.body = cs->body;
    rq.body_len = cs->len;
    rq.watch = &cs->job;
    return (enum MHD_Result)ROUTES[cs->route].fn(&rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)conn;
    (void)toe;
    conn_state *cs = *con_cls;
    if (!cs) return;
    if (cs->job) {  /* a no-op for a finished job; stops one whose client left */
        atomic_store(&cs->job->cancel, true);
        job_unref(cs->job);
    }
    free(cs->body);
    free(cs);
    *con_cls = NULL;
}

/* ---- the daemon --------------------------------------------------------------- */

static bool make_address(const char *host, int port, struct sockaddr_storage *ss, bool *v6) {
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *v6 = false;
        return true;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *v6 = true;
        return true;
    }
    return false;
}

static bool start_daemon(srv_server *srv) {
    struct sockaddr_storage ss;
    bool v6;
    if (!make_address(srv->cfg.host, srv->cfg.port, &ss, &v6)) {
        fprintf(stderr, "pocketlm serve: --host %s is not an IPv4 or IPv6 address\n", srv->cfg.host);
        return false;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     (v6 ? MHD_USE_IPv6 : 0);
    srv->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                   MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_CONNECTION_TIMEOUT,
                                   (unsigned)srv->cfg.timeout_s, MHD_OPTION_CONNECTION_LIMIT,
                                   (unsigned)srv->cfg.max_connections, MHD_OPTION_END);
    if (!srv->daemon) {
        fprintf(stderr, "pocketlm serve: cannot listen on %s:%d (in use, or not this machine's address)\n",
                srv->cfg.host, srv->cfg.port);
        return false;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->bound_port = di ? di->port : srv->cfg.port;
    return true;
}

/* A job that ended (finished, or cancelled past the grace period) still has
 * its last chunks to send: the stream's closing events, [DONE].  Stopping
 * the daemon before they leave would cut every such stream short, so wait
 * for them, a bounded time (a client that stopped reading must not hold
 * the exit). */
static void drain_streams(srv_server *srv, double max_s) {
    const struct timespec tick = {0, 10 * 1000 * 1000};
    for (double waited = 0; atomic_load(&srv->open_streams) > 0 && waited < max_s; waited += 0.01)
        nanosleep(&tick, NULL);
}

int server_run(srv_server *srv) {
    if (!start_daemon(srv)) return 1;
    fprintf(stderr, "pocketlm serve: listening on http://%s%s%s:%d (model %s, context %u, %d slot%s)\n",
            strchr(srv->cfg.host, ':') ? "[" : "", srv->cfg.host, strchr(srv->cfg.host, ':') ? "]" : "",
            srv->bound_port, srv->info.name, sched_n_ctx(srv->sched), sched_n_slots(srv->sched),
            sched_n_slots(srv->sched) == 1 ? "" : "s");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "pocketlm serve: %s: no new connections; finishing running requests (grace %.0f s)\n",
            sig == SIGTERM ? "SIGTERM" : "SIGINT", srv->cfg.grace_s);
    atomic_store(&srv->stopping, true);
    MHD_socket lfd = MHD_quiesce_daemon(srv->daemon);
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    sched_shutdown(srv->sched, srv->cfg.grace_s);
    drain_streams(srv, 2.0);
    MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
    fprintf(stderr, "pocketlm serve: stopped\n");
    return 0;
}
