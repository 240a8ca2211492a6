/*
 * pocketlm serve: the OpenAI- and Ollama-compatible HTTP server.
 *
 *   http.c       libmicrohttpd daemon: routing, request bodies and their
 *                limits, the API key, disconnect detection, JSON replies
 *   request.c    JSON request fields -> a generation job (types and ranges
 *                checked, errors naming the field)
 *   openai.c     /v1/completions, /v1/models, /v1/chat/completions
 *   ollama.c     /api/generate, /api/tags, /api/show, /api/version, /api/chat
 *   go_template.c /api/generate's `template`: Ollama's simple Go prompt templates
 *   chat.c       the model's chat template: messages (and tools) -> prompt
 *                text; generated text -> content, reasoning and tool calls
 *   tool_calls.c the output parser chat.c uses (Hermes and Llama 3 calls)
 *   stream.c     a job's output as SSE (`data:` chunks) or NDJSON
 *   job.c        one request's generation: inputs, the text and token
 *                records the worker appends, completion, cancellation
 *   scheduler.c  a bounded queue and the worker thread that owns the context:
 *                each round, one forward pass for every busy slot (plm_gen_step)
 *   slot.c       one slot (a sequence of the context): prefix reuse of its
 *                cache, its generation's callbacks, what the cache holds after
 *   metrics.c    counters and gauges in Prometheus text format
 *   page.c       GET /: the chat page (chat_page.html, embedded at build time)
 *
 * The server is a static library linked into its own binary, pocketlm-serve
 * (which `pocketlm serve` executes), not into libpocketlm or the pocketlm
 * command: the core library and the other commands stay free of HTTP and
 * JSON dependencies and of the memory they take when loaded.
 */
#ifndef PLM_SERVER_H
#define PLM_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "pocketlm.h"
#include "pocketlm_chat.h"
#include "server/tool_calls.h"

/* ---- configuration ------------------------------------------------------ */

typedef struct srv_config {
    const char *host;          /* "127.0.0.1" */
    int port;                  /* 8080; 0 = any free port (printed) */
    const char *api_key;       /* NULL = no authentication */
    const char *model_path;
    const char *model_name;    /* id in /v1/models and /api/tags */
    int n_parallel;            /* slots */
    bool batch_invariant;      /* plm_context_set_batch_invariant */
    int queue_size;            /* jobs waiting beyond the slots; more get 503 */
    size_t max_body_bytes;     /* larger request bodies get 413 */
    int max_prompt_tokens;     /* 0 = the context length - 1 */
    int max_tokens;            /* per request; 0 = the context length */
    int timeout_s;             /* idle connection timeout */
    int max_connections;
    double grace_s;            /* SIGTERM: time running requests get to finish */
    plm_sampler_params sampling;  /* defaults for fields a request leaves out */
    /* Speculative decoding in every slot (--draft-model, --lookup, --lookup-cache):
     * the drafts of all slots verified in one forward pass per round. */
    bool speculate;
    plm_spec_params spec;
    plm_model *draft;          /* the draft model (owned by the caller), or NULL */
} srv_config;

/* ---- metrics ------------------------------------------------------------ */

typedef struct srv_metrics {
    pthread_mutex_t mu;
    uint64_t requests[16];     /* by route index */
    uint64_t responses_2xx, responses_4xx, responses_5xx, rejected_busy;
    uint64_t prompt_tokens, prompt_tokens_cached, generated_tokens;
    double prompt_seconds, generate_seconds;
    double last_decode_tps;
    uint64_t jobs_done, jobs_cancelled;
    uint64_t decode_steps, decode_step_tokens;  /* forward passes of generation steps, tokens in them */
    uint64_t spec_verifications, spec_drafted, spec_accepted;  /* speculative decoding, all slots */
} srv_metrics;

void metrics_init(srv_metrics *m);
void metrics_destroy(srv_metrics *m);
void metrics_request(srv_metrics *m, int route);
void metrics_response(srv_metrics *m, unsigned status);
/* Prometheus text exposition; malloc'd. */
char *metrics_render(srv_metrics *m, const char *const *route_names, int n_routes, int queue_depth,
                     int slots_busy, int n_slots);

/* ---- jobs --------------------------------------------------------------- */

/* The most alternatives a token record keeps: OpenAI's top_logprobs limit. */
#define SRV_TOP_LOGPROBS_MAX 20

/* One generated token as the logprobs of a response report it. */
typedef struct srv_token_rec {
    plm_token token;
    float logprob;
    int n_top;
    plm_token top[SRV_TOP_LOGPROBS_MAX];
    float top_logprob[SRV_TOP_LOGPROBS_MAX];
} srv_token_rec;

typedef struct srv_job {
    /* inputs, fixed once submitted */
    plm_token *prompt;
    int n_prompt;
    plm_sampler_params sp;
    int max_tokens;            /* < 0 = until end of generation or a full context */
    char **stops;
    int n_stops;
    int logprobs;              /* top alternatives per token to record (<= SRV_TOP_LOGPROBS_MAX); -1 = no records */
    bool ignore_eos;           /* llama-server's extension: generate past end-of-generation */

    /* outputs, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *text;                /* everything generated so far */
    size_t len, cap;
    srv_token_rec *recs;
    int n_recs, cap_recs;
    plm_token *generated;      /* every sampled token (for Ollama's context) */
    int n_generated_toks, cap_generated;
    bool started, done;
    plm_status status;         /* of the generation, when done */
    char error[512];
    plm_generate_result result;
    int n_cached;              /* prompt tokens reused from the slot's cache */
    double t_queued, t_started;

    atomic_bool cancel;        /* the client went away or the server stops */
    atomic_int refs;
} srv_job;

srv_job *job_new(void);
void job_ref(srv_job *j);
void job_unref(srv_job *j);
/* Worker side: append text / a token record, finish; each wakes waiters. */
bool job_append_text(srv_job *j, const char *text, size_t len);
/* Every sampled token goes to `generated`; those that are part of the text
 * (not an end-of-generation token) also get a logprobs record. */
void job_append_token(srv_job *j, const srv_token_rec *rec, bool in_text);
/* A generation that ended cancelled (PLM_FINISH_ABORT) finishes the job
 * with PLM_ERR_ABORTED: replies say so rather than pass the cut text off
 * as an answer. */
void job_finish(srv_job *j, plm_status st, const char *error, const plm_generate_result *r);
/* A copy of the token records from index `from` on (malloc'd; NULL and
 * *n = 0 when there are none yet): a stream reads them as they grow. */
srv_token_rec *job_recs_since(srv_job *j, int from, int *n);
/* Waits up to timeout_ms for text past *seen or the end; returns a malloc'd
 * copy of the new text (NULL when none), advances *seen, and sets *done once
 * the job has finished and all its text was taken. */
char *job_next_text(srv_job *j, size_t *seen, int timeout_ms, size_t *n, bool *done);
/* Waits up to timeout_ms for the job to finish; true when it has.  After
 * that the outputs are stable and may be read without the lock. */
bool job_wait_done(srv_job *j, int timeout_ms);

/* ---- scheduler ---------------------------------------------------------- */

typedef struct srv_sched srv_sched;

typedef enum { SCHED_OK = 0, SCHED_FULL, SCHED_STOPPING } sched_result;

plm_status sched_new(plm_model *model, const plm_context_params *cp, const srv_config *cfg, srv_metrics *metrics,
                     srv_sched **out, plm_error *err);
/* Queues a job (the scheduler takes a reference). */
sched_result sched_submit(srv_sched *s, srv_job *j);
int sched_queue_depth(srv_sched *s);
int sched_slots_busy(srv_sched *s);
int sched_n_slots(srv_sched *s);
uint32_t sched_n_ctx(srv_sched *s);
/* Stops taking jobs; waits up to grace_s for queued and running ones, then
 * cancels what is left and joins the worker. */
void sched_shutdown(srv_sched *s, double grace_s);
void sched_free(srv_sched *s);

/* ---- the server --------------------------------------------------------- */

typedef struct srv_model_info {
    char name[128];
    char arch[32];
    char quant[16];            /* dominant weight type, "Q4_K" */
    char param_size[16];       /* "260K", "1.1B" */
    uint64_t file_bytes;
    int64_t mtime;
    char digest[65];           /* a stable hex id of the file (path, size, mtime) */
} srv_model_info;

/* The chat template, compiled once at start-up. */
typedef struct srv_chat {
    plm_chat_template *tmpl;
    char *source;              /* its Jinja text */
    char origin[160];          /* "the model's", "built-in qwen3", a file name */
    char *bos, *eos;           /* the model's BOS/EOS texts (NULL: none) */
    tc_format format;          /* the tool-call format the template teaches */
} srv_chat;

typedef struct srv_server {
    srv_config cfg;
    plm_model *model;
    srv_model_info info;
    srv_chat chat;
    srv_sched *sched;
    srv_metrics metrics;
    struct MHD_Daemon *daemon;
    atomic_bool stopping;
    atomic_int open_streams;   /* streamed responses not yet fully sent (stream.c) */
    int bound_port;
} srv_server;

/* ---- requests and replies ---------------------------------------------- */

/* Which API's conventions a reply follows. */
typedef enum { API_OPENAI, API_OLLAMA } srv_api;

struct MHD_Connection;

/* A request as the handlers see it. */
typedef struct srv_request {
    srv_server *srv;
    struct MHD_Connection *conn;
    const char *body;
    size_t body_len;
    srv_job **watch;           /* where submit_or_reply records the job for cancellation */
} srv_request;

/* Reply helpers (http.c).  Each returns an MHD result. */
int reply_json(srv_request *rq, unsigned status, json_t *body);  /* steals body */
int reply_text(srv_request *rq, unsigned status, const char *content_type, const char *text);
/* OpenAI: {"error":{"message","type","param","code"}}; Ollama: {"error":"..."}. */
int reply_error(srv_request *rq, srv_api api, unsigned status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* True once the client has closed its side of the connection. */
bool client_gone(srv_request *rq);

/* Request parsing (request.c). */
typedef struct srv_parse_error {
    unsigned status;           /* 400, 413, 501 */
    char param[64];
    char message[400];
} srv_parse_error;

/* Parses a JSON object body; NULL with e filled when it is not one. */
json_t *parse_body(const srv_request *rq, srv_parse_error *e);
/* Fills j->sp from OpenAI-named fields of `obj` (temperature, top_p, ...). */
bool parse_sampling(const srv_server *srv, json_t *obj, bool ollama_names, plm_sampler_params *sp,
                    srv_parse_error *e);
/* "stop": a string or an array of strings. */
bool parse_stops(json_t *v, const char *field, srv_job *j, srv_parse_error *e);
/* Tokenizes and checks a prompt (a string, or an array of token ids);
 * add_special: BOS/EOS as the vocabulary asks (not for rendered chats). */
bool parse_prompt(const srv_server *srv, json_t *v, const char *field, bool add_special, srv_job *j,
                  srv_parse_error *e);
/* The request's token budget against the server's limit. */
bool check_max_tokens(const srv_server *srv, srv_job *j, srv_parse_error *e);
void parse_error_set(srv_parse_error *e, unsigned status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The connection's idle timeout off while its handler waits for the job
 * (a queued or running request is not an idle client), and on again,
 * counted from now, when there is something to send. */
void conn_hold_timeout(srv_request *rq);
void conn_release_timeout(srv_request *rq);
/* Submits a job, or replies 503 (queue full, with Retry-After) or 503
 * (stopping); true when queued (and the connection's timeout held). */
bool submit_or_reply(srv_request *rq, srv_api api, srv_job *j);
/* Waits for a job while watching the client; true when it completed (false:
 * the client left and the job was cancelled). */
bool wait_job(srv_request *rq, srv_job *j);

/* Streaming (stream.c): a response that sends `format`'s chunks as the job
 * produces text, and its end. */
typedef struct srv_stream srv_stream;
typedef struct srv_stream_format {
    /* a chunk for new text; NULL = nothing to send */
    char *(*text_chunk)(srv_stream *st, const char *text, size_t len);
    /* the closing chunks (finish reason, usage, [DONE]) */
    char *(*final_chunks)(srv_stream *st);
    const char *content_type;
    /* frees the handler's per-stream data; NULL = free() */
    void (*free_user)(void *user);
} srv_stream_format;

struct srv_stream {
    srv_request rq;            /* conn valid while the response runs */
    srv_job *job;
    const srv_stream_format *fmt;
    void *user;                /* the handler's per-stream data (owned: freed with free()) */
    char *out;                 /* formatted bytes not yet sent */
    size_t out_len, out_pos;
    size_t text_seen;
    bool final_sent;
};

int reply_stream(srv_request *rq, srv_job *j, const srv_stream_format *fmt, void *user);

/* Handlers. */
int openai_completions(srv_request *rq);
int openai_chat(srv_request *rq);
int openai_models(srv_request *rq);
int serve_chat_page(srv_request *rq);  /* page.c: GET / */
int ollama_generate(srv_request *rq);
int ollama_chat(srv_request *rq);
int ollama_tags(srv_request *rq);
int ollama_show(srv_request *rq);
int ollama_version(srv_request *rq);

/* Chat (chat.c).  chat_setup compiles the template: `file` or the built-in
 * `name` when given, else the model's own, else chatml (with a note on
 * stderr); false with a message on stderr when it cannot. */
bool chat_setup(srv_server *srv, const char *name, const char *file);
void chat_teardown(srv_chat *c);

/* A request's rendered conversation. */
typedef struct srv_chat_prompt {
    char *text;                /* the prompt, to tokenize with add_special (a BOS the
                                  template wrote is taken off when the vocabulary adds one) */
    tc_format format;          /* how to find tool calls in the output; TC_NONE: no tools */
    bool think_open;           /* the prompt ends inside a <think> block */
    char *prefill;             /* the start of the reply the prompt already holds (a
                                  forced tool call); parsed with the output; NULL: none */
} srv_chat_prompt;

/* Renders "messages", "tools", "tool_choice" and the template variables
 * ("chat_template_kwargs"; Ollama's "think") of a chat request. */
bool chat_render(const srv_server *srv, json_t *root, srv_api api, srv_chat_prompt *out, srv_parse_error *e);
void chat_prompt_free(srv_chat_prompt *p);

/* /api/generate's `template` (go_template.c): {{ .System }}, {{ .Prompt }},
 * {{ if .X }}..{{ else }}..{{ end }}, ending at {{ .Response }}; a malloc'd
 * prompt, or false with e naming what is not supported. */
bool go_template_render(const char *tmpl, const char *system, const char *prompt, char **out, srv_parse_error *e);

/* A chat reply's output, split as it grows: content, reasoning, tool calls. */
typedef struct chat_split {
    tc_format format;
    bool think_open;
    char *text;                /* the prefill + what was generated so far */
    size_t len, cap;
    size_t sent_content, sent_reasoning;
} chat_split;

bool chat_split_init(chat_split *cs, const srv_chat_prompt *p);
/* Adds generated text and returns what is new since the last step: content
 * and reasoning (malloc'd, NULL when nothing new); at the end (`final`) also
 * the tool calls (an array of {"name", "arguments": object}, or NULL). */
bool chat_split_step(chat_split *cs, const char *text, size_t n, bool final, char **content, char **reasoning,
                     json_t **calls);
void chat_split_free(chat_split *cs);

/* Shared by the handlers: "stop"/"length" from a finish reason. */
const char *finish_reason_openai(const srv_job *j);
/* ISO-8601 UTC time of `t` (Ollama's created_at). */
void iso_time(double t, char out[40]);
double wall_now(void);
/* Generated bytes as a JSON string, invalid UTF-8 replaced by U+FFFD. */
json_t *json_text(const char *text, size_t n);
/* "cmpl-" + 16 hex digits, unique within the process. */
void random_id(const char *prefix, char out[48]);

/* Runs the server until SIGTERM/SIGINT (the caller has blocked them in
 * every thread); returns 0 after a clean shutdown. */
int server_run(srv_server *srv);

#endif
