/*
 * The AVX-VNNI table: the AVX2 set plus the VEX-encoded vpdpbusd of CPUs
 * that have VNNI without AVX-512 (Intel Alder Lake and later client cores,
 * Gracemont E-cores).  Same kernels as the AVX2 table, except byte dots are
 * one vpdpbusd instead of vpmaddubsw + vpmaddwd.  Per-function target
 * attributes; a NULL stub off x86-64.
 *
 * This machine (AVX-512) cannot run it, nor can qemu 7.2; its code paths are
 * the AVX-512 table's 256-bit ones with the VEX form of the same
 * instruction, and test_kernels checks it wherever the CPU has the feature.
 */
#include "kernels/kernels.h"
#include "kernels/x86/cpu_x86.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#define X86_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define X86_ISA X86_ISA_AVXVNNI
#define X86_FN(name) name##_avxvnni
#define X86_NAME "avxvnni"
#include "kernels/x86/x86_table.h"

const plm_kernels *plm_kernels_avxvnni(void) { return plm_x86_has_avxvnni() ? table_avxvnni() : NULL; }

#else

const plm_kernels *plm_kernels_avxvnni(void) { return NULL; }

#endif
