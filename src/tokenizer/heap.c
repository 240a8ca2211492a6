/* A binary min-heap of merge candidates, shared by the SPM and BPE merges. */
#include "tokenizer/internal.h"

#include <stdlib.h>

static bool before(const cand *a, const cand *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

void candheap_push(candheap *h, cand c) {
    if (h->oom) return;
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        cand *v = realloc(h->v, cap * sizeof *v);
        if (!v) {
            h->oom = true;
            return;
        }
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!before(&c, &h->v[up])) break;
        h->v[i] = h->v[up];
        i = up;
    }
    h->v[i] = c;
}

cand candheap_pop(candheap *h) {
    cand top = h->v[0], last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(&h->v[c + 1], &h->v[c])) c++;
        if (!before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (n > 0) h->v[i] = last;
    return top;
}
