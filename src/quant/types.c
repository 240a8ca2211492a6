#include "quant/types.h"

#include "quant/quant.h"

#include <string.h>
#include <strings.h>

/* id, name, elements and bytes a block, supported, vec_dot partner, the
 * reference quantizer and dequantizer of a row (NULL: none) */
#define T(id, nm, bs, ts, ok, vd, q, dq) [id] = {nm, bs, ts, ok, vd, q, dq}

static const plm_type_info type_table[PLM_TYPE_COUNT] = {
    T(PLM_TYPE_F32, "F32", 1, 4, true, PLM_TYPE_F32,
      plm_quantize_row_f32, plm_dequantize_row_f32),
    T(PLM_TYPE_F16, "F16", 1, 2, true, PLM_TYPE_F32,
      plm_quantize_row_f16, plm_dequantize_row_f16),
    T(PLM_TYPE_BF16, "BF16", 1, 2, true, PLM_TYPE_F32,
      plm_quantize_row_bf16, plm_dequantize_row_bf16),
    T(PLM_TYPE_Q4_0, "Q4_0", 32, 18, true, PLM_TYPE_Q8_0,
      plm_quantize_row_q4_0, plm_dequantize_row_q4_0),
    T(PLM_TYPE_Q4_1, "Q4_1", 32, 20, true, PLM_TYPE_Q8_1,
      plm_quantize_row_q4_1, plm_dequantize_row_q4_1),
    T(PLM_TYPE_Q5_0, "Q5_0", 32, 22, true, PLM_TYPE_Q8_0,
      plm_quantize_row_q5_0, plm_dequantize_row_q5_0),
    T(PLM_TYPE_Q5_1, "Q5_1", 32, 24, true, PLM_TYPE_Q8_1,
      plm_quantize_row_q5_1, plm_dequantize_row_q5_1),
    T(PLM_TYPE_Q8_0, "Q8_0", 32, 34, true, PLM_TYPE_Q8_0,
      plm_quantize_row_q8_0, plm_dequantize_row_q8_0),
    T(PLM_TYPE_Q8_1, "Q8_1", 32, 36, false, PLM_TYPE_Q8_1,
      plm_quantize_row_q8_1, plm_dequantize_row_q8_1),
    T(PLM_TYPE_Q2_K, "Q2_K", 256, 84, true, PLM_TYPE_Q8_K,
      plm_quantize_row_q2_K, plm_dequantize_row_q2_K),
    T(PLM_TYPE_Q3_K, "Q3_K", 256, 110, true, PLM_TYPE_Q8_K,
      plm_quantize_row_q3_K, plm_dequantize_row_q3_K),
    T(PLM_TYPE_Q4_K, "Q4_K", 256, 144, true, PLM_TYPE_Q8_K,
      plm_quantize_row_q4_K, plm_dequantize_row_q4_K),
    T(PLM_TYPE_Q5_K, "Q5_K", 256, 176, true, PLM_TYPE_Q8_K,
      plm_quantize_row_q5_K, plm_dequantize_row_q5_K),
    T(PLM_TYPE_Q6_K, "Q6_K", 256, 210, true, PLM_TYPE_Q8_K,
      plm_quantize_row_q6_K, plm_dequantize_row_q6_K),
    T(PLM_TYPE_Q8_K, "Q8_K", 256, 292, false, PLM_TYPE_Q8_K,
      plm_quantize_row_q8_K, plm_dequantize_row_q8_K),
    T(PLM_TYPE_IQ2_XXS, "IQ2_XXS", 256, 66, true, PLM_TYPE_Q8_K,
      NULL, plm_dequantize_row_iq2_xxs),
    T(PLM_TYPE_IQ2_XS, "IQ2_XS", 256, 74, true, PLM_TYPE_Q8_K,
      NULL, plm_dequantize_row_iq2_xs),
    T(PLM_TYPE_IQ3_XXS, "IQ3_XXS", 256, 98, true, PLM_TYPE_Q8_K,
      plm_quantize_row_iq3_xxs, plm_dequantize_row_iq3_xxs),
    T(PLM_TYPE_IQ1_S, "IQ1_S", 256, 50, true, PLM_TYPE_Q8_K,
      NULL, plm_dequantize_row_iq1_s),
    T(PLM_TYPE_IQ4_NL, "IQ4_NL", 32, 18, true, PLM_TYPE_Q8_0,
      plm_quantize_row_iq4_nl, plm_dequantize_row_iq4_nl),
    T(PLM_TYPE_IQ3_S, "IQ3_S", 256, 110, true, PLM_TYPE_Q8_K,
      plm_quantize_row_iq3_s, plm_dequantize_row_iq3_s),
    T(PLM_TYPE_IQ2_S, "IQ2_S", 256, 82, true, PLM_TYPE_Q8_K,
      plm_quantize_row_iq2_s, plm_dequantize_row_iq2_s),
    T(PLM_TYPE_IQ4_XS, "IQ4_XS", 256, 136, true, PLM_TYPE_Q8_K,
      plm_quantize_row_iq4_xs, plm_dequantize_row_iq4_xs),
    T(PLM_TYPE_I8, "I8", 1, 1, false, PLM_TYPE_I8, NULL, NULL),
    T(PLM_TYPE_I16, "I16", 1, 2, false, PLM_TYPE_I16, NULL, NULL),
    T(PLM_TYPE_I32, "I32", 1, 4, false, PLM_TYPE_I32, NULL, NULL),
    T(PLM_TYPE_I64, "I64", 1, 8, false, PLM_TYPE_I64, NULL, NULL),
    T(PLM_TYPE_F64, "F64", 1, 8, false, PLM_TYPE_F64, NULL, NULL),
    T(PLM_TYPE_IQ1_M, "IQ1_M", 256, 56, true, PLM_TYPE_Q8_K,
      plm_quantize_row_iq1_m, plm_dequantize_row_iq1_m),
    T(PLM_TYPE_TQ1_0, "TQ1_0", 256, 54, true, PLM_TYPE_Q8_K,
      plm_quantize_row_tq1_0, plm_dequantize_row_tq1_0),
    T(PLM_TYPE_TQ2_0, "TQ2_0", 256, 66, true, PLM_TYPE_Q8_K,
      plm_quantize_row_tq2_0, plm_dequantize_row_tq2_0),
    T(PLM_TYPE_MXFP4, "MXFP4", 32, 17, true, PLM_TYPE_Q8_0,
      plm_quantize_row_mxfp4, plm_dequantize_row_mxfp4),
};

const plm_type_info *plm_type_info_get(uint32_t type) {
    if (type >= PLM_TYPE_COUNT || type_table[type].name == NULL) return NULL;
    return &type_table[type];
}

plm_quantize_fn plm_get_quantize(plm_type type) {
    const plm_type_info *ti = plm_type_info_get(type);
    return ti ? ti->quantize_row : NULL;
}

plm_dequantize_fn plm_get_dequantize(plm_type type) {
    const plm_type_info *ti = plm_type_info_get(type);
    return ti ? ti->dequantize_row : NULL;
}

const char *plm_type_name(uint32_t type) {
    const plm_type_info *ti = plm_type_info_get(type);
    return ti ? ti->name : "?";
}

int plm_type_from_name(const char *name) {
    for (int i = 0; i < PLM_TYPE_COUNT; i++)
        if (type_table[i].name && strcasecmp(type_table[i].name, name) == 0) return i;
    return -1;
}

size_t plm_row_size(plm_type type, int64_t n) {
    const plm_type_info *ti = plm_type_info_get(type);
    if (!ti || n < 0 || n % ti->block_size) return 0;
    return (size_t)(n / ti->block_size) * ti->type_size;
}
