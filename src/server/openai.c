/*
 * OpenAI's API: POST /v1/completions (streamed as SSE `data:` events ending
 * with `data: [DONE]`, or one JSON reply), GET /v1/models, and
 * POST /v1/chat/completions, which is "render the messages with the model's
 * chat template -> prompt text -> the completion path" (chat_render below,
 * waiting for the chat-template module).
 */
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
} oai_stream;

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
    v = json_object_get(root, "logprobs");
    if (chat && v && !json_is_null(v) && !json_is_false(v)) {
        parse_error_set(e, 400, "logprobs", "'logprobs' is not supported on chat completions yet");
        return false;
    }
    if (v && !json_is_null(v) && !chat) {
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

static json_t *token_text(const srv_server *srv, plm_token t) {
    char buf[256];
    int n = plm_token_to_piece(srv->model, t, buf, sizeof buf, false);
    return json_text(buf, n > 0 ? (size_t)n : 0);
}

/* The legacy completions logprobs object: tokens, token_logprobs,
 * top_logprobs (one {token: logprob} per position), text_offset. */
static json_t *logprobs_json(const srv_server *srv, const srv_job *j) {
    if (j->logprobs < 0) return json_null();
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t offset = 0;
    for (int i = 0; i < j->n_recs; i++) {
        const srv_token_rec *r = &j->recs[i];
        json_t *t = token_text(srv, r->token);
        json_array_append_new(offs, json_integer((json_int_t)offset));
        offset += t ? json_string_length(t) : 0;
        json_array_append_new(tokens, t ? t : json_string(""));
        json_array_append_new(lps, json_real(r->logprob));
        json_t *top = json_object();
        for (int k = 0; k < r->n_top; k++) {
            json_t *name = token_text(srv, r->top[k]);
            if (name) json_object_set_new(top, json_string_value(name), json_real(r->top_logprob[k]));
            json_decref(name);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{sosososo}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops, "text_offset", offs);
}

static json_t *completion_json(const srv_server *srv, const srv_job *j, const char *id) {
    json_t *text = json_text(j->text ? j->text : "", j->len);
    json_t *choice = json_pack("{sosisoss}", "text", text ? text : json_string(""), "index", 0, "logprobs",
                               logprobs_json(srv, j), "finish_reason", finish_reason_openai(j));
    return json_pack("{sssssIsssss[o]so}", "id", id, "object", "text_completion", "created",
                     (json_int_t)wall_now(), "model", srv->info.name, "system_fingerprint", "pocketlm-" PLM_VERSION,
                     "choices", choice, "usage", usage_json(j));
}

static json_t *chat_json(const srv_server *srv, const srv_job *j, const char *id) {
    json_t *text = json_text(j->text ? j->text : "", j->len);
    json_t *choice = json_pack("{sis{ssso}soss}", "index", 0, "message", "role", "assistant", "content",
                               text ? text : json_string(""), "logprobs", json_null(), "finish_reason",
                               finish_reason_openai(j));
    return json_pack("{sssssIsssss[o]so}", "id", id, "object", "chat.completion", "created", (json_int_t)wall_now(),
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

/* One choice of a chunk: text (completions) or a delta (chat). */
static json_t *chunk_choice(oai_stream *u, json_t *text, json_t *finish) {
    if (!text) text = json_string("");
    if (!u->chat)
        return json_pack("[{sosisoso}]", "text", text, "index", 0, "logprobs", json_null(), "finish_reason", finish);
    json_t *delta = json_object();
    if (!u->role_sent) json_object_set_new(delta, "role", json_string("assistant"));
    u->role_sent = true;
    if (json_string_length(text) || json_is_null(finish)) json_object_set(delta, "content", text);
    json_decref(text);
    return json_pack("[{sisososo}]", "index", 0, "delta", delta, "logprobs", json_null(), "finish_reason", finish);
}

static char *sse_text(srv_stream *st, const char *text, size_t len) {
    oai_stream *u = st->user;
    json_t *choices = chunk_choice(u, json_text(text, len), json_null());
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

static char *sse_final(srv_stream *st) {
    oai_stream *u = st->user;
    srv_job *j = st->job;
    char *last;
    if (j->status != PLM_OK) {
        last = sse(json_pack("{s{ssssss?}}", "error", "message", j->error, "type", "server_error", "param", NULL));
    } else {
        json_t *choices = chunk_choice(u, json_string(""), json_string(finish_reason_openai(j)));
        json_t *c = chunk(u, choices);
        json_decref(choices);
        last = sse(c);
    }
    char *usage = NULL;
    if (u->include_usage && j->status == PLM_OK) {
        json_t *choices = json_array();
        json_t *c = chunk(u, choices);
        json_decref(choices);
        json_object_set_new(c, "usage", usage_json(j));
        usage = sse(c);
    }
    return join3(last, usage, "data: [DONE]\n\n");
}

static const srv_stream_format SSE_COMPLETION = {sse_text, sse_final, "text/event-stream"};

/* ---- handlers ------------------------------------------------------------------ */

/* A parsed job goes to the scheduler; the reply streams or waits. */
static int run_completion(srv_request *rq, srv_job *j, bool stream, bool include_usage, bool chat) {
    if (!submit_or_reply(rq, API_OPENAI, j)) return MHD_YES;
    oai_stream *u = calloc(1, sizeof *u);
    if (!u) return reply_error(rq, API_OPENAI, 500, NULL, "out of memory");
    random_id(chat ? "chatcmpl-" : "cmpl-", u->id);
    u->created = (long long)wall_now();
    snprintf(u->model, sizeof u->model, "%s", rq->srv->info.name);
    u->include_usage = include_usage;
    u->chat = chat;
    if (stream) return reply_stream(rq, j, &SSE_COMPLETION, u);
    int ret;
    if (!wait_job(rq, j)) ret = MHD_NO;  /* the client left: close */
    else if (j->status != PLM_OK) ret = reply_error(rq, API_OPENAI, 500, NULL, "generation failed: %s", j->error);
    else ret = reply_json(rq, 200, chat ? chat_json(rq->srv, j, u->id) : completion_json(rq->srv, j, u->id));
    free(u);
    return ret;
}

/* The completion path, shared by both endpoints: `prompt` is the request's
 * (completions) or the rendered conversation (chat, whose template writes
 * the special tokens itself, so none are added). */
static int completion_path(srv_request *rq, json_t *root, json_t *prompt, bool chat) {
    srv_parse_error e = {0};
    srv_job *j = job_new();
    if (!j) return reply_error(rq, API_OPENAI, 500, NULL, "out of memory");
    bool stream = false, include_usage = false;
    bool ok = refuse_unsupported(root, &e) && parse_stream_flags(root, &stream, &include_usage, &e) &&
              parse_prompt(rq->srv, prompt, "prompt", !chat, j, &e) && parse_generation(rq->srv, root, chat, j, &e);
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
                                              : completion_path(rq, root, prompt, false);
    json_decref(root);
    return ret;
}

/* Chat: messages -> prompt text through the model's chat template
 * (include/pocketlm_chat.h, being written beside this).  Wiring it: compile
 * the model's template (plm_chat_template_from_gguf, or a built-in) once at
 * start-up into srv_server, and here render `messages` (and `tools`) with
 * add_generation_prompt and the model's BOS/EOS texts.  Until then: 501. */
bool chat_render(const srv_server *srv, json_t *root, char **prompt, srv_parse_error *e) {
    (void)srv;
    (void)root;
    *prompt = NULL;
    parse_error_set(e, 501, "messages",
                    "chat endpoints need the chat-template renderer, which this build does not have yet; "
                    "use /v1/completions or /api/generate with a prompt");
    return false;
}

int openai_chat(srv_request *rq) {
    srv_parse_error e = {0};
    json_t *root = parse_body(rq, &e);
    if (!root) return reply_error(rq, API_OPENAI, e.status, e.param, "%s", e.message);
    int ret;
    char *prompt = NULL;
    if (!json_is_array(json_object_get(root, "messages")) || !json_array_size(json_object_get(root, "messages"))) {
        ret = reply_error(rq, API_OPENAI, 400, "messages", "'messages' must be a non-empty array");
    } else if (!chat_render(rq->srv, root, &prompt, &e)) {
        ret = reply_error(rq, API_OPENAI, e.status, e.param, "%s", e.message);
    } else {
        json_t *text = json_string(prompt);
        ret = text ? completion_path(rq, root, text, true)
                   : reply_error(rq, API_OPENAI, 500, NULL, "the chat template rendered invalid UTF-8");
        json_decref(text);
    }
    free(prompt);
    json_decref(root);
    return ret;
}

int openai_models(srv_request *rq) {
    const srv_model_info *mi = &rq->srv->info;
    json_t *model = json_pack("{sssssIss}", "id", mi->name, "object", "model", "created", (json_int_t)mi->mtime,
                              "owned_by", "pocketlm");
    return reply_json(rq, 200, json_pack("{sss[o]}", "object", "list", "data", model));
}
