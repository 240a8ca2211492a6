/*
 * The interleaved layout (repack.h) from ggml's row-by-row blocks.
 */
#include "quant/repack.h"

#include <string.h>

#include "quant/blocks.h"

bool plm_repack_type(plm_type type) { return type == PLM_TYPE_Q4_0 || type == PLM_TYPE_Q8_0; }

bool plm_repack_fits(plm_type type, int64_t rows, int64_t cols) {
    return plm_repack_type(type) && rows > 0 && rows % PLM_REPACK_ROWS == 0 && plm_row_size(type, cols) > 0;
}

int plm_repack_offset(plm_type type) { return type == PLM_TYPE_Q8_0 ? 128 : 8; }

/* Element e of row block x as its unsigned code. */
static int code_of(plm_type type, const void *x, int e) {
    if (type == PLM_TYPE_Q8_0) return ((const block_q8_0 *)x)->qs[e] + 128;
    const block_q4_0 *b = x;
    return e < 16 ? b->qs[e] & 0x0f : b->qs[e - 16] >> 4;
}

/* One super-block: block b of 16 rows into out. */
static void repack_block(plm_type type, const uint8_t *rows, size_t row_bytes, int64_t b, uint8_t *out) {
    const size_t bb = plm_row_size(type, 32);
    uint8_t *codes = out + PLM_REPACK_ROWS * sizeof(plm_fp16_t);
    memset(codes, 0, (size_t)PLM_REPACK_ROWS * (bb - sizeof(plm_fp16_t)));
    for (int j = 0; j < PLM_REPACK_ROWS; j++) {
        const uint8_t *x = rows + (size_t)j * row_bytes + (size_t)b * bb;
        memcpy(out + j * sizeof(plm_fp16_t), x, sizeof(plm_fp16_t)); /* d is first in both blocks */
        for (int e = 0; e < 32; e++) {
            const int s = (e / 4) * 64 + j * 4 + e % 4, u = code_of(type, x, e);
            if (type == PLM_TYPE_Q8_0) codes[s] = (uint8_t)u;
            else if (s < 256) codes[s] |= (uint8_t)u;
            else codes[s - 256] |= (uint8_t)(u << 4);
        }
    }
}

void plm_repack_rows(plm_type type, int64_t cols, int64_t rows, const void *src, void *dst) {
    const size_t row_bytes = plm_row_size(type, cols), bb = plm_row_size(type, 32);
    const int64_t nb = cols / 32;
    for (int64_t g = 0; g < rows / PLM_REPACK_ROWS; g++) {
        const uint8_t *in = (const uint8_t *)src + (size_t)g * PLM_REPACK_ROWS * row_bytes;
        uint8_t *out = (uint8_t *)dst + (size_t)g * PLM_REPACK_ROWS * row_bytes;
        for (int64_t b = 0; b < nb; b++) repack_block(type, in, row_bytes, b, out + (size_t)b * PLM_REPACK_ROWS * bb);
    }
}
