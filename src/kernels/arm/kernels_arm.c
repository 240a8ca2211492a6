/*
 * The ARM64 kernel tables and their run-time feature checks.
 *
 *   neon     ARMv8-A Advanced SIMD, present on every aarch64 CPU that Linux
 *            runs on (HWCAP_ASIMD)
 *   dotprod  + SDOT (HWCAP_ASIMDDP; ARMv8.2 optional, v8.4 mandatory)
 *   i8mm     + SMMLA (HWCAP2_I8MM; ARMv8.6), used for the tiled gemm
 *
 * On other architectures this file compiles to getters that return NULL.
 */
#include "kernels/arm/arm.h"

#if defined(PLM_ARM)

#include <pthread.h>

#if defined(__APPLE__)
#include "core/os_apple.h"
#endif
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#endif

enum { FEAT_NEON = 1, FEAT_DOTPROD = 2, FEAT_I8MM = 4 };

static int cpu_features(void) {
#if defined(__linux__)
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    int f = 0;
    if (hw & HWCAP_ASIMD) f |= FEAT_NEON;
    if ((f & FEAT_NEON) && (hw & HWCAP_ASIMDDP)) f |= FEAT_DOTPROD;
    /* every i8mm CPU has sdot too (v8.6 implies v8.4); the i8mm table relies on it */
    if ((f & FEAT_DOTPROD) && (hw2 & HWCAP2_I8MM)) f |= FEAT_I8MM;
    return f;
#elif defined(__APPLE__)
    int f = FEAT_NEON;
    if (plm_apple_sysctl_int("hw.optional.arm.FEAT_DotProd") > 0) f |= FEAT_DOTPROD;
    if ((f & FEAT_DOTPROD) && plm_apple_sysctl_int("hw.optional.arm.FEAT_I8MM") > 0) f |= FEAT_I8MM;
    return f;
#else
    return FEAT_NEON;  /* NEON is part of the AArch64 base; the rest unknown */
#endif
}

static plm_kernels tbl_neon, tbl_dotprod, tbl_i8mm;
static int features;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Each level copies the one below and overwrites what it has code for.  The
 * dotprod and i8mm tables are filled even when the CPU lacks them; they are
 * only handed out after the feature check. */
static void build_tables(void) {
    features = cpu_features();
    tbl_neon = *plm_kernels_ref();
    tbl_neon.name = "neon";
    plm_arm_fill_neon(&tbl_neon);

    tbl_dotprod = tbl_neon;
    tbl_dotprod.name = "dotprod";
    plm_arm_fill_dotprod(&tbl_dotprod);

    tbl_i8mm = tbl_dotprod;
    tbl_i8mm.name = "i8mm";
    plm_arm_fill_i8mm(&tbl_i8mm);
}

static const plm_kernels *table_if(int feature, const plm_kernels *t) {
    pthread_once(&once, build_tables);
    return (features & feature) ? t : NULL;
}

const plm_kernels *plm_kernels_neon(void) { return table_if(FEAT_NEON, &tbl_neon); }
const plm_kernels *plm_kernels_dotprod(void) { return table_if(FEAT_DOTPROD, &tbl_dotprod); }
const plm_kernels *plm_kernels_i8mm(void) { return table_if(FEAT_I8MM, &tbl_i8mm); }

#else /* not aarch64: no ARM tables */

#include "kernels/kernels.h"

const plm_kernels *plm_kernels_neon(void) { return NULL; }
const plm_kernels *plm_kernels_dotprod(void) { return NULL; }
const plm_kernels *plm_kernels_i8mm(void) { return NULL; }

#endif
