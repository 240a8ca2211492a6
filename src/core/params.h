/* Versioned parameter structs (the rule is in pocketlm.h, "parameter
 * structs"): reading a caller's struct of any release's size. */
#ifndef PLM_CORE_PARAMS_H
#define PLM_CORE_PARAMS_H

#include <stddef.h>

#include "pocketlm.h"

/* `dst` holds the defaults of this library's struct of `size` bytes, which
 * begins with size_t struct_size, as does `src` (may be NULL: defaults).
 * Copies what src has of it: its first struct_size bytes (0 = `size`);
 * refuses a larger src whose extra bytes are not zero.  dst->struct_size
 * ends up `size`.  `what` names the struct in the message. */
plm_status plm_params_take(void *dst, size_t size, const void *src, const char *what, plm_error *err);

/* *_params_init: the defaults in `full` (size bytes, struct_size = size)
 * written to the caller's struct of `caller_size` bytes. */
void plm_params_give(void *dst, size_t caller_size, const void *full, size_t size);

#endif
