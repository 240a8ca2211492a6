/*
 * Template text to tokens, as transformers configures Jinja (trim_blocks and
 * lstrip_blocks on, one trailing newline dropped) and as @huggingface/jinja
 * tokenizes: whitespace control `{%-`/`-%}`, comments, the transformers-only
 * `{% generation %}` tag removed.  Every token remembers where it began in
 * the original text, so errors can name a line and column.
 */
#ifndef PLM_CHAT_LEXER_H
#define PLM_CHAT_LEXER_H

#include <stddef.h>

#include "chat/value.h"

typedef enum {
    JT_TEXT,
    JT_INT,
    JT_FLOAT,
    JT_STRING,
    JT_NAME,
    JT_EQUALS,
    JT_LPAREN,
    JT_RPAREN,
    JT_OPEN_STMT,
    JT_CLOSE_STMT,
    JT_OPEN_EXPR,
    JT_CLOSE_EXPR,
    JT_LBRACKET,
    JT_RBRACKET,
    JT_LBRACE,
    JT_RBRACE,
    JT_COMMA,
    JT_DOT,
    JT_COLON,
    JT_PIPE,
    JT_ADD,      /* + - ~ */
    JT_MUL,      /* * / // % */
    JT_POW,      /* ** */
    JT_COMPARE,  /* < > <= >= == != */
    JT_UNARY,    /* a sign not followed by a number */
    JT_COMMENT,
    JT_END,
} jtok_type;

typedef struct jtoken {
    jtok_type type;
    const char *s;  /* text, unescaped for strings; NUL-terminated */
    size_t n;
    size_t pos;     /* byte offset in the original template */
} jtoken;

typedef struct jlex_error {
    size_t pos;
    char message[200];
} jlex_error;

/* Tokens end with one JT_END.  Returns NULL and fills err on bad input (or
 * when the arena is spent). */
jtoken *jlex(jarena *a, const char *src, size_t n, size_t *count, jlex_error *err);

/* 1-based line and column (in characters) of a byte offset. */
void jlex_line_col(const char *src, size_t n, size_t pos, int *line, int *col);

#endif
