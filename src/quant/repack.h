/*
 * Row-interleaved ("repacked") weights: groups of PLM_REPACK_ROWS
 * consecutive rows of a Q4_0, Q8_0 or Q4_K matrix stored block by block, so that
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
 *              (o = 8 for Q4_0, 128 for Q8_0), at "slot"
 *                  s = (e / 4) * 64 + j * 4 + e % 4
 *              i.e. 4-element groups of the 16 rows side by side, as one
 *              vpdpbusd / sdot lane per row wants them.  Q8_0 stores slot
 *              s at byte s (512 bytes); Q4_0 packs two slots per byte
 *              (256 bytes): slot s < 256 in the low nibble of byte s,
 *              slot s + 256 (elements 16..31) in its high nibble.
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
 * Groups follow each other; group G starts at byte G * 16 * row_bytes, so
 * rows keep their byte ranges as a whole and a row range [r0, r1) with r0,
 * r1 multiples of 16 is still one contiguous range.
 */
#ifndef PLM_QUANT_REPACK_H
#define PLM_QUANT_REPACK_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/types.h"

enum { PLM_REPACK_ROWS = 16 };

/* Whether `type` has an interleaved layout (Q4_0, Q8_0, Q4_K). */
bool plm_repack_type(plm_type type);

/* Whether a [rows x cols] matrix of `type` can be repacked: a layout for
 * the type and rows a multiple of PLM_REPACK_ROWS. */
bool plm_repack_fits(plm_type type, int64_t rows, int64_t cols);

/* Writes rows [0, rows) of src (plm_row_size(type, cols) bytes apart) into
 * dst in the interleaved layout; rows a multiple of PLM_REPACK_ROWS; dst
 * and src the same size, not overlapping. */
void plm_repack_rows(plm_type type, int64_t cols, int64_t rows, const void *src, void *dst);

/* Code offset o of a repacked 32-element type (u = w + o). */
int plm_repack_offset(plm_type type);

/* Byte offsets inside a repacked Q4_K super-block. */
enum { PLM_RQ4K_DMIN = 32, PLM_RQ4K_PLANES = 64, PLM_RQ4K_CODES = 256 };

/* The unsigned code of element e (0..31) of row j (0..15) in a repacked
 * super-block's codes (after its 16 scales). */
static inline int plm_repack_code(plm_type type, const uint8_t *codes, int j, int e) {
    const int s = (e / 4) * 64 + j * 4 + e % 4;
    if (type == PLM_TYPE_Q8_0) return codes[s];
    return s < 256 ? codes[s] & 0x0f : codes[s - 256] >> 4;
}

#endif
