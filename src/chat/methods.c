/*
 * Methods and properties of values: "s.startswith('x')", "d.items()",
 * "xs.length".  Strings follow @huggingface/jinja (JavaScript whitespace,
 * title() uppercasing word starts only); strip/lstrip/rstrip with an
 * argument strip those characters, as Python does.
 */
#include <string.h>

#include "chat/methods.h"
#include "chat/text.h"

static jv *text(jeval *e, const jnode *at, const char *s, size_t n) {
    jv *v = jv_str(e->a, s, n);
    return v ? v : jeval_oom(e, at);
}

static jv *need_string(jeval *e, const jnode *at, jv *v, const char *method, const char *what) {
    if (v && v->type == JV_STRING) return v;
    return jeval_fail(e, at, "%s() %s must be a string, not %s", method, what, v ? jv_type_name(v) : "missing");
}

/* ---- strings --------------------------------------------------------- */

static jv *m_upper(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)args, (void)nargs, (void)kwargs;
    jv *v = jtext_upper(e->a, self->u.str.s, self->u.str.n);
    return v ? v : jeval_oom(e, at);
}

static jv *m_lower(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)args, (void)nargs, (void)kwargs;
    jv *v = jtext_lower(e->a, self->u.str.s, self->u.str.n);
    return v ? v : jeval_oom(e, at);
}

/* Is the code point at s[i] one of `chars`? */
static size_t char_in_set(const char *s, size_t n, size_t i, const jv *chars) {
    int32_t cp;
    size_t len = jtext_decode(s + i, n - i, &cp);
    const char *c = chars->u.str.s;
    for (size_t k = 0; k < chars->u.str.n;) {
        int32_t cc;
        k += jtext_decode(c + k, chars->u.str.n - k, &cc);
        if (cc == cp) return len;
    }
    return 0;
}

static size_t last_char_start(const char *s, size_t end) {
    size_t k = end - 1;
    while (k > 0 && end - k < 4 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    return k;
}

jv *jstr_strip(jeval *e, const jnode *at, jv *self, jv *chars, bool left, bool right) {
    const char *s = self->u.str.s;
    size_t start = 0, end = self->u.str.n;
    if (chars && chars->type != JV_STRING && chars->type != JV_NONE && chars->type != JV_UNDEFINED)
        return jeval_fail(e, at, "strip() argument must be a string or none");
    if (!chars || chars->type != JV_STRING) {
        if (left) start = jtext_trim_start(s, end);
        if (right) end -= jtext_trim_end(s + start, end - start);
    } else {
        size_t len;
        while (left && start < end && (len = char_in_set(s, end, start, chars)) > 0) start += len;
        while (right && end > start) {
            size_t k = last_char_start(s, end);
            if (k < start || !char_in_set(s, end, k, chars)) break;
            end = k;
        }
    }
    return text(e, at, s + start, end - start);
}

static jv *m_strip(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    return jstr_strip(e, at, self, jarg(args, nargs, 0, kwargs, "chars"), true, true);
}
static jv *m_lstrip(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    return jstr_strip(e, at, self, jarg(args, nargs, 0, kwargs, "chars"), true, false);
}
static jv *m_rstrip(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    return jstr_strip(e, at, self, jarg(args, nargs, 0, kwargs, "chars"), false, true);
}

/* @huggingface/jinja's title(): an ASCII letter or digit after a non-word
 * character becomes upper case; the rest is left alone. */
jv *jstr_title(jeval *e, const jnode *at, const jv *self) {
    char *s = jarena_alloc(e->a, self->u.str.n + 1);
    if (!s) return jeval_oom(e, at);
    memcpy(s, self->u.str.s, self->u.str.n);
    for (size_t i = 0; i < self->u.str.n; i++) {
        bool boundary = i == 0 || !jtext_is_word_byte((unsigned char)s[i - 1]);
        if (boundary && s[i] >= 'a' && s[i] <= 'z') s[i] = (char)(s[i] - 32);
    }
    return jv_str_own(e->a, s, self->u.str.n);
}

static jv *m_title(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)args, (void)nargs, (void)kwargs;
    return jstr_title(e, at, self);
}

/* The first character upper-cased, the rest untouched (as @huggingface/jinja). */
jv *jstr_capitalize(jeval *e, const jnode *at, const jv *self) {
    if (self->u.str.n == 0) return (jv *)self;
    int32_t cp;
    size_t len = jtext_decode(self->u.str.s, self->u.str.n, &cp);
    jv *first = jtext_upper(e->a, self->u.str.s, len);
    if (!first) return jeval_oom(e, at);
    jbuf b;
    jbuf_init(&b, e->a, 0);
    jbuf_add(&b, first->u.str.s, first->u.str.n);
    jbuf_add(&b, self->u.str.s + len, self->u.str.n - len);
    if (b.failed) return jeval_oom(e, at);
    return jv_str_own(e->a, b.s, b.n);
}

static jv *m_capitalize(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)args, (void)nargs, (void)kwargs;
    return jstr_capitalize(e, at, self);
}

static bool has_prefix(const jv *s, const jv *p, bool suffix) {
    if (p->u.str.n > s->u.str.n) return false;
    const char *from = suffix ? s->u.str.s + s->u.str.n - p->u.str.n : s->u.str.s;
    return !memcmp(from, p->u.str.s, p->u.str.n);
}

static jv *starts_or_ends(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, bool suffix) {
    const char *name = suffix ? "endswith" : "startswith";
    if (nargs == 0) return jeval_fail(e, at, "%s() needs an argument", name);
    jv *p = args[0];
    if (p->type == JV_STRING) return jv_bool(has_prefix(self, p, suffix));
    if (p->type != JV_ARRAY) return jeval_fail(e, at, "%s() argument must be a string or a tuple of strings", name);
    for (size_t i = 0; i < p->u.arr.n; i++) {
        if (p->u.arr.items[i]->type != JV_STRING) return jeval_fail(e, at, "%s() tuple items must be strings", name);
        if (has_prefix(self, p->u.arr.items[i], suffix)) return jv_bool(true);
    }
    return jv_bool(false);
}

static jv *m_startswith(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)kwargs;
    return starts_or_ends(e, at, self, args, nargs, false);
}
static jv *m_endswith(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)kwargs;
    return starts_or_ends(e, at, self, args, nargs, true);
}

/* A growable array of values in the arena. */
typedef struct {
    jv **items;
    size_t n, cap;
} vec;

static bool vec_push(jeval *e, vec *v, jv *x) {
    if (!x) return false;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        jv **items = jarena_alloc(e->a, cap * sizeof *items);
        if (!items) return false;
        if (v->n) memcpy(items, v->items, v->n * sizeof *items);
        v->items = items;
        v->cap = cap;
    }
    v->items[v->n++] = x;
    return true;
}

static jv *vec_array(jeval *e, const jnode *at, vec *v) {
    jv *arr = jv_array(e->a, 0);
    if (!arr) return jeval_oom(e, at);
    arr->u.arr.items = v->items;
    arr->u.arr.n = v->n;
    return arr;
}

static jv *split_whitespace(jeval *e, const jnode *at, jv *self, int64_t maxsplit) {
    const char *s = self->u.str.s;
    size_t n = self->u.str.n, i = jtext_trim_start(s, n);
    vec out = {0};
    while (i < n) {
        size_t start = i, sp = 0;
        while (i < n && (sp = jtext_space_at(s + i, n - i)) == 0) i++;
        if (maxsplit >= 0 && (int64_t)out.n >= maxsplit) {
            if (!vec_push(e, &out, jv_str(e->a, s + start, n - start))) return jeval_oom(e, at);
            break;
        }
        if (!vec_push(e, &out, jv_str(e->a, s + start, i - start))) return jeval_oom(e, at);
        while (i < n && (sp = jtext_space_at(s + i, n - i)) > 0) i += sp;
    }
    return vec_array(e, at, &out);
}

static jv *m_split(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    jv *sep = jarg(args, nargs, 0, kwargs, "sep");
    jv *max = jarg(args, nargs, 1, kwargs, "maxsplit");
    if (max && max->type != JV_INT) return jeval_fail(e, at, "split() maxsplit must be an integer");
    int64_t maxsplit = max ? max->u.i : -1;
    if (!sep || sep->type == JV_NONE) return split_whitespace(e, at, self, maxsplit);
    if (sep->type != JV_STRING) return jeval_fail(e, at, "split() separator must be a string or none");
    if (sep->u.str.n == 0) return jeval_fail(e, at, "split() separator is empty");
    const char *s = self->u.str.s;
    size_t n = self->u.str.n, start = 0;
    vec out = {0};
    for (;;) {
        const char *hit = (maxsplit < 0 || (int64_t)out.n < maxsplit)
                              ? memmem(s + start, n - start, sep->u.str.s, sep->u.str.n) : NULL;
        size_t end = hit ? (size_t)(hit - s) : n;
        if (!vec_push(e, &out, jv_str(e->a, s + start, end - start))) return jeval_oom(e, at);
        if (!hit) break;
        start = end + sep->u.str.n;
    }
    return vec_array(e, at, &out);
}

jv *jstr_replace(jeval *e, const jnode *at, jv *self, jv *old, jv *new_, jv *count) {
    if (!old || !new_ || old->type != JV_STRING || new_->type != JV_STRING)
        return jeval_fail(e, at, "replace() needs two string arguments");
    if (count && count->type != JV_INT && count->type != JV_NONE)
        return jeval_fail(e, at, "replace() count must be an integer or none");
    int64_t left = (count && count->type == JV_INT && count->u.i >= 0) ? count->u.i : INT64_MAX;
    const char *s = self->u.str.s;
    size_t n = self->u.str.n;
    jbuf b;
    jbuf_init(&b, e->a, e->limits.max_output);
    jbuf_add(&b, "", 0);
    if (old->u.str.n == 0) {  /* insert between characters, at both ends too */
        for (size_t i = 0; i <= n;) {
            if (left > 0) {
                jbuf_add(&b, new_->u.str.s, new_->u.str.n);
                left--;
            }
            if (i == n) break;
            int32_t cp;
            size_t len = jtext_decode(s + i, n - i, &cp);
            jbuf_add(&b, s + i, len);
            i += len;
        }
    } else {
        size_t i = 0;
        while (i < n) {
            const char *hit = left > 0 ? memmem(s + i, n - i, old->u.str.s, old->u.str.n) : NULL;
            if (!hit) break;
            jbuf_add(&b, s + i, (size_t)(hit - (s + i)));
            jbuf_add(&b, new_->u.str.s, new_->u.str.n);
            i = (size_t)(hit - s) + old->u.str.n;
            left--;
        }
        jbuf_add(&b, s + i, n - i);
    }
    if (b.failed) return jeval_oom(e, at);
    return jv_str_own(e->a, b.s, b.n);
}

static jv *m_replace(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    return jstr_replace(e, at, self, jarg(args, nargs, 0, kwargs, "old"), jarg(args, nargs, 1, kwargs, "new"),
                        jarg(args, nargs, 2, kwargs, "count"));
}

static jv *m_count(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    jv *sub = need_string(e, at, jarg(args, nargs, 0, kwargs, "sub"), "count", "argument");
    if (!sub) return NULL;
    if (sub->u.str.n == 0) return jv_int(e->a, (int64_t)jtext_count_cps(self->u.str.s, self->u.str.n) + 1);
    int64_t c = 0;
    for (size_t i = 0; i < self->u.str.n;) {
        const char *hit = memmem(self->u.str.s + i, self->u.str.n - i, sub->u.str.s, sub->u.str.n);
        if (!hit) break;
        c++;
        i = (size_t)(hit - self->u.str.s) + sub->u.str.n;
    }
    return jv_int(e->a, c);
}

static jv *m_find(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    jv *sub = need_string(e, at, jarg(args, nargs, 0, kwargs, "sub"), "find", "argument");
    if (!sub) return NULL;
    const char *hit = sub->u.str.n == 0 ? self->u.str.s : memmem(self->u.str.s, self->u.str.n, sub->u.str.s, sub->u.str.n);
    if (!hit) return jv_int(e->a, -1);
    return jv_int(e->a, (int64_t)jtext_count_cps(self->u.str.s, (size_t)(hit - self->u.str.s)));
}

/* ---- mappings -------------------------------------------------------- */

static jv *m_get(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)kwargs;
    if (nargs == 0 || args[0]->type != JV_STRING)
        return jeval_fail(e, at, "get() key must be a string, not %s", nargs ? jv_type_name(args[0]) : "missing");
    jv *v = jobj_get(self->u.obj, args[0]->u.str.s, args[0]->u.str.n);
    return v ? v : nargs > 1 ? args[1] : jv_none();
}

jv *jobj_items(jeval *e, const jnode *at, jv *self) {
    const jobj *o = self->u.obj;
    jv *out = jv_array(e->a, o->n);
    if (!out) return jeval_oom(e, at);
    for (size_t i = 0; i < o->n; i++) {
        jv *pair = jv_array(e->a, 2);
        if (!pair || !(pair->u.arr.items[0] = jv_str_own(e->a, o->keys[i], o->key_lens[i]))) return jeval_oom(e, at);
        pair->u.arr.items[1] = o->vals[i];
        out->u.arr.items[i] = pair;
    }
    return out;
}

static jv *m_items(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)args, (void)nargs, (void)kwargs;
    return jobj_items(e, at, self);
}

static jv *m_keys(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)args, (void)nargs, (void)kwargs;
    const jobj *o = self->u.obj;
    jv *out = jv_array(e->a, o->n);
    if (!out) return jeval_oom(e, at);
    for (size_t i = 0; i < o->n; i++)
        if (!(out->u.arr.items[i] = jv_str_own(e->a, o->keys[i], o->key_lens[i]))) return jeval_oom(e, at);
    return out;
}

static jv *m_values(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)args, (void)nargs, (void)kwargs;
    const jobj *o = self->u.obj;
    jv *out = jv_array(e->a, o->n);
    if (!out) return jeval_oom(e, at);
    if (o->n) memcpy(out->u.arr.items, o->vals, o->n * sizeof(jv *));
    return out;
}

/* Stable merge sort of values by jv_compare on a key picked per item. */

bool jsort_values(jeval *e, const jnode *at, jv **items, size_t n, sort_key_fn key, const void *ctx,
                  bool case_sensitive, bool reverse) {
    if (n < 2) return true;
    jv **tmp = jarena_alloc(e->a, n * sizeof *tmp);
    if (!tmp) return jeval_oom(e, at), false;
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                bool ok;
                int c = jv_compare(e, at, key(items[j], ctx), key(items[i], ctx), case_sensitive, &ok);
                if (!ok) return false;
                if (reverse) c = -c;
                tmp[k++] = c < 0 ? items[j++] : items[i++];
            }
            while (i < mid) tmp[k++] = items[i++];
            while (j < hi) tmp[k++] = items[j++];
        }
        memcpy(items, tmp, n * sizeof *items);
    }
    return true;
}

static jv *pair_key(jv *item, const void *ctx) { return item->u.arr.items[*(const int *)ctx]; }

jv *jobj_dictsort(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    jv *cs = jarg(args, nargs, 0, kwargs, "case_sensitive");
    jv *by = jarg(args, nargs, 1, kwargs, "by");
    jv *rev = jarg(args, nargs, 2, kwargs, "reverse");
    if ((cs && cs->type != JV_BOOL) || (rev && rev->type != JV_BOOL))
        return jeval_fail(e, at, "dictsort() case_sensitive and reverse must be booleans");
    int index = 0;
    if (by) {
        if (by->type != JV_STRING || (strcmp(by->u.str.s, "key") && strcmp(by->u.str.s, "value")))
            return jeval_fail(e, at, "dictsort() by must be 'key' or 'value'");
        index = !strcmp(by->u.str.s, "value");
    }
    jv *items = jobj_items(e, at, self);
    if (!items) return NULL;
    if (!jsort_values(e, at, items->u.arr.items, items->u.arr.n, pair_key, &index, cs && cs->u.b, rev && rev->u.b))
        return NULL;
    return items;
}

/* ---- lookup ---------------------------------------------------------- */

typedef struct {
    const char *name;
    jbuiltin_fn fn;
} method;

static const method string_methods[] = {
    {"upper", m_upper},     {"lower", m_lower},           {"strip", m_strip},
    {"lstrip", m_lstrip},   {"rstrip", m_rstrip},         {"title", m_title},
    {"capitalize", m_capitalize}, {"startswith", m_startswith}, {"endswith", m_endswith},
    {"split", m_split},     {"replace", m_replace},       {"count", m_count},
    {"find", m_find},
};

static const method object_methods[] = {
    {"get", m_get}, {"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"dictsort", jobj_dictsort},
};

static jv *bind(jeval *e, const method *table, size_t count, jv *self, const char *name, size_t n) {
    for (size_t i = 0; i < count; i++)
        if (strlen(table[i].name) == n && !memcmp(table[i].name, name, n)) {
            jv *f = jeval_builtin(e, table[i].fn, self);
            return f ? f : jeval_oom(e, NULL);
        }
    return NULL;
}

jv *jmethod_lookup(jeval *e, jv *self, const char *name, size_t n) {
    bool is_length = n == 6 && !memcmp(name, "length", 6);
    switch (self->type) {
    case JV_STRING:
        if (is_length) return jv_int(e->a, (int64_t)jtext_count_cps(self->u.str.s, self->u.str.n));
        return bind(e, string_methods, sizeof string_methods / sizeof string_methods[0], self, name, n);
    case JV_ARRAY: return is_length ? jv_int(e->a, (int64_t)self->u.arr.n) : NULL;
    case JV_OBJECT: return bind(e, object_methods, sizeof object_methods / sizeof object_methods[0], self, name, n);
    default: return NULL;
    }
}
