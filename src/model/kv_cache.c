/* The KV cache: sizing (shared by the planner and the allocator), storing
 * rows, and a sequence's positions: truncation and context shift. */
#include "model/kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

plm_type plm_kv_storage_type(plm_kv_type t) {
    switch (t) {
    case PLM_KV_Q8_0: return PLM_TYPE_Q8_0;
    case PLM_KV_Q4_0: return PLM_TYPE_Q4_0;
    default: return PLM_TYPE_F16;
    }
}

/* A windowed layer's token at position p reads positions p - window + 1..p
 * while the rest of its batch (up to n_batch - 1 later positions) is
 * already stored: window + n_batch cells never overwrite a row still read. */
uint32_t plm_kv_layer_cells(const plm_kv_spec *s, int il) {
    const uint32_t w = plm_arch_layer_window(s->arch, s->hp, il);
    if (!w || (uint64_t)w + s->n_batch >= s->n_ctx) return s->n_ctx;
    return w + s->n_batch;
}

bool plm_kv_size_of(const plm_kv_spec *s, plm_kv_size *o) {
    memset(o, 0, sizeof *o);
    if ((unsigned)s->type_k > PLM_KV_Q4_0 || (unsigned)s->type_v > PLM_KV_Q4_0) return false;
    const plm_type tk = plm_kv_storage_type(s->type_k), tv = plm_kv_storage_type(s->type_v);
    if ((tk != PLM_TYPE_F16 || tv != PLM_TYPE_F16) && s->hp->head_dim % 32) return false;
    const int64_t kv_dim = (int64_t)s->hp->n_head_kv * s->hp->head_dim;
    o->k_row = plm_row_size(tk, kv_dim);
    o->v_row = plm_row_size(tv, kv_dim);
    for (int il = 0; il < s->hp->n_layer; il++) o->cells += plm_kv_layer_cells(s, il);
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
    kv->first_cell = malloc(((size_t)L + 1) * sizeof *kv->first_cell);
    kv->window = malloc((size_t)L * sizeof *kv->window);
    if (!kv->first_cell || !kv->window) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    kv->first_cell[0] = 0;
    for (int il = 0; il < L; il++) {
        kv->first_cell[il + 1] = kv->first_cell[il] + plm_kv_layer_cells(s, il);
        kv->window[il] = plm_kv_layer_cells(s, il) < s->n_ctx ? plm_arch_layer_window(s->arch, s->hp, il) : 0;
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
    free(kv->window);
    memset(kv, 0, sizeof *kv);
}

void plm_kv_store(plm_kv_cache *kv, const plm_kernels *kt, int il, uint32_t pos0, int n, const float *k,
                  const float *v) {
    for (int t = 0; t < n; t++) {
        kt->quantize_row[kv->type_k](k + (int64_t)t * kv->kv_dim, plm_kv_keys(kv, il, pos0 + t), kv->kv_dim);
        kt->quantize_row[kv->type_v](v + (int64_t)t * kv->kv_dim, plm_kv_values(kv, il, pos0 + t), kv->kv_dim);
    }
}

/* ---- sequences ------------------------------------------------------------ */

uint32_t plm_kv_seq_len(const plm_kv_cache *kv, plm_kv_seq seq) {
    (void)seq;
    return kv->len;
}

void plm_kv_seq_advance(plm_kv_cache *kv, plm_kv_seq seq, uint32_t n) {
    (void)seq;
    kv->len += n;
}

void plm_kv_seq_truncate(plm_kv_cache *kv, plm_kv_seq seq, uint32_t pos) {
    (void)seq;
    if (pos < kv->len) kv->len = pos;
}

plm_status plm_kv_seq_shift(plm_kv_cache *kv, plm_kv_seq seq, uint32_t n_keep, uint32_t n_discard,
                            plm_kv_rerotate_fn rerotate, void *user, plm_error *err) {
    const uint32_t len = plm_kv_seq_len(kv, seq);
    if ((uint64_t)n_keep + n_discard > len)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "cannot drop %u tokens after %u: only %u are cached", n_discard,
                        n_keep, len);
    if (n_discard == 0) return PLM_OK;
    for (int il = 0; il < kv->n_layer; il++)
        if (kv->window[il])
            return plm_fail(err, PLM_ERR_UNSUPPORTED, "context shift of a sliding-window cache is not supported");
    const uint32_t n_move = len - n_keep - n_discard;
    for (int il = 0; il < kv->n_layer; il++) {
        memmove(plm_kv_keys(kv, il, n_keep), plm_kv_keys(kv, il, n_keep + n_discard), (size_t)n_move * kv->k_row);
        memmove(plm_kv_values(kv, il, n_keep), plm_kv_values(kv, il, n_keep + n_discard),
                (size_t)n_move * kv->v_row);
    }
    rerotate(user, kv, n_keep, n_move, -(int)n_discard);
    kv->len -= n_discard;
    return PLM_OK;
}
