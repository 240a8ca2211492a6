/*
 * x86 attention over the f16 KV cache (online softmax, exact or flash; the
 * pass loop is kernels/attn_pass.h, shared with ARM) and SwiGLU, with a
 * vectorized e^x, and attention over a quantized cache (attn_quant.h: the
 * shared loop with this file's block functions).  Part of an x86 table (see
 * x86.h).
 *
 * Attention reads the cache a block of keys at a time, converted to f32 on
 * the stack first (stage_keys): each f16 is converted once for all the
 * query heads that share it, and exactly, so the sums are the ones the f16
 * rows would give.  The values are staged the same way on 256-bit tables;
 * AVX-512 converts each value row once for all the heads in registers
 * (heads_values), which the perf profile of a decoding token after 3000
 * keys had put first: staging stores and the loads feeding them. */


/* Whole steps of 32 go through SIMD, the rest is summed one by one in
 * float, as plm_dot_f16 sums it: stories260K (heads of 8) is that sensitive
 * to the order, 0.0034 from llama.cpp's logits this way, 0.010 with one
 * 8-lane step or with a double sum. */
X86_INL float dot_tail(const uint16_t *q, const float *k, int i, int hd) {
    float t = 0.0f;
    for (; i < hd; i++) t += plm_fp16_to_fp32(q[i]) * k[i];
    return t;
}

/* Four keys' partial sums (8 lanes each) -> their four sums: hadd twice
 * leaves each key's lanes 0-3 in one half and 4-7 in the other. */
X86_INL __m128 sum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* scores[j] = scale * q . k_j over rows of hd floats (keys j0 on), eight
 * keys at a time (eight independent FMA chains: fewer and the FMA latency,
 * not its throughput, sets the pace), then one; each key's sum is reduced
 * the same way. */
X86_INL void scores_by_rows(float *scores, const uint16_t *q, const float *kb, int j0, int n_keys, int hd,
                            float scale) {
    const int h8 = hd & ~31;
    int j = j0;
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

#if X86_ZMM
/* On 512-bit registers the keys are staged in pairs (stage_keys): keys j
 * and j + 1 (j even, within the block's whole groups of 8) interleaved by
 * 8 floats, so one zmm holds the same 8 elements of both and one FMA does
 * both keys' steps of the 256-bit kernel.  Each lane does exactly the
 * 256-bit kernel's arithmetic (same chains, same reduction tree), so every
 * table computes the same scores bit for bit, and attn_tile.h's tiles still
 * match: the width changes how many keys an instruction serves, not a
 * key's sums.  Heads of a multiple of 32 (no tail) take this path. */
X86_INL bool keys_paired(int hd) { return hd % 32 == 0; }

/* _mm256_hadd_ps on both 256-bit halves: per 128-bit lane
 * [a0 + a1, a2 + a3, b0 + b1, b2 + b3]. */
X86_INL __m512 hadd_zmm(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xdd));
}

/* Eight keys' scores from their four pair registers ([k0|k1], [k2|k3],
 * [k4|k5], [k6|k7]), each key's lanes in sum4's order: ((0+1)+(2+3)) +
 * ((4+5)+(6+7)); stored in key order, times scale. */
X86_INL void store_scores8(float *s, __m512 z0, __m512 z1, __m512 z2, __m512 z3, float scale) {
    const __m512 g = hadd_zmm(hadd_zmm(z0, z1), hadd_zmm(z2, z3)); /* lanes: k0246 lo, hi; k1357 lo, hi */
    const __m256 even = _mm512_castps512_ps256(g);
    const __m256 odd = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(g), 1));
    const __m128 a = _mm_add_ps(_mm256_castps256_ps128(even), _mm256_extractf128_ps(even, 1)); /* keys 0 2 4 6 */
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(odd), _mm256_extractf128_ps(odd, 1));   /* keys 1 3 5 7 */
    _mm_storeu_ps(s, _mm_mul_ps(_mm_unpacklo_ps(a, b), _mm_set1_ps(scale)));
    _mm_storeu_ps(s + 4, _mm_mul_ps(_mm_unpackhi_ps(a, b), _mm_set1_ps(scale)));
}

/* Eight floats in both halves. */
X86_INL __m512 bcast8_ps(const float *p) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_load_ps(p))));
}

/* The scores of 2C keys (C = 4 or 8 pair registers: 8 chains for two
 * FMA pipes of latency 4, or the last group of 8) staged in pairs from p,
 * against the query in floats. */
X86_INL void pair_scores(float *s, const float *p, const float *qf, int hd, float scale, const int C) {
    __m512 z[8];
    for (int c = 0; c < C; c++) z[c] = _mm512_setzero_ps();
    for (int i = 0; i < hd; i += 8) {
        const __m512 qv = bcast8_ps(qf + i);
        for (int c = 0; c < C; c++) z[c] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(p + (size_t)c * 2 * hd + 2 * i), z[c]);
    }
    for (int c = 0; c < C; c += 4) store_scores8(s + 2 * c, z[c], z[c + 1], z[c + 2], z[c + 3], scale);
}

X86_INL void block_scores(float *scores, const uint16_t *q, const float *kb, int n_keys, int hd, float scale) {
    if (!keys_paired(hd)) {
        scores_by_rows(scores, q, kb, 0, n_keys, hd, scale);
        return;
    }
    _Alignas(64) float qf[1024]; /* hd <= 1024 (attn_pass) */
    for (int i = 0; i < hd; i += 16) _mm512_store_ps(qf + i, _mm512_cvtph_ps(loadu256(q + i)));
    int j = 0;
    for (; j + 16 <= n_keys; j += 16) pair_scores(scores + j, kb + (size_t)j * hd, qf, hd, scale, 8);
    if (j + 8 <= n_keys) pair_scores(scores + j, kb + (size_t)j * hd, qf, hd, scale, 4), j += 8;
    scores_by_rows(scores, q, kb, j, n_keys, hd, scale); /* the last few keys, staged as rows */
}
#else
X86_INL void block_scores(float *scores, const uint16_t *q, const float *kb, int n_keys, int hd, float scale) {
    scores_by_rows(scores, q, kb, 0, n_keys, hd, scale);
}
#endif

/* e^x in 8 lanes: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n ln2
 * is exact), e^r by its Taylor series to r^7 (error < 1e-8 relative), times
 * 2^n built in the exponent bits.  Within 0.91 ulp of e^x (every 32nd float
 * of [-87, 88] checked against exp in double); 0 below -87.3 (where expf
 * turns subnormal), so padding lanes of -inf give 0; +inf above 88.37
 * (2^127), a little early. */
/* exp_ps's constants, shared with its 16-lane twin (attn_tile.h, rv_exp):
 * the range, log2(e), ln2 in two parts, e^r's Taylor coefficients from
 * r^7 down (Horner's order). */
static const float exp_lo = -87.33654f, exp_hi = 88.37626f, exp_log2e = 1.44269504f;
static const float exp_ln2_hi = 0.693359375f, exp_ln2_lo = -2.12194440e-4f;
static const float exp_taylor[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};

X86_INL __m256 exp_ps(__m256 x) {
    const __m256 lo = _mm256_set1_ps(exp_lo), hi = _mm256_set1_ps(exp_hi);
    const __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ), over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(exp_log2e)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(exp_ln2_hi), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(exp_ln2_lo), r);
    __m256 p = _mm256_set1_ps(exp_taylor[0]);
    for (int i = 1; i < 8; i++) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(exp_taylor[i]));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 y = _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep);
    return _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
}

/* plm_softmax_run_block with SIMD max and exp; s holds room for n rounded
 * up to 8, the lanes past n padded with -inf (weight 0). */
X86_INL void softmax_run_block(plm_softmax_run *r, float *s, int n, float *o, int hd) {
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
X86_INL void block_values(float *o, const float *w, const float *vb, int n_keys, int hd) {
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
X86_INL void block_weights(float *s, int n, float max, float inv_sum) {
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
X86_INL void stage_rows(float *dst, const char *src, size_t stride, int n, int hd) {
    for (int j = 0; j < n; j++, dst += hd) {
        const uint16_t *r = (const uint16_t *)(src + (size_t)j * stride);
        int i = 0;
        for (; i + 8 <= hd; i += 8) _mm256_storeu_ps(dst + i, load_f16x8(r + i));
        for (; i < hd; i++) dst[i] = plm_fp16_to_fp32(r[i]);
    }
}

/* The keys of a block as block_scores reads them: in pairs (see
 * keys_paired) on 512-bit tables, the keys past the last whole group of 8
 * as rows after them. */
X86_INL void stage_keys(float *dst, const char *src, size_t stride, int n, int hd) {
#if X86_ZMM
    if (keys_paired(hd)) {
        const int n8 = n & ~7;
        for (int j = 0; j < n8; j += 2, dst += 2 * hd) {
            const uint16_t *r0 = (const uint16_t *)(src + (size_t)j * stride);
            const uint16_t *r1 = (const uint16_t *)(src + (size_t)(j + 1) * stride);
            for (int i = 0; i < hd; i += 8)
                _mm512_storeu_ps(dst + 2 * i, _mm512_cvtph_ps(_mm256_inserti128_si256(
                                                  _mm256_castsi128_si256(loadu128(r0 + i)), loadu128(r1 + i), 1)));
        }
        stage_rows(dst, src + (size_t)n8 * stride, stride, n - n8, hd);
        return;
    }
#endif
    stage_rows(dst, src, stride, n, hd);
}

/* The value rows of a block, staged for block_values; on 512-bit tables
 * heads_values reads them as f16 instead (heads of a multiple of 16). */
X86_INL bool values_from_rows(int hd) { return X86_ZMM && hd % 16 == 0; }

X86_INL void stage_values(float *dst, const char *src, size_t stride, int n, int hd) {
    if (!values_from_rows(hd)) stage_rows(dst, src, stride, n, hd);
}

#if X86_ZMM
/* o_h[16 c0, 16 (c0 + DT)) += sum_j w_h[j] v_j for heads h0..h0+HG-1:
 * each key's DT vectors of its f16 row converted once for the HG heads,
 * HG x DT accumulators (at most 16) in registers.  Every element is the
 * same chain of FMAs in key order as block_values', so the sums are its
 * bits. */
X86_INL void values_tile(float *o, const float *w, int h0, const int HG, int c0, const int DT, const char *v,
                         size_t vs, int n, int hd) {
    __m512 acc[16];
    for (int h = 0; h < HG; h++)
        for (int c = 0; c < DT; c++) acc[h * DT + c] = _mm512_loadu_ps(o + (size_t)(h0 + h) * hd + 16 * (c0 + c));
    for (int j = 0; j < n; j++) {
        const uint16_t *r = (const uint16_t *)(v + (size_t)j * vs) + 16 * c0;
        __m512 x[8];
        for (int c = 0; c < DT; c++) x[c] = _mm512_cvtph_ps(loadu256(r + 16 * c));
        for (int h = 0; h < HG; h++) {
            const __m512 wj = _mm512_set1_ps(w[(size_t)(h0 + h) * PLM_ATTN_BLOCK + j]);
            for (int c = 0; c < DT; c++) acc[h * DT + c] = _mm512_fmadd_ps(wj, x[c], acc[h * DT + c]);
        }
    }
    for (int h = 0; h < HG; h++)
        for (int c = 0; c < DT; c++) _mm512_storeu_ps(o + (size_t)(h0 + h) * hd + 16 * (c0 + c), acc[h * DT + c]);
}

/* A group of HG heads over the whole row, in tiles of as many vectors as
 * the registers hold (eight, four with four heads), then fewer. */
X86_INL void values_group(float *o, const float *w, int h0, const int HG, const char *v, size_t vs, int n, int hd) {
    const int chunks = hd / 16;
    int c = 0;
    if (HG < 4)
        for (; c + 8 <= chunks; c += 8) values_tile(o, w, h0, HG, c, 8, v, vs, n, hd);
    for (; c + 4 <= chunks; c += 4) values_tile(o, w, h0, HG, c, 4, v, vs, n, hd);
    for (; c + 2 <= chunks; c += 2) values_tile(o, w, h0, HG, c, 2, v, vs, n, hd);
    for (; c < chunks; c++) values_tile(o, w, h0, HG, c, 1, v, vs, n, hd);
}
#endif

X86_INL void heads_values(float *o, const float *w, int n_q, const float *vst, const char *v, size_t vs, int n,
                          int hd) {
#if X86_ZMM
    if (values_from_rows(hd)) {
        int h = 0;
        for (; h + 4 <= n_q; h += 4) values_group(o, w, h, 4, v, vs, n, hd);
        for (; h + 2 <= n_q; h += 2) values_group(o, w, h, 2, v, vs, n, hd);
        for (; h < n_q; h++) values_group(o, w, h, 1, v, vs, n, hd);
        return;
    }
#endif
    (void)v, (void)vs;
    for (int i = 0; i < n_q; i++) block_values(o + (size_t)i * hd, w + (size_t)i * PLM_ATTN_BLOCK, vst, n, hd);
}

#define ATTN_TGT X86_TARGET
#include "kernels/attn_pass.h"
#undef ATTN_TGT

/* Block by block: within a block every query head of the group passes over
 * the same keys and values, staged in f32 on the stack (at most ATTN_STAGE
 * values, so fewer keys a block for wide heads). */
X86_TARGET static void X86_FN(attn_f16)(float *o, const uint16_t *q, int n_q, const void *k, const void *v, size_t ks,
                                      size_t vs, int n_keys, int hd, float scale, bool flash) {
    plm_attn_f16_passes(attn_pass, o, q, n_q, k, v, ks, vs, n_keys, hd, scale, flash);
}

/* Over a quantized cache: the shared loop (attn_quant.c) with the block
 * functions above. */
X86_TARGET static void X86_FN(attn_softmax_block)(plm_softmax_run *r, float *s, int n, float *o, int hd) {
    softmax_run_block(r, s, n, o, hd);
}

X86_TARGET static void X86_FN(attn_weights_block)(float *s, int n, float max, float inv_sum) {
    block_weights(s, n, max, inv_sum);
}

X86_TARGET static void X86_FN(attn_values_block)(float *o, const float *w, const float *vb, int n, int hd) {
    block_values(o, w, vb, n, hd);
}

/* The value rows of the cache types inlined (dequantize.h: the same
 * arithmetic as the table's dequantize_row). */
X86_TARGET static void X86_FN(attn_stage_values)(const plm_kernels *kt, plm_type type_v, float *dst, const char *v,
                                                 size_t vs, int n, int hd) {
    for (int j = 0; j < n; j++, dst += hd) {
        const char *row = v + (size_t)j * vs;
        if (type_v == PLM_TYPE_Q8_0) dequantize_32(PLM_TYPE_Q8_0, row, dst, hd);
        else if (type_v == PLM_TYPE_Q4_0) dequantize_32(PLM_TYPE_Q4_0, row, dst, hd);
        else kt->dequantize_row[type_v](row, dst, hd);
    }
}

static const plm_attn_blocks X86_FN(attn_blocks) = {
    X86_FN(attn_softmax_block),
    X86_FN(attn_weights_block),
    X86_FN(attn_values_block),
    X86_FN(attn_stage_values),
};

static void X86_FN(attn_quant)(const plm_kernels *kt, float *o, const float *q, int n_q, plm_type type_k,
                               const void *k, size_t ks, plm_type type_v, const void *v, size_t vs, int n_keys, int hd,
                               float scale, bool flash) {
    plm_attn_quant_run(&X86_FN(attn_blocks), kt, o, q, n_q, type_k, k, ks, type_v, v, vs, n_keys, hd, scale, flash);
}

static void X86_FN(attn_quant_pass)(const plm_kernels *kt, float *o, const void *q, int n_q, plm_type type_k,
                                    const char *k, size_t ks, plm_type type_v, const char *v, size_t vs, int n_keys,
                                    int hd, float scale, plm_softmax_run *run, int pass, float *kept) {
    plm_attn_quant_pass(&X86_FN(attn_blocks), kt, o, q, n_q, type_k, k, ks, type_v, v, vs, n_keys, hd, scale, run,
                        pass, kept);
}

/* g = silu(g) * u, eight at a time: g / (1 + e^-g) * u. */
X86_TARGET static void X86_FN(swiglu)(float *g, const float *u, int n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), x));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    plm_swiglu(g + i, u + i, n - i);
}

/* g = gelu(g) * u eight at a time, plm_geglu's table look-up: x rounded to
 * f16 by the hardware (round to nearest even, as plm_fp32_to_fp16), the
 * table's f16 entries gathered as 32-bit words and cut to their low half.
 * The scalar conversion and look-up were 3% of gemma's decode. */
X86_TARGET static void X86_FN(geglu)(float *g, const float *u, int n) {
    const int *table = (const int *)(const void *)plm_gelu_table();
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    const __m256i low16 = _mm256_set1_epi32(0xffff);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m256i e = _mm256_and_si256(_mm256_i32gather_epi32(table, h, 2), low16);
        const __m256i e16 = _mm256_permute4x64_epi64(_mm256_packus_epi32(e, e), 0x08);
        __m256 y = _mm256_cvtph_ps(_mm256_castsi256_si128(e16));
        y = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
        y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LE_OQ));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(y, _mm256_loadu_ps(u + i)));
    }
    plm_geglu(g + i, u + i, n - i);
}
