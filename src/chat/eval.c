/*
 * The evaluator's core: errors, scopes, step counting, call arguments,
 * macros and calls.  Expressions are in expr.c, statements in stmt.c.
 *
 * A template's syntax tree is evaluated so: statements write to an output
 * buffer, expressions produce values.  Semantics follow @huggingface/jinja (the
 * Jinja that transformers.js and the Hugging Face Hub render chat templates
 * with) so prompts come out byte-identical; where it departs from Python
 * Jinja in ways templates never rely on, Python's behaviour is kept and the
 * comment says so.  Every step is counted and every recursion bounded, so a
 * hostile template ends with an error instead of a hang or a crash.
 */
#include "chat/eval.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "chat/text.h"

jv *jeval_fail(jeval *e, const jnode *at, const char *fmt, ...) {
    if (e->failed) return NULL;
    e->failed = true;
    e->err_pos = at ? at->pos : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    return NULL;
}

jv *jeval_limit(jeval *e, const jnode *at, const char *fmt, ...) {
    if (e->failed) return NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    e->failed = e->limit = true;
    e->err_pos = at ? at->pos : 0;
    return NULL;
}

jv *jeval_oom(jeval *e, const jnode *at) {
    if (jarena_exhausted(e->a)) return jeval_limit(e, at, "the template used more memory than allowed");
    return jeval_limit(e, at, "the output passed its limit of %zu bytes", e->limits.max_output);
}

/* ---- scopes ---------------------------------------------------------- */

jenv *jenv_new(jeval *e, jenv *parent) {
    jenv *env = jarena_alloc(e->a, sizeof *env);
    if (env) env->parent = parent;
    return env;
}

jv *jenv_get(const jenv *env, const char *name, size_t n) {
    for (; env; env = env->parent) {
        jv *v = jobj_get(&env->vars, name, n);
        if (v) return v;
    }
    return NULL;
}

bool jenv_set(jeval *e, jenv *env, const char *name, size_t n, jv *v) {
    return v && jobj_set(e->a, &env->vars, name, n, v);
}

bool jeval_step(jeval *e, const jnode *at) {
    if (++e->steps <= e->limits.max_steps) return true;
    jeval_limit(e, at, "the template ran more than %zu steps (a loop that never ends?)", e->limits.max_steps);
    return false;
}

/* ---- arguments and calls -------------------------------------------- */

jv *jkwarg(jobj *kwargs, const char *name) { return kwargs ? jobj_get(kwargs, name, strlen(name)) : NULL; }

jv *jarg(jv **args, size_t nargs, size_t i, jobj *kwargs, const char *name) {
    if (i < nargs) return args[i];
    return name ? jkwarg(kwargs, name) : NULL;
}

bool jeval_args(jeval *e, const jlist *args, jenv *env, jv ***pos, size_t *npos, jobj **kwargs) {
    size_t cap = args->n + 1, n = 0;
    jv **vals = jarena_alloc(e->a, cap * sizeof *vals);
    jobj *kw = jobj_new(e->a);
    if (!vals || !kw) return jeval_oom(e, NULL), false;
    for (size_t i = 0; i < args->n; i++) {
        const jnode *arg = args->items[i];
        if (arg->kind == JN_KWARG || arg->kind == JN_KWSPREAD) continue;
        jv *v = jeval_expr(e, arg->kind == JN_SPREAD ? arg->a : arg, env);
        if (!v) return false;
        if (arg->kind != JN_SPREAD) {
            vals[n++] = v;
            continue;
        }
        if (v->type != JV_ARRAY) return jeval_fail(e, arg, "cannot unpack a %s with *", jv_type_name(v)), false;
        jv **grown = jarena_alloc(e->a, (cap + v->u.arr.n) * sizeof *grown);
        if (!grown) return jeval_oom(e, arg), false;
        memcpy(grown, vals, n * sizeof *vals);
        memcpy(grown + n, v->u.arr.items, v->u.arr.n * sizeof *vals);
        vals = grown;
        n += v->u.arr.n;
        cap += v->u.arr.n;
    }
    for (size_t i = 0; i < args->n; i++) {
        const jnode *arg = args->items[i];
        if (arg->kind != JN_KWARG && arg->kind != JN_KWSPREAD) continue;
        jv *v = jeval_expr(e, arg->a, env);
        if (!v) return false;
        if (arg->kind == JN_KWARG) {
            if (jobj_get(kw, arg->name, arg->name_n))
                return jeval_fail(e, arg, "got multiple values for keyword argument '%s'", arg->name), false;
            if (!jobj_set(e->a, kw, arg->name, arg->name_n, v)) return jeval_oom(e, arg), false;
            continue;
        }
        if (v->type != JV_OBJECT) return jeval_fail(e, arg, "the argument after ** must be a mapping"), false;
        for (size_t k = 0; k < v->u.obj->n; k++) {
            if (jobj_get(kw, v->u.obj->keys[k], v->u.obj->key_lens[k]))
                return jeval_fail(e, arg, "got multiple values for keyword argument '%s'", v->u.obj->keys[k]), false;
            if (!jobj_set(e->a, kw, v->u.obj->keys[k], v->u.obj->key_lens[k], v->u.obj->vals[k]))
                return jeval_oom(e, arg), false;
        }
    }
    *pos = vals;
    *npos = n;
    *kwargs = kw;
    return true;
}

static const char *param_name(const jnode *param, size_t *n) {
    *n = param->name_n;
    return param->name;
}

/* Binds a macro's parameters: positionals, then keywords, then defaults
 * (evaluated last, in the macro's own scope, as Jinja does). */
static bool bind_parameters(jeval *e, const jnode *at, const jfunc *fn, jv **args, size_t nargs, jobj *kwargs,
                            jenv *scope) {
    const jlist *params = &fn->macro->args;
    size_t used_kw = 0;
    for (size_t i = 0; i < params->n; i++) {
        size_t n;
        const char *name = param_name(params->items[i], &n);
        jv *v = i < nargs ? args[i] : NULL;
        if (!v && kwargs && (v = jobj_get(kwargs, name, n))) used_kw++;
        if (!jenv_set(e, scope, name, n, v ? v : jv_undefined())) return jeval_oom(e, at), false;
    }
    size_t extra_kw = (kwargs ? kwargs->n : 0) - used_kw;
    if (fn->takes_kwargs) {
        jv *kw = jv_object(e->a);
        if (!kw) return jeval_oom(e, at), false;
        for (size_t k = 0; kwargs && k < kwargs->n; k++) {
            bool is_param = false;
            for (size_t i = 0; i < params->n && !is_param; i++)
                is_param = i >= nargs && params->items[i]->name_n == kwargs->key_lens[k] &&
                           !memcmp(params->items[i]->name, kwargs->keys[k], kwargs->key_lens[k]);
            if (!is_param && !jobj_set(e->a, kw->u.obj, kwargs->keys[k], kwargs->key_lens[k], kwargs->vals[k]))
                return jeval_oom(e, at), false;
        }
        if (!jenv_set(e, scope, "kwargs", 6, kw)) return jeval_oom(e, at), false;
    } else if (extra_kw > 0) {
        return jeval_fail(e, at, "macro '%s' got an unexpected keyword argument", fn->macro->name ? fn->macro->name : "caller"), false;
    }
    if (fn->takes_varargs) {
        size_t extra = nargs > params->n ? nargs - params->n : 0;
        jv *va = jv_array(e->a, extra);
        if (!va) return jeval_oom(e, at), false;
        for (size_t i = 0; i < extra; i++) va->u.arr.items[i] = args[params->n + i];
        if (!jenv_set(e, scope, "varargs", 7, va)) return jeval_oom(e, at), false;
    } else if (nargs > params->n) {
        return jeval_fail(e, at, "macro '%s' takes at most %zu argument(s), got %zu",
                          fn->macro->name ? fn->macro->name : "caller", params->n, nargs), false;
    }
    for (size_t i = 0; i < params->n; i++) {
        const jnode *param = params->items[i];
        if (param->kind != JN_KWARG) continue;
        size_t n;
        const char *name = param_name(param, &n);
        if (jobj_get(&scope->vars, name, n)->type != JV_UNDEFINED) continue;
        if (i < nargs) continue;
        jv *v = jeval_expr(e, param->a, scope);
        if (!v || !jenv_set(e, scope, name, n, v)) return v ? (jeval_oom(e, at), false) : false;
    }
    return true;
}

static jv *call_macro(jeval *e, const jnode *at, jfunc *fn, jv **args, size_t nargs, jobj *kwargs, jenv *env) {
    if (++e->depth > e->limits.max_depth) {
        e->depth--;
        return jeval_limit(e, at, "macro calls nested deeper than %d (endless recursion?)", e->limits.max_depth);
    }
    /* @huggingface/jinja scopes a macro under its caller; a {% call %}
     * block's caller() runs where the block was written */
    jenv *scope = jenv_new(e, fn->scope ? fn->scope : env);
    jv *result = NULL;
    if (scope && bind_parameters(e, at, fn, args, nargs, kwargs, scope)) {
        jbuf out;
        jbuf_init(&out, e->a, e->limits.max_output);
        int r = jeval_block(e, &fn->macro->body, scope, &out);
        if (r >= 0) result = out.failed ? jeval_oom(e, at) : jv_str_own(e->a, out.s ? out.s : "", out.n);
    } else if (!scope) {
        jeval_oom(e, at);
    }
    e->depth--;
    return result;
}

jv *jeval_call(jeval *e, const jnode *at, jv *fn, jv **args, size_t nargs, jobj *kwargs, jenv *env) {
    if (fn->type != JV_FUNCTION) return jeval_fail(e, at, "cannot call a %s: it is not a function", jv_type_name(fn));
    jfunc *f = fn->u.fn;
    if (f->builtin) return f->builtin(e, at, f->self, args, nargs, kwargs);
    return call_macro(e, at, f, args, nargs, kwargs, env);
}

jv *jeval_builtin(jeval *e, jbuiltin_fn fn, jv *self) {
    jfunc *f = jarena_alloc(e->a, sizeof *f);
    if (!f) return NULL;
    f->builtin = fn;
    f->self = self;
    return jv_func(e->a, f);
}

/* Does a macro body read `kwargs` or `varargs`?  (Jinja then accepts extra
 * keyword or positional arguments.)  A plain walk over the tree. */
static void scan_special_names(const jnode *nd, bool *kw, bool *va, int depth) {
    if (!nd || depth > 4096) return;
    if (nd->kind == JN_NAME) {
        if (nd->name_n == 6 && !memcmp(nd->name, "kwargs", 6)) *kw = true;
        if (nd->name_n == 7 && !memcmp(nd->name, "varargs", 7)) *va = true;
        return;
    }
    if (nd->kind == JN_MACRO && depth > 0) return;  /* a nested macro has its own */
    scan_special_names(nd->a, kw, va, depth + 1);
    scan_special_names(nd->b, kw, va, depth + 1);
    scan_special_names(nd->c, kw, va, depth + 1);
    const jlist *lists[3] = {&nd->args, &nd->body, &nd->alt};
    for (int l = 0; l < 3; l++)
        for (size_t i = 0; i < lists[l]->n; i++) scan_special_names(lists[l]->items[i], kw, va, depth + 1);
}

jv *jeval_macro(jeval *e, const jnode *nd, jenv *scope) {
    jfunc *f = jarena_alloc(e->a, sizeof *f);
    if (!f) return NULL;
    f->macro = nd;
    f->scope = scope;
    for (size_t i = 0; i < nd->body.n; i++) scan_special_names(nd->body.items[i], &f->takes_kwargs, &f->takes_varargs, 1);
    return jv_func(e->a, f);
}
