/*
 * The syntax tree of a compiled template.  One node type with a kind tag and
 * a few generic slots keeps the parser and the evaluator short; each kind's
 * comment says which slots it uses.  Nodes live in the template's arena.
 */
#ifndef PLM_CHAT_AST_H
#define PLM_CHAT_AST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/value.h"

typedef enum {
    /* statements */
    JN_TEXT,       /* name: the text */
    JN_COMMENT,    /* {# ... #}: parsed, then dropped from the statement lists */
    JN_OUTPUT,     /* a: expression printed by {{ }} */
    JN_IF,         /* a: test, body, alt */
    JN_FOR,        /* a: target (name or tuple), b: iterable, c: inline filter test or NULL, body, alt: else */
    JN_SET,        /* a: target, b: value (NULL: body is the value) */
    JN_MACRO,      /* name, args: parameters, body */
    JN_CALL_BLOCK, /* a: call expression, args: caller's parameters, body */
    JN_FILTER_BLOCK, /* a: filter (JN_FILTER with a NULL operand), body */
    JN_BREAK,
    JN_CONTINUE,
    /* expressions */
    JN_INT,        /* i */
    JN_FLOAT,      /* f */
    JN_STRING,     /* name: the value */
    JN_NAME,       /* name */
    JN_ARRAY,      /* args: items */
    JN_TUPLE,      /* args: items */
    JN_DICT,       /* args: keys, alt: values */
    JN_MEMBER,     /* a: object, b: property (JN_SLICE, an expression, or a NAME/INT when !flag), flag: computed [] */
    JN_SLICE,      /* a, b, c: start, stop, step (NULL when absent) */
    JN_CALL,       /* a: callee, args */
    JN_KWARG,      /* name, a: value */
    JN_SPREAD,     /* a: *expr */
    JN_KWSPREAD,   /* a: **expr */
    JN_BINARY,     /* op, a, b */
    JN_UNARY,      /* op, a */
    JN_FILTER,     /* a: operand, name, args, flag: called with parentheses */
    JN_TEST,       /* a: operand, name, args, flag: negated ("is not") */
    JN_SELECT,     /* a: value, b: condition ("a if b" without else) */
    JN_TERNARY,    /* a: condition, b: when true, c: when false */
} jnode_kind;

typedef enum {
    JOP_NONE = 0, JOP_ADD, JOP_SUB, JOP_CONCAT, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW,
    JOP_EQ, JOP_NE, JOP_LT, JOP_GT, JOP_LE, JOP_GE, JOP_IN, JOP_NOT_IN, JOP_AND, JOP_OR, JOP_NOT,
    JOP_NEG, JOP_POS,
} jop;

typedef struct jnode jnode;

typedef struct jlist {
    jnode **items;
    size_t n;
} jlist;

struct jnode {
    jnode_kind kind;
    jop op;
    size_t pos;        /* byte offset in the template source */
    const char *name;  /* NUL-terminated */
    size_t name_n;
    int64_t i;
    double f;
    bool flag;
    jnode *a, *b, *c;
    jlist args, body, alt;
};

typedef struct jparse_error {
    size_t pos;
    char message[200];
} jparse_error;

/* Parses a whole template into its statement list. */
bool jparse(jarena *a, const char *src, size_t n, jlist *out, jparse_error *err);

#endif
