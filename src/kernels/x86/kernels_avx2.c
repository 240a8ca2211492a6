/*
 * The AVX2 table: AVX2 + FMA + F16C, byte dots by vpmaddubsw/vpmaddwd.
 * Compiled with per-function target attributes (no global -m flags) and
 * returned only when the CPU and OS support it; elsewhere (other
 * architectures, other compilers) plm_kernels_avx2() is a NULL stub.
 */
#include "kernels/kernels.h"
#include "kernels/x86/cpu_x86.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#define X86_TARGET __attribute__((target("avx2,fma,f16c")))
#define X86_ISA X86_ISA_AVX2
#define X86_FN(name) name##_avx2
#define X86_NAME "avx2"
#include "kernels/x86/x86_table.h"

const plm_kernels *plm_kernels_avx2(void) { return plm_x86_has_avx2() ? table_avx2() : NULL; }

#else

const plm_kernels *plm_kernels_avx2(void) { return NULL; }

#endif
