/*
 * GGUF reader: maps (or reads) a file and validates it completely before
 * anyone trusts a byte of it.
 *
 * Layout (little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 * n_kv x (string key, u32 value type, value), n_tensors x (string name,
 * u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset), zero padding to
 * the alignment, then the tensor data.  A string is a u64 length and bytes.
 *
 * Hostile input is the design case.  Every count is compared with the bytes
 * left in the file before it sizes an allocation, and a key's value is
 * walked once without allocating before it is parsed for real, so memory
 * use stays proportional to bytes the file actually contains.  Errors name
 * the field and its byte offset.  Fields are read with memcpy (they are
 * unaligned), which assumes a little-endian host like every phone we target.
 */
#include "gguf/gguf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "quant/types.h"

/* Smallest possible encodings, which bound what a count can claim. */
#define MIN_KV_BYTES 13     /* key length (8) + value type (4) + 1-byte value */
#define MIN_TENSOR_BYTES 24 /* name length (8) + n_dims (4) + type (4) + offset (8) */
#define MIN_STR_BYTES 8     /* length */
#define MIN_ARR_BYTES 12    /* element type (4) + count (8) */

/* ---- name lookup --------------------------------------------------------
 * Open-addressing hash tables of key/tensor name -> index + 1.  They make
 * the duplicate checks linear (a quadratic scan over a hostile file with a
 * million keys would be a hang) and the lookups constant-time. */

typedef struct {
    uint64_t *slots; /* index + 1; 0 = empty */
    uint64_t mask;   /* capacity - 1 */
} name_index;

struct plm_gguf_lookup {
    name_index kv, tensors;
};

typedef plm_gguf_str (*name_fn)(const plm_gguf_file *f, uint64_t i);

static plm_gguf_str kv_name(const plm_gguf_file *f, uint64_t i) { return f->kv[i].key; }
static plm_gguf_str tensor_name(const plm_gguf_file *f, uint64_t i) { return f->tensors[i].name; }

static uint64_t hash_bytes(const char *p, uint64_t len) {
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (uint64_t i = 0; i < len; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

static bool index_init(name_index *ix, uint64_t n) {
    uint64_t cap = 8;
    while (cap < 2 * n) cap <<= 1;
    ix->slots = calloc(cap, sizeof *ix->slots);
    ix->mask = cap - 1;
    return ix->slots != NULL;
}

/* Returns the slot where `name` is or would go. */
static uint64_t *index_slot(const name_index *ix, const plm_gguf_file *f, name_fn name_at,
                            const char *p, uint64_t len) {
    uint64_t i = hash_bytes(p, len) & ix->mask;
    for (;; i = (i + 1) & ix->mask) {
        uint64_t s = ix->slots[i];
        if (s == 0) return &ix->slots[i];
        plm_gguf_str n = name_at(f, s - 1);
        if (n.len == len && (len == 0 || memcmp(n.ptr, p, len) == 0)) return &ix->slots[i];
    }
}

/* Adds entry i; returns 0, or the earlier entry's index + 1 for a duplicate. */
static uint64_t index_add(name_index *ix, const plm_gguf_file *f, name_fn name_at, uint64_t i) {
    plm_gguf_str n = name_at(f, i);
    uint64_t *slot = index_slot(ix, f, name_at, n.ptr, n.len);
    if (*slot) return *slot;
    *slot = i + 1;
    return 0;
}

/* Index + 1 of `name`, or 0. */
static uint64_t find_name(const plm_gguf_file *f, const name_index *ix, name_fn name_at,
                          uint64_t count, const char *name) {
    if (!f || !name) return 0;
    size_t len = strlen(name);
    if (ix && ix->slots) return *index_slot(ix, f, name_at, name, len);
    for (uint64_t i = 0; i < count; i++) { /* a plm_gguf_file built by hand */
        plm_gguf_str n = name_at(f, i);
        if (n.len == len && (len == 0 || memcmp(n.ptr, name, len) == 0)) return i + 1;
    }
    return 0;
}

/* ---- the cursor and its error messages ------------------------------- */

typedef struct {
    const uint8_t *b;
    uint64_t size, pos;
    plm_error *err;
    /* What is being parsed, for messages like "kv 7 ('key')[3]: ...". */
    const char *what; /* NULL (header), "kv" or "tensor" */
    uint64_t index;
    plm_gguf_str name;
    int depth;                        /* enclosing arrays */
    uint64_t path[PLM_GGUF_MAX_NESTING];  /* element index in each of them */
} reader;

static void cat(char *buf, size_t size, size_t *len, const char *fmt, ...) PLM_PRINTF(4, 5);
static void cat(char *buf, size_t size, size_t *len, const char *fmt, ...) {
    if (*len >= size - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n > 0) *len = *len + (size_t)n < size ? *len + (size_t)n : size - 1;
}

/* Appends at most 64 bytes of s with anything unprintable as '?': the name
 * came from the file and may hold terminal escapes. */
static void cat_name(char *buf, size_t size, size_t *len, plm_gguf_str s) {
    uint64_t n = s.len < 64 ? s.len : 64;
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        cat(buf, size, len, "%c", c >= 0x20 && c < 0x7f ? c : '?');
    }
    if (s.len > n) cat(buf, size, len, "...");
}

static bool bad(reader *r, plm_status code, uint64_t at, const char *fmt, ...) PLM_PRINTF(4, 5);
static bool bad(reader *r, plm_status code, uint64_t at, const char *fmt, ...) {
    char where[200], msg[280];
    size_t n = 0;
    where[0] = '\0';
    if (!r->what) {
        cat(where, sizeof where, &n, "header");
    } else {
        cat(where, sizeof where, &n, "%s %" PRIu64, r->what, r->index);
        if (r->name.ptr) {
            cat(where, sizeof where, &n, " ('");
            cat_name(where, sizeof where, &n, r->name);
            cat(where, sizeof where, &n, "')");
        }
        for (int d = 0; d < r->depth; d++) cat(where, sizeof where, &n, "[%" PRIu64 "]", r->path[d]);
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    plm_fail(r->err, code, "%s: %s at byte %" PRIu64, where, msg, at);
    return false;
}

static uint64_t left(const reader *r) { return r->size - r->pos; }

static bool need(reader *r, uint64_t n, const char *field) {
    if (n <= left(r)) return true;
    return bad(r, PLM_ERR_FORMAT, r->pos, "%s (%" PRIu64 " bytes) runs past the end of the file (size %" PRIu64 ")",
               field, n, r->size);
}

static bool rd_u32(reader *r, const char *field, uint32_t *out) {
    if (!need(r, 4, field)) return false;
    memcpy(out, r->b + r->pos, 4);
    r->pos += 4;
    return true;
}

static bool rd_u64(reader *r, const char *field, uint64_t *out) {
    if (!need(r, 8, field)) return false;
    memcpy(out, r->b + r->pos, 8);
    r->pos += 8;
    return true;
}

/* A string; out may be NULL to only validate and skip it. */
static bool rd_str(reader *r, const char *field, plm_gguf_str *out) {
    uint64_t at = r->pos, len;
    if (!rd_u64(r, field, &len)) return false;
    if (len > left(r))
        return bad(r, PLM_ERR_FORMAT, at, "%s length %" PRIu64 " exceeds the %" PRIu64
                   " bytes left in the file (size %" PRIu64 ")", field, len, left(r), r->size);
    if (out) {
        out->ptr = (const char *)r->b + r->pos;
        out->len = len;
    }
    r->pos += len;
    return true;
}

/* ---- values ------------------------------------------------------------ */

static void decode_scalar(uint32_t type, const uint8_t *p, plm_gguf_value *out) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } x;
    memcpy(&x, p, plm_gguf_scalar_size(type));
    switch (type) {
    case PLM_GGUF_TYPE_UINT8: out->v.u64 = x.u8; break;
    case PLM_GGUF_TYPE_INT8: out->v.i64 = x.i8; break;
    case PLM_GGUF_TYPE_UINT16: out->v.u64 = x.u16; break;
    case PLM_GGUF_TYPE_INT16: out->v.i64 = x.i16; break;
    case PLM_GGUF_TYPE_UINT32: out->v.u64 = x.u32; break;
    case PLM_GGUF_TYPE_INT32: out->v.i64 = x.i32; break;
    case PLM_GGUF_TYPE_FLOAT32: out->v.f64 = x.f32; break;
    case PLM_GGUF_TYPE_BOOL: out->v.b = x.u8 != 0; break;
    case PLM_GGUF_TYPE_UINT64: out->v.u64 = x.u64; break;
    case PLM_GGUF_TYPE_INT64: out->v.i64 = x.i64; break;
    case PLM_GGUF_TYPE_FLOAT64: out->v.f64 = x.f64; break;
    default: break;
    }
}

static bool rd_value(reader *r, uint32_t type, plm_gguf_value *out, int depth);

/* An array; arr may be NULL to only validate.  depth counts this array. */
static bool rd_array(reader *r, plm_gguf_array *arr, int depth) {
    if (depth > PLM_GGUF_MAX_NESTING)
        return bad(r, PLM_ERR_FORMAT, r->pos, "arrays nested deeper than %d levels", PLM_GGUF_MAX_NESTING);
    uint64_t at = r->pos, n;
    uint32_t et;
    if (!rd_u32(r, "array element type", &et)) return false;
    if (et >= PLM_GGUF_TYPE_COUNT) return bad(r, PLM_ERR_FORMAT, at, "array element type %" PRIu32 " unknown", et);
    at = r->pos;
    if (!rd_u64(r, "array count", &n)) return false;
    size_t esize = plm_gguf_scalar_size(et);
    uint64_t min = esize ? esize : et == PLM_GGUF_TYPE_STRING ? MIN_STR_BYTES : MIN_ARR_BYTES;
    if (n > left(r) / min)
        return bad(r, PLM_ERR_FORMAT, at, "array count %" PRIu64 " of %s (%" PRIu64 "+ bytes each) exceeds the %" PRIu64
                   " bytes left in the file (size %" PRIu64 ")", n, plm_gguf_type_name((plm_gguf_type)et), min, left(r), r->size);
    if (arr) *arr = (plm_gguf_array){.type = (plm_gguf_type)et, .n = n, .data = r->b + r->pos};
    if (esize) {
        r->pos += n * esize;
        return true;
    }
    plm_gguf_value *items = NULL;
    if (arr && n) {
        items = calloc(n, sizeof *items);
        if (!items) return bad(r, PLM_ERR_NOMEM, at, "out of memory for %" PRIu64 " array elements", n);
        arr->items = items;
        arr->data = NULL;
    }
    r->depth = depth;
    for (uint64_t i = 0; i < n; i++) {
        r->path[depth - 1] = i;
        if (items) items[i].type = (plm_gguf_type)et;
        if (!rd_value(r, et, items ? &items[i] : NULL, depth)) return false;
    }
    r->depth = depth - 1;
    return true;
}

/* A value of a known type; out (its type already set) may be NULL to only
 * validate.  depth is the number of enclosing arrays. */
static bool rd_value(reader *r, uint32_t type, plm_gguf_value *out, int depth) {
    size_t size = plm_gguf_scalar_size(type);
    if (size) {
        if (!need(r, size, plm_gguf_type_name((plm_gguf_type)type))) return false;
        if (out) decode_scalar(type, r->b + r->pos, out);
        r->pos += size;
        return true;
    }
    if (type == PLM_GGUF_TYPE_STRING) return rd_str(r, "string", out ? &out->v.str : NULL);
    return rd_array(r, out ? &out->v.arr : NULL, depth + 1);
}

static void free_value(plm_gguf_value *v) {
    if (v->type != PLM_GGUF_TYPE_ARRAY || !v->v.arr.items) return;
    for (uint64_t i = 0; i < v->v.arr.n; i++) free_value(&v->v.arr.items[i]);
    free(v->v.arr.items);
    v->v.arr.items = NULL;
}

static bool value_as_u64(const plm_gguf_value *v, uint64_t *out) {
    switch (v->type) {
    case PLM_GGUF_TYPE_UINT8: case PLM_GGUF_TYPE_UINT16: case PLM_GGUF_TYPE_UINT32: case PLM_GGUF_TYPE_UINT64:
        *out = v->v.u64;
        return true;
    case PLM_GGUF_TYPE_INT8: case PLM_GGUF_TYPE_INT16: case PLM_GGUF_TYPE_INT32: case PLM_GGUF_TYPE_INT64:
        if (v->v.i64 < 0) return false;
        *out = (uint64_t)v->v.i64;
        return true;
    default:
        return false;
    }
}

static bool value_as_i64(const plm_gguf_value *v, int64_t *out) {
    uint64_t u;
    switch (v->type) {
    case PLM_GGUF_TYPE_INT8: case PLM_GGUF_TYPE_INT16: case PLM_GGUF_TYPE_INT32: case PLM_GGUF_TYPE_INT64:
        *out = v->v.i64;
        return true;
    default:
        if (!value_as_u64(v, &u) || u > INT64_MAX) return false;
        *out = (int64_t)u;
        return true;
    }
}

static bool value_as_f64(const plm_gguf_value *v, double *out) {
    int64_t i;
    if (v->type == PLM_GGUF_TYPE_FLOAT32 || v->type == PLM_GGUF_TYPE_FLOAT64) {
        *out = v->v.f64;
    } else if (v->type == PLM_GGUF_TYPE_UINT64 || v->type == PLM_GGUF_TYPE_UINT32 ||
               v->type == PLM_GGUF_TYPE_UINT16 || v->type == PLM_GGUF_TYPE_UINT8) {
        *out = (double)v->v.u64;
    } else if (value_as_i64(v, &i)) {
        *out = (double)i;
    } else {
        return false;
    }
    return true;
}

/* ---- the sections ------------------------------------------------------ */

static bool rd_header(reader *r, plm_gguf_file *f) {
    if (!need(r, 4, "magic")) return false;
    if (memcmp(r->b, PLM_GGUF_MAGIC, 4) != 0) {
        char m[5];
        for (int i = 0; i < 4; i++) m[i] = r->b[i] >= 0x20 && r->b[i] < 0x7f ? (char)r->b[i] : '?';
        m[4] = '\0';
        return bad(r, PLM_ERR_FORMAT, 0, "bad magic '%s' (not a GGUF file)", m);
    }
    r->pos = 4;
    if (!rd_u32(r, "version", &f->version)) return false;
    if (f->version != 2 && f->version != 3) {
        const char *hint = (f->version & 0xffff) == 0 ? " (a big-endian file?)" : "";
        return bad(r, PLM_ERR_UNSUPPORTED, 4, "unsupported GGUF version %" PRIu32 "%s; only 2 and 3 are supported",
                   f->version, hint);
    }
    if (!rd_u64(r, "n_tensors", &f->n_tensors) || !rd_u64(r, "n_kv", &f->n_kv)) return false;
    /* Both counts are bounded by the bytes left, so neither product overflows. */
    if (f->n_kv > left(r) / MIN_KV_BYTES)
        return bad(r, PLM_ERR_FORMAT, 16, "n_kv %" PRIu64 " is more than the %" PRIu64
                   " bytes left in the file (size %" PRIu64 ") can hold", f->n_kv, left(r), r->size);
    if (f->n_tensors > left(r) / MIN_TENSOR_BYTES ||
        f->n_kv * MIN_KV_BYTES + f->n_tensors * MIN_TENSOR_BYTES > left(r))
        return bad(r, PLM_ERR_FORMAT, 8, "n_tensors %" PRIu64 " (with n_kv %" PRIu64 ") is more than the %" PRIu64
                   " bytes left in the file (size %" PRIu64 ") can hold", f->n_tensors, f->n_kv, left(r), r->size);
    return true;
}

static bool check_alignment(reader *r, plm_gguf_file *f, const plm_gguf_value *v, uint64_t at) {
    uint64_t a;
    if (!value_as_u64(v, &a))
        return bad(r, PLM_ERR_FORMAT, at, "general.alignment has type %s, expected u32", plm_gguf_type_name(v->type));
    if (a == 0 || a > UINT32_MAX || (a & (a - 1)) != 0)
        return bad(r, PLM_ERR_FORMAT, at, "general.alignment %" PRIu64 " is not a nonzero power of two", a);
    f->alignment = (uint32_t)a;
    return true;
}

static bool rd_kv(reader *r, plm_gguf_file *f, uint64_t i) {
    plm_gguf_kv *kv = &f->kv[i];
    r->what = "kv";
    r->index = i;
    r->name = (plm_gguf_str){0};
    uint64_t at = r->pos;
    if (!rd_str(r, "key", &kv->key)) return false;
    r->name = kv->key;
    uint64_t dup = index_add(&f->lookup->kv, f, kv_name, i);
    if (dup) return bad(r, PLM_ERR_FORMAT, at, "duplicate key (also kv %" PRIu64 ")", dup - 1);

    at = r->pos;
    uint32_t type;
    if (!rd_u32(r, "value type", &type)) return false;
    if (type >= PLM_GGUF_TYPE_COUNT) return bad(r, PLM_ERR_FORMAT, at, "value type %" PRIu32 " unknown", type);
    /* Walk the value before allocating for it: a claimed count is only
     * trusted once the elements it counts were found in the file. */
    uint64_t start = r->pos;
    if (!rd_value(r, type, NULL, 0)) return false;
    r->pos = start;
    kv->value.type = (plm_gguf_type)type;
    if (!rd_value(r, type, &kv->value, 0)) return false;
    if (plm_gguf_str_eq(kv->key, "general.alignment")) return check_alignment(r, f, &kv->value, at);
    return true;
}

/* One tensor info; *offset_at receives the byte offset of its offset field. */
static bool rd_tensor(reader *r, plm_gguf_file *f, uint64_t i, uint64_t *offset_at) {
    plm_gguf_tensor *t = &f->tensors[i];
    r->what = "tensor";
    r->index = i;
    r->name = (plm_gguf_str){0};
    uint64_t at = r->pos;
    if (!rd_str(r, "tensor name", &t->name)) return false;
    r->name = t->name;
    uint64_t dup = index_add(&f->lookup->tensors, f, tensor_name, i);
    if (dup) return bad(r, PLM_ERR_FORMAT, at, "duplicate tensor name (also tensor %" PRIu64 ")", dup - 1);

    at = r->pos;
    if (!rd_u32(r, "n_dims", &t->n_dims)) return false;
    if (t->n_dims > PLM_GGUF_MAX_DIMS)
        return bad(r, PLM_ERR_FORMAT, at, "n_dims %" PRIu32 " exceeds %d", t->n_dims, PLM_GGUF_MAX_DIMS);
    uint64_t nelem = 1;
    for (int d = 0; d < PLM_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        at = r->pos;
        if (!rd_u64(r, "dims", &t->ne[d])) return false;
        if (t->ne[d] == 0 || t->ne[d] > INT64_MAX)
            return bad(r, PLM_ERR_FORMAT, at, "dims ne[%" PRIu32 "]=%" PRIu64 " invalid", d, t->ne[d]);
        if (t->ne[d] > INT64_MAX / nelem)
            return bad(r, PLM_ERR_FORMAT, at, "dims ne[%" PRIu32 "]=%" PRIu64 " overflow the element count", d, t->ne[d]);
        nelem *= t->ne[d];
    }

    at = r->pos;
    if (!rd_u32(r, "tensor type", &t->type)) return false;
    const plm_type_info *ti = plm_type_info_get(t->type);
    if (!ti) return bad(r, PLM_ERR_FORMAT, at, "unknown tensor type id %" PRIu32, t->type);
    if (t->ne[0] % ti->block_size)
        return bad(r, PLM_ERR_FORMAT, at, "ne[0]=%" PRIu64 " is not a multiple of the %s block size %" PRIu32,
                   t->ne[0], ti->name, ti->block_size);
    uint64_t total;
    if (!plm_gguf_mul_u64(nelem / ti->block_size, ti->type_size, &total) || total > r->size)
        return bad(r, PLM_ERR_FORMAT, at, "%s data of %" PRIu64 " elements is larger than the file (size %" PRIu64 ")",
                   ti->name, nelem, r->size);
    t->nbytes = (uint64_t)plm_row_size((plm_type)t->type, (int64_t)t->ne[0]) * (nelem / t->ne[0]);

    at = r->pos;
    if (!rd_u64(r, "offset", &t->offset)) return false;
    if (t->offset % f->alignment)
        return bad(r, PLM_ERR_FORMAT, at, "offset %" PRIu64 " is not a multiple of the alignment %" PRIu32,
                   t->offset, f->alignment);
    *offset_at = at;
    return true;
}

/* Places the data section and checks every tensor lies inside the file. */
static bool place_data(reader *r, plm_gguf_file *f, const uint64_t *offset_at) {
    uint64_t end = r->pos, pad = (f->alignment - end % f->alignment) % f->alignment;
    f->data_offset = pad <= UINT64_MAX - end ? end + pad : UINT64_MAX;
    /* Files without tensors (vocab-only) often stop right after the last key. */
    if (f->n_tensors == 0 && f->data_offset > r->size) f->data_offset = r->size;
    uint64_t avail = f->data_offset <= r->size ? r->size - f->data_offset : 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        plm_gguf_tensor *t = &f->tensors[i];
        if (t->offset > avail || t->nbytes > avail - t->offset) {
            r->what = "tensor";
            r->index = i;
            r->name = t->name;
            return bad(r, PLM_ERR_FORMAT, offset_at[i], "data at offset %" PRIu64 " (%" PRIu64
                       " bytes, section at byte %" PRIu64 ") ends past the end of the file (size %" PRIu64 ")",
                       t->offset, t->nbytes, f->data_offset, r->size);
        }
        t->data = r->b + f->data_offset + t->offset;
    }
    return true;
}

static bool parse(reader *r, plm_gguf_file *f) {
    if (!rd_header(r, f)) return false;
    f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof *f->kv);
    if (!f->kv || !index_init(&f->lookup->kv, f->n_kv))
        return bad(r, PLM_ERR_NOMEM, 16, "out of memory for %" PRIu64 " keys", f->n_kv);
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (!rd_kv(r, f, i)) return false;

    r->what = NULL; /* allocation failures are about the header's counts */
    f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
    uint64_t *offset_at = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *offset_at);
    bool ok = f->tensors && offset_at && index_init(&f->lookup->tensors, f->n_tensors);
    if (!ok) bad(r, PLM_ERR_NOMEM, 8, "out of memory for %" PRIu64 " tensors", f->n_tensors);
    for (uint64_t i = 0; ok && i < f->n_tensors; i++) ok = rd_tensor(r, f, i, &offset_at[i]);
    ok = ok && place_data(r, f, offset_at);
    free(offset_at);
    return ok;
}

plm_gguf_file *plm_gguf_parse(const void *image, uint64_t size, plm_error *err) {
    if (!image && size) {
        plm_fail(err, PLM_ERR_INVALID_ARG, "plm_gguf_parse: NULL image of %" PRIu64 " bytes", size);
        return NULL;
    }
    plm_gguf_file *f = calloc(1, sizeof *f);
    struct plm_gguf_lookup *lookup = calloc(1, sizeof *lookup);
    if (!f || !lookup) {
        free(f);
        free(lookup);
        plm_fail(err, PLM_ERR_NOMEM, "out of memory parsing a GGUF file");
        return NULL;
    }
    static const uint8_t empty[1];
    f->image = image ? image : empty;
    f->size = size;
    f->alignment = PLM_GGUF_DEFAULT_ALIGNMENT;
    f->lookup = lookup;
    reader r = {.b = f->image, .size = size, .err = err};
    if (!parse(&r, f)) {
        plm_gguf_close(f);
        return NULL;
    }
    return f;
}

/* ---- files --------------------------------------------------------------- */

static void release_image(const plm_gguf_file *f) {
    if (f->map_base) {
        munmap((void *)f->map_base, (size_t)f->map_size); /* also drops any lock */
    } else if (f->image && f->size) {
        if (f->locked) munlock(f->image, (size_t)f->size);
        free((void *)f->image);
    }
}

void plm_gguf_close(plm_gguf_file *f) {
    if (!f) return;
    if (f->kv)
        for (uint64_t i = 0; i < f->n_kv; i++) free_value(&f->kv[i].value);
    free(f->kv);
    free(f->tensors);
    if (f->lookup) {
        free(f->lookup->kv.slots);
        free(f->lookup->tensors.slots);
        free(f->lookup);
    }
    if (f->owns_image) release_image(f);
    free(f);
}

/* Tensor data is read as floats and ggml blocks in place: an image must start
 * at least as aligned as malloc's memory, where a file read into memory lands
 * (GGUF aligns the data to 32 bytes relative to the image's start). */
#define IMAGE_ALIGN 16

/* The image as it came: where it lies and who releases it. */
typedef struct image {
    const uint8_t *bytes;
    uint64_t size;
    const void *map_base; /* an mmap to release, or NULL */
    uint64_t map_size;
    bool owned;           /* malloc'd: free it */
} image;

static void image_release(image *im) {
    if (im->map_base) munmap((void *)im->map_base, (size_t)im->map_size);
    else if (im->owned) free((void *)im->bytes);
}

/* Reads bytes [offset, offset + size) of fd, telling `progress`. */
static plm_status read_range(const plm_gguf_source *src, int fd, uint8_t *dst, uint64_t size, plm_error *err) {
    const uint64_t chunk_max = 16u << 20; /* progress every 16 MiB */
    uint64_t done = 0;
    while (done < size) {
        size_t chunk = size - done > chunk_max ? (size_t)chunk_max : (size_t)(size - done);
        ssize_t n = pread(fd, dst + done, chunk, (off_t)(src->offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return plm_fail(err, PLM_ERR_IO, "%s: read failed: %s", src->name,
                            n == 0 ? "the file shrank while it was read" : strerror(errno));
        done += (uint64_t)n;
        if (src->progress && !src->progress(src->user, (float)((double)done / (double)size)))
            return plm_fail(err, PLM_ERR_ABORTED, "%s: loading was cancelled", src->name);
    }
    return PLM_OK;
}

/* Maps or reads the image's bytes of an open file; im->bytes stays NULL for
 * an empty one. */
static plm_status load_fd(const plm_gguf_source *src, int fd, bool use_mmap, image *im, plm_error *err) {
    struct stat st;
    if (fstat(fd, &st) != 0) return plm_fail(err, PLM_ERR_IO, "%s: cannot stat: %s", src->name, strerror(errno));
    if (!S_ISREG(st.st_mode)) return plm_fail(err, PLM_ERR_IO, "%s: not a regular file", src->name);
    const uint64_t file_size = (uint64_t)st.st_size;
    if (src->offset > file_size)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "%s: offset %" PRIu64 " is past the end of the %" PRIu64 "-byte file",
                        src->name, src->offset, file_size);
    im->size = src->length ? src->length : file_size - src->offset;
    if (im->size > file_size - src->offset)
        return plm_fail(err, PLM_ERR_INVALID_ARG,
                        "%s: %" PRIu64 " bytes at offset %" PRIu64 " run past the end of the %" PRIu64 "-byte file",
                        src->name, im->size, src->offset, file_size);
    if (im->size > SIZE_MAX / 2)
        return plm_fail(err, PLM_ERR_NOMEM, "%s: %" PRIu64 " bytes do not fit in the address space", src->name,
                        im->size);
    if (!im->size) return PLM_OK;
    if (use_mmap && src->offset % IMAGE_ALIGN == 0) {
        /* mmap wants a page-aligned file offset: map from the page the image
         * starts in.  (An image at an odd offset would sit misaligned in the
         * mapping: it is read into memory instead.) */
        const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
        const uint64_t lead = src->offset % page;
        void *p = mmap(NULL, (size_t)(im->size + lead), PROT_READ, MAP_PRIVATE, fd, (off_t)(src->offset - lead));
        if (p != MAP_FAILED) { /* else fall back to reading: some filesystems cannot map */
            im->map_base = p;
            im->map_size = im->size + lead;
            im->bytes = (const uint8_t *)p + lead;
            return PLM_OK;
        }
    }
    uint8_t *buf = malloc((size_t)im->size);
    if (!buf)
        return plm_fail(err, PLM_ERR_NOMEM, "%s: cannot allocate %" PRIu64 " bytes to read it", src->name, im->size);
    plm_status s = read_range(src, fd, buf, im->size, err);
    if (s) {
        free(buf);
        return s;
    }
    im->bytes = buf;
    im->owned = true;
    return PLM_OK;
}

static plm_status load_image(const plm_gguf_source *src, bool use_mmap, image *im, plm_error *err) {
    if (src->data || (!src->path && src->fd < 0)) {
        if (!src->data && src->length)
            return plm_fail(err, PLM_ERR_INVALID_ARG, "%s: NULL image of %" PRIu64 " bytes", src->name, src->length);
        im->bytes = src->data;
        im->size = src->length;
        if ((uintptr_t)src->data % IMAGE_ALIGN == 0 || !im->size) return PLM_OK;
        /* Misaligned memory (an asset buffer at an odd offset): a copy. */
        uint8_t *copy = im->size <= SIZE_MAX ? malloc((size_t)im->size) : NULL;
        if (!copy)
            return plm_fail(err, PLM_ERR_NOMEM, "%s: cannot allocate %" PRIu64 " bytes to align it", src->name,
                            im->size);
        memcpy(copy, src->data, (size_t)im->size);
        im->bytes = copy;
        im->owned = true;
        return PLM_OK;
    }
    if (!src->path) return load_fd(src, src->fd, use_mmap, im, err);
    int fd = open(src->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return plm_fail(err, PLM_ERR_IO, "%s: cannot open: %s", src->name, strerror(errno));
    plm_status s = load_fd(src, fd, use_mmap, im, err);
    close(fd);
    return s;
}

plm_gguf_file *plm_gguf_open_source(const plm_gguf_source *src, const plm_gguf_open_params *params,
                                    plm_error *err) {
    plm_gguf_open_params p = params ? *params : (plm_gguf_open_params){.use_mmap = true};
    image im = {0};
    if (load_image(src, p.use_mmap, &im, err) != PLM_OK) return NULL;

    plm_error perr;
    plm_gguf_file *f = plm_gguf_parse(im.bytes, im.size, &perr);
    if (!f) {
        image_release(&im);
        plm_fail(err, perr.code, "%s: %s", src->name, perr.message);
        return NULL;
    }
    f->image = im.bytes ? im.bytes : f->image;
    f->mapped = im.map_base != NULL;
    f->map_base = im.map_base;
    f->map_size = im.map_size;
    f->owns_image = im.map_base || im.owned;
    /* Only after validation: no point pinning a file we reject. */
    f->locked = f->owns_image && p.use_mlock && im.size && mlock(im.bytes, (size_t)im.size) == 0;
    return f;
}

plm_gguf_file *plm_gguf_open(const char *path, const plm_gguf_open_params *params, plm_error *err) {
    if (!path) {
        plm_fail(err, PLM_ERR_INVALID_ARG, "plm_gguf_open: NULL path");
        return NULL;
    }
    const plm_gguf_source src = {.name = path, .path = path, .fd = -1};
    return plm_gguf_open_source(&src, params, err);
}

/* ---- lookups ------------------------------------------------------------ */

const plm_gguf_kv *plm_gguf_find_kv(const plm_gguf_file *f, const char *key) {
    uint64_t i = find_name(f, f && f->lookup ? &f->lookup->kv : NULL, kv_name, f ? f->n_kv : 0, key);
    return i ? &f->kv[i - 1] : NULL;
}

int64_t plm_gguf_find_tensor_index(const plm_gguf_file *f, const char *name) {
    uint64_t i = find_name(f, f && f->lookup ? &f->lookup->tensors : NULL, tensor_name,
                           f ? f->n_tensors : 0, name);
    return (int64_t)i - 1;
}

const plm_gguf_tensor *plm_gguf_find_tensor(const plm_gguf_file *f, const char *name) {
    int64_t i = plm_gguf_find_tensor_index(f, name);
    return i < 0 ? NULL : &f->tensors[i];
}

bool plm_gguf_get_u32(const plm_gguf_file *f, const char *key, uint32_t *out) {
    const plm_gguf_kv *kv = plm_gguf_find_kv(f, key);
    uint64_t u;
    if (!kv || !value_as_u64(&kv->value, &u) || u > UINT32_MAX) return false;
    *out = (uint32_t)u;
    return true;
}

bool plm_gguf_get_i64(const plm_gguf_file *f, const char *key, int64_t *out) {
    const plm_gguf_kv *kv = plm_gguf_find_kv(f, key);
    return kv && value_as_i64(&kv->value, out);
}

/* double -> float without the undefined behaviour of an out-of-range cast. */
static float to_f32(double d) {
    if (d > 3.4028234663852886e38) return HUGE_VALF;
    if (d < -3.4028234663852886e38) return -HUGE_VALF;
    return (float)d;
}

bool plm_gguf_get_f32(const plm_gguf_file *f, const char *key, float *out) {
    const plm_gguf_kv *kv = plm_gguf_find_kv(f, key);
    double d;
    if (!kv || !value_as_f64(&kv->value, &d)) return false;
    *out = to_f32(d);
    return true;
}

bool plm_gguf_get_bool(const plm_gguf_file *f, const char *key, bool *out) {
    const plm_gguf_kv *kv = plm_gguf_find_kv(f, key);
    if (!kv || kv->value.type != PLM_GGUF_TYPE_BOOL) return false;
    *out = kv->value.v.b;
    return true;
}

bool plm_gguf_get_str(const plm_gguf_file *f, const char *key, plm_gguf_str *out) {
    const plm_gguf_kv *kv = plm_gguf_find_kv(f, key);
    if (!kv || kv->value.type != PLM_GGUF_TYPE_STRING) return false;
    *out = kv->value.v.str;
    return true;
}

const plm_gguf_array *plm_gguf_get_arr(const plm_gguf_file *f, const char *key) {
    const plm_gguf_kv *kv = plm_gguf_find_kv(f, key);
    return kv && kv->value.type == PLM_GGUF_TYPE_ARRAY ? &kv->value.v.arr : NULL;
}

/* Element i of a scalar array as a value; false if there is none. */
static bool arr_elem(const plm_gguf_array *a, uint64_t i, plm_gguf_value *out) {
    size_t size = a ? plm_gguf_scalar_size(a->type) : 0;
    if (!size || i >= a->n || !a->data) return false;
    out->type = a->type;
    decode_scalar(a->type, a->data + i * size, out);
    return true;
}

int64_t plm_gguf_arr_i64(const plm_gguf_array *a, uint64_t i) {
    plm_gguf_value v;
    int64_t x;
    if (!arr_elem(a, i, &v)) return 0;
    if (v.type == PLM_GGUF_TYPE_BOOL) return v.v.b;
    if (value_as_i64(&v, &x)) return x;
    if (v.type == PLM_GGUF_TYPE_UINT64) return INT64_MAX; /* above INT64_MAX */
    double d = v.v.f64;                            /* a float: saturate, NaN -> 0 */
    if (d != d) return 0;
    if (d >= 9223372036854775807.0) return INT64_MAX;
    if (d <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)d;
}

double plm_gguf_arr_f64(const plm_gguf_array *a, uint64_t i) {
    plm_gguf_value v;
    double d;
    if (!arr_elem(a, i, &v)) return 0;
    if (v.type == PLM_GGUF_TYPE_BOOL) return v.v.b;
    return value_as_f64(&v, &d) ? d : 0;
}

plm_gguf_str plm_gguf_arr_str(const plm_gguf_array *a, uint64_t i) {
    if (!a || a->type != PLM_GGUF_TYPE_STRING || i >= a->n || !a->items) return (plm_gguf_str){NULL, 0};
    return a->items[i].v.str;
}
