/*
 * The KV cache: every layer's keys and values, one row per cell, a cell
 * holding one position's kv_dim elements as F16, Q8_0 or Q4_0.
 *
 * Layout: keys of all layers in one allocation, layer after layer; within a
 * layer, one stream of cells per sequence (as llama.cpp's non-unified
 * cache): a token only ever attends to its own sequence, so its keys are one
 * contiguous run and attention needs no mask.  A full-attention layer's
 * stream has n_ctx cells and position p lives in cell p.  A sliding-window
 * layer's is a ring of `ring` = window + n_batch cells (it never needs
 * older keys; the batch's later tokens are stored before its earlier ones
 * attend) where position p lives in cell p mod ring, followed by a mirror
 * of the ring's first window - 1 cells, written with them: a window that
 * wraps around the ring's end continues into the mirror, so the keys a
 * token attends to are still one contiguous run, read by the same
 * attention kernel as a full layer's.  The byte count comes from one
 * function, plm_kv_size_of(), which the memory planner and the allocator
 * both call, so `plan` and a context agree to the byte.
 *
 * Sequences (llama.cpp's seq_id): each has its own positions 0..len-1,
 * appended by batches whose tokens carry a sequence id and a position;
 * truncated, cleared, copied and shifted one at a time.
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
    uint32_t n_seq;         /* sequences; 0 = 1 */
} plm_kv_spec;

/* Its size: rows of one cell, and all layers' keys and values. */
typedef struct plm_kv_size {
    size_t k_row, v_row;
    uint64_t k_bytes, v_bytes;
    uint64_t cells;          /* summed over layers and sequences */
} plm_kv_size;

typedef int plm_kv_seq;      /* a sequence id, 0..n_seq-1 */

typedef struct plm_kv_cache {
    uint8_t *k, *v;
    plm_type type_k, type_v;
    size_t k_row, v_row;
    int n_layer, kv_dim;
    uint32_t n_ctx, n_seq;
    uint64_t *first_cell;    /* [n_layer]: where layer il's streams start */
    uint32_t *cells;         /* [n_layer]: cells of one stream of layer il (ring and mirror) */
    uint32_t *window;        /* [n_layer]: positions a layer sees, 0 = all */
    uint32_t *ring;          /* [n_layer]: positions a windowed layer holds, 0 = all (no ring:
                                the window is too long for one to save memory) */
    uint32_t *len;           /* [n_seq]: positions each sequence holds */
} plm_kv_cache;

/* Tokens of one forward pass: each with a position and a sequence.  Without
 * pos, token t is at pos0 + t; without seq, every token is in sequence 0. */
typedef struct plm_ubatch {
    const plm_token *tokens;
    int n;
    uint32_t pos0;
    const uint32_t *pos;
    const plm_kv_seq *seq;
} plm_ubatch;

static inline uint32_t plm_ubatch_pos(const plm_ubatch *b, int t) {
    return b->pos ? b->pos[t] : b->pos0 + (uint32_t)t;
}
static inline plm_kv_seq plm_ubatch_seq(const plm_ubatch *b, int t) { return b->seq ? b->seq[t] : 0; }

/* Storage type of a cache type: F16, Q8_0, Q4_0. */
plm_type plm_kv_storage_type(plm_kv_type t);

/* Cells of one sequence's stream in layer il (a windowed layer's ring and
 * its mirror: 2 x window + n_batch - 1; n_ctx when that is not smaller). */
uint32_t plm_kv_layer_cells(const plm_kv_spec *s, int il);

/* Fills *out; false (and *out zeroed) when a quantized type cannot store a
 * row of head_dim elements (head_dim not a multiple of 32) or a type is
 * unknown. */
bool plm_kv_size_of(const plm_kv_spec *s, plm_kv_size *out);

/* Allocates exactly plm_kv_size_of()'s bytes; every sequence empty. */
plm_status plm_kv_init(plm_kv_cache *kv, const plm_kv_spec *s, plm_error *err);
void plm_kv_free(plm_kv_cache *kv);

/* Cell of layer il's row of sequence seq at position pos. */
static inline uint64_t plm_kv_cell(const plm_kv_cache *kv, int il, plm_kv_seq seq, uint32_t pos) {
    return kv->first_cell[il] + (uint64_t)seq * kv->cells[il] + (kv->ring[il] ? pos % kv->ring[il] : pos);
}

/* The first position a token at pos attends to in layer il: 0, or the
 * start of its window.  Its keys, from there to pos, are contiguous from
 * plm_kv_keys(kv, il, seq, first) on (the mirror continues a wrapped ring). */
static inline uint32_t plm_kv_first_seen(const plm_kv_cache *kv, int il, uint32_t pos) {
    const uint32_t w = kv->window[il];
    return w && pos >= w ? pos + 1 - w : 0;
}

/* The first of positions [first, end) whose row layer il still holds: a
 * ring keeps only its last `ring` positions. */
static inline uint32_t plm_kv_first_held(const plm_kv_cache *kv, int il, uint32_t first, uint32_t end) {
    const uint32_t r = kv->ring[il];
    return r && end - first > r ? end - r : first;
}

/* Keys / values of layer il, sequence seq, position pos, as stored. */
static inline uint8_t *plm_kv_keys(const plm_kv_cache *kv, int il, plm_kv_seq seq, uint32_t pos) {
    return kv->k + plm_kv_cell(kv, il, seq, pos) * kv->k_row;
}
static inline uint8_t *plm_kv_values(const plm_kv_cache *kv, int il, plm_kv_seq seq, uint32_t pos) {
    return kv->v + plm_kv_cell(kv, il, seq, pos) * kv->v_row;
}

/* Stores the batch's keys and values ([n][kv_dim] f32) of layer il at its
 * tokens' sequences and positions, in the cache's formats. */
void plm_kv_store(plm_kv_cache *kv, const plm_kernels *kt, int il, const plm_ubatch *b, const float *k,
                  const float *v);

/* Rewrites every windowed layer's mirror from its ring, after the rows
 * were written other than by plm_kv_store (a state file read back). */
void plm_kv_sync_mirrors(plm_kv_cache *kv);

/* Memory pressure: hands back to the kernel the pages of cells no sequence
 * holds (rows past each sequence's length in full-attention layers; they
 * are written before they are read).  Returns the bytes released. */
uint64_t plm_kv_release_unused(plm_kv_cache *kv);

/* ---- sequences ------------------------------------------------------------ */

/* Checks that a batch appends to its sequences: each token's sequence
 * exists and its position is the next one of that sequence (counting the
 * batch's earlier tokens), within n_ctx. */
plm_status plm_kv_check_batch(const plm_kv_cache *kv, const plm_ubatch *b, plm_error *err);

/* After a forward pass stored the batch: its sequences hold its positions. */
void plm_kv_commit(plm_kv_cache *kv, const plm_ubatch *b);

/* Positions sequence seq holds: the next token goes at this position. */
uint32_t plm_kv_seq_len(const plm_kv_cache *kv, plm_kv_seq seq);

/* Forgets seq's positions from pos on (0: clears it). */
void plm_kv_seq_truncate(plm_kv_cache *kv, plm_kv_seq seq, uint32_t pos);

/* Makes dst a copy of src's positions (a shared prefix, forked). */
plm_status plm_kv_seq_copy(plm_kv_cache *kv, plm_kv_seq src, plm_kv_seq dst, plm_error *err);

/* Re-rotates the keys of positions [first, first + n) of sequence seq in
 * every layer by delta positions: the forward pass knows the RoPE, the
 * cache does not. */
typedef void (*plm_kv_rerotate_fn)(void *user, plm_kv_cache *kv, plm_kv_seq seq, uint32_t first, uint32_t n,
                                   int delta);

/* Context shift: drops n_discard positions of seq after its first n_keep,
 * moves the rest down and re-rotates them (llama_memory_seq_rm + seq_add).
 * A windowed layer's ring is rotated instead, and holds only its last
 * `ring` positions: the result is llama.cpp's with a full-size SWA cache
 * (--swa-full; with its default smaller one llama.cpp refuses to shift).
 * Refused when fewer than window - 1 positions would follow the kept ones:
 * the next tokens' windows would reach into the kept prefix, which a ring no
 * longer holds. */
plm_status plm_kv_seq_shift(plm_kv_cache *kv, plm_kv_seq seq, uint32_t n_keep, uint32_t n_discard,
                            plm_kv_rerotate_fn rerotate, void *user, plm_error *err);

#endif
