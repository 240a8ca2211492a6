/*
 * Text -> tokens and token -> text.
 *
 * Tokenizing first cuts the special-token texts out of the input, longest
 * first, as llama.cpp's tokenizer_st_partition does: user-defined tokens
 * always, control and unknown tokens only with parse_special.  The raw text
 * between them goes through the SPM or BPE tokenizer.
 */
#include "tokenizer/internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct frag {
    plm_token token; /* -1 for raw text */
    size_t off, len;
} frag;

typedef struct fragvec {
    frag *v;
    size_t n, cap;
    bool oom;
} fragvec;

static void frags_push(fragvec *fv, plm_token token, size_t off, size_t len) {
    if (fv->oom) return;
    if (fv->n == fv->cap) {
        size_t cap = fv->cap ? fv->cap * 2 : 16;
        frag *v = realloc(fv->v, cap * sizeof *v);
        if (!v) {
            fv->oom = true;
            return;
        }
        fv->v = v;
        fv->cap = cap;
    }
    fv->v[fv->n++] = (frag){token, off, len};
}

/* First occurrence of needle in hay[0 .. hlen), or -1. */
static ptrdiff_t find_bytes(const char *hay, size_t hlen, const char *needle, size_t nlen) {
    if (nlen == 0 || nlen > hlen) return -1;
    const char *end = hay + hlen - nlen + 1;
    for (const char *p = hay; p < end;) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p) return -1;
        if (memcmp(p, needle, nlen) == 0) return p - hay;
        p++;
    }
    return -1;
}

static bool is_ascii_space(char c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Cuts every occurrence of token t out of the raw fragment [off, off+len). */
static void split_raw(const plm_vocab *v, const char *text, plm_token t, size_t off, size_t len,
                      fragvec *out) {
    size_t tlen;
    const char *ttext = vocab_text(v, t, &tlen);
    uint32_t attr = v->attr[t];
    for (;;) {
        ptrdiff_t m = find_bytes(text + off, len, ttext, tlen);
        if (m < 0) {
            if (len > 0) frags_push(out, -1, off, len);
            return;
        }
        size_t left = (size_t)m;
        if (attr & TOK_LSTRIP)
            while (left > 0 && is_ascii_space(text[off + left - 1])) left--;
        if (left > 0) frags_push(out, -1, off, left);
        frags_push(out, t, 0, 0);
        size_t roff = off + (size_t)m + tlen, rlen = off + len - roff;
        if (attr & TOK_RSTRIP)
            while (rlen > 0 && is_ascii_space(text[roff])) roff++, rlen--;
        off = roff;
        len = rlen;
        if (len == 0) return;
    }
}

static bool partition(const plm_vocab *v, const char *text, size_t len, bool parse_special,
                      fragvec *out) {
    fragvec cur = {0}, next = {0};
    if (len > 0) frags_push(&cur, -1, 0, len);
    for (int i = 0; i < v->n_special && !cur.oom && !next.oom; i++) {
        plm_token t = v->special[i];
        if (!parse_special && (v->attr[t] & (TOK_CONTROL | TOK_UNKNOWN))) continue;
        next.n = 0;
        for (size_t k = 0; k < cur.n; k++) {
            const frag *f = &cur.v[k];
            if (f->token >= 0)
                frags_push(&next, f->token, 0, 0);
            else
                split_raw(v, text, t, f->off, f->len, &next);
        }
        fragvec tmp = cur;
        cur = next;
        next = tmp;
    }
    bool ok = !cur.oom && !next.oom;
    free(next.v);
    *out = cur;
    return ok;
}

/* SentencePiece-style BPE (gemma4): spaces become U+2581 first. */
static void bpe_tokenize_escaped(const plm_vocab *v, const char *text, size_t len, tokvec *out) {
    size_t n = len;
    for (size_t i = 0; i < len; i++) n += text[i] == ' ' ? 2 : 0;
    char *buf = malloc(n ? n : 1);
    if (!buf) {
        out->oom = true;
        return;
    }
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + o, "\xE2\x96\x81", 3);
            o += 3;
        } else {
            buf[o++] = text[i];
        }
    }
    bpe_tokenize(v, buf, n, out);
    free(buf);
}

static void tokenize_fragments(const plm_vocab *v, const char *text, const fragvec *fv,
                               bool add_special, tokvec *out) {
    if (add_special && v->add_bos) tokvec_push(out, v->bos);
    bool prev_special = true; /* SPM: the first text gets the prefix space */
    for (size_t k = 0; k < fv->n; k++) {
        const frag *f = &fv->v[k];
        if (f->token >= 0) {
            tokvec_push(out, f->token);
            prev_special = true;
        } else if (v->type == VOCAB_SPM) {
            spm_tokenize(v, text + f->off, f->len, v->add_space_prefix && prev_special, out);
            prev_special = false;
        } else if (v->escape_spaces) {
            bpe_tokenize_escaped(v, text + f->off, f->len, out);
        } else {
            bpe_tokenize(v, text + f->off, f->len, out);
        }
    }
    if (add_special && v->add_eos) tokvec_push(out, v->eos);
}

int plm_vocab_tokenize(const plm_vocab *v, const char *text, size_t len, plm_token *out, int max,
                       bool add_special, bool parse_special) {
    fragvec fv = {0};
    tokvec tv = {0};
    if (partition(v, text, len, parse_special, &fv)) tokenize_fragments(v, text, &fv, add_special, &tv);
    else tv.oom = true;
    free(fv.v);

    int ret;
    if (tv.oom || tv.n > INT_MAX) {
        ret = INT_MIN; /* out of memory */
    } else if ((int)tv.n > max) {
        ret = -(int)tv.n;
    } else {
        if (tv.n) memcpy(out, tv.v, tv.n * sizeof *out);
        ret = (int)tv.n;
    }
    free(tv.v);
    return ret;
}

/* ---- token -> piece ------------------------------------------------------ */

/* Appends bytes to buf while they fit; counts them all. */
typedef struct sink {
    char *buf;
    size_t size, n;
} sink;

static void put(sink *s, const char *p, size_t n) {
    if (n && s->n + n <= s->size) memcpy(s->buf + s->n, p, n);
    s->n += n;
}

/* SPM text: U+2581 back to spaces. */
static void spm_piece(const char *t, size_t len, sink *s) {
    for (size_t i = 0; i < len;) {
        if (i + 3 <= len && memcmp(t + i, "\xE2\x96\x81", 3) == 0) {
            put(s, " ", 1);
            i += 3;
        } else {
            put(s, t + i, 1);
            i++;
        }
    }
}

/* BPE text: GPT-2 stand-in characters back to bytes; like llama.cpp, a
 * character that stands for no byte becomes [UNK_BYTE_0x..<token>]. */
static void bpe_piece(const char *t, size_t len, sink *s) {
    for (size_t i = 0; i < len;) {
        uint32_t cp = utf8_decode(t, len, &i);
        int b = bpe_cpt_to_byte(cp);
        if (b >= 0) {
            char c = (char)b;
            put(s, &c, 1);
            continue;
        }
        char u[4], hex[3];
        int n = utf8_encode(cp, u);
        put(s, "[UNK_BYTE_0x", 12);
        for (int k = 0; k < n; k++) {
            snprintf(hex, sizeof hex, "%02x", (unsigned char)u[k]);
            put(s, hex, 2);
        }
        put(s, t, len);
        put(s, "]", 1);
    }
}

static void byte_piece(const char *t, size_t len, sink *s) {
    char hex[3] = {0};
    if (len >= 5) memcpy(hex, t + 3, 2); /* "<0xNN>" */
    char c = (char)strtol(hex, NULL, 16);
    put(s, &c, 1);
}

int plm_vocab_token_to_piece(const plm_vocab *v, plm_token t, char *buf, int size, bool special) {
    if (t < 0 || t >= v->n_tokens) return 0;
    uint32_t attr = v->attr[t];
    if (!special && (attr & (TOK_UNKNOWN | TOK_CONTROL))) return 0;
    size_t len;
    const char *text = vocab_text(v, t, &len);
    sink s = {buf, size > 0 ? (size_t)size : 0, 0};
    if (attr & (TOK_UNKNOWN | TOK_CONTROL | TOK_USER_DEFINED))
        put(&s, text, len);
    else if ((attr & TOK_NORMAL) && (v->type == VOCAB_SPM || v->escape_spaces))
        spm_piece(text, len, &s); /* gemma4's BPE spells spaces U+2581 too */
    else if (attr & TOK_NORMAL)
        bpe_piece(text, len, &s);
    else if (attr & TOK_BYTE)
        byte_piece(text, len, &s);
    /* unused and undefined tokens render as nothing */
    if (s.n > INT_MAX) return INT_MIN;
    return s.n <= s.size ? (int)s.n : -(int)s.n;
}
