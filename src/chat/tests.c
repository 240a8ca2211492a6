/*
 * Jinja tests ("x is defined", "n is divisibleby 3").  The set and meaning
 * follow @huggingface/jinja (mapping is a dict, iterable is a list or
 * string); divisibleby, equalto with an argument, sameas, ne and the
 * comparison tests come from Python Jinja.
 */
#include <string.h>

#include "chat/eval.h"
#include "chat/text.h"

static bool named(const char *name, const char *want) { return !strcmp(name, want); }

static jv *need_arg(jeval *e, const jnode *at, const char *name, jv **args, size_t nargs) {
    if (nargs >= 1) return args[0];
    return jeval_fail(e, at, "the test '%s' needs an argument", name);
}

static jv *compare_test(jeval *e, const jnode *at, const char *name, jv *x, jv **args, size_t nargs) {
    jv *y = need_arg(e, at, name, args, nargs);
    if (!y) return NULL;
    bool ok;
    int c = jv_compare(e, at, x, y, true, &ok);
    if (!ok) return NULL;
    bool r = named(name, "lt") || named(name, "<")   ? c < 0
             : named(name, "le") || named(name, "<=") ? c <= 0
             : named(name, "gt") || named(name, ">")  ? c > 0
                                                      : c >= 0;
    return jv_bool(r);
}

jv *jtest_apply(jeval *e, const jnode *at, const char *name, jv *x, jv **args, size_t nargs) {
    jv_type t = x->type;
    if (named(name, "defined")) return jv_bool(t != JV_UNDEFINED);
    if (named(name, "undefined")) return jv_bool(t == JV_UNDEFINED);
    if (named(name, "none")) return jv_bool(t == JV_NONE);
    if (named(name, "boolean")) return jv_bool(t == JV_BOOL);
    if (named(name, "true")) return jv_bool(t == JV_BOOL && x->u.b);
    if (named(name, "false")) return jv_bool(t == JV_BOOL && !x->u.b);
    if (named(name, "string")) return jv_bool(t == JV_STRING);
    if (named(name, "number")) return jv_bool(t == JV_INT || t == JV_FLOAT);
    if (named(name, "integer")) return jv_bool(t == JV_INT);
    if (named(name, "float")) return jv_bool(t == JV_FLOAT);
    if (named(name, "mapping")) return jv_bool(t == JV_OBJECT);
    /* a tuple is not "iterable" in @huggingface/jinja (its type name differs) */
    if (named(name, "iterable")) return jv_bool((t == JV_ARRAY && !x->tuple) || t == JV_STRING);
    if (named(name, "sequence")) return jv_bool(t == JV_ARRAY || t == JV_OBJECT || t == JV_STRING);
    if (named(name, "callable")) return jv_bool(t == JV_FUNCTION);
    if (named(name, "odd") || named(name, "even")) {
        if (t != JV_INT) return jeval_fail(e, at, "the test '%s' needs an integer, not %s", name, jv_type_name(x));
        bool odd = x->u.i % 2 != 0;
        return jv_bool(named(name, "odd") ? odd : !odd);
    }
    if (named(name, "divisibleby")) {
        jv *d = need_arg(e, at, name, args, nargs);
        if (!d) return NULL;
        if (t != JV_INT || d->type != JV_INT) return jeval_fail(e, at, "divisibleby needs integers");
        if (d->u.i == 0) return jeval_fail(e, at, "divisibleby 0");
        return jv_bool(d->u.i == -1 || x->u.i % d->u.i == 0);
    }
    if (named(name, "lower") || named(name, "upper")) {
        if (t != JV_STRING) return jv_bool(false);
        jv *m = named(name, "lower") ? jtext_lower(e->a, x->u.str.s, x->u.str.n) : jtext_upper(e->a, x->u.str.s, x->u.str.n);
        if (!m) return jeval_oom(e, at);
        return jv_bool(m->u.str.n == x->u.str.n && !memcmp(m->u.str.s, x->u.str.s, x->u.str.n));
    }
    if (named(name, "equalto") || named(name, "eq") || named(name, "==") || named(name, "sameas")) {
        /* @huggingface/jinja compares with nothing (undefined) when no
         * argument can be written; with one, as Python: equal values */
        jv *y = nargs ? args[0] : jv_undefined();
        return jv_bool(jv_strict_equal(x, y));
    }
    if (named(name, "ne") || named(name, "!=")) {
        jv *y = need_arg(e, at, name, args, nargs);
        return y ? jv_bool(!jv_strict_equal(x, y)) : NULL;
    }
    if (named(name, "lt") || named(name, "le") || named(name, "gt") || named(name, "ge") || named(name, "<") ||
        named(name, "<=") || named(name, ">") || named(name, ">="))
        return compare_test(e, at, name, x, args, nargs);
    if (named(name, "in")) {
        jv *y = need_arg(e, at, name, args, nargs);
        if (!y) return NULL;
        if (y->type == JV_ARRAY) {
            for (size_t i = 0; i < y->u.arr.n; i++)
                if (jv_strict_equal(y->u.arr.items[i], x)) return jv_bool(true);
            return jv_bool(false);
        }
        if (y->type == JV_STRING && t == JV_STRING)
            return jv_bool(x->u.str.n == 0 || memmem(y->u.str.s, y->u.str.n, x->u.str.s, x->u.str.n));
        if (y->type == JV_OBJECT && t == JV_STRING) return jv_bool(jobj_get(y->u.obj, x->u.str.s, x->u.str.n) != NULL);
        return jeval_fail(e, at, "the test 'in' cannot look in a %s", jv_type_name(y));
    }
    return jeval_fail(e, at, "unknown test '%s'", name);
}
