/*
 * OpenAI's API: POST /v1/completions (streamed as SSE `data:` events ending
 * with `data: [DONE]`, or one JSON reply), GET /v1/models, and
 * POST /v1/chat/completions, which is "render the messages with the model's
 * chat template -> prompt text -> the completion path" (chat.c), its output
 * split into content, reasoning_content and tool_calls.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "server/server.h"

typedef struct oai_stream {
    char id[48];
    long long created;
    char model[128];
    bool include_usage;
    bool chat;        /* chat.completion(.chunk) shape: message / delta */
    bool role_sent;   /* the first chat delta carries the role */
    chat_split split; /* chat: the output so far, and what was sent of it */
    int lp_next;      /* logprobs: the next token record to report */
    size_t lp_offset; /* ... and where its text starts in the output */
} oai_stream;

static void oai_stream_free(void *user) {
    oai_stream *u = user;
    if (u) chat_split_free(&u->split);
    free(u);
}

/* ---- request ---------------------------------------------------------------- */

/* Fields OpenAI defines that this server cannot honour are refused by name
 * rather than silently ignored. */
static bool refuse_unsupported(json_t *root, srv_parse_error *e) {
    json_t *v;
    if ((v = json_object_get(root, "n")) && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == 1)) {
        parse_error_set(e, 400, "n", "'n' must be 1: one completion per request");
        return false;
    }
    if ((v = json_object_get(root, "best_of")) && !json_is_null(v) &&
        !(json_is_integer(v) && json_integer_value(v) == 1)) {
        parse_error_set(e, 400, "best_of", "'best_of' must be 1");
        return false;
    }
    if ((v = json_object_get(root, "echo")) && !json_is_null(v) && !json_is_false(v)) {
        parse_error_set(e, 400, "echo", "'echo' is not supported");
        return false;
    }
    if ((v = json_object_get(root, "suffix")) && !json_is_null(v) &&
        !(json_is_string(v) && json_string_length(v) == 0)) {
        parse_error_set(e, 400, "suffix", "'suffix' (fill in the middle) is not supported");
        return false;
    }
    if ((v = json_object_get(root, "logit_bias")) && !json_is_null(v) && !(json_is_object(v) && !json_object_size(v))) {
        parse_error_set(e, 400, "logit_bias", "'logit_bias' is not supported");
        return false;
    }
    return true;
}

static bool parse_stream_flags(json_t *root, bool *stream, bool *include_usage, srv_parse_error *e) {
    json_t *v = json_object_get(root, "stream");
    if (v && !json_is_null(v) && !json_is_boolean(v)) {
        parse_error_set(e, 400, "stream", "'stream' must be true or false");
        return false;
    }
    *stream = json_is_true(v);
    json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) {
            parse_error_set(e, 400, "stream_options", "'stream_options' must be an object");
            return false;
        }
        json_t *iu = json_object_get(so, "include_usage");
        if (iu && !json_is_null(iu) && !json_is_boolean(iu)) {
            parse_error_set(e, 400, "stream_options.include_usage", "'include_usage' must be true or false");
            return false;
        }
        *include_usage = json_is_true(iu);
    }
    return true;
}

/* Chat's logprobs: a flag, and top_logprobs alternatives (0..20) with it. */
static bool parse_chat_logprobs(json_t *root, srv_job *j, srv_parse_error *e) {
    json_t *on = json_object_get(root, "logprobs"), *top = json_object_get(root, "top_logprobs");
    if (on && !json_is_null(on) && !json_is_boolean(on)) {
        parse_error_set(e, 400, "logprobs", "'logprobs' must be true or false");
        return false;
    }
    j->logprobs = json_is_true(on) ? 0 : -1;
    if (!top || json_is_null(top)) return true;
    if (!json_is_integer(top) || json_integer_value(top) < 0 || json_integer_value(top) > SRV_TOP_LOGPROBS_MAX) {
        parse_error_set(e, 400, "top_logprobs", "'top_logprobs' must be an integer in [0, %d]", SRV_TOP_LOGPROBS_MAX);
        return false;
    }
    if (!json_is_true(on)) {
        parse_error_set(e, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        return false;
    }
    j->logprobs = (int)json_integer_value(top);
    return true;
}

/* The fields of a completion after the prompt: limits, sampling, stops. */
static bool parse_generation(const srv_server *srv, json_t *root, bool chat, srv_job *j, srv_parse_error *e) {
    /* Completions default to 16 tokens, as OpenAI's; chat to the limit.
     * Chat's newer name for the budget wins over the old one. */
    const char *max_field = "max_tokens";
    json_t *v = json_object_get(root, "max_completion_tokens");
    if (chat && v && !json_is_null(v)) max_field = "max_completion_tokens";
    v = json_object_get(root, max_field);
    j->max_tokens = chat ? -1 : 16;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (1 << 30)) {
            parse_error_set(e, 400, max_field, "'%s' must be an integer >= 0", max_field);
            return false;
        }
        j->max_tokens = (int)json_integer_value(v);
    }
    if (!check_max_tokens(srv, j, e)) return false;
    if (!parse_sampling(srv, root, false, &j->sp, e)) return false;
    if (!parse_stops(json_object_get(root, "stop"), "stop", j, e)) return false;
    v = json_object_get(root, "ignore_eos");
    if (v && !json_is_null(v) && !json_is_boolean(v)) {
        parse_error_set(e, 400, "ignore_eos", "'ignore_eos' must be true or false");
        return false;
    }
    j->ignore_eos = json_is_true(v);
    if (chat) return parse_chat_logprobs(root, j, e);
    v = json_object_get(root, "logprobs");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 5) {
            parse_error_set(e, 400, "logprobs", "'logprobs' must be an integer in [0, 5]");
            return false;
        }
        j->logprobs = (int)json_integer_value(v);
    }
    return true;
}

/* ---- replies ---------------------------------------------------------------- */

static json_t *usage_json(const srv_job *j) {
    int g = j->result.n_generated;
    return json_pack("{sisisis{si}}", "prompt_tokens", j->n_prompt, "completion_tokens", g, "total_tokens",
                     j->n_prompt + g, "prompt_tokens_details", "cached_tokens", j->n_cached);
}

/* ---- logprobs ------------------------------------------------------------------ */

/* A token's text as the output holds it (a control token's is empty); real
 * vocabularies have none over 256 bytes. */
static int piece_of(const srv_server *srv, plm_token t, char buf[256]) {
    int n = plm_token_to_piece(srv->model, t, buf, 256, false);
    return n > 0 ? n : 0;
}

static json_t *token_text(const srv_server *srv, plm_token t) {
    char buf[256];
    return json_text(buf, (size_t)piece_of(srv, t, buf));
}

/* JSON has no infinity: a masked logit's -inf is OpenAI's -9999. */
static json_t *logprob_value(float lp) { return json_real(isfinite(lp) ? (double)lp : -9999.0); }

/* The records a response (or the next chunk of a stream) reports: from
 * *next on, those whose text lies within the first `covered` bytes of the
 * output (at the end also one that a stop string cut through).  Advances
 * *next and *offset (where the next one's text starts) past them, so each
 * token is reported once, in order.  A malloc'd copy; *n its count. */
static srv_token_rec *recs_covered(const srv_server *srv, srv_job *j, int *next, size_t *offset, size_t covered,
                                   bool final, int *n) {
    int avail;
    srv_token_rec *recs = job_recs_since(j, *next, &avail);
    *n = 0;
    for (; *n < avail; ++*n) {
        char buf[256];
        size_t end = *offset + (size_t)piece_of(srv, recs[*n].token, buf);
        if (end > covered && !(final && *offset < covered)) break;
        *offset = end;
    }
    *next += *n;
    return recs;
}

/* The completions (legacy) logprobs object: tokens, token_logprobs,
 * top_logprobs (one {token: logprob} per position), text_offset. */
static json_t *legacy_logprobs(const srv_server *srv, const srv_token_rec *recs, int n, size_t offset) {
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (int i = 0; i < n; i++) {
        const srv_token_rec *r = &recs[i];
        char buf[256];
        json_array_append_new(offs, json_integer((json_int_t)offset));
        offset += (size_t)piece_of(srv, r->token, buf);
        json_t *t = token_text(srv, r->token);
        json_array_append_new(tokens, t ? t : json_string(""));
        json_array_append_new(lps, logprob_value(r->logprob));
        json_t *top = json_object();
        for (int k = 0; k < r->n_top; k++) {
            json_t *name = token_text(srv, r->top[k]);
            if (name) json_object_set_new(top, json_string_value(name), logprob_value(r->top_logprob[k]));
            json_decref(name);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{sosososo}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops, "text_offset", offs);
}

/* {token, logprob, bytes}: the text as a JSON string (a partial UTF-8
 * character becomes U+FFFD there) and its exact bytes. */
static json_t *token_logprob(const srv_server *srv, plm_token t, float logprob) {
    char buf[256];
    int n = piece_of(srv, t, buf);
    json_t *bytes = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(bytes, json_integer((unsigned char)buf[i]));
    json_t *text = json_text(buf, (size_t)n);
    return json_pack("{sososo}", "token", text ? text : json_string(""), "logprob", logprob_value(logprob), "bytes",
                     bytes);
}

/* Chat's logprobs object: {"content": [{token, logprob, bytes,
 * top_logprobs: [{token, logprob, bytes}]}], "refusal": null}. */
static json_t *chat_logprobs(const srv_server *srv, const srv_token_rec *recs, int n) {
    json_t *content = json_array();
    for (int i = 0; i < n; i++) {
        json_t *entry = token_logprob(srv, recs[i].token, recs[i].logprob);
        json_t *top = json_array();
        for (int k = 0; k < recs[i].n_top; k++)
            json_array_append_new(top, token_logprob(srv, recs[i].top[k], recs[i].top_logprob[k]));
        json_object_set_new(entry, "top_logprobs", top);
        json_array_append_new(content, entry);
    }
    return json_pack("{soss?}", "content", content, "refusal", NULL);
}

/* A response's (or a stream chunk's) logprobs in the endpoint's shape:
 * those of the tokens covered so far (recs_covered); JSON null when the
 * request asked for none, or (in a stream) when no token is new. */
static json_t *logprobs_json(const srv_server *srv, srv_job *j, oai_stream *u, size_t covered, bool final,
                             bool stream) {
    if (j->logprobs < 0) return json_null();
    const size_t offset = u->lp_offset;
    int n;
    srv_token_rec *recs = recs_covered(srv, j, &u->lp_next, &u->lp_offset, covered, final, &n);
    json_t *out = stream && !n ? json_null()
                  : u->chat    ? chat_logprobs(srv, recs, n)
                               : legacy_logprobs(srv, recs, n, offset);
    free(recs);
    return out;
}

static json_t *completion_json(const srv_server *srv, srv_job *j, oai_stream *u) {
    json_t *text = json_text(j->text ? j->text : "", j->len);
    json_t *choice = json_pack("{sosisoss}", "text", text ? text : json_string(""), "index", 0, "logprobs",
                               logprobs_json(srv, j, u, j->len, true, false), "finish_reason", finish_reason_openai(j));
    return json_pack("{sssssIsssss[o]so}", "id", u->id, "object", "text_completion", "created",
                     (json_int_t)wall_now(), "model", srv->info.name, "system_fingerprint", "pocketlm-" PLM_VERSION,
                     "choices", choice, "usage", usage_json(j));
}

/* OpenAI's tool_calls: arguments as a JSON string, each call with an id. */
static json_t *tool_calls_json(json_t *calls, bool with_index) {
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        char id[48];
        random_id("call_", id);
        char *args = json_dumps(json_object_get(c, "arguments"), JSON_COMPACT);
        json_t *tc = json_pack("{sssss{sOss}}", "id", id, "type", "function", "function", "name",
                               json_object_get(c, "name"), "arguments", args ? args : "{}");
        free(args);
        if (tc && with_index) json_object_set_new(tc, "index", json_integer((json_int_t)i));
        if (tc) json_array_append_new(out, tc);
    }
    return out;
}

static const char *chat_finish_reason(const srv_job *j, json_t *calls) {
    return calls && json_array_size(calls) ? "tool_calls" : finish_reason_openai(j);
}

static json_t *chat_json(const srv_server *srv, srv_job *j, oai_stream *u) {
    char *content = NULL, *reasoning = NULL;
    json_t *calls = NULL;
    if (!chat_split_step(&u->split, j->text ? j->text : "", j->len, true, &content, &reasoning, &calls)) return NULL;
    json_t *msg = json_pack("{ss}", "role", "assistant");
    bool has_calls = calls && json_array_size(calls);
    json_object_set_new(msg, "content", content || !has_calls ? json_text(content ? content : "", content ? strlen(content) : 0)
                                                              : json_null());
    if (reasoning && *reasoning) json_object_set_new(msg, "reasoning_content", json_text(reasoning, strlen(reasoning)));
    if (has_calls) json_object_set_new(msg, "tool_calls", tool_calls_json(calls, false));
    json_t *lp = logprobs_json(srv, j, u, j->len, true, false);
    json_t *choice = json_pack("{sisososs}", "index", 0, "message", msg, "logprobs", lp, "finish_reason",
                               chat_finish_reason(j, calls));
    free(content);
    free(reasoning);
    json_decref(calls);
    return json_pack("{sssssIsssss[o]so}", "id", u->id, "object", "chat.completion", "created", (json_int_t)wall_now(),
                     "model", srv->info.name, "system_fingerprint", "pocketlm-" PLM_VERSION, "choices", choice, "usage",
                     usage_json(j));
}

static char *sse(json_t *obj) {
    char *s = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (!s) return NULL;
    size_t n = strlen(s);
    char *out = malloc(n + 9);
    if (out) {
        memcpy(out, "data: ", 6);
        memcpy(out + 6, s, n);
        memcpy(out + 6 + n, "\n\n", 3);
    }
    free(s);
    return out;
}

static json_t *chunk(const oai_stream *u, json_t *choices) {
    return json_pack("{sssssIsssssO}", "id", u->id, "object", u->chat ? "chat.completion.chunk" : "text_completion",
                     "created", (json_int_t)u->created,
                     "model", u->model, "system_fingerprint", "pocketlm-" PLM_VERSION, "choices", choices);
}

/* One choice of a completions chunk, with the logprobs of the tokens its
 * text completes (at the end: all that are left). */
static json_t *chunk_choice(srv_stream *st, json_t *text, json_t *finish) {
    if (!text) text = json_string("");
    const bool final = !json_is_null(finish);
    json_t *lp = logprobs_json(st->rq.srv, st->job, st->user, final ? st->job->len : st->text_seen, final, true);
    return json_pack("[{sosisoso}]", "text", text, "index", 0, "logprobs", lp, "finish_reason", finish);
}

/* A chat chunk: a delta of content / reasoning_content / tool_calls (the
 * first one carries the role), or NULL when there is nothing to send.  With
 * logprobs, it carries those of the tokens whose text the stream has taken
 * so far (all that are left, with the finish reason). */
static char *chat_chunk(srv_stream *st, char *content, char *reasoning, json_t *calls, const char *finish) {
    oai_stream *u = st->user;
    json_t *delta = json_object();
    if (!u->role_sent) json_object_set_new(delta, "role", json_string("assistant"));
    if (content) json_object_set_new(delta, "content", json_text(content, strlen(content)));
    if (reasoning) json_object_set_new(delta, "reasoning_content", json_text(reasoning, strlen(reasoning)));
    if (calls) json_object_set_new(delta, "tool_calls", tool_calls_json(calls, true));
    free(content);
    free(reasoning);
    if (!json_object_size(delta) && !finish) {
        json_decref(delta);
        return NULL;
    }
    u->role_sent = true;
    json_t *lp = logprobs_json(st->rq.srv, st->job, u, finish ? st->job->len : st->text_seen, finish != NULL, true);
    json_t *choices = json_pack("[{sisososo}]", "index", 0, "delta", delta, "logprobs", lp, "finish_reason",
                                finish ? json_string(finish) : json_null());
    json_t *c = chunk(u, choices);
    json_decref(choices);
    return sse(c);
}

static char *sse_text(srv_stream *st, const char *text, size_t len) {
    oai_stream *u = st->user;
    json_t *choices = chunk_choice(st, json_text(text, len), json_null());
    json_t *c = chunk(u, choices);
    json_decref(choices);
    return sse(c);
}

static char *join3(char *a, char *b, const char *c) {
    size_t la = a ? strlen(a) : 0, lb = b ? strlen(b) : 0, lc = strlen(c);
    char *out = malloc(la + lb + lc + 1);
    if (out) {
        memcpy(out, a ? a : "", la);
        memcpy(out + la, b ? b : "", lb);
        memcpy(out + la + lb, c, lc + 1);
    }
    free(a);
    free(b);
    return out;
}

static char *usage_chunk(oai_stream *u, const srv_job *j) {
    char *usage = NULL;
    if (u->include_usage && j->status == PLM_OK) {
        json_t *choices = json_array();
        json_t *c = chunk(u, choices);
        json_decref(choices);
        json_object_set_new(c, "usage", usage_json(j));
        usage = sse(c);
    }
    return usage;
}

static char *sse_final(srv_stream *st) {
    oai_stream *u = st->user;
    srv_job *j = st->job;
    char *last;
    if (j->status != PLM_OK) {
        last = sse(json_pack("{s{ssssss?}}", "error", "message", j->error, "type", "server_error", "param", NULL));
    } else {
        json_t *choices = chunk_choice(st, json_string(""), json_string(finish_reason_openai(j)));
        json_t *c = chunk(u, choices);
        json_decref(choices);
        last = sse(c);
    }
    return join3(last, usage_chunk(u, j), "data: [DONE]\n\n");
}

static char *sse_chat_text(srv_stream *st, const char *text, size_t len) {
    oai_stream *u = st->user;
    char *content, *reasoning;
    if (!chat_split_step(&u->split, text, len, false, &content, &reasoning, NULL)) return NULL;
    return chat_chunk(st, content, reasoning, NULL, NULL);
}

/* The end of a chat stream: the held-back text, the tool calls, the finish
 * reason, the usage, [DONE]. */
static char *sse_chat_final(srv_stream *st) {
    oai_stream *u = st->user;
    srv_job *j = st->job;
    if (j->status != PLM_OK)
        return join3(sse(json_pack("{s{ssssss?}}", "error", "message", j->error, "type", "server_error", "param", NULL)),
                     NULL, "data: [DONE]\n\n");
    char *content = NULL, *reasoning = NULL;
    json_t *calls = NULL;
    chat_split_step(&u->split, "", 0, true, &content, &reasoning, &calls);
    char *rest = chat_chunk(st, content, reasoning, calls, NULL);
    char *fin = chat_chunk(st, NULL, NULL, NULL, chat_finish_reason(j, calls));
    json_decref(calls);
    return join3(join3(rest, fin, ""), usage_chunk(u, j), "data: [DONE]\n\n");
}

static const srv_stream_format SSE_COMPLETION = {sse_text, sse_final, "text/event-stream", oai_stream_free};
static const srv_stream_format SSE_CHAT = {sse_chat_text, sse_chat_final, "text/event-stream", oai_stream_free};

/* ---- handlers ------------------------------------------------------------------ */

/* A parsed job goes to the scheduler; the reply streams or waits.  chat:
 * the rendered conversation (NULL for completions). */
static int run_completion(srv_request *rq, srv_job *j, bool stream, bool include_usage, const srv_chat_prompt *chat) {
    if (!submit_or_reply(rq, API_OPENAI, j)) return MHD_YES;
    oai_stream *u = calloc(1, sizeof *u);
    if (!u || (chat && !chat_split_init(&u->split, chat))) {
        oai_stream_free(u);
        atomic_store(&j->cancel, true);
        conn_release_timeout(rq);
        return reply_error(rq, API_OPENAI, 500, NULL, "out of memory");
    }
    random_id(chat ? "chatcmpl-" : "cmpl-", u->id);
    u->created = (long long)wall_now();
    snprintf(u->model, sizeof u->model, "%s", rq->srv->info.name);
    u->include_usage = include_usage;
    u->chat = chat != NULL;
    if (stream) return reply_stream(rq, j, chat ? &SSE_CHAT : &SSE_COMPLETION, u);
    int ret;
    json_t *out;
    if (!wait_job(rq, j)) ret = MHD_NO;  /* the client left: close */
    else if (j->status != PLM_OK)
        ret = reply_error(rq, API_OPENAI, j->status == PLM_ERR_ABORTED ? 503 : 500, NULL, "generation failed: %s",
                          j->error);
    else if (!(out = chat ? chat_json(rq->srv, j, u) : completion_json(rq->srv, j, u)))
        ret = reply_error(rq, API_OPENAI, 500, NULL, "out of memory");
    else ret = reply_json(rq, 200, out);
    oai_stream_free(u);
    return ret;
}

/* The completion path, shared by both endpoints: `prompt` is the request's
 * (completions) or the rendered conversation (chat).  A chat's text is
 * tokenized with its special tokens parsed and BOS added as the vocabulary
 * asks (chat_render took a template-written BOS off), as llama.cpp does. */
static int completion_path(srv_request *rq, json_t *root, json_t *prompt, const srv_chat_prompt *chat) {
    srv_parse_error e = {0};
    srv_job *j = job_new();
    if (!j) return reply_error(rq, API_OPENAI, 500, NULL, "out of memory");
    bool stream = false, include_usage = false;
    bool ok = refuse_unsupported(root, &e) && parse_stream_flags(root, &stream, &include_usage, &e) &&
              parse_prompt(rq->srv, prompt, chat ? "messages" : "prompt", true, j, &e) &&
              parse_generation(rq->srv, root, chat != NULL, j, &e);
    int ret = ok ? run_completion(rq, j, stream, include_usage, chat)
                 : reply_error(rq, API_OPENAI, e.status, e.param, "%s", e.message);
    job_unref(j);
    return ret;
}

int openai_completions(srv_request *rq) {
    srv_parse_error e = {0};
    json_t *root = parse_body(rq, &e);
    if (!root) return reply_error(rq, API_OPENAI, e.status, e.param, "%s", e.message);
    json_t *prompt = json_object_get(root, "prompt");
    int ret = !prompt || json_is_null(prompt) ? reply_error(rq, API_OPENAI, 400, "prompt", "'prompt' is required")
                                              : completion_path(rq, root, prompt, NULL);
    json_decref(root);
    return ret;
}

int openai_chat(srv_request *rq) {
    srv_parse_error e = {0};
    json_t *root = parse_body(rq, &e);
    if (!root) return reply_error(rq, API_OPENAI, e.status, e.param, "%s", e.message);
    int ret;
    srv_chat_prompt chat;
    if (!chat_render(rq->srv, root, API_OPENAI, &chat, &e)) {
        ret = reply_error(rq, API_OPENAI, e.status, e.param, "%s", e.message);
    } else {
        json_t *text = json_string(chat.text);
        ret = text ? completion_path(rq, root, text, &chat)
                   : reply_error(rq, API_OPENAI, 500, NULL, "the chat template rendered invalid UTF-8");
        json_decref(text);
        chat_prompt_free(&chat);
    }
    json_decref(root);
    return ret;
}

int openai_models(srv_request *rq) {
    const srv_model_info *mi = &rq->srv->info;
    json_t *model = json_pack("{sssssIss}", "id", mi->name, "object", "model", "created", (json_int_t)mi->mtime,
                              "owned_by", "pocketlm");
    return reply_json(rq, 200, json_pack("{sss[o]}", "object", "list", "data", model));
}
