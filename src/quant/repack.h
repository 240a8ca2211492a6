/*
 * Row-interleaved ("repacked") weights: groups of PLM_REPACK_ROWS
 * consecutive rows of a Q4_0, Q5_0, Q8_0, IQ4_NL, Q4_K, Q5_K, Q6_K or
 * IQ4_XS matrix stored block by block, so that
 * one sequential pass over memory feeds 16 rows' dot products from one
 * activation load, and the rows' scales sit together.  Built at load
 * (plm_model_load with repack) into anonymous memory; same byte size as
 * the file's rows.
 *
 * Layout of group G (rows 16G..16G+15), super-block b (block b of each of
 * the 16 rows), PLM_REPACK_ROWS * type_size bytes:
 *
 *   d[16]      the rows' f16 scales, row j at d[j]
 *   codes      element e of row j is the unsigned code u = w + o
 *              (o = 8 for Q4_0, 16 for Q5_0, 128 for Q8_0), at "slot"
 *                  s = (e / 4) * 64 + j * 4 + e % 4
 *              i.e. 4-element groups of the 16 rows side by side, as one
 *              vpdpbusd / sdot lane per row wants them.  Q8_0 stores slot
 *              s at byte s (512 bytes); Q4_0 packs two slots per byte
 *              (256 bytes): slot s < 256 in the low nibble of byte s,
 *              slot s + 256 (elements 16..31) in its high nibble.
 *              IQ4_NL is stored as Q4_0 (its nibbles index the levels).
 *   high[64]   Q5_0 only, after its codes (stored as Q4_0's, the low 4
 *              bits): the fifth bit of slot s is bit s % 8 of byte s / 8,
 *              so each 64-byte run of slots has its fifth bits in one
 *              64-bit word, a byte mask for the run (AVX-512: one masked
 *              add of 16).
 *
 * Q4_K, per super-block of 256 (16 * 144 bytes):
 *
 *   d[16], dmin[16]   the rows' f16 scales
 *   planes[12][16]    byte p of row j's 12 packed 6-bit scales/mins at
 *                     planes[p][j], so one 16-byte load has a byte of all
 *                     16 rows and the unpacking works on 16 rows at once
 *   codes[4][512]     sub-block pair i (elements 64i..64i+63): row j's
 *                     qs[32i + l] at (l / 4) * 64 + j * 4 + l % 4, its low
 *                     nibble in sub-block 2i, its high nibble in 2i + 1
 *
 * The other super-block formats (plm_repack_k_layout gives the offsets)
 * share those codes: sub-block s (elements 32s..32s+31) has its 4 low bits
 * in the nibble s % 2 of codes[s / 2], element l of row j at slot
 * (l / 4) * 64 + j * 4 + l % 4 (the repacking moves nibbles where a format
 * orders them otherwise), plus per format:
 *
 *   Q5_K    d, dmin, planes as Q4_K; high[512]: row j's qh[l] at slot
 *           (l, j), bit s the fifth bit of sub-block s
 *   Q6_K    d[16]; scales[16][16] (scale i of row j at [i][j], i = 16
 *           elements); two high runs of 512: row j's qh[32p + l] at run
 *           p slot (l, j), bits 2q..2q+1 the top bits of sub-block 4p + q.
 *           Runs in the order the kernels read them: high 0, codes 0 and
 *           1, high 1, codes 2 and 3.  Read back and forth between
 *           separate high and codes areas, one core streamed it from
 *           memory at 10-12 GB/s against 48 from L2 (Zen 4; the hardware
 *           prefetcher lost the stream); in reading order 15-16, and
 *           with the x86 kernel's in-order prefetch (repacked_k.h) 24-25,
 *           near the sweep's 28-33.
 *   IQ4_XS  d[16]; scales_l[4][16] and scales_h[2][16] (byte planes of
 *           the row's scales_l and little-endian scales_h)
 *
 * Groups follow each other; group G starts at byte G * 16 * row_bytes, so
 * rows keep their byte ranges as a whole and a row range [r0, r1) with r0,
 * r1 multiples of 16 is still one contiguous range.
 */
#ifndef PLM_QUANT_REPACK_H
#define PLM_QUANT_REPACK_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/types.h"

enum {
    PLM_REPACK_ROWS = 16,
    PLM_REPACK_MAX_BLOCK_BYTES = 256, /* room for one block of any repackable type (Q6_K's 210 the largest) */
};

/* Whether `type` has an interleaved layout. */
bool plm_repack_type(plm_type type);

/* Whether a [rows x cols] matrix of `type` can be repacked: a layout for
 * the type and rows a multiple of PLM_REPACK_ROWS. */
bool plm_repack_fits(plm_type type, int64_t rows, int64_t cols);

/* Writes rows [0, rows) of src (plm_row_size(type, cols) bytes apart) into
 * dst in the interleaved layout; rows a multiple of PLM_REPACK_ROWS; dst
 * and src the same size, not overlapping. */
void plm_repack_rows(plm_type type, int64_t cols, int64_t rows, const void *src, void *dst);

/* Code offset o of a repacked 32-element type (u = w + o): 8 for Q4_0, 16
 * for Q5_0, 128 for Q8_0 and IQ4_NL (whose kernels look the level up as
 * level + 128). */
int plm_repack_offset(plm_type type);

/* Row j's block (or super-block) b, back in ggml's layout, from the
 * interleaved 16-row super-block `sblk`: the inverse of the repacking, for
 * the reference kernels and tests. */
void plm_repack_gather(plm_type type, const uint8_t *sblk, int j, void *block);

/* Block (or super-block) b of row r of a repacked matrix `w` whose rows
 * are row_bytes long, back in ggml's layout: plm_repack_gather at the
 * row's group. */
void plm_repack_row_block(plm_type type, const void *w, size_t row_bytes, int64_t r, int64_t b, void *block);

/* Byte offsets inside a repacked 16-row super-block of Q4_K, Q5_K, Q6_K or
 * IQ4_XS (d[16] is always at 0; 0 marks a part the format lacks); the code
 * runs' offsets come from plm_repack_k_codes and plm_repack_k_high. */
typedef struct {
    int dmin;   /* dmin[16] (Q4_K, Q5_K) */
    int scales; /* the scale planes */
    int high;   /* the first run of high code bits (Q5_K: one of 512 bytes, Q6_K: two) */
    int codes;  /* the first of 4 runs of 512 bytes of nibble pairs */
} plm_repack_k_layout;

static inline plm_repack_k_layout plm_repack_k(plm_type type) {
    switch (type) {
    case PLM_TYPE_Q4_K: return (plm_repack_k_layout){32, 64, 0, 256};
    case PLM_TYPE_Q5_K: return (plm_repack_k_layout){32, 64, 256, 768};
    case PLM_TYPE_Q6_K: return (plm_repack_k_layout){0, 32, 288, 800};
    default: return (plm_repack_k_layout){0, 32, 0, 128}; /* IQ4_XS: scales_h planes at scales + 64 */
    }
}

/* Q6_K's runs repeat every 1536 bytes: a high run, then two code runs. */
enum { PLM_RQ6K_PERIOD = 3 * 512 };

/* Offset of run i (0..3) of nibble pairs, sub-blocks 2i and 2i + 1. */
static inline int plm_repack_k_codes(plm_type type, int i) {
    const plm_repack_k_layout L = plm_repack_k(type);
    if (type == PLM_TYPE_Q6_K) return L.codes + PLM_RQ6K_PERIOD * (i / 2) + 512 * (i % 2);
    return L.codes + 512 * i;
}

/* Offset of run i of high code bits: Q5_K's one (i = 0), Q6_K's two
 * (sub-blocks 4i..4i+3). */
static inline int plm_repack_k_high(plm_type type, int i) {
    return plm_repack_k(type).high + PLM_RQ6K_PERIOD * i;
}

/* Slot of element l (0..31) of row j in a 512-byte run of a super-block. */
static inline int plm_repack_slot(int j, int l) { return (l / 4) * 64 + j * 4 + l % 4; }

/* Byte offsets inside a repacked Q4_K super-block. */
enum { PLM_RQ4K_DMIN = 32, PLM_RQ4K_PLANES = 64, PLM_RQ4K_CODES = 256 };

/* The unsigned code of element e (0..31) of row j (0..15) in a repacked
 * super-block's codes (after its 16 scales). */
static inline int plm_repack_code(plm_type type, const uint8_t *codes, int j, int e) {
    const int s = (e / 4) * 64 + j * 4 + e % 4;
    if (type == PLM_TYPE_Q8_0) return codes[s];
    const int low4 = s < 256 ? codes[s] & 0x0f : codes[s - 256] >> 4;
    if (type != PLM_TYPE_Q5_0) return low4;
    return low4 | ((codes[256 + s / 8] >> s % 8) & 1) << 4;
}

#endif
