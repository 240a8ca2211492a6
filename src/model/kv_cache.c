/* The KV cache: sizing (shared by the planner and the allocator), storing
 * rows, and the sequences' positions: append, truncate, copy, shift. */
#include "model/kv_cache.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"

plm_type plm_kv_storage_type(plm_kv_type t) {
    switch (t) {
    case PLM_KV_Q8_0: return PLM_TYPE_Q8_0;
    case PLM_KV_Q4_0: return PLM_TYPE_Q4_0;
    default: return PLM_TYPE_F16;
    }
}

static uint32_t n_seq_of(const plm_kv_spec *s) { return s->n_seq ? s->n_seq : 1; }

/* A windowed layer's token at position p reads positions p - window + 1..p
 * while the rest of its batch (up to n_batch - 1 later positions) is
 * already stored: a ring of window + n_batch cells never overwrites a row
 * still read.  0: the layer keeps every position. */
static uint32_t ring_of(const plm_kv_spec *s, int il) {
    const uint32_t w = plm_arch_layer_window(s->arch, s->hp, il);
    if (!w || 2 * (uint64_t)w + s->n_batch - 1 >= s->n_ctx) return 0;  /* no smaller than a full stream */
    return w + s->n_batch;
}

uint32_t plm_kv_layer_cells(const plm_kv_spec *s, int il) {
    const uint32_t ring = ring_of(s, il);
    return ring ? ring + plm_arch_layer_window(s->arch, s->hp, il) - 1 : s->n_ctx;
}

bool plm_kv_size_of(const plm_kv_spec *s, plm_kv_size *o) {
    memset(o, 0, sizeof *o);
    if ((unsigned)s->type_k > PLM_KV_Q4_0 || (unsigned)s->type_v > PLM_KV_Q4_0) return false;
    const plm_type tk = plm_kv_storage_type(s->type_k), tv = plm_kv_storage_type(s->type_v);
    if ((tk != PLM_TYPE_F16 || tv != PLM_TYPE_F16) && s->hp->head_dim % 32) return false;
    const int64_t kv_dim = (int64_t)s->hp->n_head_kv * s->hp->head_dim;
    o->k_row = plm_row_size(tk, kv_dim);
    o->v_row = plm_row_size(tv, kv_dim);
    for (int il = 0; il < s->hp->n_layer; il++) o->cells += (uint64_t)n_seq_of(s) * plm_kv_layer_cells(s, il);
    o->k_bytes = o->cells * o->k_row;
    o->v_bytes = o->cells * o->v_row;
    return true;
}

plm_status plm_kv_init(plm_kv_cache *kv, const plm_kv_spec *s, plm_error *err) {
    memset(kv, 0, sizeof *kv);
    plm_kv_size size;
    if (!plm_kv_size_of(s, &size))
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "a %s/%s KV cache needs a head size divisible by 32 (this model: %d)",
                        plm_kv_type_name(s->type_k), plm_kv_type_name(s->type_v), s->hp->head_dim);
    const int L = s->hp->n_layer;
    kv->type_k = plm_kv_storage_type(s->type_k);
    kv->type_v = plm_kv_storage_type(s->type_v);
    kv->k_row = size.k_row;
    kv->v_row = size.v_row;
    kv->n_layer = L;
    kv->kv_dim = s->hp->n_head_kv * s->hp->head_dim;
    kv->n_ctx = s->n_ctx;
    kv->n_seq = n_seq_of(s);
    kv->first_cell = malloc((size_t)L * sizeof *kv->first_cell);
    kv->cells = malloc((size_t)L * sizeof *kv->cells);
    kv->window = malloc((size_t)L * sizeof *kv->window);
    kv->ring = malloc((size_t)L * sizeof *kv->ring);
    kv->len = calloc(kv->n_seq, sizeof *kv->len);
    if (!kv->first_cell || !kv->cells || !kv->window || !kv->ring || !kv->len)
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    uint64_t first = 0;
    for (int il = 0; il < L; il++) {
        kv->first_cell[il] = first;
        kv->cells[il] = plm_kv_layer_cells(s, il);
        kv->ring[il] = ring_of(s, il);
        /* a window as long as the context changes nothing; a shorter one
         * applies whether or not a ring saves memory */
        const uint32_t w = plm_arch_layer_window(s->arch, s->hp, il);
        kv->window[il] = w < s->n_ctx ? w : 0;
        first += (uint64_t)kv->n_seq * kv->cells[il];
    }
    kv->k = malloc(size.k_bytes);
    kv->v = malloc(size.v_bytes);
    if (!kv->k || !kv->v)
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory allocating a %u-token KV cache (%llu MiB)", s->n_ctx,
                        (unsigned long long)((size.k_bytes + size.v_bytes) >> 20));
    return PLM_OK;
}

void plm_kv_free(plm_kv_cache *kv) {
    free(kv->k);
    free(kv->v);
    free(kv->first_cell);
    free(kv->cells);
    free(kv->window);
    free(kv->ring);
    free(kv->len);
    memset(kv, 0, sizeof *kv);
}

void plm_kv_store(plm_kv_cache *kv, const plm_kernels *kt, int il, const plm_ubatch *b, const float *k,
                  const float *v) {
    for (int t = 0; t < b->n; t++) {
        const plm_kv_seq seq = plm_ubatch_seq(b, t);
        const uint32_t pos = plm_ubatch_pos(b, t);
        uint8_t *kr = plm_kv_keys(kv, il, seq, pos), *vr = plm_kv_values(kv, il, seq, pos);
        kt->quantize_row[kv->type_k](k + (int64_t)t * kv->kv_dim, kr, kv->kv_dim);
        kt->quantize_row[kv->type_v](v + (int64_t)t * kv->kv_dim, vr, kv->kv_dim);
        if (kv->ring[il] && pos % kv->ring[il] < kv->window[il] - 1) {  /* and its mirror */
            memcpy(kr + (size_t)kv->ring[il] * kv->k_row, kr, kv->k_row);
            memcpy(vr + (size_t)kv->ring[il] * kv->v_row, vr, kv->v_row);
        }
    }
}

/* A windowed layer's mirror: copies of its ring's first window - 1 cells. */
static void sync_mirror(plm_kv_cache *kv, int il, plm_kv_seq seq) {
    uint8_t *k = plm_kv_keys(kv, il, seq, 0), *v = plm_kv_values(kv, il, seq, 0);
    memcpy(k + (size_t)kv->ring[il] * kv->k_row, k, (size_t)(kv->window[il] - 1) * kv->k_row);
    memcpy(v + (size_t)kv->ring[il] * kv->v_row, v, (size_t)(kv->window[il] - 1) * kv->v_row);
}

void plm_kv_sync_mirrors(plm_kv_cache *kv) {
    for (int il = 0; il < kv->n_layer; il++)
        if (kv->ring[il])
            for (uint32_t seq = 0; seq < kv->n_seq; seq++) sync_mirror(kv, il, (plm_kv_seq)seq);
}

/* ---- sequences ------------------------------------------------------------ */

plm_status plm_kv_check_batch(const plm_kv_cache *kv, const plm_ubatch *b, plm_error *err) {
    for (int t = 0; t < b->n; t++) {
        const plm_kv_seq seq = plm_ubatch_seq(b, t);
        if (seq < 0 || (uint32_t)seq >= kv->n_seq)
            return plm_fail(err, PLM_ERR_INVALID_ARG, "token %d: sequence %d does not exist (the cache has %u)", t,
                            seq, kv->n_seq);
        uint32_t next = kv->len[seq];
        for (int u = 0; u < t; u++) next += plm_ubatch_seq(b, u) == seq;
        const uint32_t pos = plm_ubatch_pos(b, t);
        if (pos != next)
            return plm_fail(err, PLM_ERR_INVALID_ARG, "token %d: position %u, but sequence %d continues at %u", t,
                            pos, seq, next);
        if (pos >= kv->n_ctx)
            return plm_fail(err, PLM_ERR_CONTEXT_FULL, "sequence %d is full: position %u, context length %u", seq,
                            pos, kv->n_ctx);
    }
    return PLM_OK;
}

void plm_kv_commit(plm_kv_cache *kv, const plm_ubatch *b) {
    for (int t = 0; t < b->n; t++) {
        const plm_kv_seq seq = plm_ubatch_seq(b, t);
        const uint32_t end = plm_ubatch_pos(b, t) + 1;
        if (end > kv->len[seq]) kv->len[seq] = end;
    }
}

uint32_t plm_kv_seq_len(const plm_kv_cache *kv, plm_kv_seq seq) { return kv->len[seq]; }

void plm_kv_seq_truncate(plm_kv_cache *kv, plm_kv_seq seq, uint32_t pos) {
    if (pos < kv->len[seq]) kv->len[seq] = pos;
}

plm_status plm_kv_seq_copy(plm_kv_cache *kv, plm_kv_seq src, plm_kv_seq dst, plm_error *err) {
    if (src < 0 || dst < 0 || (uint32_t)src >= kv->n_seq || (uint32_t)dst >= kv->n_seq)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "cannot copy sequence %d to %d: the cache has %u", src, dst,
                        kv->n_seq);
    if (src == dst) return PLM_OK;
    for (int il = 0; il < kv->n_layer; il++) {
        /* a windowed layer's ring and mirror: all of it */
        const uint32_t rows = kv->len[src] < kv->cells[il] && !kv->ring[il] ? kv->len[src] : kv->cells[il];
        memcpy(plm_kv_keys(kv, il, dst, 0), plm_kv_keys(kv, il, src, 0), (size_t)rows * kv->k_row);
        memcpy(plm_kv_values(kv, il, dst, 0), plm_kv_values(kv, il, src, 0), (size_t)rows * kv->v_row);
    }
    kv->len[dst] = kv->len[src];
    return PLM_OK;
}

/* Swaps rows a and b, `size` bytes each, through a small buffer. */
static void swap_rows(uint8_t *a, uint8_t *b, size_t size) {
    uint8_t tmp[256];
    for (size_t off = 0; off < size; off += sizeof tmp) {
        const size_t n = size - off < sizeof tmp ? size - off : sizeof tmp;
        memcpy(tmp, a + off, n);
        memcpy(a + off, b + off, n);
        memcpy(b + off, tmp, n);
    }
}

static void reverse_rows(uint8_t *rows, uint32_t first, uint32_t end, size_t size) {
    for (; first + 1 < end; first++, end--) swap_rows(rows + (size_t)first * size, rows + (size_t)(end - 1) * size, size);
}

/* Rotates n rows left by r, in place (three reversals): row i takes what
 * row (i + r) mod n held. */
static void rotate_rows(uint8_t *rows, uint32_t n, uint32_t r, size_t size) {
    if (r == 0) return;
    reverse_rows(rows, 0, r, size);
    reverse_rows(rows, r, n, size);
    reverse_rows(rows, 0, n, size);
}

/* A windowed layer's ring holds its last `ring` positions: after the shift
 * it must hold the window - 1 positions before the new end, and those must
 * all be moved ones (the kept prefix, n_keep, is in its ring no more). */
static plm_status check_windows_shift(const plm_kv_cache *kv, uint32_t n_keep, uint32_t n_move, plm_error *err) {
    for (int il = 0; il < kv->n_layer; il++)
        if (kv->ring[il] && n_move + 1 < kv->window[il])
            return plm_fail(err, PLM_ERR_UNSUPPORTED,
                            "context shift: the sliding-window layers need the last %u tokens, but only %u follow "
                            "the %u kept (keep fewer, or use a longer context)",
                            kv->window[il] - 1, n_move, n_keep);
    return PLM_OK;
}

/* Moves positions [from, from + n) of seq down to `to` in layer il.  A
 * ring's cell of position p is p mod ring: rotating the ring by the shift
 * puts every held position's row at its new cell (rows no position holds
 * rotate too, unread), and the mirror is rewritten after the re-rotation. */
static void move_rows(plm_kv_cache *kv, int il, plm_kv_seq seq, uint32_t to, uint32_t from, uint32_t n) {
    if (kv->ring[il]) {
        rotate_rows(plm_kv_keys(kv, il, seq, 0), kv->ring[il], (from - to) % kv->ring[il], kv->k_row);
        rotate_rows(plm_kv_values(kv, il, seq, 0), kv->ring[il], (from - to) % kv->ring[il], kv->v_row);
        return;
    }
    memmove(plm_kv_keys(kv, il, seq, to), plm_kv_keys(kv, il, seq, from), (size_t)n * kv->k_row);
    memmove(plm_kv_values(kv, il, seq, to), plm_kv_values(kv, il, seq, from), (size_t)n * kv->v_row);
}

plm_status plm_kv_seq_shift(plm_kv_cache *kv, plm_kv_seq seq, uint32_t n_keep, uint32_t n_discard,
                            plm_kv_rerotate_fn rerotate, void *user, plm_error *err) {
    const uint32_t len = plm_kv_seq_len(kv, seq);
    if ((uint64_t)n_keep + n_discard > len)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "cannot drop %u tokens after %u: only %u are cached", n_discard,
                        n_keep, len);
    if (n_discard == 0) return PLM_OK;
    const uint32_t n_move = len - n_keep - n_discard;
    plm_status st = check_windows_shift(kv, n_keep, n_move, err);
    if (st) return st;
    for (int il = 0; il < kv->n_layer; il++) move_rows(kv, il, seq, n_keep, n_keep + n_discard, n_move);
    rerotate(user, kv, seq, n_keep, n_move, -(int)n_discard);
    for (int il = 0; il < kv->n_layer; il++)
        if (kv->ring[il]) sync_mirror(kv, il, seq);
    kv->len[seq] -= n_discard;
    return PLM_OK;
}

/* ---- memory pressure -------------------------------------------------------- */

/* Hands the whole pages inside [p, p + n) back to the kernel; they read as
 * zeros when next touched.  Returns the bytes released. */
static uint64_t release_pages(uint8_t *p, size_t n) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + n) & ~(page - 1);
    if (b <= a || madvise((void *)a, b - a, MADV_DONTNEED) != 0) return 0;
    return b - a;
}

uint64_t plm_kv_release_unused(plm_kv_cache *kv) {
    uint64_t n = 0;
    for (int il = 0; il < kv->n_layer; il++) {
        if (kv->ring[il]) continue;  /* a ring's cells wrap: all may be live */
        for (uint32_t seq = 0; seq < kv->n_seq; seq++) {
            const uint32_t len = kv->len[seq], unused = kv->cells[il] - len;
            n += release_pages(plm_kv_keys(kv, il, (plm_kv_seq)seq, len), (size_t)unused * kv->k_row);
            n += release_pages(plm_kv_values(kv, il, (plm_kv_seq)seq, len), (size_t)unused * kv->v_row);
        }
    }
    return n;
}
