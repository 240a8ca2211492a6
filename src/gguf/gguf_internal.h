/* Facts about the GGUF format shared by the reader and the writer. */
#ifndef PLM_GGUF_INTERNAL_H
#define PLM_GGUF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pocketlm_gguf.h"

/* Arrays may hold arrays; both the parser and the writer recurse per level,
 * so the depth is bounded to keep a hostile file from exhausting the stack. */
#define PLM_GGUF_MAX_NESTING 8

/* Where a GGUF image comes from: a file by path or by descriptor (its bytes
 * [offset, offset + length); length 0 = to the end), or memory (data, length;
 * not copied).  `name` is what messages call it.  progress (optional) gets
 * the fraction read while a file is read into memory; false = stop
 * (PLM_ERR_ABORTED). */
typedef struct plm_gguf_source {
    const char *name;
    const char *path;
    int fd;
    uint64_t offset, length;
    const void *data;
    bool (*progress)(void *user, float fraction);
    void *user;
} plm_gguf_source;

plm_gguf_file *plm_gguf_open_source(const plm_gguf_source *src, const plm_gguf_open_params *params,
                                    plm_error *err);

/* plm_gguf_writer_write with no tensor data written: every tensor added
 * without data is a hole, so the file has its full size but takes only the
 * header's disk space (a synthetic model's header, for plans and quantize
 * dry runs of shapes too big to write). */
plm_status plm_gguf_writer_write_sparse(plm_gguf_writer *w, const char *path, plm_error *err);

/* Bytes of one scalar value of type t; 0 for strings, arrays and unknown ids. */
size_t plm_gguf_scalar_size(uint32_t t);

/* Unsigned 64-bit a*b; false (and *out untouched) on overflow. */
static inline int plm_gguf_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a != 0 && b > UINT64_MAX / a) return 0;
    *out = a * b;
    return 1;
}

#endif
