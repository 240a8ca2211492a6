/*
 * ggml's rounding helper for the quantizers, shared by quantize.c and
 * quantize_k.c so both round exactly as ggml does.
 */
#ifndef PLM_QUANT_ROUNDING_H
#define PLM_QUANT_ROUNDING_H

#include <stdint.h>
#include <string.h>

/* Round half to even for |v| < 2^22 by letting the FPU round v + 1.5*2^23
 * to an integer-spaced float, as ggml's nearest_int does.  Larger or
 * non-finite v give some int (ggml asserts instead), never undefined
 * behaviour.  Branch-free bit arithmetic, so loops over it vectorize. */
static inline int plm_nearest_int(float v) {
    const float big = v + 12582912.0f;
    uint32_t u;
    memcpy(&u, &big, sizeof u);
    return (int)(u & 0x007fffffu) - 0x00400000;
}

#endif
