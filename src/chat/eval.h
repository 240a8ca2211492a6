/*
 * The template evaluator's shared state and entry points, used by the
 * statement/expression evaluator (eval.c), filters, tests, methods and
 * global functions.
 */
#ifndef PLM_CHAT_EVAL_H
#define PLM_CHAT_EVAL_H

#include <stdbool.h>
#include <stddef.h>

#include "chat/ast.h"
#include "chat/value.h"

/* A scope: variables set here, then the enclosing scope's. */
typedef struct jenv {
    struct jenv *parent;
    jobj vars;
} jenv;

/* A callable value: a C builtin (bound to `self` for methods), a macro, or
 * the caller() of a {% call %} block (a macro whose scope is `scope`). */
struct jfunc {
    jbuiltin_fn builtin;
    jv *self;
    const jnode *macro;  /* JN_MACRO or JN_CALL_BLOCK */
    jenv *scope;         /* caller(): where the call block was written */
    bool takes_kwargs, takes_varargs;
};

typedef struct jlimits {
    size_t max_output;  /* bytes of rendered text */
    size_t max_steps;   /* statements executed plus loop iterations */
    int max_depth;      /* nested macro calls and expression evaluation */
} jlimits;

typedef struct jeval {
    jarena *a;
    const char *src;  /* the template, for error positions */
    size_t src_n;
    jlimits limits;
    size_t steps;
    int depth;
    bool failed;
    bool limit;       /* the failure was a limit (memory, output, steps, depth) */
    size_t err_pos;
    char err[400];
} jeval;

/* Records the first error at node `at` (its position names line and column);
 * returns NULL so callers can `return jeval_fail(...)`. */
jv *jeval_fail(jeval *e, const jnode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* jeval_fail for a limit reached (steps, depth, sizes): marks e->limit. */
jv *jeval_limit(jeval *e, const jnode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The arena ran out or the output passed its limit: one message for both. */
jv *jeval_oom(jeval *e, const jnode *at);

/* Counts one step; false (with the error set) past the limit. */
bool jeval_step(jeval *e, const jnode *at);
/* A macro value for a JN_MACRO, or caller() for a JN_CALL_BLOCK written in `scope`. */
jv *jeval_macro(jeval *e, const jnode *nd, jenv *scope);

jenv *jenv_new(jeval *e, jenv *parent);
jv *jenv_get(const jenv *env, const char *name, size_t n);  /* NULL if unset */
bool jenv_set(jeval *e, jenv *env, const char *name, size_t n, jv *v);

/* Runs statements, appending to out: 0 done, 1 break, 2 continue, -1 error. */
int jeval_block(jeval *e, const jlist *stmts, jenv *env, jbuf *out);
jv *jeval_expr(jeval *e, const jnode *nd, jenv *env);
/* Evaluates call arguments: positional values (spreads expanded) and keywords. */
bool jeval_args(jeval *e, const jlist *args, jenv *env, jv ***pos, size_t *npos, jobj **kwargs);
/* Calls a function value. */
jv *jeval_call(jeval *e, const jnode *at, jv *fn, jv **args, size_t nargs, jobj *kwargs, jenv *env);
jv *jeval_builtin(jeval *e, jbuiltin_fn fn, jv *self);

/* filters.c / tests.c / methods.c / globals.c */
jv *jfilter_apply(jeval *e, const jnode *filter, jv *operand, jenv *env);
jv *jfilter_by_name(jeval *e, const jnode *at, const char *name, jv *operand, jv **args, size_t nargs,
                    jobj *kwargs);
jv *jtest_apply(jeval *e, const jnode *at, const char *name, jv *operand, jv **args, size_t nargs);
/* A method or property of a value (s.startswith, d.items, xs.length); NULL if none. */
jv *jmethod_lookup(jeval *e, jv *self, const char *name, size_t n);
bool jglobals_install(jeval *e, jenv *env);

/* Shared helpers */
jv *jkwarg(jobj *kwargs, const char *name);  /* NULL when absent */
jv *jarg(jv **args, size_t nargs, size_t i, jobj *kwargs, const char *name);
jv *jv_concat_str(jeval *e, const jnode *at, const jv *a, const jv *b);
int jv_compare(jeval *e, const jnode *at, const jv *a, const jv *b, bool case_sensitive, bool *ok);
/* The attribute path "a.b.0" of a value (undefined when missing). */
jv *jv_attribute_path(jv *item, const char *path, size_t n);

#endif
