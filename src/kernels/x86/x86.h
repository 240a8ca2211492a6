/*
 * Internal to src/kernels/x86/: what every x86 kernel file shares.
 *
 * The three x86 tables are three compilation units (kernels_avx2.c,
 * kernels_avxvnni.c, kernels_avx512.c) that include the same kernel files
 * after defining
 *
 *   X86_TARGET  the function attribute naming the instruction set, e.g.
 *               __attribute__((target("avx2,fma,f16c")))
 *   X86_ISA     X86_ISA_AVX2, X86_ISA_AVXVNNI or X86_ISA_AVX512
 *   X86_FN(n)   the name of kernel n in that table: n##_avx2, ...
 *   X86_NAME    the table's name, "avx2", ...
 *   X86_TARGET_VBMI  (AVX-512 only) X86_TARGET plus VBMI, for the entries
 *               the table takes only on CPUs that have it
 *
 * (x86_table.h then includes every kernel file and lists the table.)
 * Everything is static, so the three inclusions never clash, and no global
 * compiler flag is needed: one binary runs on any x86-64 CPU, the caller
 * picking a table after a run-time feature check (cpu_x86.c).  The
 * differences between the instruction sets are `#if X86_ISA ...` in a few
 * small functions (dot_us, the 512-bit kernels), nothing else.
 *
 * As in the ARM tables, a kernel is an always-inline function of a
 * constant plm_type (block32_signed(PLM_TYPE_Q5_0, ...)); the table's
 * entries are one-line functions that fix the type, so each format gets
 * straight-line code for itself.
 *
 * Integer strategy.  x86 multiplies bytes as unsigned x signed
 * (vpmaddubsw, vpdpbusd).  Activations are signed int8 in [-127, 127] (the
 * activation quantizers never produce -128).  Weights are brought to one of
 * two shapes:
 *   - unsigned values (Q4_0/Q5_0 nibbles before the -8/-16 offset, K-quant
 *     codes, Q4_1/Q5_1): multiplied directly; any constant offset c is
 *     removed with c * sum(activations), which Q8_K carries precomputed per
 *     16 elements (bsums) and Q8_0 blocks get from one more dot with c.
 *   - signed values (Q8_0, IQ4_NL/IQ4_XS levels, offset Q4_0/Q5_0 in gemm):
 *     the sign trick |w| * (a * sign(w)) = w * a, with |w| <= 128 unsigned
 *     and a * sign(w) still in [-127, 127].
 * With those bounds a pair of products never saturates vpmaddubsw's int16
 * (2 * 128 * 127 < 32767), so every block total is the exact integer the
 * reference computes; only the float accumulation order differs.
 */
#ifndef PLM_KERNELS_X86_H
#define PLM_KERNELS_X86_H

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn_quant.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/repack.h"

/* Values of X86_ISA (macros: `#if` compares them). */
#define X86_ISA_AVX2 1    /* AVX2 + FMA + F16C: byte dots by vpmaddubsw + vpmaddwd */
#define X86_ISA_AVXVNNI 2 /* + AVX-VNNI: the VEX vpdpbusd on 256-bit registers */
#define X86_ISA_AVX512 3  /* AVX-512 F/BW/VL + VNNI: the EVEX vpdpbusd, 512-bit kernels */

/* 512-bit decode kernels and the panel gemm (AVX-512 BW + VNNI). */
#define X86_ZMM (X86_ISA == X86_ISA_AVX512)

#define X86_INL static inline __attribute__((always_inline)) X86_TARGET

enum {
    /* tokens per row-gemm tile: the register budget is 16 or 32 vectors */
    X86_GEMM_T = X86_ZMM ? 8 : 4,
    /* weight rows per band of the row gemm */
    X86_GEMM_RB = 16,
};

/* ---- loads and horizontal sums ------------------------------------------- */

X86_INL __m256i loadu256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
X86_INL __m128i loadu128(const void *p) { return _mm_loadu_si128((const __m128i *)p); }
X86_INL __m256i load256(const void *p) { return _mm256_load_si256((const __m256i *)p); }
X86_INL void store256(void *p, __m256i v) { _mm256_store_si256((__m256i *)p, v); }
#if X86_ZMM
/* lo in bits 0-255, hi in 256-511. */
X86_INL __m512i zmm_halves(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
#endif

X86_INL float hsum_ps(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

X86_INL double hsum_pd(__m256d v) {
    __m128d x = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(x, _mm_unpackhi_pd(x, x)));
}

X86_INL int hsum_epi32(__m256i v) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_unpackhi_epi64(x, x));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xb1));
    return _mm_cvtsi128_si32(x);
}

X86_INL float hmax_ps(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

X86_INL __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

/* f16 -> f32 with F16C: exact, like plm_fp16_to_fp32. */
X86_INL float h2f(plm_fp16_t h) { return _cvtsh_ss(h); }

X86_INL __m256 load_f16x8(const plm_fp16_t *p) { return _mm256_cvtph_ps(loadu128(p)); }

/* ---- byte dots ------------------------------------------------------------ */

/* acc + (sums of 4 adjacent products u[i] * s[i]), u unsigned, s signed. */
X86_INL __m256i dot_us(__m256i acc, __m256i u, __m256i s) {
#if X86_ISA == X86_ISA_AVXVNNI
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#elif X86_ISA == X86_ISA_AVX512
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    const __m256i p16 = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
#endif
}

/* Signed x signed by the sign trick; wabs = |w| precomputed. */
X86_INL __m256i dot_ss(__m256i acc, __m256i wabs, __m256i w, __m256i a) {
    return dot_us(acc, wabs, _mm256_sign_epi8(a, w));
}

/* ---- unpacking ------------------------------------------------------------ */

/* 16 bytes of packed nibbles -> 32 bytes: low nibbles then high nibbles,
 * i.e. elements 0..31 of a 32-element block in order. */
X86_INL __m256i nibbles32(const uint8_t *qs) {
    /* vbroadcasti128 is a plain load (no shuffle port), and the per-lane
     * shift is an ALU op: cheaper than inserting a shifted copy. */
    const __m256i b = _mm256_broadcastsi128_si256(loadu128(qs));
    const __m256i sh = _mm256_srlv_epi32(b, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    return _mm256_and_si256(sh, _mm256_set1_epi8(0x0f));
}

/* 32 little-endian bits -> 32 bytes, 0xff where the bit is set. */
X86_INL __m256i bits32(const uint8_t *qh) {
    uint32_t v;
    memcpy(&v, qh, 4);
    /* byte j of the result starts as byte j/8 of v, then keeps bit j%8 */
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                             0x0101010101010101LL, 0x0000000000000000LL);
    const __m256i x = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), spread);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(x, sel), sel);
}

/* The 16 IQ4_NL levels in both 128-bit lanes, for vpshufb. */
X86_INL __m256i lut_iq4(void) { return _mm256_broadcastsi128_si256(loadu128(kvalues_iq4nl)); }

/* ---- blocks by type (type is a constant at every call) --------------------- */

X86_INL size_t block_bytes(plm_type type) {
    switch (type) {
    case PLM_TYPE_Q4_0: return sizeof(block_q4_0);
    case PLM_TYPE_Q4_1: return sizeof(block_q4_1);
    case PLM_TYPE_Q5_0: return sizeof(block_q5_0);
    case PLM_TYPE_Q5_1: return sizeof(block_q5_1);
    case PLM_TYPE_Q8_0: return sizeof(block_q8_0);
    case PLM_TYPE_Q8_1: return sizeof(block_q8_1);
    case PLM_TYPE_IQ4_NL: return sizeof(block_iq4_nl);
    case PLM_TYPE_Q2_K: return sizeof(block_q2_K);
    case PLM_TYPE_Q3_K: return sizeof(block_q3_K);
    case PLM_TYPE_Q4_K: return sizeof(block_q4_K);
    case PLM_TYPE_Q5_K: return sizeof(block_q5_K);
    case PLM_TYPE_Q6_K: return sizeof(block_q6_K);
    case PLM_TYPE_IQ4_XS: return sizeof(block_iq4_xs);
    case PLM_TYPE_Q8_K: return sizeof(block_q8_K);
    case PLM_TYPE_IQ2_XXS: return sizeof(block_iq2_xxs);
    case PLM_TYPE_IQ2_XS: return sizeof(block_iq2_xs);
    case PLM_TYPE_IQ2_S: return sizeof(block_iq2_s);
    case PLM_TYPE_IQ3_XXS: return sizeof(block_iq3_xxs);
    case PLM_TYPE_IQ3_S: return sizeof(block_iq3_s);
    case PLM_TYPE_IQ1_S: return sizeof(block_iq1_s);
    case PLM_TYPE_IQ1_M: return sizeof(block_iq1_m);
    case PLM_TYPE_TQ1_0: return sizeof(block_tq1_0);
    case PLM_TYPE_TQ2_0: return sizeof(block_tq2_0);
    case PLM_TYPE_MXFP4: return sizeof(block_mxfp4);
    default: return 0;
    }
}

/* Block (or super-block) b of a row of `type`. */
X86_INL const void *block_at(plm_type type, const void *row, int64_t b) {
    return (const char *)row + (size_t)b * block_bytes(type);
}

X86_INL bool is_k_quant(plm_type type) {
    return type == PLM_TYPE_Q2_K || type == PLM_TYPE_Q3_K || type == PLM_TYPE_Q4_K || type == PLM_TYPE_Q5_K ||
           type == PLM_TYPE_Q6_K || type == PLM_TYPE_IQ4_XS;
}

/* Q4_1/Q5_1: a min per block, paired with Q8_1 activations. */
X86_INL bool has_min32(plm_type type) { return type == PLM_TYPE_Q4_1 || type == PLM_TYPE_Q5_1; }

#endif
