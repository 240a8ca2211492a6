/*
 * Ollama's `template` field of POST /api/generate: a Go text/template in
 * the simple form prompt templates take (Ollama's Modelfile TEMPLATE before
 * it grew .Messages):
 *
 *   {{ .System }}  {{ .Prompt }}  {{ .Response }}
 *   {{ if .System }} ... {{ else }} ... {{ end }}    (on any of the three)
 *   {{- and -}}    trim the whitespace before / after the action
 *   comments       {{ followed by slash-star ... star-slash }}
 *
 * A value is true when it is not empty, as in Go.  As Ollama does, the
 * template ends at {{ .Response }}: the prompt stops where the reply begins
 * (what came after it would close the reply).  Anything else is refused
 * with a message naming what is supported: there is no Go template engine
 * here, and a half-understood template would silently give a wrong prompt.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

#define MAX_DEPTH 16

typedef struct go_out {
    char *s;
    size_t len, cap;
} go_out;

static bool put(go_out *o, const char *s, size_t n) {
    if (o->len + n + 1 > o->cap) {
        size_t c = o->cap ? o->cap * 2 : 256;
        while (c < o->len + n + 1) c *= 2;
        char *ns = realloc(o->s, c);
        if (!ns) return false;
        o->s = ns;
        o->cap = c;
    }
    memcpy(o->s + o->len, s, n);
    o->len += n;
    o->s[o->len] = '\0';
    return true;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* The value of ".System", ".Prompt" or ".Response" (""); NULL for another name. */
static const char *field(const char *name, size_t n, const char *system, const char *prompt) {
    if (n == 7 && !memcmp(name, ".System", 7)) return system;
    if (n == 7 && !memcmp(name, ".Prompt", 7)) return prompt;
    if (n == 9 && !memcmp(name, ".Response", 9)) return "";
    return NULL;
}

/* One level of {{ if }}: its condition and whether {{ else }} was seen. */
typedef struct go_if {
    bool cond, in_else;
} go_if;

static bool emitting(const go_if *stack, int depth) {
    for (int i = 0; i < depth; i++)
        if (stack[i].cond == stack[i].in_else) return false;
    return true;
}

static bool unsupported(srv_parse_error *e, const char *what, size_t n) {
    parse_error_set(e, 400, "template",
                    "'template': {{%.*s}} is not supported here: only {{ .System }}, {{ .Prompt }}, {{ .Response }} "
                    "and {{ if .X }}/{{ else }}/{{ end }} on them",
                    (int)(n < 80 ? n : 80), what);
    return false;
}

bool go_template_render(const char *tmpl, const char *system, const char *prompt, char **out, srv_parse_error *e) {
    go_out o = {0};
    go_if stack[MAX_DEPTH];
    int depth = 0;
    bool trim_next = false, ok = put(&o, "", 0);
    const char *p = tmpl;
    while (ok) {
        const char *open = strstr(p, "{{");
        size_t text_len = open ? (size_t)(open - p) : strlen(p);
        const char *text = p;
        if (trim_next)
            while (text_len && is_space(*text)) text++, text_len--;
        if (!open) {
            if (emitting(stack, depth)) ok = put(&o, text, text_len);
            if (depth) {
                parse_error_set(e, 400, "template", "'template': an {{ if }} has no {{ end }}");
                ok = false;
            }
            break;
        }
        const char *a = open + 2;
        if (a[0] == '-' && is_space(a[1]))  /* "{{- ": trims the text before */
            while (text_len && is_space(text[text_len - 1])) text_len--;
        if (emitting(stack, depth) && !(ok = put(&o, text, text_len))) break;
        const char *close = strstr(a, "}}");
        if (!close) {
            parse_error_set(e, 400, "template", "'template': a {{ has no }}");
            ok = false;
            break;
        }
        const char *end = close;
        if (a[0] == '-' && is_space(a[1])) a++;
        trim_next = end - a >= 2 && end[-1] == '-' && is_space(end[-2]);
        if (trim_next) end--;
        while (a < end && is_space(*a)) a++;
        while (end > a && is_space(end[-1])) end--;
        const size_t n = (size_t)(end - a);
        p = close + 2;
        const char *v;
        if (n >= 4 && !memcmp(a, "/*", 2) && !memcmp(end - 2, "*/", 2)) {
            continue;  /* a comment */
        } else if (n == 9 && !memcmp(a, ".Response", 9)) {
            break;  /* the reply starts here: the prompt ends */
        } else if ((v = field(a, n, system, prompt))) {
            if (emitting(stack, depth)) ok = put(&o, v, strlen(v));
        } else if (n > 3 && !memcmp(a, "if", 2) && is_space(a[2])) {
            const char *name = a + 3;
            while (is_space(*name)) name++;
            if (!(v = field(name, (size_t)(end - name), system, prompt))) {
                ok = unsupported(e, a, n);
                break;
            }
            if (depth == MAX_DEPTH) {
                parse_error_set(e, 400, "template", "'template': {{ if }} nested deeper than %d", MAX_DEPTH);
                ok = false;
                break;
            }
            stack[depth++] = (go_if){.cond = *v != '\0', .in_else = false};
        } else if (n == 4 && !memcmp(a, "else", 4) && depth && !stack[depth - 1].in_else) {
            stack[depth - 1].in_else = true;
        } else if (n == 3 && !memcmp(a, "end", 3) && depth) {
            depth--;
        } else {
            ok = unsupported(e, a, n);
            break;
        }
    }
    if (!ok) {
        if (!e->status) parse_error_set(e, 500, NULL, "out of memory");
        free(o.s);
        return false;
    }
    *out = o.s;
    return true;
}
