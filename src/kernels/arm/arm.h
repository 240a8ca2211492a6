/*
 * Internal to src/kernels/arm/: how the three ARM tables are put together.
 *
 * Each table starts as a copy of the one below it (ref -> neon -> dotprod ->
 * i8mm), so it is complete by construction, and a fill function overwrites
 * the entries that have a faster version on that level.  Code for an
 * optional CPU feature is compiled with a per-function target attribute, not
 * a global -march flag, so one binary runs on every ARMv8-A CPU and
 * kernels_arm.c checks the feature at run time before handing out the table.
 *
 * Everything here exists only when compiling for aarch64; on other
 * architectures the getters in kernels_arm.c return NULL.
 */
#ifndef PLM_KERNELS_ARM_H
#define PLM_KERNELS_ARM_H

#if defined(__aarch64__)
#define PLM_ARM 1

#include <arm_neon.h>
#include <string.h>

#include "kernels/kernels.h"
#include "quant/blocks.h"

/* Target attributes for the optional features.  gcc's arm_neon.h defines
 * vdotq_s32 under "arch=armv8.2-a+dotprod" and vmmlaq_s32 under
 * "arch=armv8.2-a+i8mm", and only inlines them into functions whose target
 * includes that, so the attribute names the same base architecture (every
 * CPU with dotprod implements ARMv8.2).  clang takes bare feature names. */
#if defined(__clang__)
#define PLM_TARGET_DOTPROD __attribute__((target("dotprod")))
#define PLM_TARGET_I8MM __attribute__((target("dotprod,i8mm")))
#else
#define PLM_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#define PLM_TARGET_I8MM __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))
#endif

/* The kernels' helpers: always inlined, so a constant plm_type argument
 * gives each caller straight-line code for its format. */
#define PLM_ARM_INL static inline __attribute__((always_inline))

/* f16 -> f32 with the FCVT instruction (exact, like plm_fp16_to_fp32). */
static inline float plm_arm_h2f(plm_fp16_t h) {
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

/* attention.c: the table's attn_f16, attn_f16_pass, attn_quant, attn_quant_pass and swiglu entries. */
void plm_arm_attn_f16(float *o, const uint16_t *q, int n_q, const void *k, const void *v, size_t ks, size_t vs,
                      int n_keys, int hd, float scale, bool flash);
void plm_arm_attn_f16_pass(float *o, const uint16_t *q, int n_q, const char *k, const char *v, size_t ks, size_t vs,
                           int n_keys, int hd, float scale, plm_softmax_run *run, int pass, float *kept);
void plm_arm_swiglu(float *g, const float *u, int n);
void plm_arm_attn_quant(const plm_kernels *kt, float *o, const float *q, int n_q, plm_type type_k, const void *k,
                        size_t ks, plm_type type_v, const void *v, size_t vs, int n_keys, int hd, float scale,
                        bool flash);
void plm_arm_attn_quant_pass(const plm_kernels *kt, float *o, const void *q, int n_q, plm_type type_k, const char *k,
                             size_t ks, plm_type type_v, const char *v, size_t vs, int n_keys, int hd, float scale,
                             plm_softmax_run *run, int pass, float *kept);

/* Overwrite the entries that level has code for. */
void plm_arm_fill_neon(plm_kernels *t);      /* float formats, quantizers, NEON int dots */
void plm_arm_fill_dotprod(plm_kernels *t);   /* the integer dots again, with sdot */
void plm_arm_fill_i8mm(plm_kernels *t);      /* smmla gemm */
void plm_arm_fill_repacked(plm_kernels *t);  /* repacked.c: sdot kernels of the interleaved layout */
void plm_arm_fill_repacked_i8mm(plm_kernels *t); /* repacked_i8mm.c: their smmla prefill */

#endif /* __aarch64__ */
#endif
