/* Error reporting shared by every module: fill a plm_error, return its code. */
#ifndef PLM_CORE_ERROR_H
#define PLM_CORE_ERROR_H

#include "pocketlm.h"

#if defined(__GNUC__)
#define PLM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PLM_PRINTF(a, b)
#endif

/* Sets err (if non-NULL) to `code` and the formatted message; returns code. */
plm_status plm_fail(plm_error *err, plm_status code, const char *fmt, ...) PLM_PRINTF(3, 4);

/* Clears err to PLM_OK with an empty message. */
void plm_error_clear(plm_error *err);

#endif
