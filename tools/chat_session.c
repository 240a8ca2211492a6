/* The conversation and its KV reuse (chat_session.h says what it does). */
#include "chat_session.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool fail(plm_error *err, plm_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    err->code = code;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return false;
}

static json_t *message(const char *role, const char *content) {
    return json_pack("{s:s, s:s}", "role", role, "content", content);
}

static bool has_system(const chat_session *s) {
    json_t *first = json_array_get(s->messages, 0);
    const char *role = json_string_value(json_object_get(first, "role"));
    return role && !strcmp(role, "system");
}

void chat_session_init(chat_session *s, plm_model *model, plm_context *ctx, const plm_chat_template *tmpl,
                       const char *system_prompt) {
    memset(s, 0, sizeof *s);
    s->model = model;
    s->ctx = ctx;
    s->tmpl = tmpl;
    s->messages = json_array();
    if (system_prompt && *system_prompt) json_array_append_new(s->messages, message("system", system_prompt));
}

void chat_session_free(chat_session *s) {
    json_decref(s->messages);
    free(s->cached);
}

void chat_session_clear(chat_session *s) {
    while (json_array_size(s->messages) > (has_system(s) ? 1u : 0u))
        json_array_remove(s->messages, json_array_size(s->messages) - 1);
    plm_kv_truncate(s->ctx, 0);
}

/* The whole conversation as the model's prompt tokens.  A template that
 * writes the BOS text itself gets no second BOS from the tokenizer. */
static plm_token *render_tokens(const chat_session *s, int *n, plm_error *err) {
    char *msgs = json_dumps(s->messages, JSON_COMPACT);
    if (!msgs) return fail(err, PLM_ERR_NOMEM, "out of memory"), NULL;
    plm_chat_params cp = {.messages_json = msgs, .add_generation_prompt = true, .bos_token = s->bos,
                          .eos_token = s->eos, .vars_json = s->vars_json};
    char *text;
    size_t len;
    plm_status st = plm_chat_render(s->tmpl, &cp, &text, &len, err);
    free(msgs);
    if (st) return NULL;
    bool bos_written = s->bos && *s->bos && !strncmp(text, s->bos, strlen(s->bos));
    plm_token *toks = plm_tokenize_alloc(s->model, text, len, n, !bos_written, true);
    free(text);
    if (!toks) fail(err, PLM_ERR_NOMEM, "tokenization failed");
    return toks;
}

/* Drops the oldest user message and its answer (never the system prompt). */
static int drop_oldest_turn(chat_session *s) {
    size_t first = has_system(s) ? 1 : 0;
    int dropped = 0;
    if (json_array_size(s->messages) <= first + 1) return 0;  /* only the new message left */
    json_array_remove(s->messages, first);
    dropped++;
    const char *role = json_string_value(json_object_get(json_array_get(s->messages, first), "role"));
    if (role && strcmp(role, "user") && json_array_size(s->messages) > first + 1) {
        json_array_remove(s->messages, first);
        dropped++;
    }
    return dropped;
}

/* Renders the conversation, dropping the oldest turns until the prompt and
 * room for an answer fit the context. */
static plm_token *fit_conversation(chat_session *s, int *n, chat_turn_stats *stats, plm_error *err) {
    uint32_t n_ctx = plm_context_n_ctx(s->ctx);
    for (;;) {
        plm_token *toks = render_tokens(s, n, err);
        if (!toks) return NULL;
        if ((uint32_t)(*n + s->reserve) < n_ctx) return toks;
        int d = drop_oldest_turn(s);
        if (d == 0) {
            if ((uint32_t)*n + 1 < n_ctx) return toks;  /* fits, with less room to answer */
            free(toks);
            fail(err, PLM_ERR_CONTEXT_FULL, "the conversation needs %d tokens but the context holds %u; use a larger -c",
                 *n, n_ctx);
            return NULL;
        }
        free(toks);
        stats->n_dropped += d;
    }
}

static int common_prefix(const plm_token *a, int na, const plm_token *b, int nb) {
    int i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

typedef struct turn_capture {
    chat_session *s;
    plm_piece_cb on_piece;
    void *user;
    plm_token_cb on_token;
    char *text;
    size_t len, cap;
    int n_cached;  /* tokens written to s->cached so far */
} turn_capture;

static bool capture_piece(void *u, const char *text, size_t len) {
    turn_capture *c = u;
    if (c->len + len + 1 > c->cap) {
        size_t cap = (c->len + len + 1) * 2;
        char *t = realloc(c->text, cap);
        if (!t) return false;
        c->text = t;
        c->cap = cap;
    }
    memcpy(c->text + c->len, text, len);
    c->len += len;
    c->text[c->len] = '\0';
    return c->on_piece(c->user, text, len);
}

static bool reserve_cached(chat_session *s, int n) {
    if (n <= s->cap_cached) return true;
    int cap = n * 2 + 64;
    plm_token *t = realloc(s->cached, (size_t)cap * sizeof *t);
    if (!t) return false;
    s->cached = t;
    s->cap_cached = cap;
    return true;
}

/* Records each sampled token: it enters the cache when evaluated. */
static bool capture_token(void *u, plm_token t, const float *logits) {
    turn_capture *c = u;
    if (!reserve_cached(c->s, c->n_cached + 1)) return false;
    c->s->cached[c->n_cached++] = t;
    return c->on_token ? c->on_token(c->user, t, logits) : true;
}

bool chat_session_turn(chat_session *s, const char *user_text, plm_sampler *smp, plm_generate_params gp,
                       plm_piece_cb on_piece, plm_generate_result *res, chat_turn_stats *stats, plm_error *err) {
    memset(stats, 0, sizeof *stats);
    json_array_append_new(s->messages, message("user", user_text));
    int n = 0;
    plm_token *toks = fit_conversation(s, &n, stats, err);
    if (toks && n == 0) {
        free(toks);
        toks = NULL;
        fail(err, PLM_ERR_INVALID_ARG, "the template rendered an empty prompt");
    }
    if (!toks || !reserve_cached(s, n)) {
        json_array_remove(s->messages, json_array_size(s->messages) - 1);
        free(toks);
        return toks ? fail(err, PLM_ERR_NOMEM, "out of memory") : false;
    }
    /* Keep the cached prefix, but evaluate at least the last token: its
     * logits start the answer. */
    int keep = common_prefix(s->cached, (int)plm_context_n_past(s->ctx), toks, n);
    if (keep >= n) keep = n - 1;
    plm_kv_truncate(s->ctx, (uint32_t)keep);
    memcpy(s->cached, toks, (size_t)n * sizeof *toks);
    plm_sampler_reset(smp);
    for (int i = 0; i < keep; i++) plm_sampler_accept(smp, toks[i]);

    turn_capture c = {.s = s, .on_piece = on_piece, .user = gp.user, .on_token = gp.on_token, .n_cached = n};
    gp.on_token = capture_token;
    gp.user = &c;
    gp.ctx_shift = false;  /* compaction happens between turns, on whole messages */
    plm_status st = plm_generate(s->ctx, toks + keep, n - keep, smp, &gp, capture_piece, res, err);
    free(toks);
    stats->n_prompt = n;
    stats->n_reused = keep;
    stats->n_evaluated = st ? 0 : res->n_prompt;
    if (st) {
        free(c.text);
        json_array_remove(s->messages, json_array_size(s->messages) - 1);
        plm_kv_truncate(s->ctx, (uint32_t)keep);
        return false;
    }
    /* A speculative step may have evaluated accepted tokens past the last one
     * the answer took: the cache keeps only what s->cached records. */
    if (plm_context_n_past(s->ctx) > (uint32_t)c.n_cached) plm_kv_truncate(s->ctx, (uint32_t)c.n_cached);
    json_array_append_new(s->messages, message("assistant", c.text ? c.text : ""));
    free(c.text);
    return true;
}

/* ---- /save and /load ---------------------------------------------------- */

#define SAVE_FORMAT "pocketlm-chat"
#define SAVE_VERSION 1

/* The KV cache goes beside the history, in PATH.kv. */
static char *kv_path(const char *path) {
    size_t n = strlen(path) + 4;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s.kv", path);
    return p;
}

static bool save_kv(const chat_session *s, const char *path, plm_error *err) {
    char *kp = kv_path(path);
    if (!kp) return fail(err, PLM_ERR_NOMEM, "out of memory");
    plm_status st = plm_context_state_save(s->ctx, kp, s->cached, (int)plm_context_n_past(s->ctx), err);
    free(kp);
    return st == PLM_OK;
}

bool chat_session_save(const chat_session *s, const char *path, plm_error *err) {
    json_t *doc = json_pack("{s:s, s:i, s:s, s:i, s:O}", "format", SAVE_FORMAT, "version", SAVE_VERSION, "model",
                            plm_model_name(s->model), "n_vocab", plm_model_n_vocab(s->model), "messages",
                            s->messages);
    if (!doc) return fail(err, PLM_ERR_NOMEM, "out of memory");
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (!tmp) {
        json_decref(doc);
        return fail(err, PLM_ERR_NOMEM, "out of memory");
    }
    snprintf(tmp, tlen, "%s.tmp.%d", path, (int)getpid());
    /* A crash mid-write leaves the old file whole: write aside, then rename. */
    bool ok = json_dump_file(doc, tmp, JSON_INDENT(1)) == 0 && rename(tmp, path) == 0;
    if (!ok) {
        unlink(tmp);
        fail(err, PLM_ERR_IO, "cannot write %s", path);
    }
    free(tmp);
    json_decref(doc);
    return ok && save_kv(s, path, err);
}

static bool valid_messages(const json_t *msgs) {
    size_t i;
    json_t *m;
    if (!json_is_array(msgs)) return false;
    json_array_foreach(msgs, i, m) {
        if (!json_is_string(json_object_get(m, "role")) || !json_is_string(json_object_get(m, "content")))
            return false;
    }
    return true;
}

bool chat_session_load(chat_session *s, const char *path, plm_error *err) {
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc) return fail(err, PLM_ERR_FORMAT, "%s: line %d: %s", path, je.line, je.text);
    const char *format = json_string_value(json_object_get(doc, "format"));
    json_t *msgs = json_object_get(doc, "messages");
    bool ok = false;
    if (!format || strcmp(format, SAVE_FORMAT))
        fail(err, PLM_ERR_FORMAT, "%s is not a pocketlm chat file", path);
    else if (json_integer_value(json_object_get(doc, "version")) != SAVE_VERSION)
        fail(err, PLM_ERR_UNSUPPORTED, "%s: unsupported version", path);
    else if (json_integer_value(json_object_get(doc, "n_vocab")) != plm_model_n_vocab(s->model) ||
             strcmp(json_string_value(json_object_get(doc, "model")) ? json_string_value(json_object_get(doc, "model"))
                                                                       : "",
                    plm_model_name(s->model)))
        fail(err, PLM_ERR_INVALID_ARG, "%s was saved with another model", path);
    else if (!valid_messages(msgs))
        fail(err, PLM_ERR_FORMAT, "%s: messages must be [{\"role\": string, \"content\": string}, ...]", path);
    else {
        json_decref(s->messages);
        s->messages = json_deep_copy(msgs);
        ok = s->messages != NULL;
        if (!ok) {
            s->messages = json_array();
            fail(err, PLM_ERR_NOMEM, "out of memory");
        }
    }
    json_decref(doc);
    return ok;
}

bool chat_session_load_kv(chat_session *s, const char *path, plm_error *err) {
    char *kp = kv_path(path);
    int cap = (int)plm_context_n_ctx(s->ctx), n = 0;
    if (!kp || !reserve_cached(s, cap)) {
        free(kp);
        return fail(err, PLM_ERR_NOMEM, "out of memory");
    }
    plm_status st = plm_context_state_load(s->ctx, kp, s->cached, cap, &n, err);
    free(kp);
    return st == PLM_OK;
}
