/*
 * Request bodies -> generation jobs.  JSON is parsed by jansson (which
 * rejects invalid UTF-8 and nesting deeper than its limit); every field is
 * checked for its type and range, and an error names the field, as OpenAI's
 * API does ("param").  null counts as absent; unknown fields are ignored,
 * as clients send fields for other servers.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"

void parse_error_set(srv_parse_error *e, unsigned status, const char *param, const char *fmt, ...) {
    e->status = status;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

json_t *parse_body(const srv_request *rq, srv_parse_error *e) {
    json_error_t je;
    json_t *root = json_loadb(rq->body ? rq->body : "", rq->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        const char *what = json_error_code(&je) == json_error_invalid_utf8 ? "not valid UTF-8"
                           : json_error_code(&je) == json_error_stack_overflow ? "nested too deeply"
                                                                                 : "not valid JSON";
        parse_error_set(e, 400, NULL, "the body is %s: %s (line %d, column %d)", what, je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        parse_error_set(e, 400, NULL, "the body must be a JSON object");
        return NULL;
    }
    return root;
}

/* A number field in [lo, hi]; *present false when absent or null. */
static bool get_number(json_t *obj, const char *key, double lo, double hi, double *out, bool *present,
                       srv_parse_error *e) {
    json_t *v = json_object_get(obj, key);
    *present = v && !json_is_null(v);
    if (!*present) return true;
    if (!json_is_number(v)) {
        parse_error_set(e, 400, key, "'%s' must be a number", key);
        return false;
    }
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) {
        parse_error_set(e, 400, key, "'%s' is %g: it must be in [%g, %g]", key, d, lo, hi);
        return false;
    }
    *out = d;
    return true;
}

static bool get_int(json_t *obj, const char *key, long long lo, long long hi, long long *out, bool *present,
                    srv_parse_error *e) {
    json_t *v = json_object_get(obj, key);
    *present = v && !json_is_null(v);
    if (!*present) return true;
    if (!json_is_integer(v)) {
        parse_error_set(e, 400, key, "'%s' must be an integer", key);
        return false;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        parse_error_set(e, 400, key, "'%s' is %lld: it must be in [%lld, %lld]", key, x, lo, hi);
        return false;
    }
    *out = x;
    return true;
}

bool parse_sampling(const srv_server *srv, json_t *obj, bool ollama_names, plm_sampler_params *sp,
                    srv_parse_error *e) {
    *sp = srv->cfg.sampling;
    sp->seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)clock();
    if (!obj) return true;
    double d;
    long long i;
    bool has;
    /* OpenAI's documented ranges; Ollama's options are wider. */
    if (!get_number(obj, "temperature", 0, ollama_names ? 100 : 2, &d, &has, e)) return false;
    if (has) sp->temperature = (float)d;
    if (!get_number(obj, "top_p", 0, 1, &d, &has, e)) return false;
    if (has) sp->top_p = (float)d;
    if (!get_number(obj, "min_p", 0, 1, &d, &has, e)) return false;
    if (has) sp->min_p = (float)d;
    if (!get_int(obj, "top_k", 0, 1 << 30, &i, &has, e)) return false;
    if (has) sp->top_k = (int32_t)i;
    if (!get_number(obj, "presence_penalty", -2, 2, &d, &has, e)) return false;
    if (has) sp->presence_penalty = (float)d;
    if (!get_number(obj, "frequency_penalty", -2, 2, &d, &has, e)) return false;
    if (has) sp->frequency_penalty = (float)d;
    if (!get_number(obj, "repeat_penalty", 1e-6, 100, &d, &has, e)) return false;
    if (has) sp->repeat_penalty = (float)d;
    const char *last_n = ollama_names ? "repeat_last_n" : "penalty_last_n";
    if (!get_int(obj, last_n, -1, 1 << 20, &i, &has, e)) return false;
    if (has) sp->penalty_last_n = (int32_t)i;
    /* OpenAI's seed is any 64-bit integer; Ollama's may be -1 for random. */
    json_t *seed = json_object_get(obj, "seed");
    if (seed && !json_is_null(seed)) {
        if (!json_is_integer(seed)) {
            parse_error_set(e, 400, "seed", "'seed' must be an integer");
            return false;
        }
        if (!(ollama_names && json_integer_value(seed) < 0)) sp->seed = (uint64_t)json_integer_value(seed);
    }
    plm_error err;
    if (plm_sampler_params_check(sp, &err)) {
        parse_error_set(e, 400, NULL, "%s", err.message);
        return false;
    }
    return true;
}

bool parse_stops(json_t *v, const char *field, srv_job *j, srv_parse_error *e) {
    if (!v || json_is_null(v)) return true;
    int n = json_is_string(v) ? 1 : json_is_array(v) ? (int)json_array_size(v) : -1;
    if (n < 0) {
        parse_error_set(e, 400, field, "'%s' must be a string or an array of strings", field);
        return false;
    }
    if (n > 16) {
        parse_error_set(e, 400, field, "'%s' has %d strings: at most 16", field, n);
        return false;
    }
    j->stops = calloc((size_t)(n ? n : 1), sizeof *j->stops);
    if (!j->stops) {
        parse_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    for (int i = 0; i < n; i++) {
        json_t *s = json_is_string(v) ? v : json_array_get(v, (size_t)i);
        if (!json_is_string(s)) {
            parse_error_set(e, 400, field, "'%s' must hold strings only", field);
            return false;
        }
        if (json_string_length(s) > 1024) {
            parse_error_set(e, 400, field, "'%s': a stop string is longer than 1024 bytes", field);
            return false;
        }
        j->stops[j->n_stops] = strdup(json_string_value(s));
        if (!j->stops[j->n_stops]) {
            parse_error_set(e, 500, NULL, "out of memory");
            return false;
        }
        j->n_stops++;
    }
    return true;
}

static int max_prompt(const srv_server *srv) {
    int n_ctx = (int)sched_n_ctx(srv->sched);
    int lim = n_ctx - 1;  /* one position left to generate into */
    if (srv->cfg.max_prompt_tokens > 0 && srv->cfg.max_prompt_tokens < lim) lim = srv->cfg.max_prompt_tokens;
    return lim;
}

static bool prompt_from_ids(const srv_server *srv, json_t *v, const char *field, srv_job *j, srv_parse_error *e) {
    size_t n = json_array_size(v);
    if ((long long)n > max_prompt(srv)) {
        parse_error_set(e, 400, field, "'%s' has %zu tokens: at most %d fit", field, n, max_prompt(srv));
        return false;
    }
    j->prompt = malloc((n ? n : 1) * sizeof *j->prompt);
    if (!j->prompt) {
        parse_error_set(e, 500, NULL, "out of memory");
        return false;
    }
    int n_vocab = plm_model_n_vocab(srv->model);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(v, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= n_vocab) {
            parse_error_set(e, 400, field, "'%s'[%zu] must be a token id in [0, %d]", field, i, n_vocab - 1);
            return false;
        }
        j->prompt[i] = (plm_token)json_integer_value(t);
    }
    j->n_prompt = (int)n;
    return true;
}

bool parse_prompt(const srv_server *srv, json_t *v, const char *field, bool add_special, srv_job *j,
                  srv_parse_error *e) {
    if (json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0))) v = json_array_get(v, 0);
    if (json_is_array(v) && json_array_size(v) > 0 && json_is_string(json_array_get(v, 0))) {
        parse_error_set(e, 400, field, "'%s': one prompt per request", field);
        return false;
    }
    if (json_is_array(v)) {
        if (!prompt_from_ids(srv, v, field, j, e)) return false;
    } else if (json_is_string(v)) {
        j->prompt = plm_tokenize_alloc(srv->model, json_string_value(v), json_string_length(v), &j->n_prompt,
                                       add_special, true);
        if (!j->prompt) {
            parse_error_set(e, 500, NULL, "the prompt could not be tokenized (out of memory)");
            return false;
        }
    } else {
        parse_error_set(e, 400, field, "'%s' must be a string or an array of token ids", field);
        return false;
    }
    if (j->n_prompt < 1) {
        parse_error_set(e, 400, field, "'%s' is empty", field);
        return false;
    }
    if (j->n_prompt > max_prompt(srv)) {
        parse_error_set(e, 400, field, "'%s' has %d tokens: at most %d fit the context (%u)", field, j->n_prompt,
                        max_prompt(srv), sched_n_ctx(srv->sched));
        return false;
    }
    return true;
}

bool check_max_tokens(const srv_server *srv, srv_job *j, srv_parse_error *e) {
    int lim = srv->cfg.max_tokens > 0 ? srv->cfg.max_tokens : (int)sched_n_ctx(srv->sched);
    if (j->max_tokens > lim) {
        parse_error_set(e, 400, "max_tokens", "max_tokens is %d: this server allows at most %d", j->max_tokens, lim);
        return false;
    }
    if (j->max_tokens < 0) j->max_tokens = lim;
    return true;
}
