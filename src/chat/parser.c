/*
 * Tokens to a syntax tree.  The grammar and operator precedence follow
 * @huggingface/jinja (which transformers.js and the Hub use), lowest first:
 * ternary "a if c else b", or, and, not, comparisons and in / not in,
 * + - ~, * / // %, **, "is" tests, | filters, unary signs, calls and members.
 * Test arguments ("is divisibleby 3") follow Python Jinja.
 */
#include "chat/ast.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/lexer.h"

enum { MAX_NESTING = 256 };  /* parser recursion: (((( and nested blocks */

typedef struct {
    jarena *a;
    jtoken *t;
    size_t n, i;
    int depth;
    jparse_error *err;
    bool failed;
} parser;

static jnode *fail_at(parser *p, size_t pos, const char *fmt, const char *arg) {
    if (!p->failed) {
        p->failed = true;
        p->err->pos = pos;
        snprintf(p->err->message, sizeof p->err->message, fmt, arg ? arg : "");
    }
    return NULL;
}

static const char *token_desc(const jtoken *t) {
    switch (t->type) {
    case JT_END: return "end of template";
    case JT_TEXT: return "text";
    case JT_CLOSE_STMT: return "'%}'";
    case JT_CLOSE_EXPR: return "'}}'";
    case JT_OPEN_STMT: return "'{%'";
    case JT_OPEN_EXPR: return "'{{'";
    default: return t->s;
    }
}

static jnode *fail(parser *p, const char *fmt) {
    const jtoken *t = &p->t[p->i < p->n ? p->i : p->n - 1];
    return fail_at(p, t->pos, fmt, token_desc(t));
}

static jtoken *peek(parser *p) { return &p->t[p->i < p->n ? p->i : p->n - 1]; }
static bool is(parser *p, jtok_type t) { return peek(p)->type == t; }

static bool is_name_at(parser *p, size_t k, const char *name) {
    if (p->i + k >= p->n) return false;
    const jtoken *t = &p->t[p->i + k];
    return t->type == JT_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}
static bool is_name(parser *p, const char *name) { return is_name_at(p, 0, name); }

static bool is_statement(parser *p, const char *const *names) {
    if (!is(p, JT_OPEN_STMT)) return false;
    for (; *names; names++)
        if (is_name_at(p, 1, *names)) return true;
    return false;
}

static bool expect(parser *p, jtok_type type, const char *what) {
    if (p->failed) return false;
    if (!is(p, type)) {
        char msg[200];
        snprintf(msg, sizeof msg, "expected %s, got %s", what, token_desc(peek(p)));
        fail_at(p, peek(p)->pos, "%s", msg);
        return false;
    }
    p->i++;
    return true;
}

static bool expect_name(parser *p, const char *name) {
    if (p->failed) return false;
    if (!is_name(p, name)) {
        char msg[200];
        snprintf(msg, sizeof msg, "expected '%s', got %s", name, token_desc(peek(p)));
        fail_at(p, peek(p)->pos, "%s", msg);
        return false;
    }
    p->i++;
    return true;
}

static jnode *node(parser *p, jnode_kind kind, size_t pos) {
    jnode *nd = jarena_alloc(p->a, sizeof *nd);
    if (!nd) return fail_at(p, pos, "template too large%s", NULL);
    nd->kind = kind;
    nd->pos = pos;
    return nd;
}

/* A growable node list: doubling copies in the arena. */
static bool list_push(parser *p, jlist *l, jnode *nd) {
    if (!nd) return false;
    if ((l->n & (l->n - 1)) == 0) {  /* n is 0 or a power of two: grow */
        size_t cap = l->n ? l->n * 2 : 4;
        jnode **items = jarena_alloc(p->a, cap * sizeof *items);
        if (!items) return fail_at(p, nd->pos, "template too large%s", NULL), false;
        if (l->n) memcpy(items, l->items, l->n * sizeof *items);
        l->items = items;
    }
    l->items[l->n++] = nd;
    return true;
}

static jnode *parse_expression(parser *p);
static jnode *parse_any(parser *p);
static jnode *parse_primary(parser *p);

static bool enter(parser *p) {
    if (++p->depth > MAX_NESTING) {
        fail(p, "template nested too deeply at %s");
        return false;
    }
    return true;
}

/* Statements until one of `stop` opens; false on error. */
static bool parse_body(parser *p, jlist *body, const char *const *stop, const char *opened_by, size_t open_pos) {
    while (!is_statement(p, stop)) {
        if (is(p, JT_END)) {
            fail_at(p, open_pos, "'%s' block is never closed", opened_by);
            return false;
        }
        jnode *nd = parse_any(p);
        if (!nd) return false;
        if (nd->kind == JN_COMMENT) continue;
        if (!list_push(p, body, nd)) return false;
    }
    return true;
}

/* ---- expressions ----------------------------------------------------- */

static jnode *parse_args(parser *p, jlist *args, bool parameters) {
    size_t open = peek(p)->pos;
    if (!expect(p, JT_LPAREN, "'('")) return NULL;
    bool saw_keyword = false;
    while (!is(p, JT_RPAREN)) {
        if (is(p, JT_END)) return fail_at(p, open, "unclosed '('%s", NULL);
        size_t pos = peek(p)->pos;
        jnode *arg;
        if (is(p, JT_POW) || (is(p, JT_MUL) && peek(p)->s[0] == '*' && peek(p)->n == 1)) {
            if (parameters) return fail(p, "argument unpacking is not allowed in parameters, at %s");
            bool kw = is(p, JT_POW);
            p->i++;
            arg = node(p, kw ? JN_KWSPREAD : JN_SPREAD, pos);
            if (!arg || !(arg->a = parse_expression(p))) return NULL;
        } else {
            arg = parse_expression(p);
            if (!arg) return NULL;
            if (is(p, JT_EQUALS)) {
                p->i++;
                if (arg->kind != JN_NAME) return fail_at(p, pos, "expected a name before '='%s", NULL);
                jnode *kw = node(p, JN_KWARG, pos);
                if (!kw) return NULL;
                kw->name = arg->name;
                kw->name_n = arg->name_n;
                if (!(kw->a = parse_expression(p))) return NULL;
                arg = kw;
                saw_keyword = true;
            } else if (saw_keyword) {
                return fail_at(p, pos, parameters ? "a parameter without default follows one with a default%s"
                                                  : "a positional argument follows a keyword argument%s", NULL);
            } else if (parameters && arg->kind != JN_NAME) {
                return fail_at(p, pos, "expected a parameter name%s", NULL);
            }
        }
        if (!list_push(p, args, arg)) return NULL;
        if (is(p, JT_COMMA)) p->i++;  /* optional, as @huggingface/jinja parses lists */
    }
    p->i++;
    return (jnode *)args;  /* non-NULL: success */
}

static jnode *parse_call(parser *p, jnode *callee);

static jnode *parse_subscript(parser *p, size_t pos) {
    jnode *parts[3] = {NULL, NULL, NULL};
    int count = 0;
    bool slice = false;
    while (!is(p, JT_RBRACKET)) {
        if (is(p, JT_END)) return fail_at(p, pos, "unclosed '['%s", NULL);
        if (count >= 3) return fail(p, "a slice takes at most 3 parts, at %s");
        if (is(p, JT_COLON)) {
            parts[count++] = NULL;
            p->i++;
            slice = true;
        } else {
            if (!(parts[count++] = parse_expression(p))) return NULL;
            if (is(p, JT_COLON)) {
                p->i++;
                slice = true;
            } else if (!is(p, JT_RBRACKET)) {
                return fail(p, "expected ']' or ':', got %s");
            }
        }
    }
    if (count == 0) return fail(p, "expected an index or a slice before %s");
    if (!slice) return parts[0];
    jnode *s = node(p, JN_SLICE, pos);
    if (s) {
        s->a = parts[0];
        s->b = parts[1];
        s->c = parts[2];
    }
    return s;
}

static jnode *parse_member(parser *p, jnode *object) {
    while (object && (is(p, JT_DOT) || is(p, JT_LBRACKET))) {
        size_t pos = peek(p)->pos;
        bool computed = is(p, JT_LBRACKET);
        p->i++;
        jnode *m = node(p, JN_MEMBER, pos);
        if (!m) return NULL;
        m->a = object;
        m->flag = computed;
        if (computed) {
            if (!(m->b = parse_subscript(p, pos)) || !expect(p, JT_RBRACKET, "']'")) return NULL;
        } else {
            if (!is(p, JT_NAME) && !is(p, JT_INT)) return fail(p, "expected a name after '.', got %s");
            if (!(m->b = parse_primary(p))) return NULL;
        }
        object = m;
    }
    return object;
}

static jnode *parse_call(parser *p, jnode *callee) {
    jnode *c = node(p, JN_CALL, callee->pos);
    if (!c) return NULL;
    c->a = callee;
    if (!parse_args(p, &c->args, false)) return NULL;
    jnode *e = parse_member(p, c);
    if (e && is(p, JT_LPAREN)) return parse_call(p, e);
    return e;
}

static jnode *parse_call_member(parser *p) {
    jnode *member = parse_member(p, parse_primary(p));
    if (member && is(p, JT_LPAREN)) return parse_call(p, member);
    return member;
}

static jnode *parse_expression_sequence(parser *p, bool primary) {
    size_t pos = peek(p)->pos;
    jnode *first = primary ? parse_primary(p) : parse_expression(p);
    if (!first || !is(p, JT_COMMA)) return first;
    jnode *t = node(p, JN_TUPLE, pos);
    if (!t || !list_push(p, &t->args, first)) return NULL;
    while (is(p, JT_COMMA)) {
        p->i++;
        if (!list_push(p, &t->args, primary ? parse_primary(p) : parse_expression(p))) return NULL;
    }
    return t;
}

static jnode *parse_primary(parser *p) {
    if (!enter(p)) return NULL;
    jtoken *t = peek(p);
    jnode *nd = NULL;
    switch (t->type) {
    case JT_INT:
    case JT_FLOAT: {
        nd = node(p, t->type == JT_INT ? JN_INT : JN_FLOAT, t->pos);
        if (!nd) break;
        errno = 0;
        if (t->type == JT_INT) nd->i = strtoll(t->s, NULL, 10);
        else nd->f = strtod(t->s, NULL);
        if (errno == ERANGE) nd = fail(p, "number out of range: %s");
        p->i++;
        break;
    }
    case JT_STRING: {  /* adjacent literals concatenate: "a" "b" */
        jbuf b;
        jbuf_init(&b, p->a, 0);
        jbuf_add(&b, "", 0);
        while (is(p, JT_STRING)) {
            jbuf_add(&b, peek(p)->s, peek(p)->n);
            p->i++;
        }
        nd = node(p, JN_STRING, t->pos);
        if (nd && b.failed) nd = fail_at(p, t->pos, "template too large%s", NULL);
        if (nd) {
            nd->name = b.s;
            nd->name_n = b.n;
        }
        break;
    }
    case JT_NAME:
        nd = node(p, JN_NAME, t->pos);
        if (nd) {
            nd->name = t->s;
            nd->name_n = t->n;
            char *copy = jarena_alloc(p->a, t->n + 1);  /* names are NUL-terminated */
            if (!copy) nd = fail_at(p, t->pos, "template too large%s", NULL);
            else {
                memcpy(copy, t->s, t->n);
                nd->name = copy;
            }
        }
        p->i++;
        break;
    case JT_LPAREN:
        p->i++;
        nd = parse_expression_sequence(p, false);
        if (nd && !expect(p, JT_RPAREN, "')'")) nd = NULL;
        break;
    case JT_LBRACKET:
        p->i++;
        nd = node(p, JN_ARRAY, t->pos);
        while (nd && !is(p, JT_RBRACKET)) {
            if (is(p, JT_END)) {
                nd = fail_at(p, t->pos, "unclosed '['%s", NULL);
                break;
            }
            if (!list_push(p, &nd->args, parse_expression(p))) nd = NULL;
            else if (is(p, JT_COMMA)) p->i++;  /* optional between items, as in @huggingface/jinja */
        }
        if (nd) p->i++;
        break;
    case JT_LBRACE:
        p->i++;
        nd = node(p, JN_DICT, t->pos);
        while (nd && !is(p, JT_RBRACE)) {
            if (is(p, JT_END)) {
                nd = fail_at(p, t->pos, "unclosed '{'%s", NULL);
                break;
            }
            if (!list_push(p, &nd->args, parse_expression(p)) || !expect(p, JT_COLON, "':' after a key") ||
                !list_push(p, &nd->alt, parse_expression(p)))
                nd = NULL;
            else if (is(p, JT_COMMA)) p->i++;
        }
        if (nd) p->i++;
        break;
    default:
        nd = fail(p, "unexpected %s in an expression");
    }
    p->depth--;
    return nd;
}

static jnode *parse_unary_sign(parser *p) {
    jtoken *t = peek(p);
    if ((t->type == JT_UNARY || t->type == JT_ADD) && (t->s[0] == '-' || t->s[0] == '+') && t->n == 1) {
        if (!enter(p)) return NULL;
        p->i++;
        jnode *u = node(p, JN_UNARY, t->pos);
        if (u) {
            u->op = t->s[0] == '-' ? JOP_NEG : JOP_POS;
            if (!(u->a = parse_unary_sign(p))) u = NULL;
        }
        p->depth--;
        return u;
    }
    return parse_call_member(p);
}

static jnode *parse_filter(parser *p) {
    jnode *operand = parse_unary_sign(p);
    while (operand && is(p, JT_PIPE)) {
        p->i++;
        if (!is(p, JT_NAME)) return fail(p, "expected a filter name after '|', got %s");
        jnode *f = node(p, JN_FILTER, peek(p)->pos);
        if (!f) return NULL;
        jnode *name = parse_primary(p);
        if (!name) return NULL;
        f->name = name->name;
        f->name_n = name->name_n;
        f->a = operand;
        if (is(p, JT_LPAREN)) {
            f->flag = true;
            if (!parse_args(p, &f->args, false)) return NULL;
        }
        operand = f;
    }
    return operand;
}

/* Python Jinja lets a test take one argument without parentheses. */
static bool starts_test_argument(parser *p) {
    jtoken *t = peek(p);
    if (t->type == JT_NAME)
        return !(is_name(p, "else") || is_name(p, "or") || is_name(p, "and") || is_name(p, "if") ||
                 is_name(p, "is") || is_name(p, "in") || is_name(p, "not"));
    return t->type == JT_STRING || t->type == JT_INT || t->type == JT_FLOAT || t->type == JT_LBRACKET ||
           t->type == JT_LBRACE;
}

static jnode *parse_test(parser *p) {
    jnode *operand = parse_filter(p);
    while (operand && is_name(p, "is")) {
        p->i++;
        bool negate = is_name(p, "not");
        if (negate) p->i++;
        if (!is(p, JT_NAME)) return fail(p, "expected a test name after 'is', got %s");
        jnode *t = node(p, JN_TEST, peek(p)->pos);
        jnode *name = t ? parse_primary(p) : NULL;
        if (!name) return NULL;
        t->name = name->name;
        t->name_n = name->name_n;
        t->flag = negate;
        t->a = operand;
        if (is(p, JT_LPAREN)) {
            if (!parse_args(p, &t->args, false)) return NULL;
        } else if (starts_test_argument(p)) {
            if (!list_push(p, &t->args, parse_primary(p))) return NULL;
        }
        operand = t;
    }
    return operand;
}

static jnode *binary(parser *p, jop op, size_t pos, jnode *l, jnode *r) {
    if (!l || !r) return NULL;
    jnode *b = node(p, JN_BINARY, pos);
    if (b) {
        b->op = op;
        b->a = l;
        b->b = r;
    }
    return b;
}

static jnode *parse_power(parser *p) {
    jnode *l = parse_test(p);
    while (l && is(p, JT_POW)) {
        size_t pos = peek(p)->pos;
        p->i++;
        l = binary(p, JOP_POW, pos, l, parse_test(p));
    }
    return l;
}

static jnode *parse_multiplicative(parser *p) {
    jnode *l = parse_power(p);
    while (l && is(p, JT_MUL)) {
        jtoken *t = peek(p);
        jop op = t->n == 2 ? JOP_FLOORDIV : t->s[0] == '*' ? JOP_MUL : t->s[0] == '/' ? JOP_DIV : JOP_MOD;
        p->i++;
        l = binary(p, op, t->pos, l, parse_power(p));
    }
    return l;
}

static jnode *parse_additive(parser *p) {
    jnode *l = parse_multiplicative(p);
    while (l && is(p, JT_ADD)) {
        jtoken *t = peek(p);
        jop op = t->s[0] == '+' ? JOP_ADD : t->s[0] == '-' ? JOP_SUB : JOP_CONCAT;
        p->i++;
        l = binary(p, op, t->pos, l, parse_multiplicative(p));
    }
    return l;
}

static jnode *parse_comparison(parser *p) {
    jnode *l = parse_additive(p);
    while (l) {
        jtoken *t = peek(p);
        jop op;
        if (is_name(p, "not") && is_name_at(p, 1, "in")) {
            op = JOP_NOT_IN;
            p->i += 2;
        } else if (is_name(p, "in")) {
            op = JOP_IN;
            p->i++;
        } else if (is(p, JT_COMPARE)) {
            char c0 = t->s[0], c1 = t->n > 1 ? t->s[1] : 0;
            op = c0 == '=' ? JOP_EQ : c0 == '!' ? JOP_NE : c0 == '<' ? (c1 ? JOP_LE : JOP_LT) : (c1 ? JOP_GE : JOP_GT);
            p->i++;
        } else {
            break;
        }
        l = binary(p, op, t->pos, l, parse_additive(p));
    }
    return l;
}

/* "not x".  As in @huggingface/jinja, a second "not" right after the operand
 * ("not a == not b", where the right-hand "not" parsed as a name) starts
 * over: only the last negation is kept. */
static jnode *parse_not(parser *p) {
    if (!is_name(p, "not")) return parse_comparison(p);
    if (!enter(p)) return NULL;
    jnode *u = NULL;
    while (is_name(p, "not") && !p->failed) {
        u = node(p, JN_UNARY, peek(p)->pos);
        p->i++;
        if (!u) break;
        u->op = JOP_NOT;
        if (!(u->a = parse_not(p))) u = NULL;
        if (!u) break;
    }
    p->depth--;
    return u;
}

static jnode *parse_and(parser *p) {
    jnode *l = parse_not(p);
    while (l && is_name(p, "and")) {
        size_t pos = peek(p)->pos;
        p->i++;
        l = binary(p, JOP_AND, pos, l, parse_not(p));
    }
    return l;
}

static jnode *parse_or(parser *p) {
    jnode *l = parse_and(p);
    while (l && is_name(p, "or")) {
        size_t pos = peek(p)->pos;
        p->i++;
        l = binary(p, JOP_OR, pos, l, parse_and(p));
    }
    return l;
}

static jnode *parse_expression(parser *p) {
    if (!enter(p)) return NULL;
    jnode *a = parse_or(p);
    if (a && is_name(p, "if")) {
        size_t pos = peek(p)->pos;
        p->i++;
        jnode *test = parse_or(p);
        if (!test) a = NULL;
        else if (is_name(p, "else")) {
            p->i++;
            jnode *t = node(p, JN_TERNARY, pos);
            if (t) {
                t->a = test;
                t->b = a;
                if (!(t->c = parse_expression(p))) t = NULL;
            }
            a = t;
        } else {
            jnode *s = node(p, JN_SELECT, pos);
            if (s) {
                s->a = a;
                s->b = test;
            }
            a = s;
        }
    }
    p->depth--;
    return a;
}

/* ---- statements ------------------------------------------------------ */

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"endfor", "else", NULL};
static const char *const END_FOR_ELSE[] = {"endfor", NULL};
static const char *const ENDIF_ONLY[] = {"endif", NULL};

static bool close_block(parser *p, const char *end) {
    return expect(p, JT_OPEN_STMT, "'{%'") && expect_name(p, end) && expect(p, JT_CLOSE_STMT, "'%}'");
}

static jnode *parse_if(parser *p, size_t pos) {
    jnode *nd = node(p, JN_IF, pos);
    if (!nd || !(nd->a = parse_expression(p)) || !expect(p, JT_CLOSE_STMT, "'%}' after the if condition"))
        return NULL;
    if (!parse_body(p, &nd->body, END_IF, "if", pos)) return NULL;
    if (is_statement(p, (const char *const[]){"elif", NULL})) {
        size_t elif_pos = p->t[p->i + 1].pos;
        p->i += 2;
        if (!list_push(p, &nd->alt, parse_if(p, elif_pos))) return NULL;
    } else if (is_statement(p, (const char *const[]){"else", NULL})) {
        p->i += 2;
        if (!expect(p, JT_CLOSE_STMT, "'%}' after else") || !parse_body(p, &nd->alt, ENDIF_ONLY, "if", pos))
            return NULL;
    }
    return nd;
}

static jnode *parse_for(parser *p, size_t pos) {
    jnode *nd = node(p, JN_FOR, pos);
    if (!nd || !(nd->a = parse_expression_sequence(p, true))) return NULL;
    if (nd->a->kind != JN_NAME && nd->a->kind != JN_TUPLE)
        return fail_at(p, nd->a->pos, "expected a name or names for the loop variable%s", NULL);
    if (!expect_name(p, "in")) return NULL;
    jnode *iter = parse_expression(p);
    if (!iter) return NULL;
    if (iter->kind == JN_SELECT) {  /* for x in xs if cond */
        nd->b = iter->a;
        nd->c = iter->b;
    } else {
        nd->b = iter;
    }
    if (!expect(p, JT_CLOSE_STMT, "'%}' after the for header") || !parse_body(p, &nd->body, END_FOR, "for", pos))
        return NULL;
    if (is_statement(p, (const char *const[]){"else", NULL})) {
        p->i += 2;
        if (!expect(p, JT_CLOSE_STMT, "'%}' after else") || !parse_body(p, &nd->alt, END_FOR_ELSE, "for", pos))
            return NULL;
    }
    return close_block(p, "endfor") ? nd : NULL;
}

static jnode *parse_set(parser *p, size_t pos) {
    jnode *nd = node(p, JN_SET, pos);
    if (!nd || !(nd->a = parse_expression_sequence(p, false))) return NULL;
    if (nd->a->kind != JN_NAME && nd->a->kind != JN_TUPLE && nd->a->kind != JN_MEMBER)
        return fail_at(p, nd->a->pos, "cannot assign to this expression%s", NULL);
    if (is(p, JT_EQUALS)) {
        p->i++;
        if (!(nd->b = parse_expression_sequence(p, false))) return NULL;
    } else {
        if (!expect(p, JT_CLOSE_STMT, "'=' or '%}'") ||
            !parse_body(p, &nd->body, (const char *const[]){"endset", NULL}, "set", pos))
            return NULL;
        p->i += 2;
    }
    return expect(p, JT_CLOSE_STMT, "'%}'") ? nd : NULL;
}

static jnode *parse_macro(parser *p, size_t pos) {
    jnode *nd = node(p, JN_MACRO, pos);
    if (!nd) return NULL;
    if (!is(p, JT_NAME)) return fail(p, "expected a macro name, got %s");
    nd->name = peek(p)->s;
    nd->name_n = peek(p)->n;
    jnode *name = parse_primary(p);
    if (!name) return NULL;
    nd->name = name->name;
    if (!parse_args(p, &nd->args, true) || !expect(p, JT_CLOSE_STMT, "'%}'") ||
        !parse_body(p, &nd->body, (const char *const[]){"endmacro", NULL}, "macro", pos) ||
        !close_block(p, "endmacro"))
        return NULL;
    return nd;
}

static jnode *parse_call_block(parser *p, size_t pos) {
    jnode *nd = node(p, JN_CALL_BLOCK, pos);
    if (!nd) return NULL;
    if (is(p, JT_LPAREN) && !parse_args(p, &nd->args, true)) return NULL;
    if (!is(p, JT_NAME)) return fail(p, "expected a macro name after call, got %s");
    jnode *callee = parse_primary(p);
    if (!callee || !is(p, JT_LPAREN)) return callee ? fail(p, "expected '(' after the macro name, got %s") : NULL;
    jnode *call = node(p, JN_CALL, callee->pos);
    if (!call) return NULL;
    call->a = callee;
    if (!parse_args(p, &call->args, false) || !expect(p, JT_CLOSE_STMT, "'%}'")) return NULL;
    nd->a = call;
    if (!parse_body(p, &nd->body, (const char *const[]){"endcall", NULL}, "call", pos) || !close_block(p, "endcall"))
        return NULL;
    return nd;
}

static jnode *parse_filter_block(parser *p, size_t pos) {
    jnode *nd = node(p, JN_FILTER_BLOCK, pos);
    if (!nd) return NULL;
    if (!is(p, JT_NAME)) return fail(p, "expected a filter name, got %s");
    jnode *f = node(p, JN_FILTER, peek(p)->pos);
    jnode *name = f ? parse_primary(p) : NULL;
    if (!name) return NULL;
    f->name = name->name;
    f->name_n = name->name_n;
    if (is(p, JT_LPAREN)) {
        f->flag = true;
        if (!parse_args(p, &f->args, false)) return NULL;
    }
    nd->a = f;
    if (!expect(p, JT_CLOSE_STMT, "'%}'") ||
        !parse_body(p, &nd->body, (const char *const[]){"endfilter", NULL}, "filter", pos) ||
        !close_block(p, "endfilter"))
        return NULL;
    return nd;
}

static bool token_is(const jtoken *t, const char *word) { return t->n == strlen(word) && !memcmp(t->s, word, t->n); }

static jnode *parse_statement(parser *p) {
    p->i++;  /* {% */
    if (!is(p, JT_NAME)) return fail(p, "expected a statement name after '{%%', got %s");
    jtoken *t = peek(p);
    size_t pos = t->pos;
    p->i++;
    jnode *nd;
    if (token_is(t, "set")) nd = parse_set(p, pos);
    else if (token_is(t, "if")) {
        nd = parse_if(p, pos);
        if (nd && !close_block(p, "endif")) nd = NULL;
    }
    else if (token_is(t, "for")) nd = parse_for(p, pos);
    else if (token_is(t, "macro")) nd = parse_macro(p, pos);
    else if (token_is(t, "call")) nd = parse_call_block(p, pos);
    else if (token_is(t, "filter")) nd = parse_filter_block(p, pos);
    else if (token_is(t, "break") || token_is(t, "continue")) {
        nd = node(p, token_is(t, "break") ? JN_BREAK : JN_CONTINUE, pos);
        if (nd && !expect(p, JT_CLOSE_STMT, "'%}'")) nd = NULL;
    } else {
        char word[64];
        snprintf(word, sizeof word, "%.*s", (int)(t->n < 60 ? t->n : 60), t->s);
        return fail_at(p, pos, "unknown statement '%s'", word);
    }
    return nd;
}

static jnode *parse_any(parser *p) {
    if (!enter(p)) return NULL;
    jtoken *t = peek(p);
    jnode *nd = NULL;
    switch (t->type) {
    case JT_COMMENT:
        p->i++;
        nd = node(p, JN_COMMENT, t->pos);
        break;
    case JT_TEXT:
        p->i++;
        nd = node(p, JN_TEXT, t->pos);
        if (nd) {
            nd->name = t->s;
            nd->name_n = t->n;
        }
        break;
    case JT_OPEN_STMT: nd = parse_statement(p); break;
    case JT_OPEN_EXPR:
        p->i++;
        nd = node(p, JN_OUTPUT, t->pos);
        if (nd && (!(nd->a = parse_expression(p)) || !expect(p, JT_CLOSE_EXPR, "'}}'"))) nd = NULL;
        break;
    default: nd = fail(p, "unexpected %s outside a tag");
    }
    p->depth--;
    return nd;
}

bool jparse(jarena *a, const char *src, size_t n, jlist *out, jparse_error *err) {
    jlex_error lerr;
    size_t count;
    memset(out, 0, sizeof *out);
    jtoken *toks = jlex(a, src, n, &count, &lerr);
    if (!toks) {
        err->pos = lerr.pos;
        snprintf(err->message, sizeof err->message, "%s", lerr.message[0] ? lerr.message : "template too large");
        return false;
    }
    parser p = {.a = a, .t = toks, .n = count, .err = err};
    while (!is(&p, JT_END)) {
        jnode *nd = parse_any(&p);
        if (!nd) return false;
        if (nd->kind == JN_COMMENT) continue;
        if (!list_push(&p, out, nd)) return false;
    }
    return true;
}
