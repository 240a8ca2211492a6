/*
 * The x86 SIMD kernels, written once and compiled twice: kernels_avx2.c and
 * kernels_avx512.c include this file after defining
 *
 *   X86_TGT     the function attribute naming the instruction set, e.g.
 *               __attribute__((target("avx2,fma,f16c")))
 *   X86_VNNI    2 to sum byte products with the VEX vpdpbusd (AVX-VNNI),
 *               1 with the EVEX one (AVX-512 VNNI on
 *               256-bit registers), 0 for the AVX2 maddubs/madd pair
 *   X86_ZMM     1 to add the 512-bit decode kernels (needs AVX-512 BW+VNNI)
 *   X86_GEMM_T  tokens per gemm tile (register budget: 16 or 32 vectors)
 *   X86_NAME    the table name
 *
 * Everything here is static, so the two inclusions never clash, and no
 * global compiler flag is needed: one binary runs on any x86-64 CPU, the
 * caller picking a table after a run-time feature check (cpu_x86.c).
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
 *
 * gemm (prefill) tiles: X86_GEMM_T tokens share each decoded weight block,
 * held in registers (32-element formats) or in a small stack buffer
 * (K-quants, 256 decoded bytes plus scale vectors).  Rows are walked in
 * bands of GEMM_RB so a band of weights stays in L1/L2 while every token
 * tile passes over it.  No heap; the only static state is the complete
 * table, built once (pthread_once) from x86_simd and the reference.
 */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "kernels/ref.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#define TGT X86_TGT
#define INL static inline __attribute__((always_inline)) X86_TGT
#define GEMM_T X86_GEMM_T
#define GEMM_RB 16

/* ---- small helpers ------------------------------------------------------- */

#define LOADU(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define LOADU128(p) _mm_loadu_si128((const __m128i *)(const void *)(p))

INL float hsum_ps(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

INL int hsum_epi32(__m256i v) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_unpackhi_epi64(x, x));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xb1));
    return _mm_cvtsi128_si32(x);
}

/* f16 -> f32 with F16C: exact, like plm_fp16_to_fp32. */
INL float h2f(plm_fp16_t h) { return _cvtsh_ss(h); }

/* acc + (sums of 4 adjacent products u[i] * s[i]), u unsigned, s signed. */
INL __m256i dot_us(__m256i acc, __m256i u, __m256i s) {
#if X86_VNNI == 2
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#elif X86_VNNI
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    const __m256i p16 = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
#endif
}

/* Signed x signed by the sign trick; wabs = |w| precomputed. */
INL __m256i dot_ss(__m256i acc, __m256i wabs, __m256i w, __m256i a) {
    return dot_us(acc, wabs, _mm256_sign_epi8(a, w));
}

/* 16 bytes of packed nibbles -> 32 bytes: low nibbles then high nibbles,
 * i.e. elements 0..31 of a 32-element block in order. */
INL __m256i nibbles32(const uint8_t *qs) {
    /* vbroadcasti128 is a plain load (no shuffle port), and the per-lane
     * shift is an ALU op: cheaper than inserting a shifted copy. */
    const __m256i b = _mm256_broadcastsi128_si256(LOADU128(qs));
    const __m256i sh = _mm256_srlv_epi32(b, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    return _mm256_and_si256(sh, _mm256_set1_epi8(0x0f));
}

/* 32 little-endian bits -> 32 bytes, 0xff where the bit is set. */
INL __m256i bits32(const uint8_t *qh) {
    uint32_t v;
    memcpy(&v, qh, 4);
    /* byte j of the result starts as byte j/8 of v, then keeps bit j%8 */
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                             0x0101010101010101LL, 0x0000000000000000LL);
    const __m256i x = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), spread);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(x, sel), sel);
}

INL __m256i lut_iq4(void) {
    return _mm256_broadcastsi128_si256(LOADU128(kvalues_iq4nl));
}

/* ---- float weights (activations stay f32) ------------------------------- */

/* Float weights follow the reference exactly in kind: each product rounded
 * to float, the sum kept in double (float accumulation drifts enough to
 * move a small F32 model's logits past the end-to-end tolerance).  Still
 * memory-bound: 8 products cost one multiply, two widenings and two adds. */
INL double hsum_pd(__m256d v) {
    __m128d x = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(x, _mm_unpackhi_pd(x, x)));
}

INL __m256 load_f32x8(const float *p) { return _mm256_loadu_ps(p); }
INL float f32_id(float f) { return f; }

INL __m256 load_f16x8(const plm_fp16_t *p) { return _mm256_cvtph_ps(LOADU128(p)); }

INL __m256 load_bf16x8(const plm_bf16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(LOADU128(p)), 16));
}

#define WIDEN_ADD(acc_lo, acc_hi, prod)                                                      \
    do {                                                                                     \
        const __m256 p_ = (prod);                                                            \
        acc_lo = _mm256_add_pd(acc_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p_)));         \
        acc_hi = _mm256_add_pd(acc_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(p_, 1)));       \
    } while (0)

#define DEF_VD_HALF(NAME, T, LOAD8, TO32)                                                   \
    TGT static void NAME(int64_t n, float *s, const void *vw, const void *va) {            \
        const T *w = vw;                                                                    \
        const float *a = va;                                                                \
        __m256d acc0 = _mm256_setzero_pd(), acc1 = acc0, acc2 = acc0, acc3 = acc0;          \
        int64_t i = 0;                                                                      \
        for (; i + 16 <= n; i += 16) {                                                      \
            WIDEN_ADD(acc0, acc1, _mm256_mul_ps(LOAD8(w + i), _mm256_loadu_ps(a + i)));     \
            WIDEN_ADD(acc2, acc3, _mm256_mul_ps(LOAD8(w + i + 8), _mm256_loadu_ps(a + i + 8))); \
        }                                                                                   \
        for (; i + 8 <= n; i += 8)                                                          \
            WIDEN_ADD(acc0, acc1, _mm256_mul_ps(LOAD8(w + i), _mm256_loadu_ps(a + i)));     \
        double sum = hsum_pd(_mm256_add_pd(_mm256_add_pd(acc0, acc1), _mm256_add_pd(acc2, acc3))); \
        for (; i < n; i++) sum += (double)(TO32(w[i]) * a[i]);                              \
        *s = (float)sum;                                                                    \
    }

DEF_VD_HALF(vd_f32, float, load_f32x8, f32_id)

/* F16/BF16 decode: fused products summed in float over chunks of 256
 * elements (32 per lane), each chunk then added to a double total, as the
 * F16/BF16 gemm below sums.  The exact double sum above made decode
 * compute-bound (27 GB/s with two threads, llama.cpp's float sums ran 1.6x
 * faster on the same F16 file); the f16 fixtures' logits stay within their
 * tolerance either way.  F32 keeps the double sums: stories260K needs them. */
#define DEF_VD_CHUNKED(NAME, T, LOAD8, TO32)                                                \
    TGT static void NAME(int64_t n, float *s, const void *vw, const void *va) {            \
        const T *w = vw;                                                                    \
        const float *a = va;                                                                \
        __m256d tot_lo = _mm256_setzero_pd(), tot_hi = tot_lo;                              \
        int64_t i = 0;                                                                      \
        while (i + 32 <= n) {                                                               \
            const int64_t end = i + 256 <= n ? i + 256 : n & ~(int64_t)31;                  \
            __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;       \
            for (; i < end; i += 32) {                                                      \
                acc0 = _mm256_fmadd_ps(LOAD8(w + i), _mm256_loadu_ps(a + i), acc0);         \
                acc1 = _mm256_fmadd_ps(LOAD8(w + i + 8), _mm256_loadu_ps(a + i + 8), acc1); \
                acc2 = _mm256_fmadd_ps(LOAD8(w + i + 16), _mm256_loadu_ps(a + i + 16), acc2); \
                acc3 = _mm256_fmadd_ps(LOAD8(w + i + 24), _mm256_loadu_ps(a + i + 24), acc3); \
            }                                                                               \
            WIDEN_ADD(tot_lo, tot_hi, _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3))); \
        }                                                                                   \
        double sum = hsum_pd(_mm256_add_pd(tot_lo, tot_hi));                                \
        for (; i < n; i++) sum += (double)(TO32(w[i]) * a[i]);                              \
        *s = (float)sum;                                                                    \
    }

DEF_VD_CHUNKED(vd_f16, plm_fp16_t, load_f16x8, plm_fp16_to_fp32)
DEF_VD_CHUNKED(vd_bf16, plm_bf16_t, load_bf16x8, plm_bf16_to_fp32)

/* gemm for float weights: a tile of FR rows x FT tokens, each weight vector
 * loaded (and widened) once for FT tokens.
 *
 * F16/BF16 (ftile_half): fused products summed in float for FCHUNK
 * elements per lane, each partial sum then joining a double total, as
 * llama.cpp sums its f16 dots in float.  F32 (ftile_exact) keeps vec_dot's
 * arithmetic, products rounded to float and summed in double: summing even
 * eight products per lane in float moved stories260K's logits 3x further
 * from llama.cpp's (0.011 against 0.0034), its dot products cancel heavily.
 * That costs F32 the speed-up (conversions, not loads, bound it). */
enum { FR = 2, FT = 4, FCHUNK = 256 };

/* Both tiles for one weight type; `exact` picks the arithmetic. */
#define DEF_GEMM_FLOAT(NAME, T, LOAD8, TO32, EXACT)                                          \
    INL void ftile_##NAME(int nr, int nt, int64_t k, const char *w, size_t ws, const char *act, \
                          size_t as, float *out, int64_t os) {                               \
        double tot[FR][FT] = {{0}};                                                          \
        const int64_t k8 = k & ~(int64_t)7;                                                  \
        for (int64_t i0 = 0; i0 < k8; i0 += FCHUNK) {                                        \
            const int64_t i1 = i0 + FCHUNK < k8 ? i0 + FCHUNK : k8;                          \
            __m256 acc[FR][FT];                                                              \
            __m256d lo[FR][FT], hi[FR][FT];                                                  \
            for (int r = 0; r < nr; r++)                                                     \
                for (int t = 0; t < nt; t++) acc[r][t] = _mm256_setzero_ps(), lo[r][t] = hi[r][t] = _mm256_setzero_pd(); \
            for (int64_t i = i0; i < i1; i += 8) {                                           \
                __m256 wv[FR];                                                               \
                for (int r = 0; r < nr; r++) wv[r] = LOAD8((const T *)(const void *)(w + r * ws) + i); \
                for (int t = 0; t < nt; t++) {                                               \
                    const __m256 av = _mm256_loadu_ps((const float *)(const void *)(act + t * as) + i); \
                    for (int r = 0; r < nr; r++) {                                           \
                        if (EXACT) WIDEN_ADD(lo[r][t], hi[r][t], _mm256_mul_ps(wv[r], av));  \
                        else acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);              \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
            for (int r = 0; r < nr; r++)                                                     \
                for (int t = 0; t < nt; t++) {                                               \
                    if (!EXACT) WIDEN_ADD(lo[r][t], hi[r][t], acc[r][t]);                    \
                    tot[r][t] += hsum_pd(_mm256_add_pd(lo[r][t], hi[r][t]));                 \
                }                                                                            \
        }                                                                                    \
        for (int r = 0; r < nr; r++)                                                         \
            for (int t = 0; t < nt; t++) {                                                   \
                const T *wr = (const T *)(const void *)(w + r * ws);                         \
                const float *a = (const float *)(const void *)(act + t * as);                \
                for (int64_t i = k8; i < k; i++) tot[r][t] += (double)(TO32(wr[i]) * a[i]);  \
                out[t * os + r] = (float)tot[r][t];                                          \
            }                                                                                \
    }                                                                                        \
    TGT static void gemmf_##NAME(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, \
                                 size_t as, int nt, float *out, int64_t os) {                \
        for (int64_t r = 0; r < nr; r += FR)                                                 \
            for (int t = 0; t < nt; t += FT) {                                               \
                const int rn = nr - r < FR ? (int)(nr - r) : FR, tn = nt - t < FT ? nt - t : FT; \
                const char *wr = (const char *)w + (size_t)r * ws, *at = (const char *)act + (size_t)t * as; \
                if (rn == FR && tn == FT) ftile_##NAME(FR, FT, k, wr, ws, at, as, out + t * os + r, os); \
                else ftile_##NAME(rn, tn, k, wr, ws, at, as, out + t * os + r, os);          \
            }                                                                                \
    }

DEF_GEMM_FLOAT(f32, float, load_f32x8, f32_id, 1)
DEF_GEMM_FLOAT(f16, plm_fp16_t, load_f16x8, plm_fp16_to_fp32, 0)
DEF_GEMM_FLOAT(bf16, plm_bf16_t, load_bf16x8, plm_bf16_to_fp32, 0)

/* ---- 32-element formats against Q8_0 ------------------------------------
 * Each decoder returns the block's 32 weights as signed bytes in element
 * order; the vec_dot and the gemm tile below are shared by all of them. */

INL __m256i dec_q4_0(const block_q4_0 *b) {
    return _mm256_sub_epi8(nibbles32(b->qs), _mm256_set1_epi8(8));
}

INL __m256i dec_q5_0(const block_q5_0 *b) {
    const __m256i hi = _mm256_and_si256(bits32(b->qh), _mm256_set1_epi8(0x10));
    return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b->qs), hi), _mm256_set1_epi8(16));
}

INL __m256i dec_q8_0(const block_q8_0 *b) { return LOADU(b->qs); }

INL __m256i dec_iq4_nl(const block_iq4_nl *b) {
    return _mm256_shuffle_epi8(lut_iq4(), nibbles32(b->qs));
}

/* d_w * d_a of four consecutive blocks (block strides in bytes): one
 * vcvtph2ps instead of eight scalar conversions. */
INL __m128 scales4(const void *w, size_t sw, const void *a, size_t sa) {
    const uint8_t *pw = w, *pa = a;
    uint64_t hw = 0, ha = 0;
    for (int b = 0; b < 4; b++) {  /* gathered in general registers */
        uint16_t u, v;
        memcpy(&u, pw + b * sw, 2);
        memcpy(&v, pa + b * sa, 2);
        hw |= (uint64_t)u << (16 * b);
        ha |= (uint64_t)v << (16 * b);
    }
    const __m256 f = _mm256_cvtph_ps(_mm_set_epi64x((long long)ha, (long long)hw));
    return _mm_mul_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1));
}

/* Lane b of s4 in all 8 lanes. */
#define LANE(s4, b) _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s4), _mm256_set1_epi32(b))

/* Q4_0's vec_dot keeps the nibbles unsigned and subtracts 8 * sum(a): one
 * dot more but no sign juggling (the gemm amortizes the sign trick). */
TGT static void vdu_q4_0(int64_t n, float *s, const void *vw, const void *va) {
    const block_q4_0 *x = vw;
    const block_q8_0 *y = va;
    const int64_t nb = n / QK4_0;
    const __m256i eight = _mm256_set1_epi8(8);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    int64_t i = 0;
#define Q4_0_BLOCK(b)                                                                        \
    _mm256_cvtepi32_ps(_mm256_sub_epi32(dot_us(_mm256_setzero_si256(), nibbles32(x[b].qs), LOADU(y[b].qs)), \
                                        dot_us(_mm256_setzero_si256(), eight, LOADU(y[b].qs))))
    for (; i + 4 <= nb; i += 4) {
        const __m128 s4 = scales4(&x[i].d, sizeof *x, &y[i].d, sizeof *y);
        acc0 = _mm256_fmadd_ps(Q4_0_BLOCK(i), LANE(s4, 0), acc0);
        acc1 = _mm256_fmadd_ps(Q4_0_BLOCK(i + 1), LANE(s4, 1), acc1);
        acc0 = _mm256_fmadd_ps(Q4_0_BLOCK(i + 2), LANE(s4, 2), acc0);
        acc1 = _mm256_fmadd_ps(Q4_0_BLOCK(i + 3), LANE(s4, 3), acc1);
    }
    for (; i < nb; i++)
        acc0 = _mm256_fmadd_ps(Q4_0_BLOCK(i), _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), acc0);
#undef Q4_0_BLOCK
    *s = hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* One block of signed weights w against Q8_0 activations, as 8 int32 lanes
 * converted to float (exact: |lane| < 2^24). */
INL __m256 blk_ss(__m256i w, const block_q8_0 *y) {
    return _mm256_cvtepi32_ps(dot_ss(_mm256_setzero_si256(), _mm256_abs_epi8(w), w, LOADU(y->qs)));
}

/* The row-by-row gemm around a tile (one weight row x up to GEMM_T tokens):
 * rows in bands of GEMM_RB so a band of weights stays in cache while every
 * token tile passes over it. */
#define DEF_ROW_GEMM(NAME, BT, QB, TILE)                                                     \
    TGT static void gemm_##NAME(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, \
                                size_t as, int nt, float *out, int64_t os) {                 \
        const int64_t nb = k / (QB);                                                         \
        const char *wr = w, *ar = act;                                                       \
        for (int64_t r0 = 0; r0 < nr; r0 += GEMM_RB) {                                       \
            const int64_t r1 = r0 + GEMM_RB < nr ? r0 + GEMM_RB : nr;                        \
            int t = 0;                                                                       \
            for (; t + GEMM_T <= nt; t += GEMM_T)                                            \
                for (int64_t r = r0; r < r1; r++)                                            \
                    TILE(GEMM_T, nb, (const BT *)(const void *)(wr + r * ws), ar + t * as, as, \
                         out + t * os + r, os);                                              \
            if (t < nt)                                                                      \
                for (int64_t r = r0; r < r1; r++)                                            \
                    TILE(nt - t, nb, (const BT *)(const void *)(wr + r * ws), ar + t * as, as, \
                         out + t * os + r, os);                                              \
        }                                                                                    \
    }

/* vec_dot and gemm for a signed-decoder format (two blocks per step). */
#define DEF_32(NAME, BT, DEC)                                                                \
    __attribute__((unused)) TGT static void vd_##NAME(int64_t n, float *s, const void *vw, const void *va) {         \
        const BT *x = vw;                                                                    \
        const block_q8_0 *y = va;                                                            \
        const int64_t nb = n / 32;                                                           \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;                                      \
        int64_t i = 0;                                                                       \
        for (; i + 4 <= nb; i += 4) {                                                        \
            const __m128 s4 = scales4(&x[i].d, sizeof *x, &y[i].d, sizeof *y);               \
            acc0 = _mm256_fmadd_ps(blk_ss(DEC(&x[i]), &y[i]), LANE(s4, 0), acc0);                             \
            acc1 = _mm256_fmadd_ps(blk_ss(DEC(&x[i + 1]), &y[i + 1]), LANE(s4, 1), acc1);                         \
            acc0 = _mm256_fmadd_ps(blk_ss(DEC(&x[i + 2]), &y[i + 2]), LANE(s4, 2), acc0);                         \
            acc1 = _mm256_fmadd_ps(blk_ss(DEC(&x[i + 3]), &y[i + 3]), LANE(s4, 3), acc1);                         \
        }                                                                                    \
        for (; i < nb; i++) {                                                                \
            const __m256i w0 = DEC(&x[i]);                                                   \
            const __m256i p0 =                                                               \
                dot_ss(_mm256_setzero_si256(), _mm256_abs_epi8(w0), w0, LOADU(y[i].qs));      \
            acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0),                                   \
                                   _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), acc0);         \
        }                                                                                    \
        *s = hsum_ps(_mm256_add_ps(acc0, acc1));                                             \
    }                                                                                        \
    /* One weight row x nt tokens; nt is a constant where it matters, so the \
     * accumulators live in registers. */                                                   \
    INL void tile_##NAME(int nt, int64_t nb, const BT *x, const char *act, size_t as,       \
                         float *out, int64_t os) {                                           \
        __m256 acc[GEMM_T];                                                                  \
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();                           \
        for (int64_t b = 0; b < nb; b++) {                                                   \
            const __m256i w = DEC(&x[b]), wabs = _mm256_abs_epi8(w);                         \
            const float dw = h2f(x[b].d);                                                    \
            for (int t = 0; t < nt; t++) {                                                   \
                const block_q8_0 *y = (const block_q8_0 *)(const void *)(act + t * as) + b;  \
                const __m256i p = dot_ss(_mm256_setzero_si256(), wabs, w, LOADU(y->qs));     \
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * h2f(y->d)), \
                                         acc[t]);                                            \
            }                                                                                \
        }                                                                                    \
        for (int t = 0; t < nt; t++) out[t * os] = hsum_ps(acc[t]);                          \
    }                                                                                        \
    DEF_ROW_GEMM(NAME, BT, 32, tile_##NAME)

DEF_32(q4_0, block_q4_0, dec_q4_0)
DEF_32(q5_0, block_q5_0, dec_q5_0)
DEF_32(q8_0, block_q8_0, dec_q8_0)
DEF_32(iq4_nl, block_iq4_nl, dec_iq4_nl)

/* Q4_1/Q5_1 against Q8_1: unsigned codes, and the min term m * s where
 * Q8_1's s = d_a * sum(q_a). */
INL __m256i dec_q4_1(const block_q4_1 *b) { return nibbles32(b->qs); }

INL __m256i dec_q5_1(const block_q5_1 *b) {
    return _mm256_or_si256(nibbles32(b->qs), _mm256_and_si256(bits32(b->qh), _mm256_set1_epi8(0x10)));
}

#define DEF_X1(NAME, BT, DEC)                                                                \
    TGT static void vd_##NAME(int64_t n, float *s, const void *vw, const void *va) {         \
        const BT *x = vw;                                                                    \
        const block_q8_1 *y = va;                                                            \
        const int64_t nb = n / 32;                                                           \
        __m256 acc = _mm256_setzero_ps();                                                    \
        float summ = 0.0f;                                                                   \
        for (int64_t i = 0; i < nb; i++) {                                                   \
            const __m256i p = dot_us(_mm256_setzero_si256(), DEC(&x[i]), LOADU(y[i].qs));    \
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d)), \
                                  acc);                                                      \
            summ += h2f(x[i].m) * h2f(y[i].s);                                               \
        }                                                                                    \
        *s = hsum_ps(acc) + summ;                                                            \
    }

DEF_X1(q4_1, block_q4_1, dec_q4_1)
DEF_X1(q5_1, block_q5_1, dec_q5_1)

/* Row-by-row gemm for Q4_1/Q5_1 (the AVX2 table's, and small batches on
 * AVX-512): each block decoded once for GEMM_T tokens. */
#define DEF_X1_GEMM(NAME, BT, DEC)                                                           \
    INL void tile_##NAME(int nt, int64_t nb, const BT *x, const char *act, size_t as,       \
                         float *out, int64_t os) {                                           \
        __m256 acc[GEMM_T];                                                                  \
        float summ[GEMM_T];                                                                  \
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps(), summ[t] = 0.0f;          \
        for (int64_t b = 0; b < nb; b++) {                                                   \
            const __m256i u = DEC(&x[b]);                                                    \
            const float dw = h2f(x[b].d), m = h2f(x[b].m);                                   \
            for (int t = 0; t < nt; t++) {                                                   \
                const block_q8_1 *y = (const block_q8_1 *)(const void *)(act + t * as) + b;  \
                const __m256i p = dot_us(_mm256_setzero_si256(), u, LOADU(y->qs));           \
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * h2f(y->d)), acc[t]); \
                summ[t] += m * h2f(y->s);                                                    \
            }                                                                                \
        }                                                                                    \
        for (int t = 0; t < nt; t++) out[t * os] = hsum_ps(acc[t]) + summ[t];                \
    }                                                                                        \
    DEF_ROW_GEMM(NAME, BT, 32, tile_##NAME)

DEF_X1_GEMM(q4_1, block_q4_1, dec_q4_1)
DEF_X1_GEMM(q5_1, block_q5_1, dec_q5_1)

/* ---- K-quants against Q8_K ----------------------------------------------
 * A super-block decodes to kdec: 256 unsigned codes in element order, one
 * int16 scale vector per 32 elements (lanes 0-7 scale elements 0-15, lanes
 * 8-15 elements 16-31, matching vpmaddubsw's pair layout), and a 16-lane
 * offset vector dotted with Q8_K's bsums.  The block's value is
 *   d_a * (d * sum_j sc_j * dot(code_j, a_j)  -  dm * sum_j off_j * bsum_j)
 * which covers Q4_K/Q5_K/Q2_K (dm = dmin, off = mins) and Q6_K/Q3_K
 * (dm = d, off = scale * code offset 32 or 4). */
typedef struct {
    __m256i sc[8];
    __m256i off;
    float d, dm;
    _Alignas(32) uint8_t q[QK_K];
} kdec;

/* Scale vector [s[2j] x8, s[2j+1] x8] from 16 signed bytes, for chunk j. */
INL __m256i pair_scales(__m128i s8, int j) {
    const __m128i idx = _mm_set_epi64x(0x0101010101010101LL * (2 * j + 1), 0x0101010101010101LL * (2 * j));
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s8, idx));
}

/* The 6-bit scales and mins of Q4_K/Q5_K (12 bytes) -> sc[0..7], mn[0..7]
 * as bytes 0-7 and 8-15 of out.  Bytes 0-3 hold scales 0-3 and bytes 4-7
 * mins 0-3 in their low 6 bits; scales/mins 4-7 take their low 4 bits from
 * the nibbles of bytes 8-11 and their top 2 bits from the top bits of
 * bytes 0-3 (scales) / 4-7 (mins). */
INL void scales_k4(const uint8_t *p, uint32_t out[4]) {
    uint32_t u[3];
    memcpy(u, p, 12);
    out[0] = u[0] & 0x3f3f3f3fu;                                          /* sc 0-3 */
    out[1] = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 6) & 0x03030303u) << 4;     /* sc 4-7 */
    out[2] = u[1] & 0x3f3f3f3fu;                                          /* mn 0-3 */
    out[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 6) & 0x03030303u) << 4; /* mn 4-7 */
}

INL void kdec_scales_k4(const uint8_t *scales, kdec *u) {
    uint32_t sm[4];
    scales_k4(scales, sm);
    const uint8_t *sc = (const uint8_t *)sm;
    for (int j = 0; j < 8; j++) u->sc[j] = _mm256_set1_epi16(sc[j]);
    /* mins 0-7 from registers (a load would miss store forwarding) */
    const __m128i m8 = _mm_cvtsi64_si128((long long)((uint64_t)sm[3] << 32 | sm[2]));
    u->off = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); /* m0 m0 m1 m1 ... */
}

INL void kdec_q4_K(const block_q4_K *x, kdec *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    kdec_scales_k4(x->scales, u);
    for (int j = 0; j < 4; j++) {
        const __m256i q = LOADU(x->qs + 32 * j);
        _mm256_store_si256((__m256i *)(void *)(u->q + 64 * j), _mm256_and_si256(q, m4));
        _mm256_store_si256((__m256i *)(void *)(u->q + 64 * j + 32),
                           _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    }
    u->d = h2f(x->d);
    u->dm = h2f(x->dmin);
}

INL void kdec_q5_K(const block_q5_K *x, kdec *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    kdec_scales_k4(x->scales, u);
    __m256i hb = LOADU(x->qh); /* bit 2j / 2j+1 of byte l: fifth bit of sub-block 2j / 2j+1 */
    for (int j = 0; j < 4; j++) {
        const __m256i q = LOADU(x->qs + 32 * j);
        const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(hb, one), 4);
        const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4);
        _mm256_store_si256((__m256i *)(void *)(u->q + 64 * j), _mm256_or_si256(_mm256_and_si256(q, m4), h0));
        _mm256_store_si256((__m256i *)(void *)(u->q + 64 * j + 32),
                           _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1));
        hb = _mm256_srli_epi16(hb, 2);
    }
    u->d = h2f(x->d);
    u->dm = h2f(x->dmin);
}

/* Q6_K: codes 0..63 (value + 32); off = 32 * scale. */
INL void kdec_q6_K(const block_q6_K *x, kdec *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = LOADU(x->ql + 64 * h), l1 = LOADU(x->ql + 64 * h + 32);
        const __m256i qh = LOADU(x->qh + 32 * h);
        uint8_t *o = u->q + 128 * h;
        /* qh byte l: bits 0-1, 2-3, 4-5, 6-7 top up elements l, l+32, l+64, l+96 */
        const __m256i q0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
        const __m256i q1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
        const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30));
        const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
        _mm256_store_si256((__m256i *)(void *)(o), q0);
        _mm256_store_si256((__m256i *)(void *)(o + 32), q1);
        _mm256_store_si256((__m256i *)(void *)(o + 64), q2);
        _mm256_store_si256((__m256i *)(void *)(o + 96), q3);
    }
    const __m128i s8 = LOADU128(x->scales);
    for (int j = 0; j < 8; j++) u->sc[j] = pair_scales(s8, j);
    u->off = _mm256_slli_epi16(_mm256_cvtepi8_epi16(s8), 5);
    u->d = u->dm = h2f(x->d);
}

/* Q3_K: codes 0..7 = low 2 bits + 4 * hmask bit (value + 4); off = 4 * scale.
 * The 16 6-bit scales: low nibbles from bytes 0-7 (low nibbles first), top
 * two bits from bytes 8-11, one 2-bit field per group of four scales. */
INL void kdec_q3_K(const block_q3_K *x, kdec *u) {
    uint32_t a[3], s[4];
    memcpy(a, x->scales, 12);
    for (int g = 0; g < 4; g++) {
        const uint32_t lo = ((g < 2 ? a[g] : a[g - 2] >> 4)) & 0x0f0f0f0fu;
        const uint32_t hi = (a[2] >> (2 * g)) & 0x03030303u;
        s[g] = lo | hi << 4;
    }
    /* built in registers: a 16-byte load of four just-stored words would
     * miss store forwarding */
    const __m128i s8 = _mm_sub_epi8(_mm_setr_epi32((int)s[0], (int)s[1], (int)s[2], (int)s[3]),
                                    _mm_set1_epi8(32));
    for (int j = 0; j < 8; j++) u->sc[j] = pair_scales(s8, j);
    u->off = _mm256_slli_epi16(_mm256_cvtepi8_epi16(s8), 2);
    const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    __m256i hm = LOADU(x->hmask); /* shifted one bit per 32 elements */
    for (int h = 0; h < 2; h++) {
        __m256i qs = LOADU(x->qs + 32 * h); /* shifted two bits per plane */
        for (int p = 0; p < 4; p++) {
            const __m256i lo = _mm256_and_si256(qs, three);
            const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(hm, one), 2);
            _mm256_store_si256((__m256i *)(void *)(u->q + 128 * h + 32 * p), _mm256_or_si256(lo, hb));
            qs = _mm256_srli_epi16(qs, 2);
            hm = _mm256_srli_epi16(hm, 1);
        }
    }
    u->d = u->dm = h2f(x->d);
}

/* Q2_K: codes 0..3; scale = low nibble, min = high nibble, per 16. */
INL void kdec_q2_K(const block_q2_K *x, kdec *u) {
    const __m128i s8 = LOADU128(x->scales), m4 = _mm_set1_epi8(0x0f);
    const __m128i sc = _mm_and_si128(s8, m4);
    for (int j = 0; j < 8; j++) u->sc[j] = pair_scales(sc, j);
    u->off = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), m4));
    const __m256i three = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        __m256i qs = LOADU(x->qs + 32 * h);
        for (int p = 0; p < 4; p++) {
            _mm256_store_si256((__m256i *)(void *)(u->q + 128 * h + 32 * p), _mm256_and_si256(qs, three));
            qs = _mm256_srli_epi16(qs, 2);
        }
    }
    u->d = h2f(x->d);
    u->dm = h2f(x->dmin);
}

/* acc += one decoded super-block . one Q8_K block (8 lanes, summed later). */
INL __m256 kdot(const kdec *u, const block_q8_K *y, __m256 acc) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0;
    for (int j = 0; j < 8; j += 2) {
        const __m256i p0 = _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)(const void *)(u->q + 32 * j)),
                                                LOADU(y->qs + 32 * j));
        const __m256i p1 = _mm256_maddubs_epi16(
            _mm256_load_si256((const __m256i *)(const void *)(u->q + 32 * j + 32)), LOADU(y->qs + 32 * j + 32));
        s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, u->sc[j]));
        s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, u->sc[j + 1]));
    }
    const __m256i off = _mm256_madd_epi16(u->off, LOADU(y->bsums));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), _mm256_set1_ps(u->d * y->d), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(off), _mm256_set1_ps(u->dm * y->d), acc);
}

#define DEF_K(NAME, BT, DEC)                                                                 \
    TGT static void vdk_##NAME(int64_t n, float *s, const void *vw, const void *va) {        \
        const BT *x = vw;                                                                    \
        const block_q8_K *y = va;                                                            \
        __m256 acc = _mm256_setzero_ps();                                                    \
        kdec u;                                                                              \
        for (int64_t i = 0; i < n / QK_K; i++) {                                             \
            DEC(&x[i], &u);                                                                  \
            acc = kdot(&u, &y[i], acc);                                                      \
        }                                                                                    \
        *s = hsum_ps(acc);                                                                   \
    }                                                                                        \
    INL void tilek_##NAME(int nt, int64_t nb, const BT *x, const char *act, size_t as,      \
                          float *out, int64_t os) {                                          \
        __m256 acc[GEMM_T];                                                                  \
        kdec u;                                                                              \
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();                           \
        for (int64_t b = 0; b < nb; b++) {                                                   \
            DEC(&x[b], &u);                                                                  \
            for (int t = 0; t < nt; t++)                                                     \
                acc[t] = kdot(&u, (const block_q8_K *)(const void *)(act + t * as) + b, acc[t]); \
        }                                                                                    \
        for (int t = 0; t < nt; t++) out[t * os] = hsum_ps(acc[t]);                          \
    }                                                                                        \
    DEF_ROW_GEMM(NAME, BT, QK_K, tilek_##NAME)

DEF_K(q2_K, block_q2_K, kdec_q2_K)
DEF_K(q3_K, block_q3_K, kdec_q3_K)
DEF_K(q4_K, block_q4_K, kdec_q4_K)
DEF_K(q5_K, block_q5_K, kdec_q5_K)
DEF_K(q6_K, block_q6_K, kdec_q6_K)

/* IQ4_XS: signed non-linear levels, sign trick, 6-bit scale per 32. */
TGT static void vd_iq4_xs(int64_t n, float *s, const void *vw, const void *va) {
    const block_iq4_xs *x = vw;
    const block_q8_K *y = va;
    const __m256i lut = lut_iq4();
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i isum = _mm256_setzero_si256();
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const __m256i w = _mm256_shuffle_epi8(lut, nibbles32(x[i].qs + 16 * ib));
            const __m256i p = dot_ss(_mm256_setzero_si256(), _mm256_abs_epi8(w), w, LOADU(y[i].qs + 32 * ib));
            isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(p, _mm256_set1_epi32(plm_iq4_xs_scale(&x[i], ib) - 32)));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(x[i].d) * y[i].d), acc);
    }
    *s = hsum_ps(acc);
}

/* Its row-by-row gemm: a super-block's levels, their magnitudes and scales
 * decoded once for GEMM_T tokens. */
INL void tile_iq4_xs(int nt, int64_t nb, const block_iq4_xs *x, const char *act, size_t as, float *out,
                     int64_t os) {
    const __m256i lut = lut_iq4();
    __m256 acc[GEMM_T];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i w[QK_K / 32], wabs[QK_K / 32], sc[QK_K / 32];
        for (int ib = 0; ib < QK_K / 32; ib++) {
            w[ib] = _mm256_shuffle_epi8(lut, nibbles32(x[b].qs + 16 * ib));
            wabs[ib] = _mm256_abs_epi8(w[ib]);
            sc[ib] = _mm256_set1_epi32(plm_iq4_xs_scale(&x[b], ib) - 32);
        }
        const float dw = h2f(x[b].d);
        for (int t = 0; t < nt; t++) {
            const block_q8_K *y = (const block_q8_K *)(const void *)(act + t * as) + b;
            __m256i isum = _mm256_setzero_si256();
            for (int ib = 0; ib < QK_K / 32; ib++) {
                const __m256i p = dot_ss(_mm256_setzero_si256(), wabs[ib], w[ib], LOADU(y->qs + 32 * ib));
                isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(p, sc[ib]));
            }
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dw * y->d), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) out[t * os] = hsum_ps(acc[t]);
}
DEF_ROW_GEMM(iq4_xs, block_iq4_xs, QK_K, tile_iq4_xs)

/* ---- activation quantizers ----------------------------------------------
 * Bit-identical to quantize.c for finite inputs: the same float scale
 * arithmetic, roundf emulated exactly (trunc, then step away from zero when
 * the dropped fraction is >= 0.5, which is exact in float), and Q8_K's
 * round-half-even by the default MXCSR rounding of vcvtps2dq.  Rows with
 * NaN or infinities may differ from the reference (garbage either way). */

INL __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

INL float hmax_ps(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* roundf(v) for 8 lanes, as int32. */
INL __m256i roundf_epi32(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = abs_ps(_mm256_sub_ps(v, t));
    const __m256 step = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                      _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f))));
    return _mm256_cvttps_epi32(_mm256_add_ps(t, step));
}

/* 4 x 8 int32 -> 32 int8 in order (saturating). */
INL __m256i pack32(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One 32-float block scaled by id and rounded like roundf. */
INL __m256i q8_block(const float *x, float id, int *sum) {
    const __m256 vid = _mm256_set1_ps(id);
    const __m256i i0 = roundf_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), vid));
    const __m256i i1 = roundf_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), vid));
    const __m256i i2 = roundf_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), vid));
    const __m256i i3 = roundf_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), vid));
    if (sum) *sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
    return pack32(i0, i1, i2, i3);
}

INL float absmax32(const float *x) {
    const __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(_mm256_loadu_ps(x)), abs_ps(_mm256_loadu_ps(x + 8))),
                                   _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + 16)), abs_ps(_mm256_loadu_ps(x + 24))));
    return hmax_ps(m);
}

TGT static void qr_q8_0(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        const float d = absmax32(x) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = plm_fp32_to_fp16(d);
        _mm256_storeu_si256((__m256i *)(void *)y[i].qs, q8_block(x, id, NULL));
    }
}

TGT static void qr_q8_1(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        const float d = absmax32(x) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        int sum;
        y[i].d = plm_fp32_to_fp16(d);
        _mm256_storeu_si256((__m256i *)(void *)y[i].qs, q8_block(x, id, &sum));
        y[i].s = plm_fp32_to_fp16((float)sum * d);
    }
}

/* Q8_K: scale from the signed value of largest magnitude (first on ties),
 * round half to even, and the 16-element sums. */
TGT static void qr_q8_K(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + j)));
        const float amax = hmax_ps(m);
        float max = 0.0f;
        for (int j = 0; j < QK_K; j++)
            if (x[j] == amax || x[j] == -amax) {
                max = x[j];
                break;
            }
        memset(&y[i], 0, sizeof y[i]);
        if (max == 0.0f || max != max) continue;
        const float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        for (int j = 0; j < QK_K; j += 32) {
            const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j), vs));
            const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8), vs));
            const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 16), vs));
            const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 24), vs));
            const __m256i q = pack32(i0, i1, i2, i3);
            _mm256_storeu_si256((__m256i *)(void *)(y[i].qs + j), q);
            /* bsums of the two 16-element halves, from the saturated bytes */
            const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
            const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
            const __m256i h = _mm256_hadd_epi32(s32, s32);
            const __m256i hh = _mm256_hadd_epi32(h, h);
            y[i].bsums[j / 16] = (int16_t)_mm256_extract_epi32(hh, 0);
            y[i].bsums[j / 16 + 1] = (int16_t)_mm256_extract_epi32(hh, 4);
        }
        y[i].d = 1 / iscale;
    }
}

/* ---- 512-bit decode kernels (AVX-512 table only) -------------------------
 * Four 32-element blocks per step: 128-bit lane b of `lo` holds block b's
 * low nibbles (elements 0-15), lane b of `hi` its high nibbles (16-31); the
 * activations are regrouped to match with two cross-lane permutes.  Half
 * the instructions per block of the 256-bit code, which matters because a
 * single core runs those kernels at the edge of memory bandwidth. */
#if X86_ZMM

INL __m512i lanes4(const uint8_t *p, size_t stride) {
    __m512i q = _mm512_castsi128_si512(LOADU128(p));
    q = _mm512_inserti32x4(q, LOADU128(p + stride), 1);
    q = _mm512_inserti32x4(q, LOADU128(p + 2 * stride), 2);
    return _mm512_inserti32x4(q, LOADU128(p + 3 * stride), 3);
}

INL void act4(const block_q8_0 *y, __m512i *alo, __m512i *ahi) {
    const __m512i a01 = _mm512_inserti64x4(_mm512_castsi256_si512(LOADU(y[0].qs)), LOADU(y[1].qs), 1);
    const __m512i a23 = _mm512_inserti64x4(_mm512_castsi256_si512(LOADU(y[2].qs)), LOADU(y[3].qs), 1);
    *alo = _mm512_permutex2var_epi64(a01, _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13), a23);
    *ahi = _mm512_permutex2var_epi64(a01, _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15), a23);
}

/* f16 scales of 4 blocks (stride bytes apart) as 4 floats. */
INL __m128 scales4_one(const void *p, size_t stride) {
    const uint8_t *b = p;
    uint64_t h = 0;
    for (int i = 0; i < 4; i++) {
        uint16_t u;
        memcpy(&u, b + i * stride, 2);
        h |= (uint64_t)u << (16 * i);
    }
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)h));
}

/* s4[b] repeated over the four floats of lane b. */
INL __m512 spread4(__m128 s4) {
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                 _mm512_castps128_ps512(s4));
}

/* Four nibble blocks whose codes map to unsigned u = lut[code] (identity
 * for Q4_0) and whose value is u - bias: dot = sum(u * a) - bias * sum(a). */
INL __m512 nib4(const uint8_t *qs, size_t stride, const block_q8_0 *y, __m512i lut, int use_lut,
                __m512i bias) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), z = _mm512_setzero_si512();
    const __m512i q = lanes4(qs, stride);
    __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    if (use_lut) {
        lo = _mm512_shuffle_epi8(lut, lo);
        hi = _mm512_shuffle_epi8(lut, hi);
    }
    __m512i alo, ahi;
    act4(y, &alo, &ahi);
    const __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, lo, alo), hi, ahi);
    const __m512i b = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, bias, alo), bias, ahi);
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(p, b));
}

#define DEF_NIB_ZMM(NAME, BT, USE_LUT, BIAS, TAIL)                                           \
    TGT static void vdz_##NAME(int64_t n, float *s, const void *vw, const void *va) {        \
        const BT *x = vw;                                                                    \
        const block_q8_0 *y = va;                                                            \
        const int64_t nb = n / 32;                                                           \
        /* IQ4_NL levels + 128 as unsigned bytes */                                          \
        const __m512i lut = _mm512_add_epi8(_mm512_broadcast_i32x4(LOADU128(kvalues_iq4nl)),  \
                                            _mm512_set1_epi8((char)0x80));                   \
        const __m512i bias = _mm512_set1_epi8((char)(BIAS));                                 \
        /* One accumulator, four blocks a step: measured 15% faster than two   \
         * interleaved chains of eight (the loop stays within the registers). */ \
        __m512 acc = _mm512_setzero_ps();                                                    \
        int64_t i = 0;                                                                       \
        for (; i + 4 <= nb; i += 4) {                                                        \
            const __m128 s4 = _mm_mul_ps(scales4_one(&x[i].d, sizeof *x), scales4_one(&y[i].d, sizeof *y)); \
            acc = _mm512_fmadd_ps(nib4(x[i].qs, sizeof *x, y + i, lut, USE_LUT, bias), spread4(s4), acc); \
        }                                                                                    \
        float sum = _mm512_reduce_add_ps(acc);                                               \
        if (i < nb) {                                                                        \
            float t;                                                                         \
            TAIL((nb - i) * 32, &t, x + i, y + i);                                           \
            sum += t;                                                                        \
        }                                                                                    \
        *s = sum;                                                                            \
    }

DEF_NIB_ZMM(q4_0, block_q4_0, 0, 8, vdu_q4_0)
DEF_NIB_ZMM(iq4_nl, block_iq4_nl, 1, 0x80, vd_iq4_nl)

#define VD_Q4_0 vdz_q4_0
#define VD_IQ4_NL vdz_iq4_nl

#include "kernels/x86/gemm_panel.h"
#else
#define VD_Q4_0 vdu_q4_0
#define VD_IQ4_NL vd_iq4_nl
#define GEMM_Q4_0 gemm_q4_0
#define GEMM_Q5_0 gemm_q5_0
#define GEMM_Q8_0 gemm_q8_0
#define GEMM_IQ4_NL gemm_iq4_nl
#define GEMM_Q2_K gemm_q2_K
#define GEMM_Q3_K gemm_q3_K
#define GEMM_Q4_K gemm_q4_K
#define GEMM_Q5_K gemm_q5_K
#define GEMM_Q6_K gemm_q6_K
#define GEMM_Q4_1 gemm_q4_1
#define GEMM_Q5_1 gemm_q5_1
#define GEMM_IQ4_XS gemm_iq4_xs
#endif

/* ---- attention over the f16 KV cache ------------------------------------- */

/* Attention reads the cache a block of keys at a time, converted to f32 on
 * the stack first (attn_f16_x86): each f16 is converted once for all the
 * query heads that share it, and exactly, so the sums are the ones the f16
 * rows would give. */

/* Whole steps of 32 go through SIMD, the rest is summed one by one in
 * float, as plm_dot_f16 sums it: stories260K (heads of 8) is that sensitive
 * to the order, 0.0034 from llama.cpp's logits this way, 0.010 with one
 * 8-lane step or with a double sum. */
INL float dot_tail(const uint16_t *q, const float *k, int i, int hd) {
    float t = 0.0f;
    for (; i < hd; i++) t += plm_fp16_to_fp32(q[i]) * k[i];
    return t;
}

/* Four keys' partial sums (8 lanes each) -> their four sums: hadd twice
 * leaves each key's lanes 0-3 in one half and 4-7 in the other. */
INL __m128 sum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* scores[j] = scale * q . k_j over rows of hd floats, eight keys at a time
 * (eight independent FMA chains: fewer and the FMA latency, not its
 * throughput, sets the pace), then one; each key's sum is reduced the same
 * way. */
INL void block_scores(float *scores, const uint16_t *q, const float *kb, int n_keys, int hd, float scale) {
    const int h8 = hd & ~31;
    int j = 0;
    for (; j + 8 <= n_keys; j += 8) {
        const float *k0 = kb + (size_t)j * hd;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        for (int i = 0; i < h8; i += 8) {
            const __m256 qv = load_f16x8(q + i);
            a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + i), a0);
            a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + hd + i), a1);
            a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 2 * hd + i), a2);
            a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 3 * hd + i), a3);
            a4 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 4 * hd + i), a4);
            a5 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 5 * hd + i), a5);
            a6 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 6 * hd + i), a6);
            a7 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 7 * hd + i), a7);
        }
        __m128 lo = sum4(a0, a1, a2, a3), hi = sum4(a4, a5, a6, a7);
        if (h8 < hd) {
            float t[8];
            for (int u = 0; u < 8; u++) t[u] = dot_tail(q, k0 + u * hd, h8, hd);
            lo = _mm_add_ps(lo, _mm_loadu_ps(t));
            hi = _mm_add_ps(hi, _mm_loadu_ps(t + 4));
        }
        _mm_storeu_ps(scores + j, _mm_mul_ps(lo, _mm_set1_ps(scale)));
        _mm_storeu_ps(scores + j + 4, _mm_mul_ps(hi, _mm_set1_ps(scale)));
    }
    for (; j < n_keys; j++) {
        const float *kj = kb + (size_t)j * hd;
        __m256 a0 = _mm256_setzero_ps();
        for (int i = 0; i < h8; i += 8) a0 = _mm256_fmadd_ps(load_f16x8(q + i), _mm256_loadu_ps(kj + i), a0);
        scores[j] = (hsum_ps(a0) + dot_tail(q, kj, h8, hd)) * scale;
    }
}

/* e^x in 8 lanes: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n ln2
 * is exact), e^r by its Taylor series to r^7 (error < 1e-8 relative), times
 * 2^n built in the exponent bits.  Within 0.91 ulp of e^x (every 32nd float
 * of [-87, 88] checked against exp in double); 0 below -87.3 (where expf
 * turns subnormal), so padding lanes of -inf give 0; +inf above 88.37
 * (2^127), a little early. */
INL __m256 exp_ps(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654f), hi = _mm256_set1_ps(88.37626f);
    const __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ), over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 y = _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep);
    return _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
}

/* plm_softmax_run_block with SIMD max and exp; s holds room for n rounded
 * up to 8, the lanes past n padded with -inf (weight 0). */
INL void softmax_run_block(plm_softmax_run *r, float *s, int n, float *o, int hd) {
    const int n8 = (n + 7) & ~7;
    for (int j = n; j < n8; j++) s[j] = -INFINITY;
    __m256 vmax = _mm256_set1_ps(r->max);
    for (int j = 0; j < n8; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + j));
    const float max = hmax_ps(vmax);
    plm_softmax_run_raise(r, max, o, hd);
    const __m256 m = _mm256_set1_ps(max);
    __m256 sum = _mm256_setzero_ps();
    for (int j = 0; j < n8; j += 8) {
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
        _mm256_storeu_ps(s + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    r->sum += hsum_ps(sum);
}

/* o += sum_j w[j] v_j over rows of hd floats, o in registers 64 values at
 * a time across the keys (eight chains, as in block_scores), then 8, then
 * one. */
INL void block_values(float *o, const float *w, const float *vb, int n_keys, int hd) {
    int i0 = 0;
    for (; i0 + 64 <= hd; i0 += 64) {
        __m256 o0 = _mm256_loadu_ps(o + i0), o1 = _mm256_loadu_ps(o + i0 + 8);
        __m256 o2 = _mm256_loadu_ps(o + i0 + 16), o3 = _mm256_loadu_ps(o + i0 + 24);
        __m256 o4 = _mm256_loadu_ps(o + i0 + 32), o5 = _mm256_loadu_ps(o + i0 + 40);
        __m256 o6 = _mm256_loadu_ps(o + i0 + 48), o7 = _mm256_loadu_ps(o + i0 + 56);
        for (int j = 0; j < n_keys; j++) {
            const __m256 wj = _mm256_set1_ps(w[j]);
            const float *vj = vb + (size_t)j * hd + i0;
            o0 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj), o0);
            o1 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 8), o1);
            o2 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 16), o2);
            o3 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 24), o3);
            o4 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 32), o4);
            o5 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 40), o5);
            o6 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 48), o6);
            o7 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 56), o7);
        }
        _mm256_storeu_ps(o + i0, o0);
        _mm256_storeu_ps(o + i0 + 8, o1);
        _mm256_storeu_ps(o + i0 + 16, o2);
        _mm256_storeu_ps(o + i0 + 24, o3);
        _mm256_storeu_ps(o + i0 + 32, o4);
        _mm256_storeu_ps(o + i0 + 40, o5);
        _mm256_storeu_ps(o + i0 + 48, o6);
        _mm256_storeu_ps(o + i0 + 56, o7);
    }
    for (; i0 + 8 <= hd; i0 += 8) {
        __m256 o0 = _mm256_loadu_ps(o + i0);
        for (int j = 0; j < n_keys; j++)
            o0 = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), _mm256_loadu_ps(vb + (size_t)j * hd + i0), o0);
        _mm256_storeu_ps(o + i0, o0);
    }
    for (int i = i0; i < hd; i++)
        for (int j = 0; j < n_keys; j++) o[i] += w[j] * vb[(size_t)j * hd + i];
}

/* The exact mode's weights: f16(exp(s - max) * inv_sum), eight at a time
 * (s padded with -inf to a whole vector). */
INL void block_weights(float *s, int n, float max, float inv_sum) {
    const __m256 m = _mm256_set1_ps(max), inv = _mm256_set1_ps(inv_sum);
    for (int j = n; j < ((n + 7) & ~7); j++) s[j] = -INFINITY;
    for (int j = 0; j < n; j += 8) {
        const __m256 w = _mm256_mul_ps(exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + j), m)), inv);
        _mm256_storeu_ps(s + j, _mm256_cvtph_ps(_mm256_cvtps_ph(w, _MM_FROUND_TO_NEAREST_INT)));
    }
}

/* Floats of one staged block of keys (and one of values): 16 KiB each. */
enum { ATTN_STAGE = 4096 };

/* n rows of hd f16 values (stride bytes apart) -> n rows of hd floats. */
INL void stage_rows(float *dst, const char *src, size_t stride, int n, int hd) {
    for (int j = 0; j < n; j++, dst += hd) {
        const uint16_t *r = (const uint16_t *)(const void *)(src + (size_t)j * stride);
        int i = 0;
        for (; i + 8 <= hd; i += 8) _mm256_storeu_ps(dst + i, load_f16x8(r + i));
        for (; i < hd; i++) dst[i] = plm_fp16_to_fp32(r[i]);
    }
}

#define ATTN_TGT X86_TGT
#include "kernels/attn_pass.h"
#undef ATTN_TGT

/* Block by block: within a block every query head of the group passes over
 * the same keys and values, staged in f32 on the stack (at most ATTN_STAGE
 * values, so fewer keys a block for wide heads). */
X86_TGT static void attn_f16_x86(float *o, const uint16_t *q, int n_q, const void *k, const void *v, size_t ks,
                                 size_t vs, int n_keys, int hd, float scale, bool flash) {
    plm_attn_f16_passes(attn_pass, o, q, n_q, k, v, ks, vs, n_keys, hd, scale, flash);
}

/* g = silu(g) * u, eight at a time: g / (1 + e^-g) * u. */
X86_TGT static void swiglu_x86(float *g, const float *u, int n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), x));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    plm_swiglu(g + i, u + i, n - i);
}

/* ---- the table ----------------------------------------------------------- */

/* What this file has SIMD code for; the rest (row quantizers of the weight
 * formats, dequantizers) comes from the reference table when the complete
 * table is first asked for. */
static const plm_kernels x86_simd = {
    .name = X86_NAME,
    .attn_f16 = attn_f16_x86,
    .swiglu = swiglu_x86,
    .vec_dot = {
        [PLM_TYPE_F32] = vd_f32,
        [PLM_TYPE_F16] = vd_f16,
        [PLM_TYPE_BF16] = vd_bf16,
        [PLM_TYPE_Q4_0] = VD_Q4_0,
        [PLM_TYPE_Q4_1] = vd_q4_1,
        [PLM_TYPE_Q5_0] = vd_q5_0,
        [PLM_TYPE_Q5_1] = vd_q5_1,
        [PLM_TYPE_Q8_0] = vd_q8_0,
        [PLM_TYPE_Q2_K] = vdk_q2_K,
        [PLM_TYPE_Q3_K] = vdk_q3_K,
        [PLM_TYPE_Q4_K] = vdk_q4_K,
        [PLM_TYPE_Q5_K] = vdk_q5_K,
        [PLM_TYPE_Q6_K] = vdk_q6_K,
        [PLM_TYPE_IQ4_NL] = VD_IQ4_NL,
        [PLM_TYPE_IQ4_XS] = vd_iq4_xs,
    },
    .gemm = {
        [PLM_TYPE_Q4_0] = GEMM_Q4_0,
        [PLM_TYPE_Q5_0] = GEMM_Q5_0,
        [PLM_TYPE_Q8_0] = GEMM_Q8_0,
        [PLM_TYPE_IQ4_NL] = GEMM_IQ4_NL,
        [PLM_TYPE_Q2_K] = GEMM_Q2_K,
        [PLM_TYPE_Q3_K] = GEMM_Q3_K,
        [PLM_TYPE_Q4_K] = GEMM_Q4_K,
        [PLM_TYPE_Q5_K] = GEMM_Q5_K,
        [PLM_TYPE_Q6_K] = GEMM_Q6_K,
        [PLM_TYPE_Q4_1] = GEMM_Q4_1,
        [PLM_TYPE_Q5_1] = GEMM_Q5_1,
        [PLM_TYPE_IQ4_XS] = GEMM_IQ4_XS,
        [PLM_TYPE_F32] = gemmf_f32,
        [PLM_TYPE_F16] = gemmf_f16,
        [PLM_TYPE_BF16] = gemmf_bf16,
    },
    .quantize_row = {
        [PLM_TYPE_Q8_0] = qr_q8_0,
        [PLM_TYPE_Q8_1] = qr_q8_1,
        [PLM_TYPE_Q8_K] = qr_q8_K,
    },
};

static plm_kernels x86_table;
static pthread_once_t x86_once = PTHREAD_ONCE_INIT;

static void x86_build(void) {
    x86_table = x86_simd;
    plm_kernels_fill_from(&x86_table, plm_kernels_ref());
}

static const plm_kernels *x86_complete(void) {
    pthread_once(&x86_once, x86_build);
    return &x86_table;
}
