/* Jinja runtime values: the arena, constructors, maps, truthiness, and the
 * ways a value turns into text (output, concatenation, JSON). */
#include "chat/value.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/text.h"

/* ---- arena ----------------------------------------------------------- */

typedef struct jchunk {
    struct jchunk *next;
    size_t used, size;
    max_align_t data[];
} jchunk;

struct jarena {
    jchunk *head;
    size_t total, cap;
    bool exhausted;
};

enum { JARENA_CHUNK = 64 * 1024 };

jarena *jarena_new(size_t cap_bytes) {
    jarena *a = calloc(1, sizeof *a);
    if (a) a->cap = cap_bytes;
    return a;
}

void jarena_free(jarena *a) {
    if (!a) return;
    for (jchunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

bool jarena_exhausted(const jarena *a) { return a->exhausted; }

void *jarena_alloc(jarena *a, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (n == 0) n = sizeof(max_align_t);
    jchunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t size = n > JARENA_CHUNK / 2 ? n : JARENA_CHUNK;
        if (a->exhausted || size > a->cap || a->total > a->cap - size) {
            a->exhausted = true;
            return NULL;
        }
        jchunk *fresh = malloc(sizeof *fresh + size);
        if (!fresh) {
            a->exhausted = true;
            return NULL;
        }
        fresh->used = 0;
        fresh->size = size;
        a->total += size;
        if (size == n && c) {  /* a big block: keep filling the current chunk */
            fresh->next = c->next;
            c->next = fresh;
        } else {
            fresh->next = c;
            a->head = fresh;
        }
        c = fresh;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

void jbuf_init(jbuf *b, jarena *a, size_t limit) {
    memset(b, 0, sizeof *b);
    b->a = a;
    b->limit = limit;
}

bool jbuf_add(jbuf *b, const char *s, size_t n) {
    if (b->failed) return false;
    if (n == 0 && b->s) return true;  /* an empty add still gives b->s a "" to point at */
    if (b->limit && (n > b->limit || b->n > b->limit - n)) {
        b->failed = true;
        return false;
    }
    if (b->cap - b->n < n + 1) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *s2 = jarena_alloc(b->a, cap);
        if (!s2) {
            b->failed = true;
            return false;
        }
        if (b->n) memcpy(s2, b->s, b->n);
        b->s = s2;
        b->cap = cap;
    }
    if (n) memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
    return true;
}

bool jbuf_adds(jbuf *b, const char *s) { return jbuf_add(b, s, strlen(s)); }
bool jbuf_addc(jbuf *b, char c) { return jbuf_add(b, &c, 1); }

/* ---- constructors ---------------------------------------------------- */

static jv undefined_value = {.type = JV_UNDEFINED};
static jv none_value = {.type = JV_NONE};
static jv true_value = {.type = JV_BOOL, .u.b = true};
static jv false_value = {.type = JV_BOOL, .u.b = false};

/* The shared singletons are never written: a cast keeps the API uniform. */
jv *jv_undefined(void) { return &undefined_value; }
jv *jv_none(void) { return &none_value; }
jv *jv_bool(bool b) { return b ? &true_value : &false_value; }

static jv *jv_new(jarena *a, jv_type t) {
    jv *v = jarena_alloc(a, sizeof *v);
    if (v) v->type = t;
    return v;
}

jv *jv_int(jarena *a, int64_t i) {
    jv *v = jv_new(a, JV_INT);
    if (v) v->u.i = i;
    return v;
}

jv *jv_float(jarena *a, double f) {
    jv *v = jv_new(a, JV_FLOAT);
    if (v) v->u.f = f;
    return v;
}

jv *jv_str_own(jarena *a, const char *s, size_t n) {
    jv *v = jv_new(a, JV_STRING);
    if (!v) return NULL;
    v->u.str.s = s;
    v->u.str.n = n;
    return v;
}

jv *jv_str(jarena *a, const char *s, size_t n) {
    char *copy = jarena_alloc(a, n + 1);
    if (!copy) return NULL;
    if (n) memcpy(copy, s, n);
    return jv_str_own(a, copy, n);
}

jv *jv_cstr(jarena *a, const char *s) { return jv_str(a, s, strlen(s)); }

jv *jv_array(jarena *a, size_t n) {
    jv *v = jv_new(a, JV_ARRAY);
    if (!v) return NULL;
    if (n) {
        if (n > SIZE_MAX / sizeof(jv *)) return NULL;
        v->u.arr.items = jarena_alloc(a, n * sizeof(jv *));
        if (!v->u.arr.items) return NULL;
    }
    v->u.arr.n = n;
    return v;
}

jobj *jobj_new(jarena *a) { return jarena_alloc(a, sizeof(jobj)); }

jv *jv_object(jarena *a) {
    jv *v = jv_new(a, JV_OBJECT);
    if (v && !(v->u.obj = jobj_new(a))) return NULL;
    return v;
}

jv *jv_namespace(jarena *a) {
    jv *v = jv_new(a, JV_NAMESPACE);
    if (v && !(v->u.obj = jobj_new(a))) return NULL;
    return v;
}

jv *jv_func(jarena *a, jfunc *fn) {
    jv *v = jv_new(a, JV_FUNCTION);
    if (v) v->u.fn = fn;
    return v;
}

/* ---- maps ------------------------------------------------------------ */

static uint32_t hash_key(const char *k, size_t n) {
    uint32_t h = 2166136261u;  /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 16777619u;
    return h;
}

static long find_slot(const jobj *o, const char *k, size_t n) {
    if (o->index_cap == 0) {
        for (size_t i = 0; i < o->n; i++)
            if (o->key_lens[i] == n && !memcmp(o->keys[i], k, n)) return (long)i;
        return -1;
    }
    size_t mask = o->index_cap - 1;
    for (size_t s = hash_key(k, n) & mask;; s = (s + 1) & mask) {
        uint32_t e = o->index[s];
        if (!e) return -1;
        if (o->key_lens[e - 1] == n && !memcmp(o->keys[e - 1], k, n)) return (long)(e - 1);
    }
}

jv *jobj_get(const jobj *o, const char *k, size_t n) {
    long i = find_slot(o, k, n);
    return i < 0 ? NULL : o->vals[i];
}

static bool reindex(jarena *a, jobj *o, size_t cap) {
    uint32_t *index = jarena_alloc(a, cap * sizeof *index);
    if (!index) return false;
    for (size_t i = 0; i < o->n; i++) {
        size_t s = hash_key(o->keys[i], o->key_lens[i]) & (cap - 1);
        while (index[s]) s = (s + 1) & (cap - 1);
        index[s] = (uint32_t)(i + 1);
    }
    o->index = index;
    o->index_cap = cap;
    return true;
}

bool jobj_set(jarena *a, jobj *o, const char *k, size_t n, jv *v) {
    long i = find_slot(o, k, n);
    if (i >= 0) {
        o->vals[i] = v;
        return true;
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 8;
        if (cap > UINT32_MAX / 2) return false;
        const char **keys = jarena_alloc(a, cap * sizeof *keys);
        size_t *lens = jarena_alloc(a, cap * sizeof *lens);
        jv **vals = jarena_alloc(a, cap * sizeof *vals);
        if (!keys || !lens || !vals) return false;
        if (o->n) {
            memcpy(keys, o->keys, o->n * sizeof *keys);
            memcpy(lens, o->key_lens, o->n * sizeof *lens);
            memcpy(vals, o->vals, o->n * sizeof *vals);
        }
        o->keys = keys;
        o->key_lens = lens;
        o->vals = vals;
        o->cap = cap;
    }
    char *copy = jarena_alloc(a, n + 1);
    if (!copy) return false;
    if (n) memcpy(copy, k, n);
    o->keys[o->n] = copy;
    o->key_lens[o->n] = n;
    o->vals[o->n] = v;
    o->n++;
    /* small maps are searched linearly; bigger ones keep a half-full index */
    if (o->n > 8 && o->n * 2 > o->index_cap) return reindex(a, o, o->index_cap ? o->index_cap * 4 : 64);
    if (o->index_cap) {
        size_t s = hash_key(copy, n) & (o->index_cap - 1);
        while (o->index[s]) s = (s + 1) & (o->index_cap - 1);
        o->index[s] = (uint32_t)o->n;
    }
    return true;
}

/* ---- predicates ------------------------------------------------------ */

bool jv_truthy(const jv *v) {
    switch (v->type) {
    case JV_UNDEFINED:
    case JV_NONE: return false;
    case JV_BOOL: return v->u.b;
    case JV_INT: return v->u.i != 0;
    case JV_FLOAT: return v->u.f != 0 && !isnan(v->u.f);
    case JV_STRING: return v->u.str.n > 0;
    case JV_ARRAY: return v->u.arr.n > 0;
    case JV_OBJECT: return v->u.obj->n > 0;
    case JV_NAMESPACE:
    case JV_FUNCTION: return true;
    }
    return false;
}

bool jv_is_number(const jv *v) { return v->type == JV_INT || v->type == JV_FLOAT; }

double jv_num(const jv *v) {
    if (v->type == JV_INT) return (double)v->u.i;
    if (v->type == JV_FLOAT) return v->u.f;
    if (v->type == JV_BOOL) return v->u.b ? 1 : 0;
    return NAN;
}

const char *jv_type_name(const jv *v) {
    static const char *names[] = {"undefined", "none",  "boolean",   "integer",  "float",
                                  "string",    "array", "object", "namespace", "function"};
    if (v->type == JV_ARRAY && v->tuple) return "tuple";
    return names[v->type];
}

/* ---- numbers as JavaScript prints them ------------------------------ */

void jv_format_js_number(double d, char *buf, size_t cap) {
    if (isnan(d)) {
        snprintf(buf, cap, "NaN");
        return;
    }
    if (isinf(d)) {
        snprintf(buf, cap, d < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (d == 0) {
        snprintf(buf, cap, "0");
        return;
    }
    /* shortest digits that read back exactly */
    char e[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, d);
        if (strtod(e, NULL) == d) break;
    }
    bool neg = e[0] == '-';
    const char *p = e + neg;
    char digits[24];
    int k = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[k++] = *p;
    while (k > 1 && digits[k - 1] == '0') k--;
    digits[k] = '\0';
    int n = atoi(p + 1) + 1;  /* d = 0.DIGITS x 10^n */
    char out[64];
    int o = 0;
    if (neg) out[o++] = '-';
    if (k <= n && n <= 21) {
        o += snprintf(out + o, sizeof out - o, "%s%.*s", digits, n - k, "000000000000000000000");
    } else if (0 < n && n <= 21) {
        o += snprintf(out + o, sizeof out - o, "%.*s.%s", n, digits, digits + n);
    } else if (-6 < n && n <= 0) {
        o += snprintf(out + o, sizeof out - o, "0.%.*s%s", -n, "000000", digits);
    } else {
        int exp = n - 1;
        if (k == 1) o += snprintf(out + o, sizeof out - o, "%c", digits[0]);
        else o += snprintf(out + o, sizeof out - o, "%c.%s", digits[0], digits + 1);
        o += snprintf(out + o, sizeof out - o, "e%c%d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    snprintf(buf, cap, "%s", out);
}

static bool add_int(jbuf *b, int64_t i) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)i);
    return jbuf_add(b, tmp, (size_t)n);
}

static bool add_js_number(jbuf *b, double d) {
    char tmp[64];
    jv_format_js_number(d, tmp, sizeof tmp);
    return jbuf_adds(b, tmp);
}

/* A float as Python would show it in output: integral values keep ".0". */
static bool add_float_output(jbuf *b, double d) {
    if (d == 0 && signbit(d)) return jbuf_adds(b, "-0.0");
    if (isfinite(d) && d == floor(d) && fabs(d) < 1e21) {
        char tmp[64];
        int n = snprintf(tmp, sizeof tmp, "%.1f", d);
        return jbuf_add(b, tmp, (size_t)n);
    }
    return add_js_number(b, d);
}

bool jv_append_output(jbuf *b, const jv *v) {
    switch (v->type) {
    case JV_UNDEFINED:
    case JV_NONE: return true;
    case JV_BOOL: return jbuf_adds(b, v->u.b ? "true" : "false");
    case JV_INT: return add_int(b, v->u.i);
    case JV_FLOAT: return add_float_output(b, v->u.f);
    case JV_STRING: return jbuf_add(b, v->u.str.s, v->u.str.n);
    case JV_ARRAY:
    case JV_OBJECT:
    case JV_NAMESPACE: {
        jjson_opts o = {.indent = -1};
        return jv_append_json(b, v, &o, 0);
    }
    case JV_FUNCTION: return jbuf_adds(b, "<function>");
    }
    return true;
}

bool jv_append_concat(jbuf *b, const jv *v) {
    switch (v->type) {
    case JV_UNDEFINED: return jbuf_adds(b, "undefined");
    case JV_NONE: return jbuf_adds(b, "null");
    case JV_FLOAT: return add_js_number(b, v->u.f);
    case JV_ARRAY:  /* JavaScript's Array#toString: the items' texts, comma-separated */
        for (size_t i = 0; i < v->u.arr.n; i++) {
            const jv *item = v->u.arr.items[i];
            if (i && !jbuf_addc(b, ',')) return false;
            if (item->type == JV_UNDEFINED || item->type == JV_NONE) {
                if (!jbuf_adds(b, item->type == JV_NONE ? "null" : "undefined")) return false;
            } else if (!jv_append_output(b, item)) {
                return false;
            }
        }
        return !b->failed;
    case JV_OBJECT:
    case JV_NAMESPACE: return jbuf_adds(b, "[object Map]");
    default: return jv_append_output(b, v);
    }
}

/* ---- JSON ------------------------------------------------------------ */

static bool add_json_string(jbuf *b, const char *s, size_t n, bool ensure_ascii) {
    static const char hex[] = "0123456789abcdef";
    jbuf_addc(b, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        char esc[16];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            jbuf_add(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            const char *short_esc = c == '\b' ? "\\b" : c == '\f' ? "\\f" : c == '\n' ? "\\n"
                                  : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
            if (short_esc) jbuf_adds(b, short_esc);
            else {
                snprintf(esc, sizeof esc, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
                jbuf_adds(b, esc);
            }
            i++;
        } else if (ensure_ascii && c >= 0x7F) {
            int32_t cp;
            size_t len = jtext_decode(s + i, n - i, &cp);
            if (cp >= 0x10000) {  /* a UTF-16 surrogate pair, as Python writes it */
                int32_t v = cp - 0x10000;
                snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", cp);
            }
            jbuf_adds(b, esc);
            i += len;
        } else {
            size_t j = i + 1;
            while (j < n && (unsigned char)s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' &&
                   !(ensure_ascii && (unsigned char)s[j] >= 0x7F))
                j++;
            jbuf_add(b, s + i, j - i);
            i = j;
        }
    }
    return jbuf_addc(b, '"');
}

static bool add_newline_indent(jbuf *b, int indent, int depth) {
    jbuf_addc(b, '\n');
    for (int i = 0; i < indent * depth && !b->failed; i++) jbuf_addc(b, ' ');
    return !b->failed;
}

static int compare_keys(const char *a, size_t an, const char *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

bool jv_append_json(jbuf *b, const jv *v, const jjson_opts *o, int depth) {
    if (depth > 512) {  /* values are acyclic except through namespaces */
        b->failed = true;
        return false;
    }
    bool pretty = o->indent > 0;
    const char *item_sep = o->item_sep ? o->item_sep : pretty ? "," : ", ";
    const char *key_sep = o->key_sep ? o->key_sep : ": ";
    switch (v->type) {
    case JV_UNDEFINED: return jbuf_adds(b, o->undefined_as_null ? "null" : "undefined");
    case JV_NONE: return jbuf_adds(b, "null");
    case JV_BOOL: return jbuf_adds(b, v->u.b ? "true" : "false");
    case JV_INT: return add_int(b, v->u.i);
    case JV_FLOAT: return isfinite(v->u.f) ? add_js_number(b, v->u.f) : jbuf_adds(b, "null");
    case JV_STRING: return add_json_string(b, v->u.str.s, v->u.str.n, o->ensure_ascii);
    case JV_FUNCTION: b->failed = true; return false;
    case JV_ARRAY:
        jbuf_addc(b, '[');
        for (size_t i = 0; i < v->u.arr.n; i++) {
            if (i) jbuf_adds(b, item_sep);
            if (pretty) add_newline_indent(b, o->indent, depth + 1);
            if (!jv_append_json(b, v->u.arr.items[i], o, depth + 1)) return false;
        }
        if (pretty && v->u.arr.n) add_newline_indent(b, o->indent, depth);
        return jbuf_addc(b, ']');
    case JV_OBJECT:
    case JV_NAMESPACE: {
        const jobj *m = v->u.obj;
        size_t *order = NULL;
        if (o->sort_keys && m->n > 1) {
            order = jarena_alloc(b->a, m->n * sizeof *order);
            if (!order) return (b->failed = true, false);
            for (size_t i = 0; i < m->n; i++) order[i] = i;
            for (size_t i = 1; i < m->n; i++)  /* insertion sort: stable, small maps */
                for (size_t j = i; j > 0 && compare_keys(m->keys[order[j - 1]], m->key_lens[order[j - 1]],
                                                         m->keys[order[j]], m->key_lens[order[j]]) > 0; j--) {
                    size_t t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
        }
        jbuf_addc(b, '{');
        for (size_t i = 0; i < m->n; i++) {
            size_t k = order ? order[i] : i;
            if (i) jbuf_adds(b, item_sep);
            if (pretty) add_newline_indent(b, o->indent, depth + 1);
            add_json_string(b, m->keys[k], m->key_lens[k], o->ensure_ascii);
            jbuf_adds(b, key_sep);
            if (!jv_append_json(b, m->vals[k], o, depth + 1)) return false;
        }
        if (pretty && m->n) add_newline_indent(b, o->indent, depth);
        return jbuf_addc(b, '}');
    }
    }
    return false;
}

/* ---- equality -------------------------------------------------------- */

/* JavaScript's ToNumber of a string: trimmed decimal, "" is 0, else NaN. */
static double js_string_number(const jv *v) {
    size_t lead = jtext_trim_start(v->u.str.s, v->u.str.n);
    size_t n = v->u.str.n - lead;
    n -= jtext_trim_end(v->u.str.s + lead, n);
    if (n == 0) return 0;
    if (n > 64) return NAN;
    char tmp[65];
    memcpy(tmp, v->u.str.s + lead, n);
    tmp[n] = '\0';
    if (!strcmp(tmp, "Infinity") || !strcmp(tmp, "+Infinity")) return INFINITY;
    if (!strcmp(tmp, "-Infinity")) return -INFINITY;
    for (size_t i = 0; i < n; i++)  /* no hex floats, "inf" or "nan" spellings */
        if (!strchr("0123456789+-.eE", tmp[i])) return NAN;
    char *end;
    double d = strtod(tmp, &end);
    return *end ? NAN : d;
}

static bool is_scalar(const jv *v) {
    return v->type == JV_BOOL || v->type == JV_INT || v->type == JV_FLOAT || v->type == JV_STRING;
}

bool jv_strict_equal(const jv *a, const jv *b) {
    if (jv_is_number(a) && jv_is_number(b)) return jv_num(a) == jv_num(b);
    if (a->type != b->type) return false;
    switch (a->type) {
    case JV_UNDEFINED:
    case JV_NONE: return true;
    case JV_BOOL: return a->u.b == b->u.b;
    case JV_STRING: return a->u.str.n == b->u.str.n && !memcmp(a->u.str.s, b->u.str.s, a->u.str.n);
    case JV_ARRAY: return a == b;  /* lists are equal only to themselves, as in JavaScript */
    case JV_OBJECT:
    case JV_NAMESPACE: return a->u.obj == b->u.obj;
    case JV_FUNCTION: return a->u.fn == b->u.fn;
    default: return false;
    }
}

/* A container compared with a scalar turns into its text first, as
 * JavaScript's == does (["a", "b"] == "a,b").  The text goes to a scratch
 * arena; one too long to build compares unequal. */
static bool container_equals_scalar(const jv *c, const jv *x) {
    jarena *a = jarena_new(4 << 20);
    if (!a) return false;
    jbuf b;
    jbuf_init(&b, a, 1 << 20);
    jv_append_concat(&b, c);
    bool eq = false;
    if (!b.failed) {
        jv text = {.type = JV_STRING, .u.str = {b.s ? b.s : "", b.n}};
        eq = jv_loose_equal(&text, x);
    }
    jarena_free(a);
    return eq;
}

bool jv_loose_equal(const jv *a, const jv *b) {
    bool a_nil = a->type == JV_NONE || a->type == JV_UNDEFINED;
    bool b_nil = b->type == JV_NONE || b->type == JV_UNDEFINED;
    if (a_nil || b_nil) return a_nil && b_nil;
    bool a_box = a->type == JV_ARRAY || a->type == JV_OBJECT || a->type == JV_NAMESPACE;
    bool b_box = b->type == JV_ARRAY || b->type == JV_OBJECT || b->type == JV_NAMESPACE;
    if (a_box && is_scalar(b)) return container_equals_scalar(a, b);
    if (b_box && is_scalar(a)) return container_equals_scalar(b, a);
    if (a->type == JV_STRING && b->type == JV_STRING) return jv_strict_equal(a, b);
    if (is_scalar(a) && is_scalar(b)) {
        double x = a->type == JV_STRING ? js_string_number(a) : jv_num(a);
        double y = b->type == JV_STRING ? js_string_number(b) : jv_num(b);
        return x == y;
    }
    return jv_strict_equal(a, b);
}
