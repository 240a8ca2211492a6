/*
 * One decoder per codebook format (IQ1/IQ2/IQ3, TQ1_0/TQ2_0): a 256-element
 * block becomes 256 small signed integers and 16 integer scales, one per 16
 * elements, so that
 *
 *     x[j] = d * ls[j / 16] * q[j] * post
 *
 * with d the block's f16 scale and post a power of two per format
 * (plm_iq_post).  Every dequantizer and dot product of these formats is
 * built on this form: the dot with a Q8_K block is exact integer arithmetic,
 * sum(ls * sum(q * a)), scaled once, as ggml's own kernels do.  The IQ1
 * formats' +-1/8 shift is folded in as q = 8 * grid +- 1 (post 1/8), which
 * keeps the sums exact.
 */
#ifndef PLM_QUANT_IQ_UNPACK_H
#define PLM_QUANT_IQ_UNPACK_H

#include <stdint.h>
#include <string.h>

#include "quant/blocks.h"
#include "quant/iq_tables.h"
#include "quant/types.h"

typedef struct {
    int8_t q[QK_K];
    uint8_t ls[QK_K / 16];
} plm_iq_codes;

/* Eight grid bytes with the signs of `signs` (bit j negates byte j). */
static inline void iq_put8(int8_t *q, uint64_t grid, uint8_t signs) {
    for (int j = 0; j < 8; j++) {
        const int8_t g = (int8_t)(grid >> (8 * j));
        q[j] = (signs >> j) & 1 ? (int8_t)-g : g;
    }
}

static inline void iq_put4(int8_t *q, uint32_t grid, unsigned signs) {
    for (int j = 0; j < 4; j++) {
        const int8_t g = (int8_t)(grid >> (8 * j));
        q[j] = (signs >> j) & 1 ? (int8_t)-g : g;
    }
}

static inline uint32_t iq_u32(const void *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline float plm_unpack_iq2_xxs(const void *blk, plm_iq_codes *c) {
    const block_iq2_xxs *b = blk;
    const uint8_t *qs = (const uint8_t *)b->qs;
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t idx = iq_u32(qs + 8 * ib), aux = iq_u32(qs + 8 * ib + 4);
        c->ls[2 * ib] = c->ls[2 * ib + 1] = (uint8_t)(2 * (aux >> 28) + 1);
        for (int l = 0; l < 4; l++)
            iq_put8(c->q + 32 * ib + 8 * l, plm_iq2xxs_grid[(idx >> (8 * l)) & 255],
                    plm_iq2_signs[(aux >> (7 * l)) & 127]);
    }
    return plm_fp16_to_fp32(b->d);
}

static inline float plm_unpack_iq2_xs(const void *blk, plm_iq_codes *c) {
    const block_iq2_xs *b = blk;
    for (int ib = 0; ib < 8; ib++) {
        c->ls[2 * ib] = (uint8_t)(2 * (b->scales[ib] & 15) + 1);
        c->ls[2 * ib + 1] = (uint8_t)(2 * (b->scales[ib] >> 4) + 1);
        for (int l = 0; l < 4; l++) {
            const uint16_t v = b->qs[4 * ib + l];
            iq_put8(c->q + 32 * ib + 8 * l, plm_iq2xs_grid[v & 511], plm_iq2_signs[v >> 9]);
        }
    }
    return plm_fp16_to_fp32(b->d);
}

static inline float plm_unpack_iq2_s(const void *blk, plm_iq_codes *c) {
    const block_iq2_s *b = blk;
    const uint8_t *signs = b->qs + QK_K / 8;
    for (int ib = 0; ib < 8; ib++) {
        c->ls[2 * ib] = (uint8_t)(2 * (b->scales[ib] & 15) + 1);
        c->ls[2 * ib + 1] = (uint8_t)(2 * (b->scales[ib] >> 4) + 1);
        for (int l = 0; l < 4; l++) {
            const int idx = b->qs[4 * ib + l] | ((b->qh[ib] << (8 - 2 * l)) & 0x300);
            iq_put8(c->q + 32 * ib + 8 * l, plm_iq2s_grid[idx], signs[4 * ib + l]);
        }
    }
    return plm_fp16_to_fp32(b->d);
}

static inline float plm_unpack_iq3_xxs(const void *blk, plm_iq_codes *c) {
    const block_iq3_xxs *b = blk;
    const uint8_t *qs = b->qs, *scales_signs = b->qs + QK_K / 4;
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t aux = iq_u32(scales_signs + 4 * ib);
        c->ls[2 * ib] = c->ls[2 * ib + 1] = (uint8_t)(2 * (aux >> 28) + 1);
        for (int l = 0; l < 4; l++) {
            const uint8_t signs = plm_iq2_signs[(aux >> (7 * l)) & 127];
            int8_t *q = c->q + 32 * ib + 8 * l;
            iq_put4(q, plm_iq3xxs_grid[qs[8 * ib + 2 * l]], signs);
            iq_put4(q + 4, plm_iq3xxs_grid[qs[8 * ib + 2 * l + 1]], signs >> 4);
        }
    }
    return plm_fp16_to_fp32(b->d);
}

static inline float plm_unpack_iq3_s(const void *blk, plm_iq_codes *c) {
    const block_iq3_s *b = blk;
    for (int ib = 0; ib < 8; ib++) {
        c->ls[2 * ib] = c->ls[2 * ib + 1] = (uint8_t)(2 * ((b->scales[ib / 2] >> (4 * (ib % 2))) & 15) + 1);
        const uint8_t *qs = b->qs + 8 * ib;
        const int qh = b->qh[ib];
        for (int l = 0; l < 4; l++) {
            const uint8_t signs = b->signs[4 * ib + l];
            int8_t *q = c->q + 32 * ib + 8 * l;
            iq_put4(q, plm_iq3s_grid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)], signs);
            iq_put4(q + 4, plm_iq3s_grid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)], signs >> 4);
        }
    }
    return plm_fp16_to_fp32(b->d);
}

/* Eight IQ1 weights 8 * grid + shift, shift = +-1 (the +-1/8 in units of 1/8). */
static inline void iq1_put8(int8_t *q, int idx, int shift) {
    const uint64_t grid = plm_iq1s_grid[idx];
    for (int j = 0; j < 8; j++) q[j] = (int8_t)(8 * (int8_t)(grid >> (8 * j)) + shift);
}

static inline float plm_unpack_iq1_s(const void *blk, plm_iq_codes *c) {
    const block_iq1_s *b = blk;
    for (int ib = 0; ib < 8; ib++) {
        const int qh = b->qh[ib];
        c->ls[2 * ib] = c->ls[2 * ib + 1] = (uint8_t)(2 * ((qh >> 12) & 7) + 1);
        const int shift = qh & 0x8000 ? -1 : 1;
        for (int l = 0; l < 4; l++)
            iq1_put8(c->q + 32 * ib + 8 * l, b->qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8), shift);
    }
    return plm_fp16_to_fp32(b->d);
}

static inline float plm_unpack_iq1_m(const void *blk, plm_iq_codes *c) {
    const block_iq1_m *b = blk;
    uint16_t sc[4];
    memcpy(sc, b->scales, sizeof sc);
    for (int ib = 0; ib < 8; ib++) {
        c->ls[2 * ib] = (uint8_t)(2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1);
        c->ls[2 * ib + 1] = (uint8_t)(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1);
        for (int l = 0; l < 4; l++) {
            /* group l's nibble of qh: 3 index bits, then the shift's sign */
            const int nib = (b->qh[2 * ib + l / 2] >> (4 * (l % 2))) & 15;
            iq1_put8(c->q + 32 * ib + 8 * l, b->qs[4 * ib + l] | ((nib & 7) << 8), nib & 8 ? -1 : 1);
        }
    }
    /* the block scale: the top nibble of each of the four u16, low first */
    const uint16_t d = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    return plm_fp16_to_fp32(d);
}

/* Trit n (0..4) of a TQ1_0 byte: the byte is a base-3 fraction scaled to
 * 256, so multiplying by 3^n (mod 256) brings trit n to the top. */
static inline int8_t tq1_trit(uint8_t byte, int n) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t q = (uint8_t)(byte * pow3[n]);
    return (int8_t)(((uint16_t)q * 3 >> 8) - 1);
}

static inline float plm_unpack_tq1_0(const void *blk, plm_iq_codes *c) {
    const block_tq1_0 *b = blk;
    int8_t *q = c->q;
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 32; m++) q[32 * n + m] = tq1_trit(b->qs[m], n);
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 16; m++) q[160 + 16 * n + m] = tq1_trit(b->qs[32 + m], n);
    for (int n = 0; n < 4; n++)
        for (int m = 0; m < 4; m++) q[240 + 4 * n + m] = tq1_trit(b->qh[m], n);
    memset(c->ls, 1, sizeof c->ls);
    return plm_fp16_to_fp32(b->d);
}

static inline float plm_unpack_tq2_0(const void *blk, plm_iq_codes *c) {
    const block_tq2_0 *b = blk;
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 4; l++)
            for (int m = 0; m < 32; m++)
                c->q[128 * h + 32 * l + m] = (int8_t)(((b->qs[32 * h + m] >> (2 * l)) & 3) - 1);
    memset(c->ls, 1, sizeof c->ls);
    return plm_fp16_to_fp32(b->d);
}

/* The decoder of a codebook format, and its power-of-two factor; NULL / 0
 * for any other type. */
typedef float (*plm_iq_unpack_fn)(const void *blk, plm_iq_codes *c);

static inline plm_iq_unpack_fn plm_iq_unpacker(plm_type t) {
    switch (t) {
    case PLM_TYPE_IQ2_XXS: return plm_unpack_iq2_xxs;
    case PLM_TYPE_IQ2_XS: return plm_unpack_iq2_xs;
    case PLM_TYPE_IQ2_S: return plm_unpack_iq2_s;
    case PLM_TYPE_IQ3_XXS: return plm_unpack_iq3_xxs;
    case PLM_TYPE_IQ3_S: return plm_unpack_iq3_s;
    case PLM_TYPE_IQ1_S: return plm_unpack_iq1_s;
    case PLM_TYPE_IQ1_M: return plm_unpack_iq1_m;
    case PLM_TYPE_TQ1_0: return plm_unpack_tq1_0;
    case PLM_TYPE_TQ2_0: return plm_unpack_tq2_0;
    default: return NULL;
    }
}

static inline float plm_iq_post(plm_type t) {
    switch (t) {
    case PLM_TYPE_IQ2_XXS: case PLM_TYPE_IQ2_XS: case PLM_TYPE_IQ2_S:
    case PLM_TYPE_IQ1_S: case PLM_TYPE_IQ1_M: return 0.125f;
    case PLM_TYPE_IQ3_XXS: return 0.25f;
    case PLM_TYPE_IQ3_S: case PLM_TYPE_TQ1_0: case PLM_TYPE_TQ2_0: return 1.0f;
    default: return 0.0f;
    }
}

#endif
