/*
 * Splitting a chat model's output into content, reasoning and tool calls
 * (tool_calls.h).  The JSON inside a call is parsed by jansson; everything
 * else is plain string search, since the markers are fixed text.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "server/tool_calls.h"

#define THINK_OPEN "<think>"
#define THINK_CLOSE "</think>"
#define HERMES_OPEN "<tool_call>"
#define HERMES_CLOSE "</tool_call>"
#define PYTHON_TAG "<|python_tag|>"

tc_format tc_format_of_template(const char *source) {
    if (!source) return TC_NONE;
    if (strstr(source, HERMES_OPEN)) return TC_HERMES;
    if (strstr(source, PYTHON_TAG) || (strstr(source, "<|start_header_id|>") && strstr(source, "tools")))
        return TC_LLAMA3;
    return TC_NONE;
}

/* ---- small helpers -------------------------------------------------------- */

static const char *find(const char *s, const char *end, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = s; p + n <= end; p++)
        if (!memcmp(p, needle, n)) return p;
    return NULL;
}

static bool starts_with(const char *s, const char *end, const char *prefix) {
    size_t n = strlen(prefix);
    return (size_t)(end - s) >= n && !memcmp(s, prefix, n);
}

/* s..end is a proper, non-empty prefix of `marker`: more text may complete it. */
static bool is_partial_marker(const char *s, const char *end, const char *marker) {
    size_t n = (size_t)(end - s);
    return n > 0 && n < strlen(marker) && !memcmp(s, marker, n);
}

/* Bytes at the end of s..end that could begin `marker`. */
static size_t marker_tail(const char *s, const char *end, const char *marker) {
    size_t m = strlen(marker), n = (size_t)(end - s);
    for (size_t k = m - 1 < n ? m - 1 : n; k > 0; k--)
        if (!memcmp(end - k, marker, k)) return k;
    return 0;
}

static const char *skip_space(const char *s, const char *end) {
    while (s < end && isspace((unsigned char)*s)) s++;
    return s;
}

static const char *trim_end(const char *s, const char *end) {
    while (end > s && isspace((unsigned char)end[-1])) end--;
    return end;
}

static char *dup_range(const char *s, const char *end) {
    size_t n = end > s ? (size_t)(end - s) : 0;
    char *out = malloc(n + 1);
    if (!out) return NULL;
    memcpy(out, s, n);
    out[n] = '\0';
    return out;
}

/* ---- one call --------------------------------------------------------------- */

/* {"name": N, ARGS_KEY: {...}} -> {"name", "arguments"}; NULL when it is not
 * a call.  Arguments given as a JSON string holding an object are accepted
 * (some fine-tunes write them so). */
static json_t *call_from_json(json_t *obj) {
    if (!json_is_object(obj)) return NULL;
    json_t *name = json_object_get(obj, "name");
    if (!json_is_string(name) || !json_string_length(name)) return NULL;
    json_t *args = json_object_get(obj, "arguments");
    if (!args) args = json_object_get(obj, "parameters");
    if (json_is_string(args)) args = json_loads(json_string_value(args), 0, NULL);
    else if (!args || json_is_null(args)) args = json_object();
    else json_incref(args);
    if (!json_is_object(args)) {
        json_decref(args);
        return NULL;
    }
    return json_pack("{sOso}", "name", name, "arguments", args);
}

/* ---- the formats -------------------------------------------------------------- */

/* Hermes: <tool_call>JSON</tool_call> ... from `first`; NULL when any is
 * malformed.  *after: the text following the last call. */
static json_t *parse_hermes_calls(const char *first, const char *end, const char **after) {
    json_t *calls = json_array();
    const char *q = first;
    while (calls && starts_with(q, end, HERMES_OPEN)) {
        q += strlen(HERMES_OPEN);
        const char *close = find(q, end, HERMES_CLOSE);
        const char *body_end = close ? close : end;  /* an unclosed last call: its JSON may be whole */
        json_t *obj = json_loadb(q, (size_t)(body_end - q), 0, NULL);
        json_t *call = call_from_json(obj);
        json_decref(obj);
        if (!call) {
            json_decref(calls);
            return NULL;
        }
        json_array_append_new(calls, call);
        q = skip_space(close ? close + strlen(HERMES_CLOSE) : end, end);
    }
    *after = q;
    return calls;
}

/* Llama 3.x: [<|python_tag|>]{...}[; {...}]*, nothing else; NULL otherwise. */
static json_t *parse_llama3_calls(const char *s, const char *end) {
    json_t *calls = json_array();
    while (calls && s < end) {
        json_error_t je;
        json_t *obj = json_loadb(s, (size_t)(end - s), JSON_DISABLE_EOF_CHECK, &je);
        json_t *call = call_from_json(obj);
        json_decref(obj);
        if (!call) {
            json_decref(calls);
            return NULL;
        }
        json_array_append_new(calls, call);
        s = skip_space(s + je.position, end);
        if (s < end && *s == ';') s = skip_space(s + 1, end);
    }
    return calls;
}

/* Content s..end (reasoning already taken) -> out->content and out->calls. */
static bool split_calls(const char *s, const char *end, tc_format fmt, bool partial, tc_result *out) {
    const char *content_end = end;
    if (fmt == TC_HERMES) {
        const char *open = find(s, end, HERMES_OPEN);
        if (open && partial) {
            content_end = trim_end(s, open);
        } else if (open) {
            const char *after;
            out->calls = parse_hermes_calls(open, end, &after);
            if (out->calls) {
                /* the text around the calls is the content */
                const char *pre_end = trim_end(s, open);
                size_t a = (size_t)(pre_end - s), b = (size_t)(trim_end(after, end) - after);
                out->content = malloc(a + b + 2);
                if (!out->content) return false;
                memcpy(out->content, s, a);
                size_t n = a;
                if (a && b) out->content[n++] = '\n';
                memcpy(out->content + n, after, b);
                out->content[n + b] = '\0';
                return true;
            }
        } else if (partial) {
            content_end = end - marker_tail(s, end, HERMES_OPEN);
        }
    } else if (fmt == TC_LLAMA3) {
        const char *r = skip_space(s, end);
        bool tagged = starts_with(r, end, PYTHON_TAG);
        if (tagged) r = skip_space(r + strlen(PYTHON_TAG), end);
        if (partial && (is_partial_marker(r, end, PYTHON_TAG) || tagged || (r < end && *r == '{'))) {
            content_end = s;  /* maybe a call: wait for all of it */
        } else if (!partial && r < end && *r == '{') {
            out->calls = parse_llama3_calls(r, end);
            if (out->calls) content_end = s;
        }
    }
    if (partial) content_end = trim_end(s, content_end);  /* trailing space may precede a marker */
    out->content = dup_range(s, content_end);
    return out->content != NULL;
}

/* ---- reasoning and the whole ------------------------------------------------ */

bool tc_parse(const char *text, size_t len, tc_format fmt, bool think_open, bool partial, tc_result *out) {
    memset(out, 0, sizeof *out);
    const char *s = text, *end = text + len;
    const char *r0 = NULL;  /* where reasoning starts */
    const char *lead = skip_space(s, end);
    if (think_open) {
        r0 = s;
    } else if (starts_with(lead, end, THINK_OPEN)) {
        r0 = lead + strlen(THINK_OPEN);
    } else if (partial && (lead == end || is_partial_marker(lead, end, THINK_OPEN))) {
        out->content = dup_range(s, s);  /* maybe the start of <think>: wait */
        return out->content != NULL;
    }
    if (r0) {
        r0 = skip_space(r0, end);
        const char *close = find(r0, end, THINK_CLOSE);
        const char *r1 = close ? close : partial ? end - marker_tail(r0, end, THINK_CLOSE) : end;
        r1 = trim_end(r0, r1);
        out->reasoning = dup_range(r0, r1);
        if (!out->reasoning) return false;
        s = close ? skip_space(close + strlen(THINK_CLOSE), end) : end;
    }
    if (!split_calls(s, end, fmt, partial, out)) {
        tc_result_free(out);
        return false;
    }
    return true;
}

void tc_result_free(tc_result *r) {
    free(r->content);
    free(r->reasoning);
    json_decref(r->calls);
    memset(r, 0, sizeof *r);
}
