/*
 * Ollama's API: POST /api/generate (NDJSON lines while streaming, which is
 * Ollama's default, or one JSON reply; the prompt goes through the chat
 * template as the user's message unless `raw`), GET /api/tags, POST /api/show,
 * GET /api/version; POST /api/chat renders messages like the OpenAI chat
 * endpoint (chat.c), its "message" split into content, thinking and
 * tool_calls.  Durations are nanoseconds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "server/server.h"

typedef struct oll_stream {
    char model[128];
    double t_start;
    bool chat;  /* /api/chat's shape: "message" instead of "response", no "context" */
    chat_split split;
} oll_stream;

static void oll_stream_free(void *user) {
    oll_stream *u = user;
    if (u) chat_split_free(&u->split);
    free(u);
}

/* ---- request ---------------------------------------------------------------- */

static bool get_bool(json_t *obj, const char *key, bool dflt, bool *out, srv_parse_error *e) {
    json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) {
        parse_error_set(e, 400, key, "'%s' must be true or false", key);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

static bool refuse_unsupported(json_t *root, srv_parse_error *e) {
    json_t *v;
    if ((v = json_object_get(root, "images")) && !json_is_null(v) && !(json_is_array(v) && !json_array_size(v))) {
        parse_error_set(e, 400, "images", "'images': this model takes text only");
        return false;
    }
    if ((v = json_object_get(root, "format")) && !json_is_null(v) && !(json_is_string(v) && !json_string_length(v))) {
        parse_error_set(e, 501, "format", "'format' (structured output) is not supported");
        return false;
    }
    if ((v = json_object_get(root, "suffix")) && !json_is_null(v) && !(json_is_string(v) && !json_string_length(v))) {
        parse_error_set(e, 400, "suffix", "'suffix' (fill in the middle) is not supported");
        return false;
    }
    return true;
}

/* The prompt's tokens: a previous reply's "context" tokens, then the text
 * (with BOS as the vocabulary asks only when it starts the prompt). */
static bool tokenize_after_context(const srv_server *srv, json_t *text, json_t *context, srv_job *j,
                                   srv_parse_error *e) {
    if (!context || !json_array_size(context)) return parse_prompt(srv, text, "prompt", true, j, e);
    srv_job tmp = {0};  /* the context's ids, checked as a prompt */
    if (!parse_prompt(srv, context, "context", false, &tmp, e)) {
        free(tmp.prompt);
        return false;
    }
    int n_text = 0;
    plm_token *more = plm_tokenize_alloc(srv->model, json_string_value(text), json_string_length(text), &n_text,
                                         false, true);
    plm_token *all = more ? realloc(tmp.prompt, (size_t)(tmp.n_prompt + n_text + 1) * sizeof *all) : NULL;
    if (!all) {
        free(more);
        free(tmp.prompt);
        parse_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    memcpy(all + tmp.n_prompt, more, (size_t)n_text * sizeof *all);
    free(more);
    j->prompt = all;
    j->n_prompt = tmp.n_prompt + n_text;
    int lim = (int)sched_n_ctx(srv->sched) - 1;
    if (j->n_prompt > lim) {
        parse_error_set(e, 400, "context", "context + prompt are %d tokens: at most %d fit", j->n_prompt, lim);
        return false;
    }
    return true;
}

static bool optional_string(json_t *root, const char *key, const char **out, srv_parse_error *e) {
    json_t *v = json_object_get(root, key);
    *out = json_is_string(v) ? json_string_value(v) : "";
    if (!v || json_is_null(v) || json_is_string(v)) return true;
    parse_error_set(e, 400, key, "'%s' must be a string", key);
    return false;
}

/* The prompt as Ollama builds it without `raw`: the request's `template`
 * (a simple Go one), else the chat template with `system` and the prompt
 * as the user's message and the assistant's turn opened (`think` reaching
 * the template as in /api/chat).  A malloc'd text to tokenize. */
static char *templated_prompt(const srv_server *srv, json_t *root, const char *prompt, srv_parse_error *e) {
    const char *system, *tmpl;
    if (!optional_string(root, "system", &system, e) || !optional_string(root, "template", &tmpl, e)) return NULL;
    char *text = NULL;
    if (*tmpl) return go_template_render(tmpl, system, prompt, &text, e) ? text : NULL;
    json_t *msgs = json_array();
    if (*system) json_array_append_new(msgs, json_pack("{ssss}", "role", "system", "content", system));
    json_array_append_new(msgs, json_pack("{ssss}", "role", "user", "content", prompt));
    json_t *req = json_pack("{so}", "messages", msgs);
    json_t *think = json_object_get(root, "think");
    if (req && think) json_object_set(req, "think", think);
    srv_chat_prompt cp;
    if (req && chat_render(srv, req, API_OLLAMA, &cp, e)) {
        text = cp.text;
        cp.text = NULL;
        chat_prompt_free(&cp);
    } else if (!req) {
        parse_error_set(e, 500, NULL, "out of memory");
    }
    json_decref(req);
    return text;
}

/* /api/generate's prompt: `raw`, the text as given; else templated as
 * Ollama does (templated_prompt).  A previous reply's `context` goes
 * first, as Ollama prepends it to the rendered text. */
static bool parse_generate_prompt(const srv_server *srv, json_t *root, bool raw, srv_job *j, bool *empty,
                                  srv_parse_error *e) {
    json_t *prompt = json_object_get(root, "prompt"), *context = json_object_get(root, "context");
    if (prompt && !json_is_null(prompt) && !json_is_string(prompt)) {
        parse_error_set(e, 400, "prompt", "'prompt' must be a string");
        return false;
    }
    if (json_is_null(context)) context = NULL;
    if (context && !json_is_array(context)) {
        parse_error_set(e, 400, "context", "'context' must be an array of token ids");
        return false;
    }
    const char *text = json_is_string(prompt) ? json_string_value(prompt) : "";
    *empty = !*text && (!context || !json_array_size(context));
    if (*empty) return true;
    if (raw) {
        json_t *t = json_is_string(prompt) ? json_incref(prompt) : json_string("");
        bool ok = t && tokenize_after_context(srv, t, context, j, e);
        json_decref(t);
        return ok;
    }
    char *rendered = templated_prompt(srv, root, text, e);
    if (!rendered) return false;
    json_t *t = json_string(rendered);
    free(rendered);
    if (!t) parse_error_set(e, 400, "template", "the template rendered invalid UTF-8");
    bool ok = t && tokenize_after_context(srv, t, context, j, e);
    json_decref(t);
    return ok;
}

static bool parse_options(const srv_server *srv, json_t *root, srv_job *j, srv_parse_error *e) {
    json_t *opt = json_object_get(root, "options");
    if (opt && !json_is_null(opt) && !json_is_object(opt)) {
        parse_error_set(e, 400, "options", "'options' must be an object");
        return false;
    }
    if (opt && json_is_null(opt)) opt = NULL;
    if (!parse_sampling(srv, opt, true, &j->sp, e)) return false;
    json_t *np = opt ? json_object_get(opt, "num_predict") : NULL;
    j->max_tokens = -1;  /* Ollama: until the model stops or the context fills */
    if (np && !json_is_null(np)) {
        if (!json_is_integer(np) || json_integer_value(np) < -2 || json_integer_value(np) > (1 << 30)) {
            parse_error_set(e, 400, "num_predict", "'num_predict' must be an integer >= -2 (-1 = no limit)");
            return false;
        }
        j->max_tokens = json_integer_value(np) < 0 ? -1 : (int)json_integer_value(np);
    }
    if (!check_max_tokens(srv, j, e)) return false;
    return parse_stops(opt ? json_object_get(opt, "stop") : NULL, "stop", j, e);
}

/* ---- replies ---------------------------------------------------------------- */

static json_t *context_json(const srv_job *j) {
    json_t *a = json_array();
    for (int i = 0; i < j->n_prompt; i++) json_array_append_new(a, json_integer(j->prompt[i]));
    for (int i = 0; i < j->n_generated_toks; i++) json_array_append_new(a, json_integer(j->generated[i]));
    return a;
}

static json_int_t ns(double s) { return (json_int_t)(s * 1e9); }

static const char *done_reason(const srv_job *j) {
    return j->result.finish == PLM_FINISH_LENGTH || j->result.finish == PLM_FINISH_CONTEXT ? "length" : "stop";
}

/* The generated text under its key: "response", or chat's "message". */
static void set_text(json_t *obj, bool chat, json_t *text) {
    if (!text) text = json_string("");
    if (chat) json_object_set_new(obj, "message", json_pack("{ssso}", "role", "assistant", "content", text));
    else json_object_set_new(obj, "response", text);
}

/* A chat "message": new content (and thinking, tool calls); steals the strings. */
static json_t *chat_message(char *content, char *thinking, json_t *calls) {
    json_t *m = json_pack("{ss}", "role", "assistant");
    json_object_set_new(m, "content", json_text(content ? content : "", content ? strlen(content) : 0));
    if (thinking && *thinking) json_object_set_new(m, "thinking", json_text(thinking, strlen(thinking)));
    if (calls && json_array_size(calls)) {
        json_t *out = json_array();
        size_t i;
        json_t *c;
        json_array_foreach(calls, i, c) json_array_append_new(
            out, json_pack("{s{sOsO}}", "function", "name", json_object_get(c, "name"), "arguments",
                           json_object_get(c, "arguments")));
        json_object_set_new(m, "tool_calls", out);
    }
    free(content);
    free(thinking);
    return m;
}

/* The closing object: done, the reason, the context and the timings. */
static json_t *final_json(const oll_stream *u, const srv_job *j) {
    char at[40];
    iso_time(wall_now(), at);
    double queue_s = j->t_started - j->t_queued;
    json_t *o = json_pack("{sssssbsssIsIsisIsisI}", "model", u->model, "created_at", at, "done", 1, "done_reason",
                          done_reason(j), "total_duration", ns(wall_now() - u->t_start), "load_duration",
                          ns(queue_s > 0 ? queue_s : 0), "prompt_eval_count", j->n_prompt, "prompt_eval_duration",
                          ns(j->result.t_prompt_s), "eval_count", j->result.n_generated, "eval_duration",
                          ns(j->result.t_gen_s));
    if (o && !u->chat) json_object_set_new(o, "context", context_json(j));
    if (o) set_text(o, u->chat, json_string(""));
    return o;
}

static char *ndjson(json_t *obj) {
    char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (!s) return NULL;
    size_t n = strlen(s);
    char *out = realloc(s, n + 2);
    if (!out) {
        free(s);
        return NULL;
    }
    out[n] = '\n';
    out[n + 1] = '\0';
    return out;
}

static char *nd_text(srv_stream *st, const char *text, size_t len) {
    oll_stream *u = st->user;
    char at[40];
    iso_time(wall_now(), at);
    char *content = NULL, *thinking = NULL;
    if (u->chat) {
        if (!chat_split_step(&u->split, text, len, false, &content, &thinking, NULL)) return NULL;
        if (!content && !thinking) return NULL;  /* held back: maybe a marker */
    }
    json_t *o = json_pack("{sssssb}", "model", u->model, "created_at", at, "done", 0);
    if (o && u->chat) json_object_set_new(o, "message", chat_message(content, thinking, NULL));
    else if (o) set_text(o, false, json_text(text, len));
    return ndjson(o);
}

/* Chat's end: the held-back text and the tool calls go in the last message. */
static json_t *chat_final_json(oll_stream *u, const srv_job *j, const char *text, size_t len) {
    char *content = NULL, *thinking = NULL;
    json_t *calls = NULL;
    if (!chat_split_step(&u->split, text, len, true, &content, &thinking, &calls)) return NULL;
    json_t *o = final_json(u, j);
    if (o) json_object_set_new(o, "message", chat_message(content, thinking, calls));
    else {
        free(content);
        free(thinking);
    }
    json_decref(calls);
    return o;
}

static char *nd_final(srv_stream *st) {
    oll_stream *u = st->user;
    if (st->job->status != PLM_OK) return ndjson(json_pack("{ss}", "error", st->job->error));
    return ndjson(u->chat ? chat_final_json(u, st->job, "", 0) : final_json(u, st->job));
}

static const srv_stream_format NDJSON_GENERATE = {nd_text, nd_final, "application/x-ndjson", oll_stream_free};

/* ---- handlers ------------------------------------------------------------------ */

static int generate_reply(srv_request *rq, srv_job *j, bool stream, oll_stream *u) {
    if (!submit_or_reply(rq, API_OLLAMA, j)) {
        oll_stream_free(u);
        return MHD_YES;
    }
    if (stream) return reply_stream(rq, j, &NDJSON_GENERATE, u);
    int ret;
    if (!wait_job(rq, j)) {
        ret = MHD_NO;
    } else if (j->status != PLM_OK) {
        ret = reply_error(rq, API_OLLAMA, j->status == PLM_ERR_ABORTED ? 503 : 500, NULL, "generation failed: %s",
                          j->error);
    } else {
        json_t *out = u->chat ? chat_final_json(u, j, j->text ? j->text : "", j->len) : final_json(u, j);
        if (out && !u->chat) set_text(out, false, json_text(j->text ? j->text : "", j->len));
        ret = out ? reply_json(rq, 200, out) : reply_error(rq, API_OLLAMA, 500, NULL, "out of memory");
    }
    oll_stream_free(u);
    return ret;
}

/* Both endpoints: the prompt is the request's (generate) or the rendered
 * conversation (chat non-NULL: tokenized with its special tokens parsed). */
static int generate_path(srv_request *rq, json_t *root, const srv_chat_prompt *chat) {
    const char *chat_text = chat ? chat->text : NULL;
    srv_parse_error e = {0};
    oll_stream *u = calloc(1, sizeof *u);
    srv_job *j = job_new();
    if (!u || !j) {
        free(u);
        job_unref(j);
        return reply_error(rq, API_OLLAMA, 500, NULL, "out of memory");
    }
    u->t_start = wall_now();
    u->chat = chat_text != NULL;
    if (chat && !chat_split_init(&u->split, chat)) {
        oll_stream_free(u);
        job_unref(j);
        return reply_error(rq, API_OLLAMA, 500, NULL, "out of memory");
    }
    bool stream = true, raw = chat_text != NULL, empty = false;
    bool ok = get_bool(root, "stream", true, &stream, &e) && (u->chat || get_bool(root, "raw", false, &raw, &e));
    json_t *model = json_object_get(root, "model");
    if (ok && !json_is_string(model)) {
        parse_error_set(&e, 400, "model", "'model' is required (a string)");
        ok = false;
    }
    ok = ok && refuse_unsupported(root, &e);
    if (ok && chat_text) {
        json_t *text = json_string(chat_text);
        ok = text && parse_prompt(rq->srv, text, "messages", true, j, &e);
        if (!text) parse_error_set(&e, 500, NULL, "the chat template rendered invalid UTF-8");
        json_decref(text);
    } else if (ok) {
        ok = parse_generate_prompt(rq->srv, root, raw, j, &empty, &e);
    }
    ok = ok && parse_options(rq->srv, root, j, &e);
    if (ok) snprintf(u->model, sizeof u->model, "%s", json_string_value(model));
    int ret;
    if (!ok) {
        oll_stream_free(u);
        ret = reply_error(rq, API_OLLAMA, e.status, e.param, "%s", e.message);
    } else if (empty) {  /* Ollama answers an empty prompt by loading the model */
        char at[40];
        iso_time(wall_now(), at);
        ret = reply_json(rq, 200, json_pack("{sssssssbss}", "model", u->model, "created_at", at, "response", "",
                                            "done", 1, "done_reason", "load"));
        oll_stream_free(u);
    } else {
        ret = generate_reply(rq, j, stream, u);
    }
    job_unref(j);
    return ret;
}

int ollama_generate(srv_request *rq) {
    srv_parse_error e = {0};
    json_t *root = parse_body(rq, &e);
    if (!root) return reply_error(rq, API_OLLAMA, e.status, e.param, "%s", e.message);
    int ret = generate_path(rq, root, NULL);
    json_decref(root);
    return ret;
}

int ollama_chat(srv_request *rq) {
    srv_parse_error e = {0};
    json_t *root = parse_body(rq, &e);
    if (!root) return reply_error(rq, API_OLLAMA, e.status, e.param, "%s", e.message);
    srv_chat_prompt chat;
    int ret;
    if (!chat_render(rq->srv, root, API_OLLAMA, &chat, &e)) {
        ret = reply_error(rq, API_OLLAMA, e.status, e.param, "%s", e.message);
    } else {
        ret = generate_path(rq, root, &chat);
        chat_prompt_free(&chat);
    }
    json_decref(root);
    return ret;
}

static json_t *details_json(const srv_model_info *mi) {
    return json_pack("{sssssss[s]ssss}", "parent_model", "", "format", "gguf", "family", mi->arch, "families", mi->arch,
                     "parameter_size", mi->param_size, "quantization_level", mi->quant);
}

int ollama_tags(srv_request *rq) {
    const srv_model_info *mi = &rq->srv->info;
    char at[40];
    iso_time((double)mi->mtime, at);
    json_t *m = json_pack("{sssssssIssso}", "name", mi->name, "model", mi->name, "modified_at", at, "size",
                          (json_int_t)mi->file_bytes, "digest", mi->digest, "details", details_json(mi));
    return reply_json(rq, 200, json_pack("{s[o]}", "models", m));
}

static bool same_model(const char *asked, const char *name) {
    size_t n = strlen(name);
    return !strcmp(asked, name) || (!strncmp(asked, name, n) && !strcmp(asked + n, ":latest"));
}

int ollama_show(srv_request *rq) {
    srv_parse_error e = {0};
    json_t *root = parse_body(rq, &e);
    if (!root) return reply_error(rq, API_OLLAMA, e.status, e.param, "%s", e.message);
    json_t *m = json_object_get(root, "model");
    if (!m || json_is_null(m)) m = json_object_get(root, "name");  /* older clients */
    const srv_model_info *mi = &rq->srv->info;
    if (!json_is_string(m) || !same_model(json_string_value(m), mi->name)) {
        int ret = json_is_string(m)
                      ? reply_error(rq, API_OLLAMA, 404, "model", "model '%s' not found", json_string_value(m))
                      : reply_error(rq, API_OLLAMA, 400, "model", "'model' is required (a string)");
        json_decref(root);
        return ret;
    }
    json_decref(root);
    const plm_model *model = rq->srv->model;
    json_t *info = json_object();
    char key[96];
    json_object_set_new(info, "general.architecture", json_string(mi->arch));
    json_object_set_new(info, "general.parameter_count", json_integer((json_int_t)plm_model_n_params(model)));
    snprintf(key, sizeof key, "%s.context_length", mi->arch);
    json_object_set_new(info, key, json_integer(plm_model_n_ctx_train(model)));
    snprintf(key, sizeof key, "%s.embedding_length", mi->arch);
    json_object_set_new(info, key, json_integer(plm_model_n_embd(model)));
    snprintf(key, sizeof key, "%s.block_count", mi->arch);
    json_object_set_new(info, key, json_integer(plm_model_n_layer(model)));
    char at[40];
    iso_time((double)mi->mtime, at);
    const srv_chat *chat = &rq->srv->chat;
    json_t *caps = json_pack("[s]", "completion");
    if (chat->format != TC_NONE) json_array_append_new(caps, json_string("tools"));
    if (chat->source && strstr(chat->source, "<think>")) json_array_append_new(caps, json_string("thinking"));
    return reply_json(rq, 200, json_pack("{ssssssssso so so ss}", "license", "", "modelfile", "", "parameters", "",
                                         "template", chat->source ? chat->source : "", "details", details_json(mi),
                                         "model_info", info, "capabilities", caps, "modified_at", at));
}

int ollama_version(srv_request *rq) {
    return reply_json(rq, 200, json_pack("{ss}", "version", PLM_VERSION));
}
