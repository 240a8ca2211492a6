/*
 * The AVX2 table: AVX2 + FMA + F16C, byte dots by vpmaddubsw/vpmaddwd.
 * Compiled with per-function target attributes (no global -m flags) and
 * returned only when the CPU and OS support it; elsewhere (other
 * architectures, other compilers) plm_kernels_avx2() is a NULL stub.
 */
#include "kernels/kernels.h"
#include "kernels/x86/cpu_x86.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#define X86_TGT __attribute__((target("avx2,fma,f16c")))
#define X86_VNNI 0
#define X86_ZMM 0
#define X86_GEMM_T 4
#define X86_NAME "avx2"
#include "kernels/x86/x86_body.h"

const plm_kernels *plm_kernels_avx2(void) { return plm_x86_has_avx2() ? x86_complete() : NULL; }

#else

const plm_kernels *plm_kernels_avx2(void) { return NULL; }

#endif
