/* Expressions: literals, names, operators with @huggingface/jinja's
 * semantics (JavaScript's number and string rules where they show), members,
 * slices, calls, filters and tests. */
#include <math.h>
#include <string.h>

#include "chat/eval.h"
#include "chat/text.h"

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
