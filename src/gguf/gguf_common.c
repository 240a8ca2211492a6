/* Type names and sizes used by both the GGUF reader and writer. */
#include "gguf/gguf_internal.h"

#include <string.h>

#include "quant/types.h"

static const struct {
    const char *name;
    size_t size;
} value_types[PLM_GGUF_TYPE_COUNT] = {
    [PLM_GGUF_TYPE_UINT8] = {"u8", 1},    [PLM_GGUF_TYPE_INT8] = {"i8", 1},
    [PLM_GGUF_TYPE_UINT16] = {"u16", 2},  [PLM_GGUF_TYPE_INT16] = {"i16", 2},
    [PLM_GGUF_TYPE_UINT32] = {"u32", 4},  [PLM_GGUF_TYPE_INT32] = {"i32", 4},
    [PLM_GGUF_TYPE_FLOAT32] = {"f32", 4}, [PLM_GGUF_TYPE_BOOL] = {"bool", 1},
    [PLM_GGUF_TYPE_STRING] = {"str", 0},  [PLM_GGUF_TYPE_ARRAY] = {"arr", 0},
    [PLM_GGUF_TYPE_UINT64] = {"u64", 8},  [PLM_GGUF_TYPE_INT64] = {"i64", 8},
    [PLM_GGUF_TYPE_FLOAT64] = {"f64", 8},
};

const char *plm_gguf_type_name(plm_gguf_type t) {
    return (unsigned)t < PLM_GGUF_TYPE_COUNT ? value_types[t].name : "?";
}

size_t plm_gguf_scalar_size(uint32_t t) {
    return t < PLM_GGUF_TYPE_COUNT ? value_types[t].size : 0;
}

const char *plm_gguf_tensor_type_name(uint32_t type) {
    return plm_type_name(type);
}

char *plm_gguf_str_copy(plm_gguf_str s, char *buf, size_t size) {
    if (size == 0) return buf;
    size_t n = s.len < size - 1 ? (size_t)s.len : size - 1;
    if (n) memcpy(buf, s.ptr, n);
    buf[n] = '\0';
    return buf;
}

bool plm_gguf_str_eq(plm_gguf_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && (n == 0 || memcmp(s.ptr, cstr, n) == 0);
}
