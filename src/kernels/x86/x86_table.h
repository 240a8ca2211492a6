/*
 * One x86 kernel table: every kernel file, then the table listing them.
 * Included once by each of kernels_avx2.c, kernels_avxvnni.c and
 * kernels_avx512.c after they define X86_TARGET, X86_ISA and X86_FN (see
 * x86.h); X86_FN(table)() returns the complete table.
 */
#include <pthread.h>

#include "kernels/x86/x86.h"

#include "kernels/x86/float_dots.h"
#include "kernels/x86/blocks32.h"
#include "kernels/x86/kquants.h"
#include "kernels/x86/codebooks.h"
#if X86_ZMM
#include "kernels/x86/lookups.h"
#endif
#include "kernels/x86/act_quant.h"
#include "kernels/x86/dequantize.h"
#include "kernels/x86/attention.h"
#include "kernels/x86/attn_tile.h"
#if X86_ZMM
#include "kernels/x86/gemm_panel.h"
#endif
#include "kernels/x86/gemm_rows.h"
#include "kernels/x86/repacked.h"
#if X86_ZMM
#include "kernels/x86/gemm_coarse.h"
#endif
#include "kernels/x86/gemm_exact.h"

/* What the x86 files have SIMD code for; the rest (row quantizers of the
 * weight formats, most dequantizers) comes from the reference table when the
 * complete table is first asked for. */
static const plm_kernels X86_FN(simd) = {
    .attn_f16 = X86_FN(attn_f16),
    .attn_f16_pass = attn_pass,
    .attn_quant = X86_FN(attn_quant),
    .attn_quant_pass = X86_FN(attn_quant_pass),
    .attn_tile = X86_FN(attn_tile),
    .swiglu = X86_FN(swiglu),
    .geglu = X86_FN(geglu),
    .vec_dot = {
        [PLM_TYPE_F32] = X86_FN(vec_dot_f32),
        [PLM_TYPE_F16] = X86_FN(vec_dot_f16),
        [PLM_TYPE_BF16] = X86_FN(vec_dot_bf16),
        [PLM_TYPE_Q4_0] = X86_FN(vec_dot_q4_0),
        [PLM_TYPE_Q4_1] = X86_FN(vec_dot_q4_1),
        [PLM_TYPE_Q5_0] = X86_FN(vec_dot_q5_0),
        [PLM_TYPE_Q5_1] = X86_FN(vec_dot_q5_1),
        [PLM_TYPE_Q8_0] = X86_FN(vec_dot_q8_0),
        [PLM_TYPE_IQ4_NL] = X86_FN(vec_dot_iq4_nl),
        [PLM_TYPE_Q2_K] = X86_FN(vec_dot_q2_K),
        [PLM_TYPE_Q3_K] = X86_FN(vec_dot_q3_K),
        [PLM_TYPE_Q4_K] = X86_FN(vec_dot_q4_K),
        [PLM_TYPE_Q5_K] = X86_FN(vec_dot_q5_K),
        [PLM_TYPE_Q6_K] = X86_FN(vec_dot_q6_K),
        [PLM_TYPE_IQ4_XS] = X86_FN(vec_dot_iq4_xs),
        [PLM_TYPE_IQ2_XXS] = X86_FN(vec_dot_iq2_xxs),
        [PLM_TYPE_IQ2_XS] = X86_FN(vec_dot_iq2_xs),
        [PLM_TYPE_IQ2_S] = X86_FN(vec_dot_iq2_s),
        [PLM_TYPE_IQ3_XXS] = X86_FN(vec_dot_iq3_xxs),
        [PLM_TYPE_IQ3_S] = X86_FN(vec_dot_iq3_s),
        [PLM_TYPE_IQ1_S] = X86_FN(vec_dot_iq1_s),
        [PLM_TYPE_IQ1_M] = X86_FN(vec_dot_iq1_m),
        [PLM_TYPE_TQ1_0] = X86_FN(vec_dot_tq1_0),
        [PLM_TYPE_TQ2_0] = X86_FN(vec_dot_tq2_0),
        [PLM_TYPE_MXFP4] = X86_FN(vec_dot_mxfp4),
    },
    .gemm = {
        [PLM_TYPE_F32] = X86_FN(gemm_f32),
        [PLM_TYPE_F16] = X86_FN(gemm_f16),
        [PLM_TYPE_BF16] = X86_FN(gemm_bf16),
        [PLM_TYPE_Q4_0] = X86_FN(gemm_q4_0),
        [PLM_TYPE_Q4_1] = X86_FN(gemm_q4_1),
        [PLM_TYPE_Q5_0] = X86_FN(gemm_q5_0),
        [PLM_TYPE_Q5_1] = X86_FN(gemm_q5_1),
        [PLM_TYPE_Q8_0] = X86_FN(gemm_q8_0),
        [PLM_TYPE_IQ4_NL] = X86_FN(gemm_iq4_nl),
        [PLM_TYPE_Q2_K] = X86_FN(gemm_q2_K),
        [PLM_TYPE_Q3_K] = X86_FN(gemm_q3_K),
        [PLM_TYPE_Q4_K] = X86_FN(gemm_q4_K),
        [PLM_TYPE_Q5_K] = X86_FN(gemm_q5_K),
        [PLM_TYPE_Q6_K] = X86_FN(gemm_q6_K),
        [PLM_TYPE_IQ4_XS] = X86_FN(gemm_iq4_xs),
        [PLM_TYPE_IQ2_XXS] = X86_FN(gemm_iq2_xxs),
        [PLM_TYPE_IQ2_XS] = X86_FN(gemm_iq2_xs),
        [PLM_TYPE_IQ2_S] = X86_FN(gemm_iq2_s),
        [PLM_TYPE_IQ3_XXS] = X86_FN(gemm_iq3_xxs),
        [PLM_TYPE_IQ3_S] = X86_FN(gemm_iq3_s),
        [PLM_TYPE_IQ1_S] = X86_FN(gemm_iq1_s),
        [PLM_TYPE_IQ1_M] = X86_FN(gemm_iq1_m),
        [PLM_TYPE_TQ1_0] = X86_FN(gemm_tq1_0),
        [PLM_TYPE_TQ2_0] = X86_FN(gemm_tq2_0),
        [PLM_TYPE_MXFP4] = X86_FN(gemm_mxfp4),
    },
    .gemm_repacked = {
        [PLM_TYPE_Q4_0] = X86_FN(gemm_repacked_q4_0),
        [PLM_TYPE_Q5_0] = X86_FN(gemm_repacked_q5_0),
        [PLM_TYPE_Q8_0] = X86_FN(gemm_repacked_q8_0),
        [PLM_TYPE_IQ4_NL] = X86_FN(gemm_repacked_iq4_nl),
        [PLM_TYPE_Q4_K] = X86_FN(gemm_repacked_q4_K),
        [PLM_TYPE_Q5_K] = X86_FN(gemm_repacked_q5_K),
        [PLM_TYPE_Q6_K] = X86_FN(gemm_repacked_q6_K),
        [PLM_TYPE_IQ4_XS] = X86_FN(gemm_repacked_iq4_xs),
    },
    .gemm_exact = {
        [PLM_TYPE_Q4_0] = X86_FN(gemm_exact_q4_0),
        [PLM_TYPE_Q4_1] = X86_FN(gemm_exact_q4_1),
        [PLM_TYPE_Q5_0] = X86_FN(gemm_exact_q5_0),
        [PLM_TYPE_Q5_1] = X86_FN(gemm_exact_q5_1),
        [PLM_TYPE_Q8_0] = X86_FN(gemm_exact_q8_0),
        [PLM_TYPE_IQ4_NL] = X86_FN(gemm_exact_iq4_nl),
        [PLM_TYPE_Q2_K] = X86_FN(gemm_exact_q2_K),
        [PLM_TYPE_Q3_K] = X86_FN(gemm_exact_q3_K),
        [PLM_TYPE_Q4_K] = X86_FN(gemm_exact_q4_K),
        [PLM_TYPE_Q5_K] = X86_FN(gemm_exact_q5_K),
        [PLM_TYPE_Q6_K] = X86_FN(gemm_exact_q6_K),
        [PLM_TYPE_IQ4_XS] = X86_FN(gemm_exact_iq4_xs),
    },
    .quantize_row = {
        [PLM_TYPE_Q8_0] = X86_FN(quantize_row_q8_0),
        [PLM_TYPE_Q8_1] = X86_FN(quantize_row_q8_1),
        [PLM_TYPE_Q8_K] = X86_FN(quantize_row_q8_K),
        [PLM_TYPE_F16] = X86_FN(quantize_row_f16),
    },
#if X86_ZMM
    .gemv = {
        [PLM_TYPE_Q8_0] = X86_FN(gemv_q8_0),
        [PLM_TYPE_Q4_0] = X86_FN(gemv_q4_0),
        [PLM_TYPE_Q5_0] = X86_FN(gemv_q5_0),
        [PLM_TYPE_IQ4_NL] = X86_FN(gemv_iq4_nl),
        [PLM_TYPE_Q2_K] = X86_FN(gemv_q2_K),
        [PLM_TYPE_Q3_K] = X86_FN(gemv_q3_K),
        [PLM_TYPE_Q4_K] = X86_FN(gemv_q4_K),
        [PLM_TYPE_MXFP4] = X86_FN(gemv_mxfp4),
    },
    .gemm_coarse = {
        [PLM_TYPE_Q2_K] = X86_FN(gemm_coarse_q2_K),
        [PLM_TYPE_Q3_K] = X86_FN(gemm_coarse_q3_K),
        [PLM_TYPE_Q4_K] = X86_FN(gemm_coarse_q4_K),
        [PLM_TYPE_Q5_K] = X86_FN(gemm_coarse_q5_K),
        [PLM_TYPE_Q6_K] = X86_FN(gemm_coarse_q6_K),
        [PLM_TYPE_IQ4_XS] = X86_FN(gemm_coarse_iq4_xs),
    },
#endif
    .dequantize_row = {
        [PLM_TYPE_F16] = X86_FN(dequantize_row_f16),
        [PLM_TYPE_Q8_0] = X86_FN(dequantize_row_q8_0),
        [PLM_TYPE_Q4_0] = X86_FN(dequantize_row_q4_0),
    },
};

static plm_kernels X86_FN(complete);
static pthread_once_t X86_FN(once) = PTHREAD_ONCE_INIT;

static void X86_FN(build)(void) {
    X86_FN(complete) = X86_FN(simd);
    X86_FN(complete).name = X86_NAME;
#if X86_ZMM
    lookups_install_vbmi(&X86_FN(complete));
#endif
    plm_kernels_fill_from(&X86_FN(complete), plm_kernels_ref());
}

/* The complete table, built on first use. */
static const plm_kernels *X86_FN(table)(void) {
    pthread_once(&X86_FN(once), X86_FN(build));
    return &X86_FN(complete);
}
