/*
 * The interleaved layout (repack.h) from ggml's row-by-row blocks, and back
 * (plm_repack_gather, the reference kernels' view of it).
 */
#include "quant/repack.h"

#include <stddef.h>
#include <string.h>

#include "quant/blocks.h"

bool plm_repack_type(plm_type type) {
    switch (type) {
    case PLM_TYPE_Q4_0:
    case PLM_TYPE_Q5_0:
    case PLM_TYPE_Q8_0:
    case PLM_TYPE_IQ4_NL:
    case PLM_TYPE_Q4_K:
    case PLM_TYPE_Q5_K:
    case PLM_TYPE_Q6_K:
    case PLM_TYPE_IQ4_XS: return true;
    default: return false;
    }
}

bool plm_repack_fits(plm_type type, int64_t rows, int64_t cols) {
    return plm_repack_type(type) && rows > 0 && rows % PLM_REPACK_ROWS == 0 && plm_row_size(type, cols) > 0;
}

int plm_repack_offset(plm_type type) {
    return type == PLM_TYPE_Q4_0 ? 8 : type == PLM_TYPE_Q5_0 ? 16 : 128;
}

static bool super_block(plm_type type) { return plm_type_info_get(type)->block_size == QK_K; }

/* ---- 32-element blocks (Q4_0, Q5_0, IQ4_NL, Q8_0) -------------------------
 * A Q4_0/Q5_0/IQ4_NL byte holds elements e and e + 16 in its low and high
 * nibble, exactly the slots s and s + 256 of the layout, so its 4-byte
 * groups move unchanged; Q8_0 bytes gain the offset 128 (a flip of the top
 * bit).  d is first in every block, qs last; Q5_0's qh (bit e: element e's
 * fifth bit) sits between them and goes to the bitmap after the codes.
 * One function for both directions keeps the two in step: `to_layout`
 * copies row j's block x into the super-block, otherwise back. */

static void move_block32(plm_type type, bool to_layout, uint8_t *sblk, int j, uint8_t *x) {
    const int groups = type == PLM_TYPE_Q8_0 ? 8 : 4;
    const size_t qs_at = type == PLM_TYPE_Q5_0 ? offsetof(block_q5_0, qs) : sizeof(plm_fp16_t);
    uint8_t *codes = sblk + PLM_REPACK_ROWS * sizeof(plm_fp16_t);
    const uint32_t flip = type == PLM_TYPE_Q8_0 ? 0x80808080u : 0;
    uint32_t v;
    for (int g = 0; g < groups; g++) {
        uint8_t *layout = codes + 64 * g + 4 * j, *block = x + qs_at + 4 * g;
        memcpy(&v, to_layout ? block : layout, 4);
        v ^= flip;
        memcpy(to_layout ? layout : block, &v, 4);
    }
    if (to_layout) memcpy(sblk + j * sizeof(plm_fp16_t), x, sizeof(plm_fp16_t));
    else memcpy(x, sblk + j * sizeof(plm_fp16_t), sizeof(plm_fp16_t));
    if (type != PLM_TYPE_Q5_0) return;
    uint8_t *high = codes + 256;
    uint32_t qh = 0;
    if (to_layout) memcpy(&qh, x + offsetof(block_q5_0, qh), 4);
    for (int e = 0; e < 32; e++) {
        const int s = plm_repack_slot(j, e);
        if (to_layout) high[s / 8] = (uint8_t)((high[s / 8] & ~(1u << s % 8)) | ((qh >> e) & 1u) << s % 8);
        else qh |= (uint32_t)((high[s / 8] >> s % 8) & 1) << e;
    }
    if (!to_layout) memcpy(x + offsetof(block_q5_0, qh), &qh, 4);
}

/* ---- super-blocks: the low 4 bits of every element -----------------------
 * nib[s][l] is element l of sub-block s (elements 32s + l); each format
 * orders its nibbles its own way. */

static void nibbles_of(plm_type type, const void *block, uint8_t nib[8][32]) {
    for (int s = 0; s < 8; s++)
        for (int l = 0; l < 32; l++) {
            int v;
            if (type == PLM_TYPE_Q4_K) v = ((const block_q4_K *)block)->qs[32 * (s / 2) + l] >> 4 * (s % 2);
            else if (type == PLM_TYPE_Q5_K) v = ((const block_q5_K *)block)->qs[32 * (s / 2) + l] >> 4 * (s % 2);
            else if (type == PLM_TYPE_Q6_K) /* sub-block 4h + q: ql[64h + 32(q%2) + l], nibble q/2 */
                v = ((const block_q6_K *)block)->ql[64 * (s / 4) + 32 * (s % 2) + l] >> 4 * ((s % 4) / 2);
            else v = ((const block_iq4_xs *)block)->qs[16 * s + l % 16] >> 4 * (l / 16);
            nib[s][l] = (uint8_t)(v & 0x0f);
        }
}

static void set_nibbles(plm_type type, void *block, const uint8_t nib[8][32]) {
    for (int s = 0; s < 8; s++)
        for (int l = 0; l < 32; l++) {
            uint8_t *p;
            int shift;
            if (type == PLM_TYPE_Q4_K) p = &((block_q4_K *)block)->qs[32 * (s / 2) + l], shift = 4 * (s % 2);
            else if (type == PLM_TYPE_Q5_K) p = &((block_q5_K *)block)->qs[32 * (s / 2) + l], shift = 4 * (s % 2);
            else if (type == PLM_TYPE_Q6_K)
                p = &((block_q6_K *)block)->ql[64 * (s / 4) + 32 * (s % 2) + l], shift = 4 * ((s % 4) / 2);
            else p = &((block_iq4_xs *)block)->qs[16 * s + l % 16], shift = 4 * (l / 16);
            *p = (uint8_t)((*p & ~(0x0f << shift)) | nib[s][l] << shift);
        }
}

/* ---- super-blocks: the rest, moved field by field -------------------------
 * One function for both directions keeps the two in step: `to_layout`
 * copies row j's fields into the super-block, otherwise back. */

static void move(bool to_layout, uint8_t *layout, uint8_t *field, size_t n) {
    if (to_layout) memcpy(layout, field, n);
    else memcpy(field, layout, n);
}

static void move_fields(plm_type type, bool to_layout, uint8_t *sb, int j, void *block) {
    const plm_repack_k_layout L = plm_repack_k(type);
    uint8_t *d, *dmin = NULL, *scales, *high = NULL;
    int n_scales, n_high = 0;
    if (type == PLM_TYPE_Q4_K || type == PLM_TYPE_Q5_K) {
        block_q4_K *x4 = block;
        block_q5_K *x5 = block;
        const bool q5 = type == PLM_TYPE_Q5_K;
        d = (uint8_t *)(q5 ? &x5->d : &x4->d);
        dmin = (uint8_t *)(q5 ? &x5->dmin : &x4->dmin);
        scales = q5 ? x5->scales : x4->scales;
        n_scales = K_SCALE_SIZE;
        if (q5) high = x5->qh, n_high = QK_K / 8;
    } else if (type == PLM_TYPE_Q6_K) {
        block_q6_K *x = block;
        d = (uint8_t *)&x->d;
        scales = (uint8_t *)x->scales;
        n_scales = QK_K / 16;
        high = x->qh, n_high = QK_K / 4;
    } else {
        block_iq4_xs *x = block;
        d = (uint8_t *)&x->d;
        scales = x->scales_l; /* then the two bytes of scales_h, as planes 4 and 5 */
        n_scales = QK_K / 64;
        uint8_t h[2] = {(uint8_t)(x->scales_h & 0xff), (uint8_t)(x->scales_h >> 8)};
        for (int p = 0; p < 2; p++) move(to_layout, sb + L.scales + 16 * (4 + p) + j, &h[p], 1);
        if (!to_layout) x->scales_h = (uint16_t)(h[0] | h[1] << 8);
    }
    move(to_layout, sb + 2 * j, d, 2);
    if (dmin) move(to_layout, sb + L.dmin + 2 * j, dmin, 2);
    for (int p = 0; p < n_scales; p++) move(to_layout, sb + L.scales + 16 * p + j, scales + p, 1);
    for (int i = 0; i < n_high; i++) /* byte 32p + l of the row's high bits: slot (j, l) of run p */
        move(to_layout, sb + plm_repack_k_high(type, i / 32) + plm_repack_slot(j, i % 32), high + i, 1);
}

static void put_super_block(plm_type type, const void *x, int j, uint8_t *sb) {
    uint8_t nib[8][32], copy[sizeof(block_q6_K)];
    memcpy(copy, x, plm_row_size(type, QK_K)); /* move_fields takes a writable block */
    move_fields(type, true, sb, j, copy);
    nibbles_of(type, x, nib);
    for (int i = 0; i < 4; i++)
        for (int l = 0; l < 32; l++)
            sb[plm_repack_k_codes(type, i) + plm_repack_slot(j, l)] = (uint8_t)(nib[2 * i][l] | nib[2 * i + 1][l] << 4);
}

static void get_super_block(plm_type type, const uint8_t *sb, int j, void *x) {
    uint8_t nib[8][32];
    memset(x, 0, plm_row_size(type, QK_K));
    move_fields(type, false, (uint8_t *)(uintptr_t)sb, j, x);
    for (int i = 0; i < 4; i++)
        for (int l = 0; l < 32; l++) {
            const uint8_t v = sb[plm_repack_k_codes(type, i) + plm_repack_slot(j, l)];
            nib[2 * i][l] = v & 0x0f;
            nib[2 * i + 1][l] = v >> 4;
        }
    set_nibbles(type, x, nib);
}

void plm_repack_gather(plm_type type, const uint8_t *sblk, int j, void *block) {
    if (super_block(type)) get_super_block(type, sblk, j, block);
    else move_block32(type, false, (uint8_t *)(uintptr_t)sblk, j, block);
}

void plm_repack_row_block(plm_type type, const void *w, size_t row_bytes, int64_t r, int64_t b, void *block) {
    const uint8_t *group = (const uint8_t *)w + (size_t)(r / PLM_REPACK_ROWS) * PLM_REPACK_ROWS * row_bytes;
    const size_t sb = PLM_REPACK_ROWS * (size_t)plm_type_info_get(type)->type_size;
    plm_repack_gather(type, group + (size_t)b * sb, (int)(r % PLM_REPACK_ROWS), block);
}

void plm_repack_rows(plm_type type, int64_t cols, int64_t rows, const void *src, void *dst) {
    const plm_type_info *ti = plm_type_info_get(type);
    const size_t row_bytes = plm_row_size(type, cols), bb = ti->type_size;
    const int64_t nb = cols / ti->block_size;
    for (int64_t g = 0; g < rows / PLM_REPACK_ROWS; g++) {
        const uint8_t *in = (const uint8_t *)src + (size_t)g * PLM_REPACK_ROWS * row_bytes;
        uint8_t *out = (uint8_t *)dst + (size_t)g * PLM_REPACK_ROWS * row_bytes;
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *o = out + (size_t)b * PLM_REPACK_ROWS * bb;
            for (int j = 0; j < PLM_REPACK_ROWS; j++) {
                const uint8_t *x = in + (size_t)j * row_bytes + (size_t)b * bb;
                if (super_block(type)) put_super_block(type, x, j, o);
                else move_block32(type, true, o, j, (uint8_t *)(uintptr_t)x);
            }
        }
    }
}
