/*
 * ggml tensor types: ids as stored in GGUF, block sizes and byte sizes.
 * Layouts are ggml's, bit for bit (see the block structs in blocks.h).
 */
#ifndef PLM_QUANT_TYPES_H
#define PLM_QUANT_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    PLM_TYPE_F32 = 0,
    PLM_TYPE_F16 = 1,
    PLM_TYPE_Q4_0 = 2,
    PLM_TYPE_Q4_1 = 3,
    PLM_TYPE_Q5_0 = 6,
    PLM_TYPE_Q5_1 = 7,
    PLM_TYPE_Q8_0 = 8,
    PLM_TYPE_Q8_1 = 9,
    PLM_TYPE_Q2_K = 10,
    PLM_TYPE_Q3_K = 11,
    PLM_TYPE_Q4_K = 12,
    PLM_TYPE_Q5_K = 13,
    PLM_TYPE_Q6_K = 14,
    PLM_TYPE_Q8_K = 15,
    PLM_TYPE_IQ2_XXS = 16,
    PLM_TYPE_IQ2_XS = 17,
    PLM_TYPE_IQ3_XXS = 18,
    PLM_TYPE_IQ1_S = 19,
    PLM_TYPE_IQ4_NL = 20,
    PLM_TYPE_IQ3_S = 21,
    PLM_TYPE_IQ2_S = 22,
    PLM_TYPE_IQ4_XS = 23,
    PLM_TYPE_I8 = 24,
    PLM_TYPE_I16 = 25,
    PLM_TYPE_I32 = 26,
    PLM_TYPE_I64 = 27,
    PLM_TYPE_F64 = 28,
    PLM_TYPE_IQ1_M = 29,
    PLM_TYPE_BF16 = 30,
    PLM_TYPE_TQ1_0 = 34,
    PLM_TYPE_TQ2_0 = 35,
    PLM_TYPE_MXFP4 = 39,
    PLM_TYPE_COUNT = 40
} plm_type;

/* Row conversions (quant.h): n elements, a whole number of blocks. */
typedef void (*plm_dequantize_fn)(const void *x, float *y, int64_t n);
typedef void (*plm_quantize_fn)(const float *x, void *y, int64_t n);

/* Everything that is a property of a format, in one table (types.c): a new
 * format is one line there, and every dispatch by type reads it. */
typedef struct plm_type_info {
    const char *name;     /* "Q4_K", as ggml prints it; NULL for unused ids */
    uint32_t block_size;  /* elements per block */
    uint32_t type_size;   /* bytes per block */
    bool supported;       /* we can dequantize and dot it */
    plm_type vec_dot_type;/* activation format its dot product consumes */
    plm_quantize_fn quantize_row;     /* reference quantizer (llama.cpp's, bit for bit); NULL: none */
    plm_dequantize_fn dequantize_row; /* reference dequantizer; NULL: none */
} plm_type_info;

/* NULL when `type` is not a known ggml type id. */
const plm_type_info *plm_type_info_get(uint32_t type);
const char *plm_type_name(uint32_t type);  /* "?" when unknown */
/* Parses "q4_k", "Q8_0", "f16"... ; returns -1 when unknown. */
int plm_type_from_name(const char *name);
/* Bytes of a row of n elements; 0 if n is not a whole number of blocks. */
size_t plm_row_size(plm_type type, int64_t n);

#endif
