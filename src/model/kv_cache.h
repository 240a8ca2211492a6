/*
 * The KV cache: every layer's keys and values, one row per cell, a cell
 * holding one position's kv_dim elements as F16, Q8_0 or Q4_0.
 *
 * Layout: keys of all layers in one allocation, layer after layer, layer il
 * holding plm_kv_layer_cells() cells (values alike).  A full-attention layer
 * has n_ctx cells and position p lives in cell p; a sliding-window layer
 * holds only its window plus one batch (it never needs older keys) and
 * position p lives in cell p mod cells.  The byte count comes from one
 * function, plm_kv_size(), which the memory planner and the allocator both
 * call, so `plan` and a context agree to the byte.
 *
 * Sequences: the API speaks of a sequence (plm_kv_seq_*), as llama.cpp's
 * seq_id does, so that several conversations can later share one cache.
 * Today a cache holds one sequence, 0, whose positions are 0..len-1.
 */
#ifndef PLM_MODEL_KV_CACHE_H
#define PLM_MODEL_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "model/arch.h"
#include "pocketlm.h"
#include "quant/types.h"

/* What a cache is sized from. */
typedef struct plm_kv_spec {
    const plm_arch *arch;
    const plm_hparams *hp;
    uint32_t n_ctx;         /* positions a sequence may hold */
    uint32_t n_batch;       /* most tokens stored by one forward pass */
    plm_kv_type type_k, type_v;
} plm_kv_spec;

/* Its size: rows of one cell, and all layers' keys and values. */
typedef struct plm_kv_size {
    size_t k_row, v_row;
    uint64_t k_bytes, v_bytes;
    uint64_t cells;          /* summed over layers */
} plm_kv_size;

typedef int plm_kv_seq;      /* a sequence id; 0 is the only one today */

typedef struct plm_kv_cache {
    uint8_t *k, *v;
    plm_type type_k, type_v;
    size_t k_row, v_row;
    int n_layer, kv_dim;
    uint32_t n_ctx;
    uint64_t *first_cell;    /* [n_layer + 1]: layer il's cells are [first_cell[il], first_cell[il + 1]) */
    uint32_t *window;        /* [n_layer]: positions a layer sees, 0 = all */
    uint32_t len;            /* positions held by sequence 0 */
} plm_kv_cache;

/* Storage type of a cache type: F16, Q8_0, Q4_0. */
plm_type plm_kv_storage_type(plm_kv_type t);

/* Cells layer il holds. */
uint32_t plm_kv_layer_cells(const plm_kv_spec *s, int il);

/* Fills *out; false (and *out zeroed) when a quantized type cannot store a
 * row of head_dim elements (head_dim not a multiple of 32) or a type is
 * unknown. */
bool plm_kv_size_of(const plm_kv_spec *s, plm_kv_size *out);

/* Allocates exactly plm_kv_size_of()'s bytes. */
plm_status plm_kv_init(plm_kv_cache *kv, const plm_kv_spec *s, plm_error *err);
void plm_kv_free(plm_kv_cache *kv);

/* Cell of layer il's row at position pos (sequence 0). */
static inline uint64_t plm_kv_cell(const plm_kv_cache *kv, int il, uint32_t pos) {
    const uint64_t first = kv->first_cell[il], cells = kv->first_cell[il + 1] - first;
    return first + (kv->window[il] ? pos % cells : pos);
}

/* Keys / values of layer il at position pos, as stored. */
static inline uint8_t *plm_kv_keys(const plm_kv_cache *kv, int il, uint32_t pos) {
    return kv->k + plm_kv_cell(kv, il, pos) * kv->k_row;
}
static inline uint8_t *plm_kv_values(const plm_kv_cache *kv, int il, uint32_t pos) {
    return kv->v + plm_kv_cell(kv, il, pos) * kv->v_row;
}

/* Stores n tokens' keys and values ([n][kv_dim] f32) of layer il at
 * positions pos0.. in the cache's formats. */
void plm_kv_store(plm_kv_cache *kv, const plm_kernels *kt, int il, uint32_t pos0, int n, const float *k,
                  const float *v);

/* ---- sequences ------------------------------------------------------------ */

/* Positions sequence seq holds: the next token goes at this position. */
uint32_t plm_kv_seq_len(const plm_kv_cache *kv, plm_kv_seq seq);

/* Sequence seq now holds n more positions (after a forward pass stored them). */
void plm_kv_seq_advance(plm_kv_cache *kv, plm_kv_seq seq, uint32_t n);

/* Forgets seq's positions from pos on. */
void plm_kv_seq_truncate(plm_kv_cache *kv, plm_kv_seq seq, uint32_t pos);

/* Re-rotates the keys of positions [first, first + n) of every layer by
 * delta positions: the forward pass knows the RoPE, the cache does not. */
typedef void (*plm_kv_rerotate_fn)(void *user, plm_kv_cache *kv, uint32_t first, uint32_t n, int delta);

/* Context shift: drops n_discard positions after the first n_keep, moves
 * the rest down and re-rotates them.  Refuses a cache with windowed layers
 * (their cells wrap; shifting them is not implemented). */
plm_status plm_kv_seq_shift(plm_kv_cache *kv, plm_kv_seq seq, uint32_t n_keep, uint32_t n_discard,
                            plm_kv_rerotate_fn rerotate, void *user, plm_error *err);

#endif
