/*
 * Jinja filters ("x | tojson(indent=2)").  Each follows @huggingface/jinja
 * where it has the filter, so chat prompts come out byte-identical; the
 * filters it lacks (round, select/reject, map by filter name, wordcount,
 * count, min/max, ...) follow Python Jinja.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/eval.h"
#include "chat/methods.h"
#include "chat/text.h"

typedef struct {
    jeval *e;
    const jnode *at;
    const char *name;
    jv *x;
    jv **args;
    size_t nargs;
    jobj *kwargs;
    bool called;  /* written with parentheses: "int()" differs from "int" */
} fcall;

static jv *arg(const fcall *f, size_t i, const char *name) { return jarg(f->args, f->nargs, i, f->kwargs, name); }

static jv *bad_operand(const fcall *f) {
    return jeval_fail(f->e, f->at, "the filter '%s' cannot be applied to a %s", f->name, jv_type_name(f->x));
}

static jv *oom(const fcall *f) { return jeval_oom(f->e, f->at); }

static jv *string_of(const fcall *f, jbuf *b) {
    if (b->failed) return oom(f);
    return jv_str_own(f->e->a, b->s ? b->s : "", b->n);
}

/* ---- JSON and text --------------------------------------------------- */

static jv *f_tojson(const fcall *f) {
    jjson_opts o = {.indent = -1, .undefined_as_null = true};
    jv *indent = jkwarg(f->kwargs, "indent"), *ascii = jkwarg(f->kwargs, "ensure_ascii");
    jv *sort = jkwarg(f->kwargs, "sort_keys"), *seps = jkwarg(f->kwargs, "separators");
    if (!indent && f->nargs > 0) indent = f->args[0];
    if (indent && indent->type != JV_INT && indent->type != JV_NONE)
        return jeval_fail(f->e, f->at, "tojson indent must be an integer");
    if (indent && indent->type == JV_INT) {
        if (indent->u.i > 64) return jeval_fail(f->e, f->at, "tojson indent %lld is too large", (long long)indent->u.i);
        o.indent = (int)indent->u.i;
    }
    if ((ascii && ascii->type != JV_BOOL) || (sort && sort->type != JV_BOOL))
        return jeval_fail(f->e, f->at, "tojson ensure_ascii and sort_keys must be booleans");
    o.ensure_ascii = ascii && ascii->u.b;
    o.sort_keys = sort && sort->u.b;
    if (seps && seps->type != JV_NONE) {
        if (seps->type != JV_ARRAY || seps->u.arr.n != 2 || seps->u.arr.items[0]->type != JV_STRING ||
            seps->u.arr.items[1]->type != JV_STRING)
            return jeval_fail(f->e, f->at, "tojson separators must be two strings");
        o.item_sep = seps->u.arr.items[0]->u.str.s;
        o.key_sep = seps->u.arr.items[1]->u.str.s;
    }
    if (f->x->type == JV_FUNCTION) return jeval_fail(f->e, f->at, "cannot convert a function to JSON");
    jbuf b;
    jbuf_init(&b, f->e->a, f->e->limits.max_output);
    jv_append_json(&b, f->x, &o, 0);
    return string_of(f, &b);
}

static jv *f_string(const fcall *f) {
    if (f->x->type == JV_STRING) return f->x;
    if (f->x->type == JV_NONE) return jv_cstr(f->e->a, "None");
    jbuf b;
    jbuf_init(&b, f->e->a, f->e->limits.max_output);
    jv_append_output(&b, f->x);
    jbuf_add(&b, "", 0);
    return string_of(f, &b);
}

static jv *f_join(const fcall *f) {
    jv *sep = arg(f, 0, "d");
    if (!sep) sep = jkwarg(f->kwargs, "separator");
    if (sep && sep->type != JV_STRING) return jeval_fail(f->e, f->at, "join separator must be a string");
    jv *attr = jkwarg(f->kwargs, "attribute");
    jbuf b;
    jbuf_init(&b, f->e->a, f->e->limits.max_output);
    jbuf_add(&b, "", 0);
    if (f->x->type == JV_STRING) {
        for (size_t i = 0; i < f->x->u.str.n;) {
            int32_t cp;
            size_t len = jtext_decode(f->x->u.str.s + i, f->x->u.str.n - i, &cp);
            if (i && sep) jbuf_add(&b, sep->u.str.s, sep->u.str.n);
            jbuf_add(&b, f->x->u.str.s + i, len);
            i += len;
        }
        return string_of(f, &b);
    }
    if (f->x->type != JV_ARRAY) return bad_operand(f);
    for (size_t i = 0; i < f->x->u.arr.n; i++) {
        jv *item = f->x->u.arr.items[i];
        if (attr && attr->type == JV_STRING) item = jv_attribute_path(item, attr->u.str.s, attr->u.str.n);
        if (i && sep) jbuf_add(&b, sep->u.str.s, sep->u.str.n);
        if (item->type != JV_NONE && item->type != JV_UNDEFINED) jv_append_concat(&b, item);
    }
    return string_of(f, &b);
}

static jv *f_indent(const fcall *f) {
    if (f->x->type != JV_STRING) return bad_operand(f);
    jv *width = arg(f, 0, "width"), *first = arg(f, 1, "first"), *blank = arg(f, 2, "blank");
    int64_t w = 4;
    if (width) {
        if (width->type != JV_INT || width->u.i < 0 || width->u.i > 1024)
            return jeval_fail(f->e, f->at, "indent width must be an integer from 0 to 1024");
        w = width->u.i;
    }
    bool indent_first = first && jv_truthy(first), indent_blank = blank && jv_truthy(blank);
    jbuf b;
    jbuf_init(&b, f->e->a, f->e->limits.max_output);
    jbuf_add(&b, "", 0);
    const char *s = f->x->u.str.s;
    size_t n = f->x->u.str.n, start = 0;
    for (size_t line = 0;; line++) {
        const char *nl = memchr(s + start, '\n', n - start);
        size_t end = nl ? (size_t)(nl - s) : n;
        bool skip = (line == 0 && !indent_first) || (end == start && !indent_blank);
        for (int64_t k = 0; !skip && k < w; k++) jbuf_addc(&b, ' ');
        jbuf_add(&b, s + start, end - start);
        if (!nl) break;
        jbuf_addc(&b, '\n');
        start = end + 1;
    }
    return string_of(f, &b);
}

/* JavaScript's parseInt(s, 10): leading space, a sign, the digits that follow. */
static bool parse_js_int(const jv *s, int64_t *out) {
    size_t i = jtext_trim_start(s->u.str.s, s->u.str.n), n = s->u.str.n;
    bool neg = false;
    if (i < n && (s->u.str.s[i] == '+' || s->u.str.s[i] == '-')) neg = s->u.str.s[i++] == '-';
    size_t digits = 0;
    int64_t v = 0;
    for (; i < n && s->u.str.s[i] >= '0' && s->u.str.s[i] <= '9'; i++, digits++)
        if (v < INT64_MAX / 10 - 10) v = v * 10 + (s->u.str.s[i] - '0');
    *out = neg ? -v : v;
    return digits > 0;
}

/* JavaScript's parseFloat: the longest decimal number at the start. */
static bool parse_js_float(const jv *s, double *out) {
    size_t i = jtext_trim_start(s->u.str.s, s->u.str.n), n = s->u.str.n, k = 0;
    char tmp[128];
    if (i < n && (s->u.str.s[i] == '+' || s->u.str.s[i] == '-')) tmp[k++] = s->u.str.s[i++];
    if (n - i >= 8 && !memcmp(s->u.str.s + i, "Infinity", 8)) {
        *out = k && tmp[0] == '-' ? -INFINITY : INFINITY;
        return true;
    }
    while (i < n && k < sizeof tmp - 1 && strchr("0123456789.eE+-", s->u.str.s[i]) && s->u.str.s[i]) tmp[k++] = s->u.str.s[i++];
    tmp[k] = '\0';
    /* strtod takes the longest valid prefix, as parseFloat does */
    char *end;
    double d = strtod(tmp, &end);
    if (end == tmp || (end == tmp + 1 && (tmp[0] == '+' || tmp[0] == '-'))) return false;
    *out = d;
    return true;
}

static jv *f_int(const fcall *f) {
    jv *def = arg(f, 0, "default");
    switch (f->x->type) {
    case JV_STRING: {
        int64_t v;
        if (parse_js_int(f->x, &v)) return jv_int(f->e->a, v);
        return def ? def : jv_int(f->e->a, 0);
    }
    case JV_INT: return f->x;
    case JV_FLOAT:  /* "x|int" floors in @huggingface/jinja; "x|int()" keeps x */
        if (f->called) return f->x;
        if (!isfinite(f->x->u.f) || fabs(f->x->u.f) > 9e18) return jeval_fail(f->e, f->at, "cannot convert %g to an integer", f->x->u.f);
        return jv_int(f->e->a, (int64_t)floor(f->x->u.f));
    case JV_BOOL: return jv_int(f->e->a, f->x->u.b);
    default: return bad_operand(f);
    }
}

static jv *f_float(const fcall *f) {
    jv *def = arg(f, 0, "default");
    switch (f->x->type) {
    case JV_STRING: {
        double d;
        if (parse_js_float(f->x, &d)) return jv_float(f->e->a, d);
        return def ? def : jv_float(f->e->a, 0);
    }
    case JV_INT: return f->called ? f->x : jv_float(f->e->a, (double)f->x->u.i);
    case JV_FLOAT: return f->x;
    case JV_BOOL: return jv_float(f->e->a, f->x->u.b);
    default: return bad_operand(f);
    }
}

static jv *f_round(const fcall *f) {
    jv *prec = arg(f, 0, "precision"), *method = arg(f, 1, "method");
    if (!jv_is_number(f->x)) return bad_operand(f);
    if (prec && prec->type != JV_INT) return jeval_fail(f->e, f->at, "round precision must be an integer");
    int64_t p = prec ? prec->u.i : 0;
    if (p < -20 || p > 20) return jeval_fail(f->e, f->at, "round precision must be from -20 to 20");
    const char *m = method && method->type == JV_STRING ? method->u.str.s : "common";
    double scale = pow(10, (double)p), x = jv_num(f->x) * scale, r;
    if (!strcmp(m, "common")) r = nearbyint(x);  /* Python's round(): halves to even */
    else if (!strcmp(m, "ceil")) r = ceil(x);
    else if (!strcmp(m, "floor")) r = floor(x);
    else return jeval_fail(f->e, f->at, "round method must be common, ceil or floor");
    r /= scale;
    if (f->x->type == JV_INT && !strcmp(m, "common") && !prec) return f->x;
    return jv_float(f->e->a, r);
}

static jv *f_abs(const fcall *f) {
    if (f->x->type == JV_INT) {
        if (f->x->u.i == INT64_MIN) return jeval_fail(f->e, f->at, "integer overflow");
        return jv_int(f->e->a, f->x->u.i < 0 ? -f->x->u.i : f->x->u.i);
    }
    if (f->x->type == JV_FLOAT) return jv_float(f->e->a, fabs(f->x->u.f));
    return bad_operand(f);
}

static jv *f_wordcount(const fcall *f) {
    if (f->x->type != JV_STRING) return bad_operand(f);
    int64_t words = 0;
    bool in_word = false;
    for (size_t i = 0; i < f->x->u.str.n; i++) {
        unsigned char c = (unsigned char)f->x->u.str.s[i];
        bool w = jtext_is_word_byte(c) || c >= 0x80;
        if (w && !in_word) words++;
        in_word = w;
    }
    return jv_int(f->e->a, words);
}

/* ---- sequences ------------------------------------------------------- */

static jv *sequence_of(const fcall *f) {  /* the list a filter walks */
    if (f->x->type == JV_ARRAY) return f->x;
    if (f->x->type == JV_STRING) {
        size_t n;
        size_t *offs = jtext_cp_offsets(f->e->a, f->x->u.str.s, f->x->u.str.n, &n);
        jv *out = offs ? jv_array(f->e->a, n) : NULL;
        if (!out) return oom(f);
        for (size_t i = 0; i < n; i++)
            if (!(out->u.arr.items[i] = jv_str_own(f->e->a, f->x->u.str.s + offs[i], offs[i + 1] - offs[i]))) return oom(f);
        return out;
    }
    if (f->x->type == JV_OBJECT) {  /* a mapping walks its keys */
        const jobj *o = f->x->u.obj;
        jv *keys = jv_array(f->e->a, o->n);
        if (!keys) return oom(f);
        for (size_t i = 0; i < o->n; i++)
            if (!(keys->u.arr.items[i] = jv_str_own(f->e->a, o->keys[i], o->key_lens[i]))) return oom(f);
        return keys;
    }
    return bad_operand(f);
}

static jv *f_length(const fcall *f) {
    switch (f->x->type) {
    case JV_STRING: return jv_int(f->e->a, (int64_t)jtext_count_cps(f->x->u.str.s, f->x->u.str.n));
    case JV_ARRAY: return jv_int(f->e->a, (int64_t)f->x->u.arr.n);
    case JV_OBJECT: return jv_int(f->e->a, (int64_t)f->x->u.obj->n);
    default: return bad_operand(f);
    }
}

static jv *f_first_last(const fcall *f, bool last) {
    jv *seq = sequence_of(f);
    if (!seq) return NULL;
    if (seq->u.arr.n == 0) return jv_undefined();
    return seq->u.arr.items[last ? seq->u.arr.n - 1 : 0];
}

static jv *f_reverse(const fcall *f) {
    jv *seq = sequence_of(f);
    if (!seq) return NULL;
    jv *out = jv_array(f->e->a, seq->u.arr.n);
    if (!out) return oom(f);
    for (size_t i = 0; i < seq->u.arr.n; i++) out->u.arr.items[i] = seq->u.arr.items[seq->u.arr.n - 1 - i];
    if (f->x->type != JV_STRING) return out;
    jbuf b;
    jbuf_init(&b, f->e->a, 0);
    jbuf_add(&b, "", 0);
    for (size_t i = 0; i < out->u.arr.n; i++) jbuf_add(&b, out->u.arr.items[i]->u.str.s, out->u.arr.items[i]->u.str.n);
    return string_of(f, &b);
}

static jv *f_unique(const fcall *f) {
    jv *seq = sequence_of(f);
    if (!seq) return NULL;
    jv *out = jv_array(f->e->a, seq->u.arr.n);
    if (!out) return oom(f);
    size_t k = 0;
    for (size_t i = 0; i < seq->u.arr.n; i++) {
        bool seen = false;
        for (size_t j = 0; j < k && !seen; j++) seen = jv_strict_equal(out->u.arr.items[j], seq->u.arr.items[i]);
        if (!seen) out->u.arr.items[k++] = seq->u.arr.items[i];
    }
    out->u.arr.n = k;
    return out;
}

typedef struct {
    const char *path;
    size_t n;
} attr_path;

static jv *by_attribute(jv *item, const void *ctx) {
    const attr_path *p = ctx;
    return p->path ? jv_attribute_path(item, p->path, p->n) : item;
}

static jv *f_sort(const fcall *f) {
    jv *seq = sequence_of(f);
    if (!seq) return NULL;
    jv *rev = arg(f, 0, "reverse"), *cs = arg(f, 1, "case_sensitive"), *attr = arg(f, 2, "attribute");
    attr_path p = {0};
    char num[24];
    if (attr && attr->type == JV_STRING) p = (attr_path){attr->u.str.s, attr->u.str.n};
    else if (attr && attr->type == JV_INT) p = (attr_path){num, (size_t)snprintf(num, sizeof num, "%lld", (long long)attr->u.i)};
    jv *out = jv_array(f->e->a, seq->u.arr.n);
    if (!out) return oom(f);
    if (seq->u.arr.n) memcpy(out->u.arr.items, seq->u.arr.items, seq->u.arr.n * sizeof(jv *));
    if (!jsort_values(f->e, f->at, out->u.arr.items, out->u.arr.n, by_attribute, &p, cs && jv_truthy(cs),
                      rev && jv_truthy(rev)))
        return NULL;
    return out;
}

static jv *f_min_max(const fcall *f, bool want_max) {
    jv *seq = sequence_of(f);
    if (!seq) return NULL;
    if (seq->u.arr.n == 0) return jv_undefined();
    jv *best = seq->u.arr.items[0];
    for (size_t i = 1; i < seq->u.arr.n; i++) {
        bool ok;
        int c = jv_compare(f->e, f->at, seq->u.arr.items[i], best, false, &ok);
        if (!ok) return NULL;
        if (want_max ? c > 0 : c < 0) best = seq->u.arr.items[i];
    }
    return best;
}

static jv *f_sum(const fcall *f) {
    jv *seq = sequence_of(f);
    if (!seq) return NULL;
    jv *attr = jkwarg(f->kwargs, "attribute"), *start = arg(f, 1, "start");
    jv *total = start ? start : jv_int(f->e->a, 0);
    for (size_t i = 0; total && i < seq->u.arr.n; i++) {
        jv *x = seq->u.arr.items[i];
        if (attr && attr->type == JV_STRING) x = jv_attribute_path(x, attr->u.str.s, attr->u.str.n);
        if (!jv_is_number(x) || !jv_is_number(total)) return jeval_fail(f->e, f->at, "sum needs numbers");
        if (total->type == JV_INT && x->type == JV_INT) {
            int64_t r;
            if (__builtin_add_overflow(total->u.i, x->u.i, &r)) return jeval_fail(f->e, f->at, "integer overflow");
            total = jv_int(f->e->a, r);
        } else {
            total = jv_float(f->e->a, jv_num(total) + jv_num(x));
        }
    }
    return total ? total : oom(f);
}

static jv *f_map(const fcall *f) {
    jv *seq = sequence_of(f);
    if (!seq) return NULL;
    jv *attr = jkwarg(f->kwargs, "attribute"), *def = jkwarg(f->kwargs, "default");
    jv *out = jv_array(f->e->a, seq->u.arr.n);
    if (!out) return oom(f);
    if (attr) {
        if (attr->type != JV_STRING) return jeval_fail(f->e, f->at, "map attribute must be a string");
        for (size_t i = 0; i < seq->u.arr.n; i++) {
            jv *item = seq->u.arr.items[i];
            jv *v = jv_attribute_path(item, attr->u.str.s, attr->u.str.n);
            out->u.arr.items[i] = (v->type == JV_UNDEFINED && def) ? def : v;
        }
        return out;
    }
    if (f->nargs == 0 || f->args[0]->type != JV_STRING)
        return jeval_fail(f->e, f->at, "map needs a filter name or attribute=");
    for (size_t i = 0; i < seq->u.arr.n; i++) {  /* map('upper'), map('replace', 'a', 'b') */
        jv *v = jfilter_by_name(f->e, f->at, f->args[0]->u.str.s, seq->u.arr.items[i], f->args + 1, f->nargs - 1, f->kwargs);
        if (!v) return NULL;
        out->u.arr.items[i] = v;
    }
    return out;
}

/* select/reject(test, args...) and selectattr/rejectattr(attr, test, args...). */
static jv *f_select(const fcall *f, bool keep_passing, bool by_attr) {
    jv *seq = sequence_of(f);
    if (!seq) return NULL;
    size_t a0 = by_attr ? 1 : 0;
    jv *attr = by_attr ? arg(f, 0, NULL) : NULL;
    if (by_attr && (!attr || attr->type != JV_STRING))
        return jeval_fail(f->e, f->at, "%s needs an attribute name", f->name);
    jv *test = f->nargs > a0 ? f->args[a0] : NULL;
    if (test && test->type != JV_STRING) return jeval_fail(f->e, f->at, "%s test name must be a string", f->name);
    jv *out = jv_array(f->e->a, seq->u.arr.n);
    if (!out) return oom(f);
    size_t k = 0;
    for (size_t i = 0; i < seq->u.arr.n; i++) {
        jv *item = seq->u.arr.items[i], *x = item;
        bool pass;
        if (by_attr) {
            if (item->type != JV_OBJECT && item->type != JV_NAMESPACE)
                return jeval_fail(f->e, f->at, "%s can only be applied to a list of objects", f->name);
            x = jv_attribute_path(item, attr->u.str.s, attr->u.str.n);
        }
        if (by_attr && x->type == JV_UNDEFINED) {
            pass = false;  /* a missing attribute fails every test */
        } else if (test) {
            jv *r = jtest_apply(f->e, f->at, test->u.str.s, x, f->args + a0 + 1, f->nargs - a0 - 1);
            if (!r) return NULL;
            pass = jv_truthy(r);
        } else {
            pass = jv_truthy(x);
        }
        if (pass == keep_passing) out->u.arr.items[k++] = item;
    }
    out->u.arr.n = k;
    return out;
}

static jv *f_default(const fcall *f) {
    jv *def = arg(f, 0, "default_value"), *boolean = arg(f, 1, "boolean");
    if (boolean && boolean->type != JV_BOOL) return jeval_fail(f->e, f->at, "default boolean flag must be a boolean");
    if (f->x->type == JV_UNDEFINED || (boolean && boolean->u.b && !jv_truthy(f->x)))
        return def ? def : jv_str_own(f->e->a, "", 0);
    return f->x;
}

static jv *f_list(const fcall *f) { return sequence_of(f); }

/* ---- dispatch -------------------------------------------------------- */

/* Thin adapters so every filter has the same shape. */
static jv *f_same(const fcall *f) { return f->x; }
static jv *f_first(const fcall *f) { return f_first_last(f, false); }
static jv *f_last(const fcall *f) { return f_first_last(f, true); }
static jv *f_min(const fcall *f) { return f_min_max(f, false); }
static jv *f_max(const fcall *f) { return f_min_max(f, true); }
static jv *f_select_(const fcall *f) { return f_select(f, true, false); }
static jv *f_reject(const fcall *f) { return f_select(f, false, false); }
static jv *f_selectattr(const fcall *f) { return f_select(f, true, true); }
static jv *f_rejectattr(const fcall *f) { return f_select(f, false, true); }
static jv *f_upper(const fcall *f) { return jtext_upper(f->e->a, f->x->u.str.s, f->x->u.str.n); }
static jv *f_lower(const fcall *f) { return jtext_lower(f->e->a, f->x->u.str.s, f->x->u.str.n); }
static jv *f_title(const fcall *f) { return jstr_title(f->e, f->at, f->x); }
static jv *f_capitalize(const fcall *f) { return jstr_capitalize(f->e, f->at, f->x); }
static jv *f_trim(const fcall *f) { return jstr_strip(f->e, f->at, f->x, arg(f, 0, "chars"), true, true); }
static jv *f_replace(const fcall *f) {
    return jstr_replace(f->e, f->at, f->x, arg(f, 0, "old"), arg(f, 1, "new"), arg(f, 2, "count"));
}
static jv *f_items(const fcall *f) { return jobj_items(f->e, f->at, f->x); }
static jv *f_dictsort(const fcall *f) { return jobj_dictsort(f->e, f->at, f->x, f->args, f->nargs, f->kwargs); }
static jv *f_keys_values(const fcall *f) {
    jv *m = jmethod_lookup(f->e, f->x, f->name, strlen(f->name));
    return m ? jeval_call(f->e, f->at, m, f->args, f->nargs, f->kwargs, NULL) : NULL;
}

/* Every filter: its name, the one operand type it takes (JV_UNDEFINED: it
 * checks for itself), and the function. */
static const struct {
    const char *name;
    jv_type only;
    jv *(*fn)(const fcall *f);
} filters[] = {
    {"safe", JV_UNDEFINED, f_same},        {"e", JV_UNDEFINED, f_same},
    {"escape", JV_UNDEFINED, f_same},      {"forceescape", JV_UNDEFINED, f_same},
    {"tojson", JV_UNDEFINED, f_tojson},    {"default", JV_UNDEFINED, f_default},
    {"d", JV_UNDEFINED, f_default},        {"string", JV_UNDEFINED, f_string},
    {"length", JV_UNDEFINED, f_length},    {"count", JV_UNDEFINED, f_length},
    {"join", JV_UNDEFINED, f_join},        {"int", JV_UNDEFINED, f_int},
    {"float", JV_UNDEFINED, f_float},      {"round", JV_UNDEFINED, f_round},
    {"abs", JV_UNDEFINED, f_abs},          {"bool", JV_BOOL, f_same},
    {"list", JV_UNDEFINED, f_list},        {"first", JV_UNDEFINED, f_first},
    {"last", JV_UNDEFINED, f_last},        {"reverse", JV_UNDEFINED, f_reverse},
    {"unique", JV_UNDEFINED, f_unique},    {"sort", JV_UNDEFINED, f_sort},
    {"min", JV_UNDEFINED, f_min},          {"max", JV_UNDEFINED, f_max},
    {"sum", JV_UNDEFINED, f_sum},          {"map", JV_UNDEFINED, f_map},
    {"select", JV_UNDEFINED, f_select_},   {"reject", JV_UNDEFINED, f_reject},
    {"selectattr", JV_UNDEFINED, f_selectattr}, {"rejectattr", JV_UNDEFINED, f_rejectattr},
    {"upper", JV_STRING, f_upper},         {"lower", JV_STRING, f_lower},
    {"title", JV_STRING, f_title},         {"capitalize", JV_STRING, f_capitalize},
    {"trim", JV_STRING, f_trim},           {"indent", JV_STRING, f_indent},
    {"wordcount", JV_STRING, f_wordcount}, {"replace", JV_STRING, f_replace},
    {"items", JV_OBJECT, f_items},         {"dictsort", JV_OBJECT, f_dictsort},
    {"keys", JV_OBJECT, f_keys_values},    {"values", JV_OBJECT, f_keys_values},
};

static jv *apply(const fcall *f) {
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++) {
        if (strcmp(f->name, filters[i].name)) continue;
        if (filters[i].only != JV_UNDEFINED && f->x->type != filters[i].only) return bad_operand(f);
        return filters[i].fn(f);
    }
    return jeval_fail(f->e, f->at, "unknown filter '%s'", f->name);
}

jv *jfilter_by_name(jeval *e, const jnode *at, const char *name, jv *operand, jv **args, size_t nargs,
                    jobj *kwargs) {
    fcall f = {e, at, name, operand, args, nargs, kwargs, nargs > 0 || (kwargs && kwargs->n)};
    jv *r = apply(&f);
    if (!r && !e->failed) jeval_oom(e, at);
    return r;
}

jv *jfilter_apply(jeval *e, const jnode *filter, jv *operand, jenv *env) {
    fcall f = {e, filter, filter->name, operand, NULL, 0, NULL, filter->flag};
    if (filter->flag && !jeval_args(e, &filter->args, env, &f.args, &f.nargs, &f.kwargs)) return NULL;
    jv *r = apply(&f);
    if (!r && !e->failed) jeval_oom(e, filter);
    return r;
}
