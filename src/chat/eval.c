/*
 * Evaluates a template's syntax tree: statements write to an output buffer,
 * expressions produce values.  Semantics follow @huggingface/jinja (the
 * Jinja that transformers.js and the Hugging Face Hub render chat templates
 * with) so prompts come out byte-identical; where it departs from Python
 * Jinja in ways templates never rely on, Python's behaviour is kept and the
 * comment says so.  Every step is counted and every recursion bounded, so a
 * hostile template ends with an error instead of a hang or a crash.
 */
#include "chat/eval.h"

#include <math.h>
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

static bool step(jeval *e, const jnode *at) {
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

static jv *make_macro(jeval *e, const jnode *nd, jenv *scope) {
    jfunc *f = jarena_alloc(e->a, sizeof *f);
    if (!f) return NULL;
    f->macro = nd;
    f->scope = scope;
    for (size_t i = 0; i < nd->body.n; i++) scan_special_names(nd->body.items[i], &f->takes_kwargs, &f->takes_varargs, 1);
    return jv_func(e->a, f);
}

/* ---- expressions ----------------------------------------------------- */

jv *jv_concat_str(jeval *e, const jnode *at, const jv *a, const jv *b) {
    jbuf out;
    jbuf_init(&out, e->a, e->limits.max_output);
    jv_append_concat(&out, a);
    jv_append_concat(&out, b);
    if (out.failed) return jeval_oom(e, at);
    return jv_str_own(e->a, out.s ? out.s : "", out.n);
}

static jv *arith_int(jeval *e, const jnode *at, jop op, int64_t a, int64_t b) {
    int64_t r = 0;
    bool overflow = false;
    switch (op) {
    case JOP_ADD: overflow = __builtin_add_overflow(a, b, &r); break;
    case JOP_SUB: overflow = __builtin_sub_overflow(a, b, &r); break;
    case JOP_MUL: overflow = __builtin_mul_overflow(a, b, &r); break;
    case JOP_FLOORDIV:
    case JOP_MOD:
        if (b == 0) return jeval_fail(e, at, "division by zero");
        if (a == INT64_MIN && b == -1) return jeval_fail(e, at, "integer overflow");
        if (op == JOP_MOD) r = a % b;  /* JavaScript's remainder: the sign of a */
        else r = a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
        break;
    default: break;
    }
    if (overflow) return jeval_fail(e, at, "integer overflow");
    return jv_int(e->a, r);
}

static jv *arithmetic(jeval *e, const jnode *at, jop op, const jv *l, const jv *r) {
    bool is_float = l->type == JV_FLOAT || r->type == JV_FLOAT;
    double a = jv_num(l), b = jv_num(r);
    switch (op) {
    case JOP_LT: return jv_bool(a < b);
    case JOP_GT: return jv_bool(a > b);
    case JOP_LE: return jv_bool(a <= b);
    case JOP_GE: return jv_bool(a >= b);
    case JOP_DIV:
        if (b == 0) return jeval_fail(e, at, "division by zero");
        return jv_float(e->a, a / b);
    default: break;
    }
    if (!is_float) return arith_int(e, at, op, l->u.i, r->u.i);
    double res;
    switch (op) {
    case JOP_ADD: res = a + b; break;
    case JOP_SUB: res = a - b; break;
    case JOP_MUL: res = a * b; break;
    case JOP_FLOORDIV:
        if (b == 0) return jeval_fail(e, at, "division by zero");
        res = floor(a / b);
        break;
    case JOP_MOD:
        if (b == 0) return jeval_fail(e, at, "division by zero");
        res = fmod(a, b);
        break;
    default: return jeval_fail(e, at, "unsupported operator");
    }
    return jv_float(e->a, res);
}

static jv *power(jeval *e, const jnode *at, const jv *l, const jv *r) {
    double a = jv_num(l), b = jv_num(r);
    if (a == 0 && b < 0) return jeval_fail(e, at, "0.0 cannot be raised to a negative power");
    double res = pow(a, b);
    if (!isfinite(res)) return jeval_fail(e, at, "the power is not a finite number");
    bool is_float = l->type == JV_FLOAT || r->type == JV_FLOAT || b < 0;
    if (is_float) return jv_float(e->a, res);
    if (fabs(res) >= 9.2e18) return jeval_fail(e, at, "integer overflow");
    return jv_int(e->a, (int64_t)res);
}

static bool str_contains(const jv *hay, const jv *needle) {
    if (needle->u.str.n == 0) return true;
    if (needle->u.str.n > hay->u.str.n) return false;
    return memmem(hay->u.str.s, hay->u.str.n, needle->u.str.s, needle->u.str.n) != NULL;
}

static const char *op_name(jop op) {
    static const char *names[] = {"?", "+", "-", "~", "*", "/", "//", "%", "**", "==", "!=", "<", ">",
                                  "<=", ">=", "in", "not in", "and", "or", "not", "-", "+"};
    return names[op];
}

static jv *eval_binary(jeval *e, const jnode *nd, jenv *env) {
    jv *l = jeval_expr(e, nd->a, env);
    if (!l) return NULL;
    if (nd->op == JOP_AND) return jv_truthy(l) ? jeval_expr(e, nd->b, env) : l;
    if (nd->op == JOP_OR) return jv_truthy(l) ? l : jeval_expr(e, nd->b, env);
    jv *r = jeval_expr(e, nd->b, env);
    if (!r) return NULL;
    jop op = nd->op;
    if (op == JOP_EQ) return jv_bool(jv_loose_equal(l, r));
    if (op == JOP_NE) return jv_bool(!jv_loose_equal(l, r));
    bool is_in = op == JOP_IN || op == JOP_NOT_IN;
    if (l->type == JV_UNDEFINED || r->type == JV_UNDEFINED) {
        if (r->type == JV_UNDEFINED && is_in) return jv_bool(op == JOP_NOT_IN);
        return jeval_fail(e, nd, "cannot apply '%s' to an undefined value", op_name(op));
    }
    if (l->type == JV_NONE || r->type == JV_NONE)
        return jeval_fail(e, nd, "cannot apply '%s' to none", op_name(op));
    if (op == JOP_CONCAT) return jv_concat_str(e, nd, l, r);
    bool l_num = jv_is_number(l) || l->type == JV_BOOL, r_num = jv_is_number(r) || r->type == JV_BOOL;
    if (op == JOP_POW && l_num && r_num) return power(e, nd, l, r);
    if (jv_is_number(l) && jv_is_number(r) && !is_in) return arithmetic(e, nd, op, l, r);
    if (l->type == JV_ARRAY && r->type == JV_ARRAY) {
        if (op == JOP_ADD) {
            jv *out = jv_array(e->a, l->u.arr.n + r->u.arr.n);
            if (!out) return jeval_oom(e, nd);
            if (l->u.arr.n) memcpy(out->u.arr.items, l->u.arr.items, l->u.arr.n * sizeof(jv *));
            if (r->u.arr.n) memcpy(out->u.arr.items + l->u.arr.n, r->u.arr.items, r->u.arr.n * sizeof(jv *));
            return out;
        }
    } else if (r->type == JV_ARRAY && is_in) {
        bool found = false;
        for (size_t i = 0; i < r->u.arr.n && !found; i++) found = jv_strict_equal(r->u.arr.items[i], l);
        return jv_bool(found == (op == JOP_IN));
    }
    if ((l->type == JV_STRING || r->type == JV_STRING) && op == JOP_ADD) return jv_concat_str(e, nd, l, r);
    if (l->type == JV_STRING && r->type == JV_STRING) {
        if (is_in) return jv_bool(str_contains(r, l) == (op == JOP_IN));
        if (op >= JOP_LT && op <= JOP_GE) {  /* Python compares strings; @huggingface/jinja refuses */
            bool ok;
            int c = jv_compare(e, nd, l, r, true, &ok);
            return jv_bool(op == JOP_LT ? c < 0 : op == JOP_GT ? c > 0 : op == JOP_LE ? c <= 0 : c >= 0);
        }
    }
    if (l->type == JV_STRING && r->type == JV_OBJECT && is_in)
        return jv_bool((jobj_get(r->u.obj, l->u.str.s, l->u.str.n) != NULL) == (op == JOP_IN));
    return jeval_fail(e, nd, "unsupported operand types for '%s': %s and %s", op_name(op), jv_type_name(l),
                      jv_type_name(r));
}

static jv *eval_unary(jeval *e, const jnode *nd, jenv *env) {
    jv *v = jeval_expr(e, nd->a, env);
    if (!v) return NULL;
    if (nd->op == JOP_NOT) return jv_bool(!jv_truthy(v));
    int sign = nd->op == JOP_NEG ? -1 : 1;
    if (v->type == JV_FLOAT) return jv_float(e->a, sign * v->u.f);
    if (v->type == JV_INT) {
        if (v->u.i == INT64_MIN && sign < 0) return jeval_fail(e, nd, "integer overflow");
        return jv_int(e->a, sign * v->u.i);
    }
    if (v->type == JV_BOOL) return jv_int(e->a, sign * (int64_t)v->u.b);
    return jeval_fail(e, nd, "bad operand type for unary '%s': %s", op_name(nd->op), jv_type_name(v));
}

static bool slice_index(jeval *e, const jnode *at, const jnode *part, jenv *env, bool *given, int64_t *out) {
    *given = false;
    if (!part) return true;
    jv *v = jeval_expr(e, part, env);
    if (!v) return false;
    if (v->type == JV_UNDEFINED || v->type == JV_NONE) return true;
    if (v->type != JV_INT) return jeval_fail(e, at, "slice indices must be integers, not %s", jv_type_name(v)), false;
    *given = true;
    *out = v->u.i;
    return true;
}

/* Python's slice rules over `len` elements; fills idx, returns the count. */
static size_t slice_plan(int64_t len, bool has_start, int64_t start, bool has_stop, int64_t stop, int64_t step,
                         int64_t *idx) {
    if (step > 0) {
        start = !has_start ? 0 : start < 0 ? (len + start > 0 ? len + start : 0) : (start < len ? start : len);
        stop = !has_stop ? len : stop < 0 ? (len + stop > 0 ? len + stop : 0) : (stop < len ? stop : len);
    } else {
        start = !has_start ? len - 1 : start < 0 ? (len + start > -1 ? len + start : -1) : (start < len - 1 ? start : len - 1);
        stop = !has_stop ? -1 : stop < -1 ? (len + stop > -1 ? len + stop : -1) : (stop < len - 1 ? stop : len - 1);
    }
    size_t k = 0;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) idx[k++] = i;
    return k;
}

static jv *eval_slice(jeval *e, const jnode *at, jv *obj, const jnode *s, jenv *env) {
    bool has_start, has_stop, has_step;
    int64_t start = 0, stop = 0, stepv = 1;
    if (!slice_index(e, at, s->a, env, &has_start, &start) || !slice_index(e, at, s->b, env, &has_stop, &stop) ||
        !slice_index(e, at, s->c, env, &has_step, &stepv))
        return NULL;
    if (stepv == 0) return jeval_fail(e, at, "slice step cannot be zero");
    size_t len;
    size_t *offs = NULL;
    if (obj->type == JV_ARRAY) len = obj->u.arr.n;
    else if (obj->type == JV_STRING) {
        offs = jtext_cp_offsets(e->a, obj->u.str.s, obj->u.str.n, &len);
        if (!offs) return jeval_oom(e, at);
    } else {
        return jeval_fail(e, at, "cannot slice a %s", jv_type_name(obj));
    }
    int64_t *idx = jarena_alloc(e->a, (len + 1) * sizeof *idx);
    if (!idx) return jeval_oom(e, at);
    size_t k = slice_plan((int64_t)len, has_start, start, has_stop, stop, stepv, idx);
    if (obj->type == JV_ARRAY) {
        jv *out = jv_array(e->a, k);
        if (!out) return jeval_oom(e, at);
        for (size_t i = 0; i < k; i++) out->u.arr.items[i] = obj->u.arr.items[idx[i]];
        return out;
    }
    jbuf b;
    jbuf_init(&b, e->a, 0);
    jbuf_add(&b, "", 0);
    for (size_t i = 0; i < k; i++) jbuf_add(&b, obj->u.str.s + offs[idx[i]], offs[idx[i] + 1] - offs[idx[i]]);
    if (b.failed) return jeval_oom(e, at);
    return jv_str_own(e->a, b.s, b.n);
}

static jv *index_sequence(jeval *e, const jnode *at, jv *obj, int64_t i) {
    if (obj->type == JV_ARRAY) {
        int64_t n = (int64_t)obj->u.arr.n;
        if (i < 0) i += n;
        return (i < 0 || i >= n) ? jv_undefined() : obj->u.arr.items[i];
    }
    size_t len;
    size_t *offs = jtext_cp_offsets(e->a, obj->u.str.s, obj->u.str.n, &len);
    if (!offs) return jeval_oom(e, at);
    if (i < 0) i += (int64_t)len;
    if (i < 0 || i >= (int64_t)len) return jv_undefined();
    return jv_str(e->a, obj->u.str.s + offs[i], offs[i + 1] - offs[i]);
}

static jv *eval_member(jeval *e, const jnode *nd, jenv *env) {
    jv *obj = jeval_expr(e, nd->a, env);
    if (!obj) return NULL;
    jv *prop;
    if (nd->flag) {
        if (nd->b->kind == JN_SLICE) return eval_slice(e, nd, obj, nd->b, env);
        if (!(prop = jeval_expr(e, nd->b, env))) return NULL;
    } else if (nd->b->kind == JN_INT) {
        prop = jv_int(e->a, nd->b->i);
    } else {
        prop = jv_str_own(e->a, nd->b->name, nd->b->name_n);
    }
    if (!prop) return jeval_oom(e, nd);
    jv *v = NULL;
    if (obj->type == JV_OBJECT || obj->type == JV_NAMESPACE) {
        if (prop->type != JV_STRING)
            return jeval_fail(e, nd, "cannot look up a %s key in a mapping", jv_type_name(prop));
        v = jobj_get(obj->u.obj, prop->u.str.s, prop->u.str.n);
        if (!v && obj->type == JV_OBJECT) v = jmethod_lookup(e, obj, prop->u.str.s, prop->u.str.n);
    } else if (obj->type == JV_ARRAY || obj->type == JV_STRING) {
        if (prop->type == JV_INT) v = index_sequence(e, nd, obj, prop->u.i);
        else if (prop->type == JV_STRING) v = jmethod_lookup(e, obj, prop->u.str.s, prop->u.str.n);
        else return jeval_fail(e, nd, "indices must be integers, not %s", jv_type_name(prop));
    } else if (prop->type == JV_STRING) {
        v = jmethod_lookup(e, obj, prop->u.str.s, prop->u.str.n);
    } else {
        return jeval_fail(e, nd, "cannot index a %s", jv_type_name(obj));
    }
    if (e->failed) return NULL;
    return v ? v : jv_undefined();
}

static jv *eval_call(jeval *e, const jnode *nd, jenv *env) {
    jv **args;
    size_t nargs;
    jobj *kwargs;
    if (!jeval_args(e, &nd->args, env, &args, &nargs, &kwargs)) return NULL;
    jv *fn = jeval_expr(e, nd->a, env);
    if (!fn) return NULL;
    return jeval_call(e, nd, fn, args, nargs, kwargs, env);
}

static jv *eval_collection(jeval *e, const jnode *nd, jenv *env) {
    if (nd->kind == JN_DICT) {
        jv *d = jv_object(e->a);
        if (!d) return jeval_oom(e, nd);
        for (size_t i = 0; i < nd->args.n; i++) {
            jv *k = jeval_expr(e, nd->args.items[i], env);
            if (!k) return NULL;
            if (k->type != JV_STRING) return jeval_fail(e, nd->args.items[i], "dict keys must be strings, not %s", jv_type_name(k));
            jv *v = jeval_expr(e, nd->alt.items[i], env);
            if (!v) return NULL;
            if (!jobj_set(e->a, d->u.obj, k->u.str.s, k->u.str.n, v)) return jeval_oom(e, nd);
        }
        return d;
    }
    jv *arr = jv_array(e->a, nd->args.n);
    if (!arr) return jeval_oom(e, nd);
    arr->tuple = nd->kind == JN_TUPLE;
    for (size_t i = 0; i < nd->args.n; i++)
        if (!(arr->u.arr.items[i] = jeval_expr(e, nd->args.items[i], env))) return NULL;
    return arr;
}

static jv *eval_expr_kind(jeval *e, const jnode *nd, jenv *env) {
    switch (nd->kind) {
    case JN_INT: return jv_int(e->a, nd->i);
    case JN_FLOAT: return jv_float(e->a, nd->f);
    case JN_STRING: return jv_str_own(e->a, nd->name, nd->name_n);
    case JN_NAME: {
        jv *v = jenv_get(env, nd->name, nd->name_n);
        return v ? v : jv_undefined();
    }
    case JN_ARRAY:
    case JN_TUPLE:
    case JN_DICT: return eval_collection(e, nd, env);
    case JN_MEMBER: return eval_member(e, nd, env);
    case JN_CALL: return eval_call(e, nd, env);
    case JN_BINARY: return eval_binary(e, nd, env);
    case JN_UNARY: return eval_unary(e, nd, env);
    case JN_FILTER: {
        jv *operand = jeval_expr(e, nd->a, env);
        return operand ? jfilter_apply(e, nd, operand, env) : NULL;
    }
    case JN_TEST: {
        jv *operand = jeval_expr(e, nd->a, env);
        if (!operand) return NULL;
        jv **args;
        size_t nargs;
        jobj *kwargs;
        if (!jeval_args(e, &nd->args, env, &args, &nargs, &kwargs)) return NULL;
        jv *r = jtest_apply(e, nd, nd->name, operand, args, nargs);
        return r ? jv_bool(jv_truthy(r) != nd->flag) : NULL;
    }
    case JN_SELECT: {
        jv *c = jeval_expr(e, nd->b, env);
        if (!c) return NULL;
        return jv_truthy(c) ? jeval_expr(e, nd->a, env) : jv_undefined();
    }
    case JN_TERNARY: {
        jv *c = jeval_expr(e, nd->a, env);
        if (!c) return NULL;
        return jeval_expr(e, jv_truthy(c) ? nd->b : nd->c, env);
    }
    case JN_SLICE: return jeval_fail(e, nd, "a slice is only valid inside []");
    case JN_KWARG:
    case JN_SPREAD:
    case JN_KWSPREAD: return jeval_fail(e, nd, "argument syntax outside a call");
    default: return jeval_fail(e, nd, "a statement where an expression was expected");
    }
}

jv *jeval_expr(jeval *e, const jnode *nd, jenv *env) {
    if (e->failed) return NULL;
    if (++e->depth > e->limits.max_depth + 256) {
        e->depth--;
        return jeval_limit(e, nd, "expression nested too deeply");
    }
    jv *v = eval_expr_kind(e, nd, env);
    e->depth--;
    if (!v && !e->failed) jeval_oom(e, nd);
    return v;
}

/* ---- statements ------------------------------------------------------ */

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
            if (!probe || !step(e, nd)) return probe ? -1 : (jeval_oom(e, nd), -1);
            if (!assign(e, nd->a, items->u.arr.items[i], probe)) return -1;
            jv *c = jeval_expr(e, nd->c, probe);
            if (!c) return -1;
            if (jv_truthy(c)) kept->u.arr.items[k++] = items->u.arr.items[i];
        }
        kept->u.arr.n = k;
        items = kept;
    }
    for (size_t i = 0; i < items->u.arr.n; i++) {
        if (!step(e, nd)) return -1;
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
    jv *caller = make_macro(e, nd, env);
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
        jv *m = make_macro(e, nd, NULL);
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
        if (!step(e, stmts->items[i])) r = -1;
        else r = exec_statement(e, stmts->items[i], env, out);
        if (r == 0 && out->failed) r = (jeval_oom(e, stmts->items[i]), -1);
    }
    e->depth--;
    return r;
}
