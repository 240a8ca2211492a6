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

#define X86_TGT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define X86_VNNI 1
#define X86_ZMM 1
#define X86_GEMM_T 8
#define X86_NAME "avx512"
#include "kernels/x86/x86_body.h"

const plm_kernels *plm_kernels_avx512(void) { return plm_x86_has_avx512() ? x86_complete() : NULL; }

#else

const plm_kernels *plm_kernels_avx512(void) { return NULL; }

#endif
