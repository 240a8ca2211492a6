/* Template text to tokens: transformers' whitespace rules, then the tags. */
#include "chat/lexer.h"

#include <stdio.h>
#include <string.h>

#include "chat/text.h"

/* Preprocessed text, each byte remembering its offset in the original. */
typedef struct {
    char *s;
    size_t *pos;
    size_t n;
} mapped;

typedef struct {
    jarena *a;
    mapped m;
    size_t i;
    jtoken *toks;
    size_t count, cap;
    int curly_depth;
    jlex_error *err;
} lexer;

static bool fail(lexer *lx, size_t at, const char *msg, const char *detail) {
    lx->err->pos = at < lx->m.n ? lx->m.pos[at] : (lx->m.n ? lx->m.pos[lx->m.n - 1] + 1 : 0);
    snprintf(lx->err->message, sizeof lx->err->message, "%s%s", msg, detail ? detail : "");
    return false;
}

/* ---- preprocessing --------------------------------------------------- */

static bool mapped_alloc(jarena *a, mapped *m, size_t cap) {
    m->s = jarena_alloc(a, cap + 1);
    m->pos = jarena_alloc(a, (cap + 1) * sizeof *m->pos);
    m->n = 0;
    return m->s && m->pos;
}

static void mapped_push(mapped *out, const mapped *in, size_t i) {
    out->s[out->n] = in->s[i];
    out->pos[out->n++] = in->pos[i];
}

static bool at_line_start(const mapped *m, size_t i) {
    if (i == 0) return true;
    char c = m->s[i - 1];
    if (c == '\n' || c == '\r') return true;
    /* U+2028 / U+2029 end lines for JavaScript's multiline ^ as well */
    return i >= 3 && (unsigned char)m->s[i - 3] == 0xE2 && (unsigned char)m->s[i - 2] == 0x80 &&
           ((unsigned char)m->s[i - 1] == 0xA8 || (unsigned char)m->s[i - 1] == 0xA9);
}

/* lstrip_blocks: spaces and tabs between a line start and "{%", "{#" or "{-". */
static bool lstrip_blocks(jarena *a, const mapped *in, mapped *out) {
    if (!mapped_alloc(a, out, in->n)) return false;
    for (size_t i = 0; i < in->n;) {
        if (at_line_start(in, i)) {
            size_t j = i;
            while (j < in->n && (in->s[j] == ' ' || in->s[j] == '\t')) j++;
            if (j > i && j + 1 < in->n && in->s[j] == '{' && strchr("#%-", in->s[j + 1])) i = j;
        }
        if (i < in->n) mapped_push(out, in, i++);
    }
    return true;
}

/* trim_blocks: the newline right after "%}", "#}" or "-}". */
static bool trim_blocks(jarena *a, const mapped *in, mapped *out) {
    if (!mapped_alloc(a, out, in->n)) return false;
    for (size_t i = 0; i < in->n; i++) {
        mapped_push(out, in, i);
        if (in->s[i] == '}' && i > 0 && strchr("#%-", in->s[i - 1]) && i + 1 < in->n && in->s[i + 1] == '\n')
            i++;
    }
    return true;
}

/* Length of "{%-? *(end)?generation *-?%}" at s, 0 if none; sets the dashes. */
static size_t generation_tag(const char *s, size_t n, bool *lstrip, bool *rstrip) {
    if (n < 2 || s[0] != '{' || s[1] != '%') return 0;
    size_t i = 2, len;
    *lstrip = i < n && s[i] == '-';
    if (*lstrip) i++;
    while ((len = jtext_space_at(s + i, n - i)) > 0) i += len;
    if (n - i >= 3 && !memcmp(s + i, "end", 3) && n - i >= 13 && !memcmp(s + i + 3, "generation", 10)) i += 3;
    if (n - i < 10 || memcmp(s + i, "generation", 10)) return 0;
    i += 10;
    while ((len = jtext_space_at(s + i, n - i)) > 0) i += len;
    *rstrip = i < n && s[i] == '-';
    if (*rstrip) i++;
    if (n - i < 2 || s[i] != '%' || s[i + 1] != '}') return 0;
    return i + 2;
}

/* transformers' {% generation %} marks assistant text for training masks;
 * it renders as nothing, its dashes trimming the whitespace around it. */
static bool drop_generation_tags(jarena *a, const mapped *in, mapped *out) {
    if (!mapped_alloc(a, out, in->n)) return false;
    size_t keep_from = 0;  /* whitespace before here belongs to an earlier match */
    for (size_t i = 0; i < in->n;) {
        bool lstrip, rstrip;
        size_t len = generation_tag(in->s + i, in->n - i, &lstrip, &rstrip);
        if (!len) {
            mapped_push(out, in, i++);
            continue;
        }
        if (lstrip) {
            size_t sp;
            while (out->n > keep_from && (sp = jtext_space_before(out->s + keep_from, out->n - keep_from)) > 0)
                out->n -= sp;
        }
        i += len;
        size_t j = i, sp;
        while ((sp = jtext_space_at(in->s + j, in->n - j)) > 0) j += sp;
        if (!rstrip)
            for (; i < j; i++) mapped_push(out, in, i);
        i = j;
        keep_from = out->n;
    }
    return true;
}

static bool preprocess(jarena *a, const char *src, size_t n, mapped *out) {
    mapped m;
    if (n > 0 && src[n - 1] == '\n') n--;
    if (!mapped_alloc(a, &m, n)) return false;
    memcpy(m.s, src, n);
    for (size_t i = 0; i < n; i++) m.pos[i] = i;
    m.n = n;
    mapped l, t;
    if (!lstrip_blocks(a, &m, &l) || !trim_blocks(a, &l, &t) || !drop_generation_tags(a, &t, out)) return false;
    out->s[out->n] = '\0';
    return true;
}

/* ---- tokens ---------------------------------------------------------- */

static jtoken *push(lexer *lx, jtok_type type, const char *s, size_t n, size_t at) {
    if (lx->count == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 256;
        jtoken *t = jarena_alloc(lx->a, cap * sizeof *t);
        if (!t) return NULL;
        if (lx->count) memcpy(t, lx->toks, lx->count * sizeof *t);
        lx->toks = t;
        lx->cap = cap;
    }
    jtoken *t = &lx->toks[lx->count++];
    t->type = type;
    t->s = s;
    t->n = n;
    t->pos = at < lx->m.n ? lx->m.pos[at] : (lx->m.n ? lx->m.pos[lx->m.n - 1] + 1 : 0);
    return t;
}

static jtok_type last_type(const lexer *lx) { return lx->count ? lx->toks[lx->count - 1].type : JT_END; }

static bool starts(const lexer *lx, const char *s) {
    size_t n = strlen(s);
    return lx->m.n - lx->i >= n && !memcmp(lx->m.s + lx->i, s, n);
}

static void strip_trailing_space(lexer *lx) {
    if (!lx->count || lx->toks[lx->count - 1].type != JT_TEXT) return;
    jtoken *t = &lx->toks[lx->count - 1];
    t->n -= jtext_trim_end(t->s, t->n);
    if (t->n == 0) lx->count--;
}

static void skip_space(lexer *lx) {
    size_t len;
    while ((len = jtext_space_at(lx->m.s + lx->i, lx->m.n - lx->i)) > 0) lx->i += len;
}

static bool lex_text(lexer *lx) {
    size_t start = lx->i;
    while (lx->i < lx->m.n &&
           !(lx->m.s[lx->i] == '{' && lx->i + 1 < lx->m.n && strchr("%{#", lx->m.s[lx->i + 1])))
        lx->i++;
    if (lx->i > start) {
        /* text tokens are copied: strip_trailing_space shortens them in place */
        char *s = jarena_alloc(lx->a, lx->i - start + 1);
        if (!s || !push(lx, JT_TEXT, s, lx->i - start, start)) return false;
        memcpy(s, lx->m.s + start, lx->i - start);
    }
    return true;
}

static bool lex_comment(lexer *lx) {
    size_t start = lx->i;
    lx->i += 2;
    bool strip_before = lx->i < lx->m.n && lx->m.s[lx->i] == '-';
    if (strip_before) lx->i++;
    size_t body = lx->i;
    while (!(lx->i + 1 < lx->m.n && lx->m.s[lx->i] == '#' && lx->m.s[lx->i + 1] == '}')) {
        if (lx->i + 2 >= lx->m.n) return fail(lx, start, "missing end of comment tag '#}'", NULL);
        lx->i++;
    }
    bool strip_after = lx->i > body && lx->m.s[lx->i - 1] == '-';
    if (strip_before) strip_trailing_space(lx);
    if (!push(lx, JT_COMMENT, lx->m.s + body, lx->i - body, start)) return false;
    lx->i += 2;
    if (strip_after) skip_space(lx);
    return true;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* \xHH or \uHHHH at s (after the backslash and letter); -1 when malformed. */
static long read_hex(const char *s, size_t avail, int digits) {
    if ((size_t)digits > avail) return -1;
    long v = 0;
    for (int k = 0; k < digits; k++) {
        int h = hex_value(s[k]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

static bool lex_string(lexer *lx) {
    char quote = lx->m.s[lx->i];
    size_t start = lx->i++;
    jbuf b;
    jbuf_init(&b, lx->a, 0);
    jbuf_add(&b, "", 0);
    for (;;) {
        if (lx->i >= lx->m.n) return fail(lx, start, "unterminated string literal", NULL);
        char c = lx->m.s[lx->i];
        if (c == quote) break;
        if (c != '\\') {
            jbuf_addc(&b, c);
            lx->i++;
            continue;
        }
        if (++lx->i >= lx->m.n) return fail(lx, start, "unterminated string literal", NULL);
        char e = lx->m.s[lx->i++];
        const char *plain = strchr("ntrbfv'\"\\", e);
        if (plain && e) {
            static const char out[] = "\n\t\r\b\f\v'\"\\";
            jbuf_addc(&b, out[plain - "ntrbfv'\"\\"]);
        } else if (e == 'x' || e == 'u') {
            long cp = read_hex(lx->m.s + lx->i, lx->m.n - lx->i, e == 'x' ? 2 : 4);
            if (cp < 0) return fail(lx, lx->i - 2, "invalid hexadecimal escape sequence", NULL);
            lx->i += e == 'x' ? 2 : 4;
            if (cp >= 0xD800 && cp < 0xDC00 && lx->m.n - lx->i >= 6 && lx->m.s[lx->i] == '\\' &&
                lx->m.s[lx->i + 1] == 'u') {  /* a surrogate pair spelled as two escapes */
                long lo = read_hex(lx->m.s + lx->i + 2, 4, 4);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    lx->i += 6;
                }
            }
            jtext_encode(&b, (cp >= 0xD800 && cp < 0xE000) ? 0xFFFD : (int32_t)cp);
        } else {
            char d[2] = {e, 0};
            return fail(lx, lx->i - 2, "unexpected escaped character: \\", d);
        }
    }
    lx->i++;
    if (b.failed) return false;
    return push(lx, JT_STRING, b.s, b.n, start) != NULL;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Digits, then ".digits" unless the number follows a dot (messages.0.content). */
static bool lex_number(lexer *lx, size_t start, bool after_dot) {
    while (lx->i < lx->m.n && is_digit(lx->m.s[lx->i])) lx->i++;
    bool is_float = false;
    if (!after_dot && lx->i + 1 < lx->m.n && lx->m.s[lx->i] == '.' && is_digit(lx->m.s[lx->i + 1])) {
        is_float = true;
        lx->i++;
        while (lx->i < lx->m.n && is_digit(lx->m.s[lx->i])) lx->i++;
    }
    return push(lx, is_float ? JT_FLOAT : JT_INT, lx->m.s + start, lx->i - start, start) != NULL;
}

static const struct { const char *seq; jtok_type type; } operators[] = {
    {"{%", JT_OPEN_STMT}, {"%}", JT_CLOSE_STMT}, {"{{", JT_OPEN_EXPR}, {"}}", JT_CLOSE_EXPR},
    {"(", JT_LPAREN},     {")", JT_RPAREN},      {"{", JT_LBRACE},     {"}", JT_RBRACE},
    {"[", JT_LBRACKET},   {"]", JT_RBRACKET},    {",", JT_COMMA},      {".", JT_DOT},
    {":", JT_COLON},      {"|", JT_PIPE},        {"<=", JT_COMPARE},   {">=", JT_COMPARE},
    {"==", JT_COMPARE},   {"!=", JT_COMPARE},    {"<", JT_COMPARE},    {">", JT_COMPARE},
    {"+", JT_ADD},        {"-", JT_ADD},         {"~", JT_ADD},        {"**", JT_POW},
    {"*", JT_MUL},        {"//", JT_MUL},        {"/", JT_MUL},        {"%", JT_MUL},
    {"=", JT_EQUALS},
};

static bool lex_operator(lexer *lx) {
    for (size_t k = 0; k < sizeof operators / sizeof operators[0]; k++) {
        if (operators[k].type == JT_CLOSE_EXPR && lx->curly_depth > 0) continue;
        if (!starts(lx, operators[k].seq)) continue;
        size_t n = strlen(operators[k].seq);
        if (!push(lx, operators[k].type, lx->m.s + lx->i, n, lx->i)) return false;
        if (operators[k].type == JT_OPEN_EXPR) lx->curly_depth = 0;
        if (operators[k].type == JT_LBRACE) lx->curly_depth++;
        if (operators[k].type == JT_RBRACE) lx->curly_depth--;
        lx->i += n;
        return true;
    }
    return fail(lx, lx->i, "unexpected character", NULL);
}

/* A sign after an operand is binary; elsewhere it is unary, and a number
 * right behind it becomes a signed literal. */
static int lex_sign(lexer *lx) {
    jtok_type last = last_type(lx);
    if (last == JT_TEXT || last == JT_END) return fail(lx, lx->i, "unexpected character", NULL) ? 1 : -1;
    if (last == JT_NAME || last == JT_INT || last == JT_FLOAT || last == JT_STRING || last == JT_RPAREN ||
        last == JT_RBRACKET)
        return 0;
    size_t start = lx->i++;
    if (lx->i < lx->m.n && is_digit(lx->m.s[lx->i])) return lex_number(lx, start, false) ? 1 : -1;
    return push(lx, JT_UNARY, lx->m.s + start, 1, start) ? 1 : -1;
}

static bool lex_tag_part(lexer *lx) {
    if (starts(lx, "{%-") || starts(lx, "{{-")) {
        strip_trailing_space(lx);
        bool stmt = lx->m.s[lx->i + 1] == '%';
        if (!push(lx, stmt ? JT_OPEN_STMT : JT_OPEN_EXPR, lx->m.s + lx->i, 2, lx->i)) return false;
        if (!stmt) lx->curly_depth = 0;
        lx->i += 3;
        return true;
    }
    skip_space(lx);
    if (lx->i >= lx->m.n) return true;
    if (starts(lx, "-%}") || starts(lx, "-}}")) {
        bool stmt = lx->m.s[lx->i + 1] == '%';
        if (!push(lx, stmt ? JT_CLOSE_STMT : JT_CLOSE_EXPR, lx->m.s + lx->i + 1, 2, lx->i)) return false;
        lx->i += 3;
        skip_space(lx);
        return true;
    }
    char c = lx->m.s[lx->i];
    if (c == '-' || c == '+') {
        int r = lex_sign(lx);
        if (r != 0) return r > 0;
    }
    if (c == '\'' || c == '"') return lex_string(lx);
    if (is_digit(c)) return lex_number(lx, lx->i, last_type(lx) == JT_DOT);
    if (jtext_is_word_byte((unsigned char)c)) {
        size_t start = lx->i;
        while (lx->i < lx->m.n && jtext_is_word_byte((unsigned char)lx->m.s[lx->i])) lx->i++;
        return push(lx, JT_NAME, lx->m.s + start, lx->i - start, start) != NULL;
    }
    return lex_operator(lx);
}

jtoken *jlex(jarena *a, const char *src, size_t n, size_t *count, jlex_error *err) {
    lexer lx = {.a = a, .err = err};
    err->message[0] = '\0';
    if (!preprocess(a, src, n, &lx.m)) return NULL;
    while (lx.i < lx.m.n) {
        jtok_type last = last_type(&lx);
        if (last == JT_END || last == JT_CLOSE_STMT || last == JT_CLOSE_EXPR || last == JT_COMMENT) {
            size_t before = lx.count;
            if (!lex_text(&lx)) return NULL;
            if (lx.count > before) continue;
        }
        bool ok = starts(&lx, "{#") ? lex_comment(&lx) : lex_tag_part(&lx);
        if (!ok) return NULL;
    }
    if (!push(&lx, JT_END, "", 0, lx.m.n)) return NULL;
    *count = lx.count;
    return lx.toks;
}

void jlex_line_col(const char *src, size_t n, size_t pos, int *line, int *col) {
    int l = 1, c = 1;
    for (size_t i = 0; i < pos && i < n;) {
        if (src[i] == '\n') {
            l++;
            c = 1;
            i++;
            continue;
        }
        int32_t cp;
        i += jtext_decode(src + i, n - i, &cp);
        c++;
    }
    *line = l;
    *col = c;
}
