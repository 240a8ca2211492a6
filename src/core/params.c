/* Versioned parameter structs: old and new callers' sizes. */
#include "core/params.h"

#include <string.h>

#include "core/error.h"

plm_status plm_params_take(void *dst, size_t size, const void *src, const char *what, plm_error *err) {
    if (!src) return PLM_OK;
    size_t given;
    memcpy(&given, src, sizeof given);
    if (given == 0) given = size;
    if (given < sizeof given)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "%s.struct_size is %zu: start from its *_default_params()", what,
                        given);
    /* A newer caller's fields this library does not know must be unset. */
    const unsigned char *extra = (const unsigned char *)src;
    for (size_t i = size; i < given; i++)
        if (extra[i])
            return plm_fail(err, PLM_ERR_UNSUPPORTED,
                            "%s sets a field at byte %zu that this library (pocketlm %s, %zu-byte struct) does not "
                            "know: the program was built against a newer pocketlm.h",
                            what, i, PLM_VERSION, size);
    memcpy(dst, src, given < size ? given : size);
    memcpy(dst, &size, sizeof size);
    return PLM_OK;
}

void plm_params_give(void *dst, size_t caller_size, const void *full, size_t size) {
    if (!dst || caller_size < sizeof(size_t)) return;
    memcpy(dst, full, caller_size < size ? caller_size : size);
    if (caller_size > size) memset((unsigned char *)dst + size, 0, caller_size - size);
    memcpy(dst, &caller_size, sizeof caller_size);
}
