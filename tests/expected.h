/* Readers for llama.cpp's reference files in ../shared/models/expected/:
 * NAME.tokens (one line of ids) and NAME.logits.f32 (little-endian float32,
 * n_tokens rows of n_vocab). */
#ifndef PLM_TEST_EXPECTED_H
#define PLM_TEST_EXPECTED_H

#include <stdio.h>
#include <stdlib.h>

#include "pocketlm.h"

/* Up to max ids into out; their count, or -1 when the file cannot be read. */
static inline int expected_read_tokens(const char *path, plm_token *out, int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, v;
    while (n < max && fscanf(f, "%d", &v) == 1) out[n++] = v;
    fclose(f);
    return n;
}

/* Exactly count floats (malloc'd), or NULL when the file is missing or short. */
static inline float *expected_read_logits(const char *path, size_t count) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *l = malloc(count * sizeof(float));
    if (l && fread(l, sizeof(float), count, f) != count) {
        free(l);
        l = NULL;
    }
    fclose(f);
    return l;
}

#endif
