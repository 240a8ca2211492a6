/*
 * Run-time x86 feature detection for the SIMD kernel tables.  A feature is
 * usable only when the CPU reports it (cpuid) AND the OS saves the register
 * state it needs across context switches (xgetbv): a CPU with AVX-512 under
 * an OS that does not enable ZMM state must not run AVX-512 code.
 */
#ifndef PLM_KERNELS_CPU_X86_H
#define PLM_KERNELS_CPU_X86_H

#include <stdbool.h>

/* AVX2 + FMA + F16C, with YMM state enabled by the OS. */
bool plm_x86_has_avx2(void);
/* AVX2 set plus AVX-512 F/BW/VL/VNNI, with ZMM/opmask state enabled. */
bool plm_x86_has_avx512(void);
/* AVX2 set plus AVX-VNNI (VEX-encoded vpdpbusd on YMM). */
bool plm_x86_has_avxvnni(void);

#endif
