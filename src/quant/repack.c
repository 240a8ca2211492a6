/*
 * The interleaved layout (repack.h) from ggml's row-by-row blocks.
 */
#include "quant/repack.h"

#include <string.h>

#include "quant/blocks.h"

bool plm_repack_type(plm_type type) {
    return type == PLM_TYPE_Q4_0 || type == PLM_TYPE_Q8_0 || type == PLM_TYPE_Q4_K;
}

bool plm_repack_fits(plm_type type, int64_t rows, int64_t cols) {
    return plm_repack_type(type) && rows > 0 && rows % PLM_REPACK_ROWS == 0 && plm_row_size(type, cols) > 0;
}

int plm_repack_offset(plm_type type) { return type == PLM_TYPE_Q8_0 ? 128 : 8; }

/* One super-block: block b of 16 rows into out.  A Q4_0 byte holds
 * elements e and e + 16 in its low and high nibble, exactly the slots s and
 * s + 256 of the layout, so its 4-byte groups move unchanged; Q8_0 bytes
 * gain the offset 128 (a flip of the top bit). */
static void repack_block(plm_type type, const uint8_t *rows, size_t row_bytes, int64_t b, uint8_t *out) {
    const size_t bb = plm_row_size(type, 32);
    const int groups = type == PLM_TYPE_Q8_0 ? 8 : 4;
    uint8_t *codes = out + PLM_REPACK_ROWS * sizeof(plm_fp16_t);
    for (int j = 0; j < PLM_REPACK_ROWS; j++) {
        const uint8_t *x = rows + (size_t)j * row_bytes + (size_t)b * bb;
        const uint8_t *qs = x + sizeof(plm_fp16_t); /* d is first in both blocks, qs follows */
        memcpy(out + j * sizeof(plm_fp16_t), x, sizeof(plm_fp16_t));
        for (int g = 0; g < groups; g++) {
            uint32_t v;
            memcpy(&v, qs + 4 * g, 4);
            if (type == PLM_TYPE_Q8_0) v ^= 0x80808080u;
            memcpy(codes + 64 * g + 4 * j, &v, 4);
        }
    }
}

/* Q4_K: super-block b of 16 rows into out (layout in repack.h); the codes'
 * 4-byte groups again move unchanged. */
static void repack_block_q4_K(const uint8_t *rows, size_t row_bytes, int64_t b, uint8_t *out) {
    for (int j = 0; j < PLM_REPACK_ROWS; j++) {
        const block_q4_K *x = (const block_q4_K *)(const void *)(rows + (size_t)j * row_bytes) + b;
        memcpy(out + 2 * j, &x->d, 2);
        memcpy(out + PLM_RQ4K_DMIN + 2 * j, &x->dmin, 2);
        for (int p = 0; p < K_SCALE_SIZE; p++) out[PLM_RQ4K_PLANES + 16 * p + j] = x->scales[p];
        for (int i = 0; i < 4; i++)
            for (int g = 0; g < 8; g++) memcpy(out + PLM_RQ4K_CODES + 512 * i + 64 * g + 4 * j, x->qs + 32 * i + 4 * g, 4);
    }
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
            if (type == PLM_TYPE_Q4_K) repack_block_q4_K(in, row_bytes, b, o);
            else repack_block(type, in, row_bytes, b, o);
        }
    }
}
