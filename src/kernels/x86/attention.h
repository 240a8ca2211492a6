/*
 * x86 attention over the f16 KV cache (online softmax, exact or flash; the
 * pass loop is kernels/attn_pass.h, shared with ARM) and SwiGLU, with a
 * vectorized e^x, and attention over a quantized cache (attn_quant.h: the
 * shared loop with this file's block functions).  Part of an x86 table (see
 * x86.h).
 *
 * Attention reads the cache a block of keys at a time, converted to f32 on
 * the stack first (stage_rows): each f16 is converted once for all the
 * query heads that share it, and exactly, so the sums are the ones the f16
 * rows would give. */


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

/* scores[j] = scale * q . k_j over rows of hd floats, eight keys at a time
 * (eight independent FMA chains: fewer and the FMA latency, not its
 * throughput, sets the pace), then one; each key's sum is reduced the same
 * way. */
X86_INL void block_scores(float *scores, const uint16_t *q, const float *kb, int n_keys, int hd, float scale) {
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

static const plm_attn_blocks X86_FN(attn_blocks) = {
    X86_FN(attn_softmax_block),
    X86_FN(attn_weights_block),
    X86_FN(attn_values_block),
};

static void X86_FN(attn_quant)(const plm_kernels *kt, float *o, const float *q, int n_q, plm_type type_k,
                               const void *k, size_t ks, plm_type type_v, const void *v, size_t vs, int n_keys, int hd,
                               float scale, bool flash) {
    plm_attn_quant_run(&X86_FN(attn_blocks), kt, o, q, n_q, type_k, k, ks, type_v, v, vs, n_keys, hd, scale, flash);
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
