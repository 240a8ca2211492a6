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
/* The AVX-512 set plus VBMI (byte permutes: vpermb, vpermt2b).  The
 * AVX-512 table uses it for a few entries when present (x86_table.h). */
bool plm_x86_has_avx512vbmi(void);
/* AVX2 set plus AVX-VNNI (VEX-encoded vpdpbusd on YMM). */
bool plm_x86_has_avxvnni(void);

#endif
