/*
 * libpocketlm's file-format API: GGUF v2/v3 reader (mmap or read into memory)
 * and writer, used by the inspect/synth/quantize/convert tools.
 *
 * The reader validates every count, length, dim and offset against the file
 * size before it trusts it: a truncated or hostile file yields PLM_ERR_FORMAT
 * with a message naming the field and its byte offset, never a crash, a hang
 * or an allocation larger than the file could justify.
 *
 * Strings point into the file image and are NOT NUL-terminated: use len.
 */
#ifndef POCKETLM_GGUF_H
#define POCKETLM_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pocketlm.h"

#define PLM_GGUF_MAGIC "GGUF"
#define PLM_GGUF_DEFAULT_ALIGNMENT 32
#define PLM_GGUF_MAX_DIMS 4

typedef enum {
    PLM_GGUF_TYPE_UINT8 = 0,
    PLM_GGUF_TYPE_INT8 = 1,
    PLM_GGUF_TYPE_UINT16 = 2,
    PLM_GGUF_TYPE_INT16 = 3,
    PLM_GGUF_TYPE_UINT32 = 4,
    PLM_GGUF_TYPE_INT32 = 5,
    PLM_GGUF_TYPE_FLOAT32 = 6,
    PLM_GGUF_TYPE_BOOL = 7,
    PLM_GGUF_TYPE_STRING = 8,
    PLM_GGUF_TYPE_ARRAY = 9,
    PLM_GGUF_TYPE_UINT64 = 10,
    PLM_GGUF_TYPE_INT64 = 11,
    PLM_GGUF_TYPE_FLOAT64 = 12,
    PLM_GGUF_TYPE_COUNT
} plm_gguf_type;

PLM_API const char *plm_gguf_type_name(plm_gguf_type t);  /* "u32", "str", "arr"... */

/* ggml tensor type name ("Q4_K") for a tensor's type id; "?" if unknown. */
PLM_API const char *plm_gguf_tensor_type_name(uint32_t type);

typedef struct plm_gguf_str {
    const char *ptr;  /* into the file image; not NUL-terminated */
    uint64_t len;
} plm_gguf_str;

typedef struct plm_gguf_value plm_gguf_value;

typedef struct plm_gguf_array {
    plm_gguf_type type;       /* element type */
    uint64_t n;           /* element count */
    const uint8_t *data;  /* scalar elements: raw little-endian bytes in the image */
    plm_gguf_value *items;    /* string or array elements: n parsed values (else NULL) */
} plm_gguf_array;

struct plm_gguf_value {
    plm_gguf_type type;
    union {
        uint64_t u64;  /* UINT8..UINT64 widened */
        int64_t i64;   /* INT8..INT64 widened */
        double f64;    /* FLOAT32/FLOAT64 widened */
        bool b;
        plm_gguf_str str;
        plm_gguf_array arr;
    } v;
};

typedef struct plm_gguf_kv {
    plm_gguf_str key;
    plm_gguf_value value;
} plm_gguf_kv;

typedef struct plm_gguf_tensor {
    plm_gguf_str name;
    uint32_t n_dims;
    uint64_t ne[PLM_GGUF_MAX_DIMS];  /* unused dims are 1; ne[0] is the row length */
    uint32_t type;               /* plm_type id */
    uint64_t offset;             /* relative to the data section */
    uint64_t nbytes;             /* computed from type and shape */
    const void *data;            /* image + data_offset + offset */
} plm_gguf_tensor;

typedef struct plm_gguf_file {
    uint32_t version;
    uint64_t n_kv;
    plm_gguf_kv *kv;
    uint64_t n_tensors;
    plm_gguf_tensor *tensors;
    uint32_t alignment;
    uint64_t data_offset;  /* absolute byte offset of the tensor data section (<= size) */
    const uint8_t *image;  /* the whole file, mapped or read */
    uint64_t size;         /* bytes in the file */
    bool mapped;           /* image is an mmap (else malloc'd, owned) */
    bool owns_image;       /* plm_gguf_close frees/unmaps image */
    bool locked;           /* use_mlock was asked and mlock succeeded; a failed
                              mlock is not an error, callers may warn */
    struct plm_gguf_lookup *lookup; /* private name index; NULL = linear search */
    const void *map_base;  /* private: the mapping to release (image may start
                              inside it: an image at an offset in a file) */
    uint64_t map_size;
} plm_gguf_file;

typedef struct plm_gguf_open_params {
    bool use_mmap;   /* default true */
    bool use_mlock;  /* lock the mapping / buffer in RAM */
} plm_gguf_open_params;

/* Opens and validates `path`.  On failure returns NULL and fills err. */
PLM_API plm_gguf_file *plm_gguf_open(const char *path, const plm_gguf_open_params *params, plm_error *err);
/* Parses a file image already in memory (not copied; must outlive the result). */
PLM_API plm_gguf_file *plm_gguf_parse(const void *image, uint64_t size, plm_error *err);
PLM_API void plm_gguf_close(plm_gguf_file *f);

/* Lookups: NULL / -1 when absent.  Keys are compared byte-exactly. */
PLM_API const plm_gguf_kv *plm_gguf_find_kv(const plm_gguf_file *f, const char *key);
PLM_API const plm_gguf_tensor *plm_gguf_find_tensor(const plm_gguf_file *f, const char *name);
PLM_API int64_t plm_gguf_find_tensor_index(const plm_gguf_file *f, const char *name);

/* Typed getters: return false when absent or not convertible.  Integer
 * getters accept any integer type whose value fits; f32 accepts any number. */
PLM_API bool plm_gguf_get_u32(const plm_gguf_file *f, const char *key, uint32_t *out);
PLM_API bool plm_gguf_get_i64(const plm_gguf_file *f, const char *key, int64_t *out);
PLM_API bool plm_gguf_get_f32(const plm_gguf_file *f, const char *key, float *out);
PLM_API bool plm_gguf_get_bool(const plm_gguf_file *f, const char *key, bool *out);
PLM_API bool plm_gguf_get_str(const plm_gguf_file *f, const char *key, plm_gguf_str *out);
PLM_API const plm_gguf_array *plm_gguf_get_arr(const plm_gguf_file *f, const char *key);

/* Element access for scalar arrays (any numeric type converts). */
PLM_API int64_t plm_gguf_arr_i64(const plm_gguf_array *a, uint64_t i);
PLM_API double plm_gguf_arr_f64(const plm_gguf_array *a, uint64_t i);
PLM_API plm_gguf_str plm_gguf_arr_str(const plm_gguf_array *a, uint64_t i); /* {NULL,0} if not strings */

/* Copies s into buf as a NUL-terminated string (truncating); returns buf. */
PLM_API char *plm_gguf_str_copy(plm_gguf_str s, char *buf, size_t size);
PLM_API bool plm_gguf_str_eq(plm_gguf_str s, const char *cstr);

/* ---- writer ------------------------------------------------------------
 * Collect metadata and tensor descriptions, then write the file in one go to
 * `path.tmp`, fsync, and rename over `path`: a failed write (full disk) never
 * leaves a half-written file under the final name. */

typedef struct plm_gguf_writer plm_gguf_writer;

/* Produces the bytes of tensor `index` (nbytes of them) into dst. */
typedef plm_status (*plm_gguf_fill_fn)(void *user, uint64_t index, void *dst,
                                   uint64_t nbytes, plm_error *err);

PLM_API plm_gguf_writer *plm_gguf_writer_new(void);
PLM_API void plm_gguf_writer_free(plm_gguf_writer *w);
/* A power of two; also sets general.alignment unless it is the default 32.
 * Setting general.alignment (u32) directly or via copy_kv has the same effect. */
PLM_API void plm_gguf_writer_set_alignment(plm_gguf_writer *w, uint32_t alignment);

/* Setting a key twice replaces its value (keeps its position). */
PLM_API void plm_gguf_writer_set_u32(plm_gguf_writer *w, const char *key, uint32_t v);
PLM_API void plm_gguf_writer_set_i32(plm_gguf_writer *w, const char *key, int32_t v);
PLM_API void plm_gguf_writer_set_u64(plm_gguf_writer *w, const char *key, uint64_t v);
PLM_API void plm_gguf_writer_set_f32(plm_gguf_writer *w, const char *key, float v);
PLM_API void plm_gguf_writer_set_bool(plm_gguf_writer *w, const char *key, bool v);
PLM_API void plm_gguf_writer_set_str(plm_gguf_writer *w, const char *key, const char *v);
/* Scalar array: `n` elements of `type`, raw little-endian bytes copied. */
PLM_API void plm_gguf_writer_set_arr(plm_gguf_writer *w, const char *key, plm_gguf_type type,
                         const void *data, uint64_t n);
PLM_API void plm_gguf_writer_set_arr_str(plm_gguf_writer *w, const char *key,
                             const plm_gguf_str *strs, uint64_t n);
/* Copies one key/value (any type, nested arrays included) from a reader. */
PLM_API void plm_gguf_writer_copy_kv(plm_gguf_writer *w, const plm_gguf_kv *kv);

/* Adds a tensor.  `data` (nbytes) is copied at write time if non-NULL;
 * otherwise the fill callback given to plm_gguf_writer_write produces it. */
PLM_API void plm_gguf_writer_add_tensor(plm_gguf_writer *w, const char *name, uint32_t type,
                            uint32_t n_dims, const uint64_t *ne, const void *data);

PLM_API plm_status plm_gguf_writer_write(plm_gguf_writer *w, const char *path, plm_gguf_fill_fn fill,
                             void *user, plm_error *err);

#endif
