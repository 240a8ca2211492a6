/*
 * GGUF v3 writer.  Setters only collect: each key keeps its value already
 * encoded, each tensor its shape and data pointer.  plm_gguf_writer_write then
 * lays the file out, streams it to PATH.tmp, fsyncs and renames it over
 * PATH, so a reader never sees a half-written model under the final name.
 *
 * Setters return nothing; the first problem (out of memory, a bad shape, an
 * invalid alignment) is remembered and reported by plm_gguf_writer_write.
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
#include <unistd.h>

#include "core/error.h"
#include "quant/types.h"

/* llama.cpp keeps tensor names in char[64] (GGML_MAX_NAME) and rejects longer. */
#define MAX_TENSOR_NAME 63

typedef struct {
    uint8_t *p;
    size_t len, cap;
} bytes;

typedef struct {
    char *key;
    plm_gguf_type type;
    bytes val; /* the value's encoding, without the type field */
} wkv;

typedef struct {
    char *name;
    uint32_t type, n_dims;
    uint64_t ne[PLM_GGUF_MAX_DIMS];
    const void *data; /* NULL: produced by the fill callback */
    uint64_t nbytes, offset;
} wtensor;

struct plm_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    uint32_t alignment;
    plm_status status; /* first recorded error, PLM_OK if none */
    char msg[400];
};

static void record(plm_gguf_writer *w, plm_status code, const char *fmt, ...) PLM_PRINTF(3, 4);
static void record(plm_gguf_writer *w, plm_status code, const char *fmt, ...) {
    if (w->status != PLM_OK) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    w->status = code;
}

/* Grows *p (an array of *cap elements of `size`) to hold `need`. */
static bool grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2 / size) return false;
        n *= 2;
    }
    void *q = realloc(*p, n * size);
    if (!q) return false;
    *p = q;
    *cap = n;
    return true;
}

static bool put(bytes *b, const void *src, size_t n) {
    if (n > SIZE_MAX - b->len) return false;
    void *p = b->p;
    if (!grow(&p, &b->cap, b->len + n, 1)) return false;
    b->p = p;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    return true;
}

static bool put_u32(bytes *b, uint32_t v) { return put(b, &v, 4); }
static bool put_u64(bytes *b, uint64_t v) { return put(b, &v, 8); }

static bool put_str(bytes *b, const char *s, uint64_t len) {
    return len <= SIZE_MAX && put_u64(b, len) && put(b, s, (size_t)len);
}

static char *dup_cstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void check_alignment_kv(plm_gguf_writer *w, plm_gguf_type type, const bytes *val) {
    uint32_t a = 0;
    if (type != PLM_GGUF_TYPE_UINT32) {
        record(w, PLM_ERR_INVALID_ARG, "general.alignment must be u32, not %s", plm_gguf_type_name(type));
        return;
    }
    memcpy(&a, val->p, 4);
    if (a == 0 || (a & (a - 1)) != 0) {
        record(w, PLM_ERR_INVALID_ARG, "general.alignment %" PRIu32 " is not a nonzero power of two", a);
        return;
    }
    w->alignment = a;
}

/* Stores key = (type, val), taking ownership of val.  A key set twice keeps
 * its first position: files stay in the order their writer meant. */
static void put_kv(plm_gguf_writer *w, const char *key, plm_gguf_type type, bytes *val, bool ok) {
    if (!w) {
        free(val->p);
        return;
    }
    if (!ok) {
        free(val->p);
        record(w, PLM_ERR_NOMEM, "out of memory encoding key '%s'", key ? key : "(null)");
        return;
    }
    if (!key || !*key) {
        free(val->p);
        record(w, PLM_ERR_INVALID_ARG, "a key is NULL or empty");
        return;
    }
    if (!strcmp(key, "general.alignment")) check_alignment_kv(w, type, val);
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].val.p);
            w->kv[i].type = type;
            w->kv[i].val = *val;
            return;
        }
    }
    void *p = w->kv;
    char *k = dup_cstr(key);
    if (!k || !grow(&p, &w->cap_kv, w->n_kv + 1, sizeof *w->kv)) {
        free(k);
        free(val->p);
        record(w, PLM_ERR_NOMEM, "out of memory adding key '%s'", key);
        return;
    }
    w->kv = p;
    w->kv[w->n_kv++] = (wkv){.key = k, .type = type, .val = *val};
}

static void set_scalar(plm_gguf_writer *w, const char *key, plm_gguf_type type, const void *v) {
    bytes b = {0};
    bool ok = put(&b, v, plm_gguf_scalar_size(type));
    put_kv(w, key, type, &b, ok);
}

plm_gguf_writer *plm_gguf_writer_new(void) {
    plm_gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->alignment = PLM_GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void plm_gguf_writer_free(plm_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val.p);
    }
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

void plm_gguf_writer_set_alignment(plm_gguf_writer *w, uint32_t alignment) {
    if (!w) return;
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        record(w, PLM_ERR_INVALID_ARG, "alignment %" PRIu32 " is not a nonzero power of two", alignment);
        return;
    }
    bool has_key = false;
    for (size_t i = 0; i < w->n_kv; i++) has_key |= !strcmp(w->kv[i].key, "general.alignment");
    /* Readers assume 32 without the key; any other value must be stated. */
    if (alignment != PLM_GGUF_DEFAULT_ALIGNMENT || has_key)
        plm_gguf_writer_set_u32(w, "general.alignment", alignment);
    w->alignment = alignment;
}

void plm_gguf_writer_set_u32(plm_gguf_writer *w, const char *key, uint32_t v) { set_scalar(w, key, PLM_GGUF_TYPE_UINT32, &v); }
void plm_gguf_writer_set_i32(plm_gguf_writer *w, const char *key, int32_t v) { set_scalar(w, key, PLM_GGUF_TYPE_INT32, &v); }
void plm_gguf_writer_set_u64(plm_gguf_writer *w, const char *key, uint64_t v) { set_scalar(w, key, PLM_GGUF_TYPE_UINT64, &v); }
void plm_gguf_writer_set_f32(plm_gguf_writer *w, const char *key, float v) { set_scalar(w, key, PLM_GGUF_TYPE_FLOAT32, &v); }

void plm_gguf_writer_set_bool(plm_gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    set_scalar(w, key, PLM_GGUF_TYPE_BOOL, &b);
}

void plm_gguf_writer_set_str(plm_gguf_writer *w, const char *key, const char *v) {
    if (w && !v) {
        record(w, PLM_ERR_INVALID_ARG, "key '%s': NULL string", key ? key : "(null)");
        return;
    }
    bytes b = {0};
    bool ok = v && put_str(&b, v, strlen(v));
    put_kv(w, key, PLM_GGUF_TYPE_STRING, &b, ok);
}

void plm_gguf_writer_set_arr(plm_gguf_writer *w, const char *key, plm_gguf_type type, const void *data, uint64_t n) {
    if (!w) return;
    size_t size = plm_gguf_scalar_size(type);
    uint64_t total;
    if (!size || (n && !data) || !plm_gguf_mul_u64(n, size, &total) || total > SIZE_MAX) {
        record(w, PLM_ERR_INVALID_ARG, "key '%s': bad scalar array (%s x %" PRIu64 ")",
               key ? key : "(null)", plm_gguf_type_name(type), n);
        return;
    }
    bytes b = {0};
    bool ok = put_u32(&b, (uint32_t)type) && put_u64(&b, n) && put(&b, data, (size_t)total);
    put_kv(w, key, PLM_GGUF_TYPE_ARRAY, &b, ok);
}

void plm_gguf_writer_set_arr_str(plm_gguf_writer *w, const char *key, const plm_gguf_str *strs, uint64_t n) {
    if (!w) return;
    if (n && !strs) {
        record(w, PLM_ERR_INVALID_ARG, "key '%s': NULL string array", key ? key : "(null)");
        return;
    }
    bytes b = {0};
    bool ok = put_u32(&b, PLM_GGUF_TYPE_STRING) && put_u64(&b, n);
    for (uint64_t i = 0; ok && i < n; i++) ok = put_str(&b, strs[i].ptr, strs[i].len);
    put_kv(w, key, PLM_GGUF_TYPE_ARRAY, &b, ok);
}

static float to_f32(double d) {
    if (d > 3.4028234663852886e38) return HUGE_VALF;
    if (d < -3.4028234663852886e38) return -HUGE_VALF;
    return (float)d;
}

/* Encodes a reader's value (without its type field); false on out of memory
 * or a value no reader could have produced. */
static bool encode_value(bytes *b, const plm_gguf_value *v, int depth) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
            float f32; uint64_t u64; int64_t i64; double f64; } x;
    switch (v->type) {
    case PLM_GGUF_TYPE_UINT8: x.u8 = (uint8_t)v->v.u64; break;
    case PLM_GGUF_TYPE_INT8: x.i8 = (int8_t)v->v.i64; break;
    case PLM_GGUF_TYPE_UINT16: x.u16 = (uint16_t)v->v.u64; break;
    case PLM_GGUF_TYPE_INT16: x.i16 = (int16_t)v->v.i64; break;
    case PLM_GGUF_TYPE_UINT32: x.u32 = (uint32_t)v->v.u64; break;
    case PLM_GGUF_TYPE_INT32: x.i32 = (int32_t)v->v.i64; break;
    case PLM_GGUF_TYPE_FLOAT32: x.f32 = to_f32(v->v.f64); break;
    case PLM_GGUF_TYPE_BOOL: x.u8 = v->v.b ? 1 : 0; break;
    case PLM_GGUF_TYPE_UINT64: x.u64 = v->v.u64; break;
    case PLM_GGUF_TYPE_INT64: x.i64 = v->v.i64; break;
    case PLM_GGUF_TYPE_FLOAT64: x.f64 = v->v.f64; break;
    case PLM_GGUF_TYPE_STRING: return put_str(b, v->v.str.ptr, v->v.str.len);
    case PLM_GGUF_TYPE_ARRAY: {
        const plm_gguf_array *a = &v->v.arr;
        size_t size = plm_gguf_scalar_size(a->type);
        uint64_t total;
        if (depth >= PLM_GGUF_MAX_NESTING || (unsigned)a->type >= PLM_GGUF_TYPE_COUNT) return false;
        if (!put_u32(b, (uint32_t)a->type) || !put_u64(b, a->n)) return false;
        if (size) {
            if (!plm_gguf_mul_u64(a->n, size, &total) || total > SIZE_MAX || (a->n && !a->data)) return false;
            return put(b, a->data, (size_t)total);
        }
        if (a->n && !a->items) return false;
        for (uint64_t i = 0; i < a->n; i++) {
            if (a->items[i].type != a->type || !encode_value(b, &a->items[i], depth + 1)) return false;
        }
        return true;
    }
    default: return false;
    }
    return put(b, &x, plm_gguf_scalar_size(v->type));
}

void plm_gguf_writer_copy_kv(plm_gguf_writer *w, const plm_gguf_kv *kv) {
    if (!w) return;
    if (!kv || !kv->key.ptr || kv->key.len == 0 || kv->key.len >= SIZE_MAX ||
        memchr(kv->key.ptr, '\0', (size_t)kv->key.len)) {
        record(w, PLM_ERR_INVALID_ARG, "copy_kv: missing, empty or NUL-containing key");
        return;
    }
    char *key = malloc((size_t)kv->key.len + 1);
    if (!key) {
        record(w, PLM_ERR_NOMEM, "copy_kv: out of memory for a key of %" PRIu64 " bytes", kv->key.len);
        return;
    }
    plm_gguf_str_copy(kv->key, key, (size_t)kv->key.len + 1);
    bytes b = {0};
    if (!encode_value(&b, &kv->value, 0)) {
        free(b.p);
        record(w, PLM_ERR_INVALID_ARG, "copy_kv: key '%.200s': value cannot be encoded (or out of memory)", key);
    } else {
        put_kv(w, key, kv->value.type, &b, true);
    }
    free(key);
}

/* Validates a tensor's shape and computes its size; false (recorded) if bad. */
static bool tensor_size(plm_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                        const uint64_t *ne, uint64_t *nbytes) {
    const plm_type_info *ti = plm_type_info_get(type);
    if (!ti) {
        record(w, PLM_ERR_INVALID_ARG, "tensor '%s': unknown type id %" PRIu32, name, type);
        return false;
    }
    if (n_dims < 1 || n_dims > PLM_GGUF_MAX_DIMS || !ne) {
        record(w, PLM_ERR_INVALID_ARG, "tensor '%s': n_dims %" PRIu32 " not in 1..%d", name, n_dims, PLM_GGUF_MAX_DIMS);
        return false;
    }
    uint64_t nelem = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] == 0 || ne[d] > INT64_MAX / nelem) {
            record(w, PLM_ERR_INVALID_ARG, "tensor '%s': ne[%" PRIu32 "]=%" PRIu64 " invalid", name, d, ne[d]);
            return false;
        }
        nelem *= ne[d];
    }
    if (ne[0] % ti->block_size) {
        record(w, PLM_ERR_INVALID_ARG, "tensor '%s': ne[0]=%" PRIu64 " is not a multiple of the %s block size %" PRIu32,
               name, ne[0], ti->name, ti->block_size);
        return false;
    }
    if (!plm_gguf_mul_u64(nelem / ti->block_size, ti->type_size, nbytes)) {
        record(w, PLM_ERR_INVALID_ARG, "tensor '%s': size overflows", name);
        return false;
    }
    *nbytes = (uint64_t)plm_row_size((plm_type)type, (int64_t)ne[0]) * (nelem / ne[0]);
    return true;
}

void plm_gguf_writer_add_tensor(plm_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                            const uint64_t *ne, const void *data) {
    if (!w) return;
    if (!name || !*name || strlen(name) > MAX_TENSOR_NAME) {
        record(w, PLM_ERR_INVALID_ARG, "tensor name '%.80s' is empty or longer than %d bytes",
               name ? name : "(null)", MAX_TENSOR_NAME);
        return;
    }
    for (size_t i = 0; i < w->n_t; i++) {
        if (!strcmp(w->t[i].name, name)) {
            record(w, PLM_ERR_INVALID_ARG, "tensor '%s' added twice", name);
            return;
        }
    }
    wtensor t = {.type = type, .n_dims = n_dims, .data = data};
    if (!tensor_size(w, name, type, n_dims, ne, &t.nbytes)) return;
    for (int d = 0; d < PLM_GGUF_MAX_DIMS; d++) t.ne[d] = d < (int)n_dims ? ne[d] : 1;
    void *p = w->t;
    t.name = dup_cstr(name);
    if (!t.name || !grow(&p, &w->cap_t, w->n_t + 1, sizeof *w->t)) {
        free(t.name);
        record(w, PLM_ERR_NOMEM, "out of memory adding tensor '%s'", name);
        return;
    }
    w->t = p;
    w->t[w->n_t++] = t;
}

/* ---- output -------------------------------------------------------------- */

/* A buffered file; errno_ is the first error (0 = none). */
typedef struct {
    int fd;
    int errno_;
    uint8_t *buf;
    size_t len, cap;
} out_file;

static void write_fd(out_file *o, const void *p, size_t n) {
    const uint8_t *s = p;
    while (n && !o->errno_) {
        ssize_t k = write(o->fd, s, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            o->errno_ = k < 0 ? errno : EIO;
            break;
        }
        s += k;
        n -= (size_t)k;
    }
}

static void flush(out_file *o) {
    write_fd(o, o->buf, o->len);
    o->len = 0;
}

static void emit(out_file *o, const void *p, size_t n) {
    if (o->errno_) return;
    if (o->len + n > o->cap) flush(o);
    if (n >= o->cap) {
        write_fd(o, p, n); /* big tensor data: straight through */
    } else {
        memcpy(o->buf + o->len, p, n);
        o->len += n;
    }
}

static void emit_u32(out_file *o, uint32_t v) { emit(o, &v, 4); }
static void emit_u64(out_file *o, uint64_t v) { emit(o, &v, 8); }

static void emit_str(out_file *o, const char *s) {
    size_t n = strlen(s);
    emit_u64(o, n);
    emit(o, s, n);
}

static void emit_pad(out_file *o, uint64_t pos, uint32_t alignment) {
    static const uint8_t zeros[256];
    uint64_t pad = (alignment - pos % alignment) % alignment;
    while (pad) {
        size_t n = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        emit(o, zeros, n);
        pad -= n;
    }
}

static uint64_t align_up(uint64_t x, uint32_t a) { return (x + a - 1) / a * a; }

/* Assigns tensor offsets; returns the header's size (before padding). */
static uint64_t layout(plm_gguf_writer *w) {
    uint64_t pos = 4 + 4 + 8 + 8, off = 0;
    for (size_t i = 0; i < w->n_kv; i++) pos += 8 + strlen(w->kv[i].key) + 4 + w->kv[i].val.len;
    for (size_t i = 0; i < w->n_t; i++) {
        pos += 8 + strlen(w->t[i].name) + 4 + 8 * (uint64_t)w->t[i].n_dims + 4 + 8;
        w->t[i].offset = off;
        off = align_up(off + w->t[i].nbytes, w->alignment);
    }
    return pos;
}

static void emit_header(out_file *o, const plm_gguf_writer *w) {
    emit(o, PLM_GGUF_MAGIC, 4);
    emit_u32(o, 3);
    emit_u64(o, w->n_t);
    emit_u64(o, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        emit_str(o, w->kv[i].key);
        emit_u32(o, (uint32_t)w->kv[i].type);
        emit(o, w->kv[i].val.p, w->kv[i].val.len);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        emit_str(o, t->name);
        emit_u32(o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) emit_u64(o, t->ne[d]);
        emit_u32(o, t->type);
        emit_u64(o, t->offset);
    }
}

/* Skips n bytes of the file, leaving a hole that reads as zeros. */
static void skip(out_file *o, uint64_t n) {
    flush(o);
    if (!o->errno_ && lseek(o->fd, (off_t)n, SEEK_CUR) < 0) o->errno_ = errno;
}

/* Writes every tensor's bytes, padded; PLM_OK or the error (err filled).
 * With fill NULL (a sparse file) a tensor without data is left a hole. */
static plm_status emit_data(out_file *o, const plm_gguf_writer *w, const char *path, plm_gguf_fill_fn fill,
                            void *user, plm_error *err) {
    uint64_t scratch_size = 0;
    for (size_t i = 0; i < w->n_t && fill; i++)
        if (!w->t[i].data && w->t[i].nbytes > scratch_size) scratch_size = w->t[i].nbytes;
    if (scratch_size > SIZE_MAX) return plm_fail(err, PLM_ERR_NOMEM, "%s: tensor too large", path);
    uint8_t *scratch = scratch_size ? malloc((size_t)scratch_size) : NULL;
    if (scratch_size && !scratch)
        return plm_fail(err, PLM_ERR_NOMEM, "%s: cannot allocate %" PRIu64 " bytes for tensor data", path, scratch_size);
    plm_status st = PLM_OK;
    for (size_t i = 0; i < w->n_t && !o->errno_; i++) {
        const wtensor *t = &w->t[i];
        const void *src = t->data;
        if (!src && !fill) {
            skip(o, align_up(t->nbytes, w->alignment));
            continue;
        }
        if (!src) {
            plm_error ferr = {PLM_OK, ""};
            st = fill(user, i, scratch, t->nbytes, &ferr);
            if (st != PLM_OK) {
                plm_fail(err, st, "%s: tensor '%s': %s", path, t->name, ferr.message[0] ? ferr.message : plm_status_name(st));
                break;
            }
            src = scratch;
        }
        emit(o, src, (size_t)t->nbytes);
        emit_pad(o, t->nbytes, w->alignment);
    }
    free(scratch);
    return st;
}

/* fsyncs the directory holding path so the rename itself is durable. */
static void sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) {
        dir[0] = '.', dir[1] = '\0';
    } else if ((size_t)(slash - path) < sizeof dir) {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        memcpy(dir, path, n);
        dir[n] = '\0';
    } else {
        return;
    }
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd); /* best effort: some filesystems refuse */
        close(fd);
    }
}

/* plm_gguf_writer_write, or with sparse a file whose tensors without data
 * are holes. */
static plm_status write_file(plm_gguf_writer *w, const char *path, plm_gguf_fill_fn fill, void *user, bool sparse,
                             plm_error *err) {
    if (!path) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_gguf_writer_write: NULL path");
    if (!w) return plm_fail(err, PLM_ERR_NOMEM, "%s: the GGUF writer could not be allocated", path);
    if (w->status != PLM_OK) return plm_fail(err, w->status, "%s: %s", path, w->msg);
    for (size_t i = 0; i < w->n_t && !sparse; i++)
        if (!w->t[i].data && !fill)
            return plm_fail(err, PLM_ERR_INVALID_ARG, "%s: tensor '%s' has no data and no fill callback", path, w->t[i].name);

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    out_file o = {.fd = -1, .cap = 1 << 20};
    o.buf = malloc(o.cap);
    if (!tmp || !o.buf) {
        free(tmp);
        free(o.buf);
        return plm_fail(err, PLM_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);

    plm_status st = PLM_OK;
    o.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool created = o.fd >= 0;
    if (!created) {
        st = plm_fail(err, PLM_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
        goto done;
    }
    uint64_t header = layout(w);
    emit_header(&o, w);
    emit_pad(&o, header, w->alignment);
    st = emit_data(&o, w, path, sparse ? NULL : fill, user, err);
    if (st != PLM_OK) goto done;
    flush(&o);
    if (sparse && !o.errno_) {  /* a hole at the end does not make the file longer by itself */
        const off_t end = lseek(o.fd, 0, SEEK_CUR);
        if (end < 0 || ftruncate(o.fd, end) != 0) o.errno_ = errno;
    }
    if (!o.errno_ && fsync(o.fd) != 0) o.errno_ = errno;
    if (close(o.fd) != 0 && !o.errno_) o.errno_ = errno;
    o.fd = -1;
    if (o.errno_) {
        st = plm_fail(err, PLM_ERR_IO, "%s: writing %s failed: %s", path, tmp, strerror(o.errno_));
        goto done;
    }
    if (rename(tmp, path) != 0) {
        st = plm_fail(err, PLM_ERR_IO, "%s: cannot rename %s to it: %s", path, tmp, strerror(errno));
        goto done;
    }
    sync_dir(path);
done:
    if (o.fd >= 0) close(o.fd);
    if (st != PLM_OK && created) unlink(tmp);
    free(tmp);
    free(o.buf);
    return st;
}

plm_status plm_gguf_writer_write(plm_gguf_writer *w, const char *path, plm_gguf_fill_fn fill, void *user,
                             plm_error *err) {
    return write_file(w, path, fill, user, false, err);
}

plm_status plm_gguf_writer_write_sparse(plm_gguf_writer *w, const char *path, plm_error *err) {
    return write_file(w, path, NULL, NULL, true, err);
}
