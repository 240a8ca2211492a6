/*
 * SentencePiece BPE (tokenizer.ggml.model = "llama"), as llama.cpp does it:
 * spaces become U+2581, the text is cut into UTF-8 characters, and the
 * adjacent pair whose concatenation is the token with the highest score is
 * merged first (leftmost on ties) until no pair forms a token.  A piece left
 * that is not a token falls back to its bytes as <0xNN> tokens.
 */
#include "tokenizer/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPACE_MARK "\xE2\x96\x81" /* U+2581 */

typedef struct symbol {
    int prev, next;
    size_t off, n; /* bytes of the escaped text; n = 0 once merged away */
} symbol;

/* The text with the optional leading space, every ' ' as U+2581. */
static char *escape_spaces(const char *text, size_t len, bool prefix_space, size_t *out_len) {
    size_t n = prefix_space ? 3 : 0;
    for (size_t i = 0; i < len; i++) n += text[i] == ' ' ? 3 : 1;
    char *buf = malloc(n ? n : 1);
    if (!buf) return NULL;
    size_t o = 0;
    if (prefix_space) {
        memcpy(buf, SPACE_MARK, 3);
        o = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + o, SPACE_MARK, 3);
            o += 3;
        } else {
            buf[o++] = text[i];
        }
    }
    *out_len = o;
    return buf;
}

static void try_bigram(const plm_vocab *v, const char *buf, const symbol *sym, int left, int right,
                       candheap *h) {
    if (left < 0 || right < 0) return;
    size_t size = sym[left].n + sym[right].n; /* adjacent symbols are contiguous */
    plm_token t = vocab_find(v, buf + sym[left].off, size);
    if (t < 0) return;
    candheap_push(h, (cand){-(double)v->scores[t], left, right, size});
}

static plm_token byte_token(const plm_vocab *v, unsigned char b) {
    char hex[7];
    snprintf(hex, sizeof hex, "<0x%02X>", b);
    plm_token t = vocab_find(v, hex, 6);
    if (t < 0) t = vocab_find(v, (const char *)&b, 1);
    return t >= 0 ? t : v->unk; /* llama.cpp would throw here */
}

static void emit_symbol(const plm_vocab *v, const char *text, size_t n, tokvec *out) {
    plm_token t = vocab_find(v, text, n);
    if (t >= 0) {
        tokvec_push(out, t);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        t = byte_token(v, (unsigned char)text[i]);
        if (t >= 0) tokvec_push(out, t);
    }
}

void spm_tokenize(const plm_vocab *v, const char *text, size_t len, bool prefix_space,
                  tokvec *out) {
    size_t n_bytes = 0;
    char *buf = escape_spaces(text, len, prefix_space, &n_bytes);
    symbol *sym = malloc((n_bytes ? n_bytes : 1) * sizeof *sym);
    candheap heap = {0};
    if (!buf || !sym) {
        out->oom = true;
        goto done;
    }
    int n = 0;
    for (size_t off = 0; off < n_bytes; n++) {
        size_t cl = utf8_len_by_lead((unsigned char)buf[off]);
        if (cl > n_bytes - off) cl = n_bytes - off;
        sym[n] = (symbol){n - 1, off + cl == n_bytes ? -1 : n + 1, off, cl};
        off += cl;
    }
    for (int i = 1; i < n; i++) try_bigram(v, buf, sym, i - 1, i, &heap);

    while (heap.n > 0 && !heap.oom) {
        cand b = candheap_pop(&heap);
        symbol *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        try_bigram(v, buf, sym, l->prev, b.left, &heap);
        try_bigram(v, buf, sym, b.left, l->next, &heap);
    }
    if (heap.oom) out->oom = true;
    for (int i = 0; i >= 0 && n > 0; i = sym[i].next) emit_symbol(v, buf + sym[i].off, sym[i].n, out);
done:
    free(heap.v);
    free(sym);
    free(buf);
}
