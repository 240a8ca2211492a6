/*
 * Byte-level BPE (tokenizer.ggml.model = "gpt2"), as llama.cpp does it:
 * pre-tokenize into words, map each byte of a word to GPT-2's printable
 * stand-in character, then repeatedly merge the adjacent pair with the best
 * (lowest) merge rank, leftmost first on ties.
 */
#include "tokenizer/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- GPT-2's byte <-> unicode mapping --------------------------------
 * Printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) stand for themselves;
 * the other 68 bytes, in increasing order, become U+0100, U+0101, ... */

static uint32_t byte_to_cpt(uint8_t b) {
    if (b <= 0x20) return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
    if (b == 0xAD) return 0x100 + 67;
    return b;
}

int bpe_byte_to_utf8(uint8_t b, char out[2]) {
    uint32_t cp = byte_to_cpt(b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

int bpe_cpt_to_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 0x100 && cp <= 0x100 + 32) return (int)(cp - 0x100);
    if (cp >= 0x100 + 33 && cp <= 0x100 + 66) return (int)(0x7F + cp - (0x100 + 33));
    if (cp == 0x100 + 67) return 0xAD;
    return -1;
}

/* ---- per-call scratch --------------------------------------------------- */

typedef struct symbol {
    int prev, next;
    size_t off, n; /* bytes of the word; n = 0 once merged away */
} symbol;

typedef struct scratch {
    char *word;
    size_t word_cap;
    symbol *sym;
    size_t sym_cap;
    candheap heap;
    char *key;
    size_t key_cap;
    bool oom;
} scratch;

static void *grow(void *p, size_t *cap, size_t need, size_t elem, bool *oom) {
    if (need <= *cap) return p;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need) cap2 *= 2;
    void *q = realloc(p, cap2 * elem);
    if (!q) {
        *oom = true;
        return p;
    }
    *cap = cap2;
    return q;
}

/* ---- merging ------------------------------------------------------------ */

static void add_bigram(const plm_vocab *v, scratch *s, int left, int right) {
    if (left < 0 || right < 0) return;
    const symbol *l = &s->sym[left], *r = &s->sym[right];
    size_t len = l->n + 1 + r->n;
    s->key = grow(s->key, &s->key_cap, len, 1, &s->oom);
    if (s->oom) return;
    memcpy(s->key, s->word + l->off, l->n);
    s->key[l->n] = ' ';
    memcpy(s->key + l->n + 1, s->word + r->off, r->n);
    int32_t rank = strtab_find(&v->merges, s->key, len);
    if (rank < 0) return;
    candheap_push(&s->heap, (cand){rank, left, right, l->n + r->n});
}

static void emit_symbol(const plm_vocab *v, const char *text, size_t n, tokvec *out) {
    plm_token t = vocab_find(v, text, n);
    if (t >= 0) {
        tokvec_push(out, t);
        return;
    }
    /* llama.cpp's fallback: each raw byte of the (encoded) symbol, if a
     * token; raw-byte vocabularies spell bytes <0xNN> */
    for (size_t i = 0; i < n; i++) {
        if (v->raw_bytes) {
            char hex[7];
            snprintf(hex, sizeof hex, "<0x%02X>", (unsigned char)text[i]);
            t = vocab_find(v, hex, 6);
        } else {
            t = vocab_find(v, text + i, 1);
        }
        if (t >= 0) tokvec_push(out, t);
    }
}

static bool only_newlines(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (s[i] != '\n') return false;
    return true;
}

/* Tokenizes one (byte-encoded) word held in s->word[0 .. len). */
static void merge_word(const plm_vocab *v, scratch *s, size_t len, tokvec *out) {
    if (v->ignore_merges || (v->newline_words && only_newlines(s->word, len))) {
        plm_token t = vocab_find(v, s->word, len);
        if (t >= 0) {
            tokvec_push(out, t);
            return;
        }
    }
    s->sym = grow(s->sym, &s->sym_cap, len, sizeof *s->sym, &s->oom);
    if (s->oom) return;
    int n = 0;
    for (size_t off = 0; off < len; n++) {
        size_t cl = utf8_len_by_lead((unsigned char)s->word[off]);
        if (cl > len - off) cl = len - off;
        s->sym[n] = (symbol){n - 1, off + cl == len ? -1 : n + 1, off, cl};
        off += cl;
    }
    s->heap.n = 0;
    for (int i = 1; i < n; i++) add_bigram(v, s, i - 1, i);

    while (s->heap.n > 0 && !s->oom && !s->heap.oom) {
        cand b = candheap_pop(&s->heap);
        symbol *l = &s->sym[b.left], *r = &s->sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = b.left;
        add_bigram(v, s, l->prev, b.left);
        add_bigram(v, s, b.left, l->next);
    }
    for (int i = 0; i >= 0 && n > 0; i = s->sym[i].next)
        if (s->sym[i].n > 0) emit_symbol(v, s->word + s->sym[i].off, s->sym[i].n, out);
}

void bpe_tokenize(const plm_vocab *v, const char *text, size_t len, tokvec *out) {
    pretok_out words;
    scratch s = {0};
    if (!pretok_split(v->pre, text, len, &words)) {
        out->oom = true;
    } else {
        for (size_t w = 0; w < words.n && !s.oom; w++) {
            const piece *p = &words.pieces[w];
            s.word = grow(s.word, &s.word_cap, p->len * 2 + 1, 1, &s.oom);
            if (s.oom) break;
            size_t n = 0;
            if (v->raw_bytes) {
                memcpy(s.word, words.text + p->off, p->len);
                n = p->len;
            } else {
                for (size_t i = 0; i < p->len; i++)
                    n += (size_t)bpe_byte_to_utf8((uint8_t)words.text[p->off + i], s.word + n);
            }
            if (n > 0) merge_word(v, &s, n, out);
        }
    }
    if (s.oom || s.heap.oom) out->oom = true;
    free(s.word);
    free(s.sym);
    free(s.heap.v);
    free(s.key);
    pretok_out_free(&words);
}
