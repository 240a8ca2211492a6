/* Statements: text, {{ output }}, if, for (loop.*, else, inline filter,
 * unpacking), set (names, tuples, namespace attributes, blocks), macro,
 * call and filter blocks, break and continue. */
#include <string.h>

#include "chat/eval.h"
#include "chat/text.h"

static bool assign(jeval *e, const jnode *target, jv *v, jenv *env) {
    if (target->kind == JN_NAME) return jenv_set(e, env, target->name, target->name_n, v) || jeval_oom(e, target);
    if (target->kind == JN_TUPLE) {
        if (v->type != JV_ARRAY) return jeval_fail(e, target, "cannot unpack a %s", jv_type_name(v)), false;
        if (v->u.arr.n != target->args.n)
            return jeval_fail(e, target, "too %s values to unpack (expected %zu, got %zu)",
                              v->u.arr.n < target->args.n ? "few" : "many", target->args.n, v->u.arr.n), false;
        for (size_t i = 0; i < target->args.n; i++) {
            const jnode *t = target->args.items[i];
            if (t->kind != JN_NAME) return jeval_fail(e, t, "can only unpack into names"), false;
            if (!jenv_set(e, env, t->name, t->name_n, v->u.arr.items[i])) return jeval_oom(e, t), false;
        }
        return true;
    }
    /* {% set ns.attr = v %} */
    jv *obj = jeval_expr(e, target->a, env);
    if (!obj) return false;
    if (obj->type != JV_NAMESPACE) return jeval_fail(e, target, "cannot set an attribute of a %s (only of a namespace)", jv_type_name(obj)), false;
    if (target->flag || target->b->kind != JN_NAME) return jeval_fail(e, target, "a namespace attribute must be a name"), false;
    return jobj_set(e->a, obj->u.obj, target->b->name, target->b->name_n, v) || jeval_oom(e, target);
}

static int exec_set(jeval *e, const jnode *nd, jenv *env) {
    jv *v;
    if (nd->b) {
        v = jeval_expr(e, nd->b, env);
    } else {
        jbuf out;
        jbuf_init(&out, e->a, e->limits.max_output);
        if (jeval_block(e, &nd->body, env, &out) < 0) return -1;
        v = out.failed ? jeval_oom(e, nd) : jv_str_own(e->a, out.s ? out.s : "", out.n);
    }
    return v && assign(e, nd->a, v, env) ? 0 : -1;
}

static jv *loop_object(jeval *e, jv *items, size_t i) {
    size_t n = items->u.arr.n;
    jv *loop = jv_object(e->a);
    if (!loop) return NULL;
    jobj *o = loop->u.obj;
    jarena *a = e->a;
    bool ok = jobj_set(a, o, "index", 5, jv_int(a, (int64_t)i + 1)) && jobj_set(a, o, "index0", 6, jv_int(a, (int64_t)i)) &&
              jobj_set(a, o, "revindex", 8, jv_int(a, (int64_t)(n - i))) &&
              jobj_set(a, o, "revindex0", 9, jv_int(a, (int64_t)(n - i - 1))) &&
              jobj_set(a, o, "first", 5, jv_bool(i == 0)) && jobj_set(a, o, "last", 4, jv_bool(i == n - 1)) &&
              jobj_set(a, o, "length", 6, jv_int(a, (int64_t)n)) &&
              jobj_set(a, o, "previtem", 8, i > 0 ? items->u.arr.items[i - 1] : jv_undefined()) &&
              jobj_set(a, o, "nextitem", 8, i + 1 < n ? items->u.arr.items[i + 1] : jv_undefined());
    for (size_t k = 0; ok && k < o->n; k++) ok = o->vals[k] != NULL;
    return ok ? loop : NULL;
}

/* The values a for loop walks: a list, a mapping's keys, a string's characters. */
static jv *iteration_items(jeval *e, const jnode *at, jv *it) {
    if (it->type == JV_ARRAY) return it;
    if (it->type == JV_OBJECT) {
        jv *keys = jv_array(e->a, it->u.obj->n);
        if (!keys) return NULL;
        for (size_t i = 0; i < it->u.obj->n; i++)
            if (!(keys->u.arr.items[i] = jv_str_own(e->a, it->u.obj->keys[i], it->u.obj->key_lens[i]))) return NULL;
        return keys;
    }
    if (it->type == JV_STRING) {
        size_t n;
        size_t *offs = jtext_cp_offsets(e->a, it->u.str.s, it->u.str.n, &n);
        jv *chars = offs ? jv_array(e->a, n) : NULL;
        if (!chars) return NULL;
        for (size_t i = 0; i < n; i++)
            if (!(chars->u.arr.items[i] = jv_str_own(e->a, it->u.str.s + offs[i], offs[i + 1] - offs[i]))) return NULL;
        return chars;
    }
    return jeval_fail(e, at, "cannot loop over a %s", jv_type_name(it));
}

static int exec_for(jeval *e, const jnode *nd, jenv *env, jbuf *out) {
    jenv *scope = jenv_new(e, env);
    if (!scope) return jeval_oom(e, nd), -1;
    jv *it = jeval_expr(e, nd->b, scope);
    jv *items = it ? iteration_items(e, nd->b, it) : NULL;
    if (!items) return e->failed ? -1 : (jeval_oom(e, nd), -1);
    if (nd->c) {  /* for x in xs if cond: keep the items that pass, then loop */
        jv *kept = jv_array(e->a, items->u.arr.n);
        if (!kept) return jeval_oom(e, nd), -1;
        size_t k = 0;
        for (size_t i = 0; i < items->u.arr.n; i++) {
            jenv *probe = jenv_new(e, scope);
            if (!probe || !jeval_step(e, nd)) return probe ? -1 : (jeval_oom(e, nd), -1);
            if (!assign(e, nd->a, items->u.arr.items[i], probe)) return -1;
            jv *c = jeval_expr(e, nd->c, probe);
            if (!c) return -1;
            if (jv_truthy(c)) kept->u.arr.items[k++] = items->u.arr.items[i];
        }
        kept->u.arr.n = k;
        items = kept;
    }
    for (size_t i = 0; i < items->u.arr.n; i++) {
        if (!jeval_step(e, nd)) return -1;
        jv *loop = loop_object(e, items, i);
        if (!loop || !jenv_set(e, scope, "loop", 4, loop)) return jeval_oom(e, nd), -1;
        if (!assign(e, nd->a, items->u.arr.items[i], scope)) return -1;
        int r = jeval_block(e, &nd->body, scope, out);
        if (r < 0) return -1;
        if (r == 1) break;
    }
    /* Python runs the else block when nothing was iterated */
    if (items->u.arr.n == 0 && jeval_block(e, &nd->alt, scope, out) < 0) return -1;
    return 0;
}

static int exec_call_block(jeval *e, const jnode *nd, jenv *env, jbuf *out) {
    jv *caller = jeval_macro(e, nd, env);
    jv **args;
    size_t nargs;
    jobj *kwargs;
    if (!caller) return jeval_oom(e, nd), -1;
    if (!jeval_args(e, &nd->a->args, env, &args, &nargs, &kwargs)) return -1;
    jv *fn = jeval_expr(e, nd->a->a, env);
    if (!fn) return -1;
    jenv *with_caller = jenv_new(e, env);
    if (!with_caller || !jenv_set(e, with_caller, "caller", 6, caller)) return jeval_oom(e, nd), -1;
    jv *r = jeval_call(e, nd, fn, args, nargs, kwargs, with_caller);
    if (!r) return -1;
    return jv_append_output(out, r) ? 0 : (jeval_oom(e, nd), -1);
}

static int exec_filter_block(jeval *e, const jnode *nd, jenv *env, jbuf *out) {
    jbuf body;
    jbuf_init(&body, e->a, e->limits.max_output);
    if (jeval_block(e, &nd->body, env, &body) < 0) return -1;
    if (body.failed) return jeval_oom(e, nd), -1;
    jv *text = jv_str_own(e->a, body.s ? body.s : "", body.n);
    jv *r = text ? jfilter_apply(e, nd->a, text, env) : NULL;
    if (!r) return -1;
    return jv_append_output(out, r) ? 0 : (jeval_oom(e, nd), -1);
}

static int exec_statement(jeval *e, const jnode *nd, jenv *env, jbuf *out) {
    switch (nd->kind) {
    case JN_TEXT: return jbuf_add(out, nd->name, nd->name_n) ? 0 : (jeval_oom(e, nd), -1);
    case JN_OUTPUT: {
        jv *v = jeval_expr(e, nd->a, env);
        if (!v) return -1;
        return jv_append_output(out, v) ? 0 : (jeval_oom(e, nd), -1);
    }
    case JN_IF: {
        jv *c = jeval_expr(e, nd->a, env);
        if (!c) return -1;
        return jeval_block(e, jv_truthy(c) ? &nd->body : &nd->alt, env, out);
    }
    case JN_FOR: return exec_for(e, nd, env, out);
    case JN_SET: return exec_set(e, nd, env);
    case JN_MACRO: {
        jv *m = jeval_macro(e, nd, NULL);
        return m && jenv_set(e, env, nd->name, strlen(nd->name), m) ? 0 : (jeval_oom(e, nd), -1);
    }
    case JN_CALL_BLOCK: return exec_call_block(e, nd, env, out);
    case JN_FILTER_BLOCK: return exec_filter_block(e, nd, env, out);
    case JN_BREAK: return 1;
    case JN_CONTINUE: return 2;
    default: {  /* an expression statement cannot be written, but be safe */
        jv *v = jeval_expr(e, nd, env);
        return v && jv_append_output(out, v) ? 0 : -1;
    }
    }
}

int jeval_block(jeval *e, const jlist *stmts, jenv *env, jbuf *out) {
    if (++e->depth > e->limits.max_depth + 256) {
        e->depth--;
        jeval_limit(e, stmts->n ? stmts->items[0] : NULL, "blocks nested too deeply");
        return -1;
    }
    int r = 0;
    for (size_t i = 0; i < stmts->n && r == 0; i++) {
        if (!jeval_step(e, stmts->items[i])) r = -1;
        else r = exec_statement(e, stmts->items[i], env, out);
        if (r == 0 && out->failed) r = (jeval_oom(e, stmts->items[i]), -1);
    }
    e->depth--;
    return r;
}
