/* Interned byte strings with an open-addressing hash index (linear probing).
 * Built once at load time, read-only afterwards. */
#include "tokenizer/internal.h"

#include <stdlib.h>
#include <string.h>

static uint32_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, 64-bit, folded */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return (uint32_t)(h ^ (h >> 32));
}

bool strtab_init(strtab *t, uint32_t n, uint64_t bytes) {
    memset(t, 0, sizeof *t);
    uint64_t slots = 16;
    while (slots < (uint64_t)n * 2) slots <<= 1;
    if (slots > (1ull << 31) || bytes > UINT32_MAX) return false;
    t->bytes = malloc(bytes ? bytes : 1);
    t->off = malloc(((size_t)n + 1) * sizeof *t->off);
    t->slots = calloc(slots, sizeof *t->slots);
    if (!t->bytes || !t->off || !t->slots) {
        strtab_free(t);
        return false;
    }
    t->cap = n;
    t->bytes_cap = bytes;
    t->mask = (uint32_t)(slots - 1);
    t->off[0] = 0;
    return true;
}

void strtab_free(strtab *t) {
    free(t->bytes);
    free(t->off);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static bool slot_matches(const strtab *t, uint64_t slot, uint32_t h, const char *s, size_t len) {
    if ((uint32_t)(slot >> 32) != h) return false;
    uint32_t id = (uint32_t)slot - 1;
    size_t n = t->off[id + 1] - t->off[id];
    return n == len && memcmp(t->bytes + t->off[id], s, len) == 0;
}

bool strtab_push(strtab *t, const char *s, size_t len, bool *dup) {
    *dup = false;
    if (t->n >= t->cap || len > t->bytes_cap - t->size) return false;
    uint32_t id = t->n;
    if (len) memcpy(t->bytes + t->size, s, len);
    t->size += len;
    t->off[id + 1] = (uint32_t)t->size;
    t->n++;

    uint32_t h = hash_bytes(s, len);
    for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
        uint64_t slot = t->slots[i];
        if (slot == 0) {
            t->slots[i] = ((uint64_t)h << 32) | (id + 1);
            return true;
        }
        if (slot_matches(t, slot, h, s, len)) {
            *dup = true;
            return true;
        }
    }
}

int32_t strtab_find(const strtab *t, const char *s, size_t len) {
    if (!t->slots) return -1;
    uint32_t h = hash_bytes(s, len);
    for (uint32_t i = h & t->mask;; i = (i + 1) & t->mask) {
        uint64_t slot = t->slots[i];
        if (slot == 0) return -1;
        if (slot_matches(t, slot, h, s, len)) return (int32_t)((uint32_t)slot - 1);
    }
}
