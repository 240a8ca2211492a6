#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

plm_status plm_fail(plm_error *err, plm_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

void plm_error_clear(plm_error *err) {
    if (err) {
        err->code = PLM_OK;
        err->message[0] = '\0';
    }
}

const char *plm_status_name(plm_status s) {
    switch (s) {
    case PLM_OK: return "ok";
    case PLM_ERR_IO: return "i/o error";
    case PLM_ERR_FORMAT: return "format error";
    case PLM_ERR_UNSUPPORTED: return "unsupported";
    case PLM_ERR_NOMEM: return "out of memory";
    case PLM_ERR_INVALID_ARG: return "invalid argument";
    case PLM_ERR_CONTEXT_FULL: return "context full";
    case PLM_ERR_ABORTED: return "aborted";
    }
    return "unknown error";
}

const char *plm_version(void) { return PLM_VERSION; }

void plm_free(void *p) { free(p); }
