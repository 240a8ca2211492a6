/*
 * cpuid/xgetbv probing (see cpu_x86.h).  Nothing is cached: the answers are
 * cheap enough for the few calls made when a context picks its kernels, and
 * no mutable global state means no initialisation race between threads.
 * On other architectures every probe answers false.
 */
#include "kernels/x86/cpu_x86.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <cpuid.h>
#include <stdint.h>

/* cpuid leaf 1, ECX */
#define CPUID1_FMA (1u << 12)
#define CPUID1_OSXSAVE (1u << 27)
#define CPUID1_AVX (1u << 28)
#define CPUID1_F16C (1u << 29)
/* cpuid leaf 7 subleaf 0, EBX / ECX */
#define CPUID7_AVX2 (1u << 5)
#define CPUID7_AVX512F (1u << 16)
#define CPUID7_AVX512BW (1u << 30)
#define CPUID7_AVX512VL (1u << 31)
#define CPUID7C_AVX512VBMI (1u << 1)
#define CPUID7C_AVX512VNNI (1u << 11)
/* cpuid leaf 7 subleaf 1, EAX */
#define CPUID71A_AVXVNNI (1u << 4)
/* XCR0: state components the OS saves */
#define XCR0_SSE_AVX 0x06u     /* XMM and upper YMM halves */
#define XCR0_AVX512 0xe0u      /* opmask, upper ZMM0-15 halves, ZMM16-31 */

/* xgetbv by opcode bytes' mnemonic, so no -mxsave is needed. */
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

typedef struct {
    uint32_t ecx1, ebx7, ecx7, eax71;
    uint64_t xcr0;
} x86_caps;

static x86_caps probe(void) {
    x86_caps c = {0, 0, 0, 0, 0};
    unsigned a, b, cx, d;
    if (!__get_cpuid(1, &a, &b, &cx, &d)) return c;
    c.ecx1 = cx;
    if (__get_cpuid_max(0, (unsigned *)0) >= 7 && __get_cpuid_count(7, 0, &a, &b, &cx, &d)) {
        c.ebx7 = b;
        c.ecx7 = cx;
        if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &cx, &d)) c.eax71 = a;
    }
    if (c.ecx1 & CPUID1_OSXSAVE) c.xcr0 = xgetbv0();
    return c;
}

static bool avx2_ok(const x86_caps *c) {
    const uint32_t need1 = CPUID1_FMA | CPUID1_OSXSAVE | CPUID1_AVX | CPUID1_F16C;
    return (c->ecx1 & need1) == need1 && (c->ebx7 & CPUID7_AVX2) &&
           (c->xcr0 & XCR0_SSE_AVX) == XCR0_SSE_AVX;
}

bool plm_x86_has_avx2(void) {
    const x86_caps c = probe();
    return avx2_ok(&c);
}

static bool avx512_ok(const x86_caps *c) {
    const uint32_t need7 = CPUID7_AVX512F | CPUID7_AVX512BW | CPUID7_AVX512VL;
    return avx2_ok(c) && (c->ebx7 & need7) == need7 && (c->ecx7 & CPUID7C_AVX512VNNI) &&
           (c->xcr0 & XCR0_AVX512) == XCR0_AVX512;
}

bool plm_x86_has_avx512(void) {
    const x86_caps c = probe();
    return avx512_ok(&c);
}

bool plm_x86_has_avx512vbmi(void) {
    const x86_caps c = probe();
    return avx512_ok(&c) && (c.ecx7 & CPUID7C_AVX512VBMI);
}

bool plm_x86_has_avxvnni(void) {
    const x86_caps c = probe();
    return avx2_ok(&c) && (c.eax71 & CPUID71A_AVXVNNI);
}

#else

bool plm_x86_has_avx2(void) { return false; }
bool plm_x86_has_avx512(void) { return false; }
bool plm_x86_has_avx512vbmi(void) { return false; }
bool plm_x86_has_avxvnni(void) { return false; }

#endif
