/*
 * The AVX-512 table: AVX-512 F/BW/VL + VNNI.  Byte dots use vpdpbusd (one
 * instruction for 32 byte products summed in fours, no int16 saturation
 * step), and the 32 vector registers allow wider gemm tiles.  Needs VNNI:
 * AVX-512 CPUs without it (Skylake-SP) use the AVX2 table.
 * Per-function target attributes; a NULL stub off x86-64.
 */
#include "kernels/kernels.h"
#include "kernels/x86/cpu_x86.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#define X86_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
/* The same plus VBMI, for the entries installed only when the CPU has it. */
#define X86_TARGET_VBMI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))
#define X86_ISA X86_ISA_AVX512
#define X86_FN(name) name##_avx512
#define X86_NAME "avx512"
#include "kernels/x86/x86_table.h"

const plm_kernels *plm_kernels_avx512(void) { return plm_x86_has_avx512() ? table_avx512() : NULL; }

#else

const plm_kernels *plm_kernels_avx512(void) { return NULL; }

#endif
