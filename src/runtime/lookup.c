/*
 * Prompt lookup and the n-gram cache (see lookup.h).
 *
 * The cache is an open-addressing hash table keyed by a context of 1..4
 * tokens; each entry keeps the NGRAM_SLOTS most frequent successors seen
 * (a new successor replaces the least counted one, so a changed habit is
 * learned).  Its file, little-endian:
 *
 *     "PLMNGRAM"                 8 bytes
 *     u32 version (1), u32 n_vocab, u32 max context (4), u32 slots (4)
 *     u64 n_entries
 *     n_entries x { u32 n; i32 ctx[4]; i32 tok[4]; u32 count[4] }   (52 bytes)
 *     u64 FNV-1a of every byte before it
 *
 * Everything is checked on load (size, version, vocabulary, each token id,
 * each count, the checksum) before the table is touched.
 */
#include "runtime/lookup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

#define NGRAM_SLOTS 4
#define NGRAM_VERSION 1u
#define NGRAM_MAGIC "PLMNGRAM"
#define NGRAM_HEADER 32
#define NGRAM_RECORD 52
/* A cache never grows past this many contexts (64 MiB of table); new
 * contexts are then ignored, known ones still counted. */
#define NGRAM_MAX_ENTRIES (1u << 20)

/* ---- prompt lookup ---------------------------------------------------------- */

int plm_lookup_propose(const plm_token *hist, int n_hist, int n_min, int n_max, plm_token *out, int k) {
    if (n_min < 1) n_min = 1;
    for (int n = n_max; n >= n_min; n--) {
        if (n >= n_hist) continue;
        const plm_token *suffix = hist + n_hist - n;
        /* Most recent first: the newest context is the likeliest to go on. */
        for (int j = n_hist - n - 1; j >= 0; j--) {
            if (memcmp(hist + j, suffix, (size_t)n * sizeof *hist) != 0) continue;
            int m = 0;
            while (m < k && j + n + m < n_hist) {
                out[m] = hist[j + n + m];
                m++;
            }
            return m;
        }
    }
    return 0;
}

/* ---- the n-gram cache -------------------------------------------------------- */

typedef struct ngram_entry {
    uint32_t n;  /* context length; 0 = empty slot of the table */
    plm_token ctx[PLM_NGRAM_MAX];
    plm_token tok[NGRAM_SLOTS];
    uint32_t count[NGRAM_SLOTS];
} ngram_entry;

struct plm_ngram_cache {
    int n_vocab;
    uint64_t cap;  /* power of two */
    uint64_t used;
    ngram_entry *e;
};

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_OFFSET 0xcbf29ce484222325ull

static uint64_t ctx_hash(const plm_token *ctx, uint32_t n) {
    uint64_t h = fnv1a(FNV_OFFSET, &n, sizeof n);
    h = fnv1a(h, ctx, n * sizeof *ctx);
    return h ^ (h >> 29);
}

plm_ngram_cache *plm_ngram_cache_new(int n_vocab) {
    plm_ngram_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n_vocab = n_vocab;
    c->cap = 1024;
    c->e = calloc(c->cap, sizeof *c->e);
    if (!c->e) {
        free(c);
        return NULL;
    }
    return c;
}

void plm_ngram_cache_free(plm_ngram_cache *c) {
    if (!c) return;
    free(c->e);
    free(c);
}

uint64_t plm_ngram_cache_size(const plm_ngram_cache *c) { return c->used; }

/* The slot of ctx: its entry, or the empty slot where it would go. */
static ngram_entry *find_slot(ngram_entry *tab, uint64_t cap, const plm_token *ctx, uint32_t n) {
    uint64_t i = ctx_hash(ctx, n) & (cap - 1);
    for (;;) {
        ngram_entry *e = &tab[i];
        if (e->n == 0 || (e->n == n && !memcmp(e->ctx, ctx, n * sizeof *ctx))) return e;
        i = (i + 1) & (cap - 1);
    }
}

/* Doubles the table when it is half full; false when it may not grow. */
static bool make_room(plm_ngram_cache *c) {
    if (c->used + 1 <= c->cap / 2) return true;
    if (c->used >= NGRAM_MAX_ENTRIES) return false;
    const uint64_t cap = c->cap * 2;
    ngram_entry *tab = calloc(cap, sizeof *tab);
    if (!tab) return false;
    for (uint64_t i = 0; i < c->cap; i++)
        if (c->e[i].n) *find_slot(tab, cap, c->e[i].ctx, c->e[i].n) = c->e[i];
    free(c->e);
    c->e = tab;
    c->cap = cap;
    return true;
}

/* Adds `count` sightings of `tok` after ctx[0..n). */
static void count_successor(plm_ngram_cache *c, const plm_token *ctx, uint32_t n, plm_token tok, uint32_t count) {
    ngram_entry *e = find_slot(c->e, c->cap, ctx, n);
    if (e->n == 0) {
        if (!make_room(c)) return;
        e = find_slot(c->e, c->cap, ctx, n);
        memset(e, 0, sizeof *e);
        e->n = n;
        memcpy(e->ctx, ctx, n * sizeof *ctx);
        for (int s = 0; s < NGRAM_SLOTS; s++) e->tok[s] = -1;
        c->used++;
    }
    int least = 0;
    for (int s = 0; s < NGRAM_SLOTS; s++) {
        if (e->count[s] && e->tok[s] == tok) {
            e->count[s] = e->count[s] > UINT32_MAX - count ? UINT32_MAX : e->count[s] + count;
            return;
        }
        if (e->count[s] < e->count[least]) least = s;
    }
    e->tok[least] = tok;
    e->count[least] = count;
}

void plm_ngram_cache_add(plm_ngram_cache *c, const plm_token *hist, int n_hist) {
    for (int n = 1; n <= PLM_NGRAM_MAX && n < n_hist; n++)
        count_successor(c, hist + n_hist - 1 - n, (uint32_t)n, hist[n_hist - 1], 1);
}

/* The favourite successor of the longest known context ending hist, or -1. */
static plm_token favourite(const plm_ngram_cache *c, const plm_token *hist, int n_hist) {
    for (int n = PLM_NGRAM_MAX; n >= 1; n--) {
        if (n > n_hist) continue;
        const ngram_entry *e = find_slot(c->e, c->cap, hist + n_hist - n, (uint32_t)n);
        if (e->n == 0) continue;
        uint64_t total = 0;
        int best = 0;
        for (int s = 0; s < NGRAM_SLOTS; s++) {
            total += e->count[s];
            if (e->count[s] > e->count[best]) best = s;
        }
        if (2 * (uint64_t)e->count[best] > total && (n >= 3 || e->count[best] >= 2)) return e->tok[best];
    }
    return -1;
}

int plm_ngram_cache_propose(const plm_ngram_cache *c, const plm_token *hist, int n_hist, plm_token *out, int k) {
    /* Each guess extends the context the next one is looked up with. */
    plm_token tail[PLM_NGRAM_MAX * 2 + 64];
    const int keep = n_hist < PLM_NGRAM_MAX ? n_hist : PLM_NGRAM_MAX;
    memcpy(tail, hist + n_hist - keep, (size_t)keep * sizeof *tail);
    int n_tail = keep, m = 0;
    while (m < k && m < 64) {
        plm_token t = favourite(c, tail + n_tail - (n_tail < PLM_NGRAM_MAX ? n_tail : PLM_NGRAM_MAX),
                                n_tail < PLM_NGRAM_MAX ? n_tail : PLM_NGRAM_MAX);
        if (t < 0) break;
        out[m++] = t;
        tail[n_tail++] = t;
    }
    return m;
}

/* ---- the file ------------------------------------------------------------------ */

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void encode_entry(const ngram_entry *e, uint8_t *p) {
    put_u32(p, e->n);
    for (int i = 0; i < PLM_NGRAM_MAX; i++) put_u32(p + 4 + 4 * i, (uint32_t)(i < (int)e->n ? e->ctx[i] : -1));
    for (int s = 0; s < NGRAM_SLOTS; s++) {
        put_u32(p + 20 + 4 * s, (uint32_t)(e->count[s] ? e->tok[s] : -1));
        put_u32(p + 36 + 4 * s, e->count[s]);
    }
}

/* Checks one record; fills e on success. */
static bool decode_entry(const uint8_t *p, int n_vocab, ngram_entry *e) {
    memset(e, 0, sizeof *e);
    e->n = get_u32(p);
    if (e->n < 1 || e->n > PLM_NGRAM_MAX) return false;
    for (int i = 0; i < PLM_NGRAM_MAX; i++) {
        int32_t t = (int32_t)get_u32(p + 4 + 4 * i);
        if (i < (int)e->n ? (t < 0 || t >= n_vocab) : t != -1) return false;
        if (i < (int)e->n) e->ctx[i] = t;
    }
    for (int s = 0; s < NGRAM_SLOTS; s++) {
        e->tok[s] = (int32_t)get_u32(p + 20 + 4 * s);
        e->count[s] = get_u32(p + 36 + 4 * s);
        if (e->count[s] ? (e->tok[s] < 0 || e->tok[s] >= n_vocab) : e->tok[s] != -1) return false;
    }
    return true;
}

static uint8_t *read_whole(const char *path, size_t *size, plm_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        plm_fail(err, PLM_ERR_IO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    uint8_t *buf = NULL;
    long len = -1;
    if (fseek(f, 0, SEEK_END) == 0) len = ftell(f);
    if (len < 0 || fseek(f, 0, SEEK_SET) != 0) {
        plm_fail(err, PLM_ERR_IO, "%s: cannot find its size", path);
    } else if (!(buf = malloc(len ? (size_t)len : 1))) {
        plm_fail(err, PLM_ERR_NOMEM, "%s: out of memory reading %ld bytes", path, len);
    } else if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
        plm_fail(err, PLM_ERR_IO, "%s: read failed", path);
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)(len < 0 ? 0 : len);
    return buf;
}

static plm_status check_file(const uint8_t *b, size_t size, int n_vocab, const char *path, uint64_t *n_out,
                             plm_error *err) {
    if (size < NGRAM_HEADER + 8 || memcmp(b, NGRAM_MAGIC, 8) != 0)
        return plm_fail(err, PLM_ERR_FORMAT, "%s is not a pocketlm n-gram cache (no PLMNGRAM header)", path);
    const uint32_t version = get_u32(b + 8), vocab = get_u32(b + 12);
    if (version != NGRAM_VERSION)
        return plm_fail(err, PLM_ERR_FORMAT, "%s: n-gram cache format version %u; this build reads version %u", path,
                        version, NGRAM_VERSION);
    if (vocab != (uint32_t)n_vocab)
        return plm_fail(err, PLM_ERR_FORMAT, "%s: n-gram cache for a vocabulary of %u tokens; this model has %d",
                        path, vocab, n_vocab);
    if (get_u32(b + 16) != PLM_NGRAM_MAX || get_u32(b + 20) != NGRAM_SLOTS)
        return plm_fail(err, PLM_ERR_FORMAT, "%s: n-gram cache with %u-token contexts and %u slots; expected %d and %d",
                        path, get_u32(b + 16), get_u32(b + 20), PLM_NGRAM_MAX, NGRAM_SLOTS);
    const uint64_t n = get_u64(b + 24);
    if (n > NGRAM_MAX_ENTRIES || size != NGRAM_HEADER + n * NGRAM_RECORD + 8)
        return plm_fail(err, PLM_ERR_FORMAT, "%s: corrupt n-gram cache: %llu entries do not fit its %zu bytes", path,
                        (unsigned long long)n, size);
    if (fnv1a(FNV_OFFSET, b, size - 8) != get_u64(b + size - 8))
        return plm_fail(err, PLM_ERR_FORMAT, "%s: corrupt n-gram cache: checksum mismatch", path);
    for (uint64_t i = 0; i < n; i++) {
        ngram_entry e;
        if (!decode_entry(b + NGRAM_HEADER + i * NGRAM_RECORD, n_vocab, &e))
            return plm_fail(err, PLM_ERR_FORMAT, "%s: corrupt n-gram cache: entry %llu is out of range", path,
                            (unsigned long long)i);
    }
    *n_out = n;
    return PLM_OK;
}

plm_status plm_ngram_cache_load(plm_ngram_cache *c, const char *path, plm_error *err) {
    size_t size;
    uint8_t *b = read_whole(path, &size, err);
    if (!b) return err ? err->code : PLM_ERR_IO;
    uint64_t n = 0;
    plm_status st = check_file(b, size, c->n_vocab, path, &n, err);
    for (uint64_t i = 0; !st && i < n; i++) {
        ngram_entry e;
        decode_entry(b + NGRAM_HEADER + i * NGRAM_RECORD, c->n_vocab, &e);
        for (int s = 0; s < NGRAM_SLOTS; s++)
            if (e.count[s]) count_successor(c, e.ctx, e.n, e.tok[s], e.count[s]);
    }
    free(b);
    return st;
}

plm_status plm_ngram_cache_save(const plm_ngram_cache *c, const char *path, plm_error *err) {
    const size_t size = NGRAM_HEADER + (size_t)c->used * NGRAM_RECORD + 8;
    uint8_t *b = malloc(size);
    if (!b) return plm_fail(err, PLM_ERR_NOMEM, "out of memory writing the n-gram cache");
    memcpy(b, NGRAM_MAGIC, 8);
    put_u32(b + 8, NGRAM_VERSION);
    put_u32(b + 12, (uint32_t)c->n_vocab);
    put_u32(b + 16, PLM_NGRAM_MAX);
    put_u32(b + 20, NGRAM_SLOTS);
    put_u64(b + 24, c->used);
    uint8_t *p = b + NGRAM_HEADER;
    for (uint64_t i = 0; i < c->cap; i++)
        if (c->e[i].n) {
            encode_entry(&c->e[i], p);
            p += NGRAM_RECORD;
        }
    put_u64(p, fnv1a(FNV_OFFSET, b, size - 8));

    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        free(b);
        return plm_fail(err, PLM_ERR_INVALID_ARG, "n-gram cache path is too long");
    }
    plm_status st = PLM_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        st = plm_fail(err, PLM_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    } else {
        size_t done = 0;
        while (done < size) {
            ssize_t w = write(fd, b + done, size - done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            done += (size_t)w;
        }
        int sync_rc = done == size ? fsync(fd) : -1;
        if (close(fd) != 0 || done != size || sync_rc != 0)
            st = plm_fail(err, PLM_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
        else if (rename(tmp, path) != 0)
            st = plm_fail(err, PLM_ERR_IO, "%s: cannot rename %s to it: %s", path, tmp, strerror(errno));
        if (st) unlink(tmp);
    }
    free(b);
    return st;
}
