/*
 * The dotprod table's integer dots: quants_tmpl.h again, with SDOT, which
 * sums four int8 products into each int32 lane in one instruction.  Compiled
 * with a per-function target attribute; kernels_arm.c hands the table out
 * only when the CPU reports HWCAP_ASIMDDP.
 */
#include "kernels/arm/arm.h"

#if defined(PLM_ARM)

PLM_TARGET_DOTPROD static inline int32x4_t plm_dot_sdot(int32x4_t acc, int8x16_t a, int8x16_t b) {
    return vdotq_s32(acc, a, b);
}

#define PLM_SFX dotprod
#define PLM_FN_ATTR PLM_TARGET_DOTPROD
#define PLM_DOT(acc, a, b) plm_dot_sdot(acc, a, b)
#include "kernels/arm/quants_tmpl.h"
#undef PLM_DOT
#undef PLM_FN_ATTR
#undef PLM_SFX

void plm_arm_fill_dotprod(plm_kernels *t) {
    fill_quants_dotprod(t);
    plm_arm_fill_repacked(t);
}

#else
typedef int plm_arm_dotprod_unused; /* ISO C: no empty translation unit */
#endif
