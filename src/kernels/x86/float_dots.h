/*
 * x86 kernels for float weights (F32, F16, BF16): activations stay f32.
 * Part of an x86 table (see x86.h); `type` is a constant at every call.
 *
 * Float weights follow the reference exactly in kind where it matters:
 * F32 rounds each product to float and keeps the sum in double (float
 * accumulation drifts enough to move a small F32 model's logits past the
 * end-to-end tolerance; stories260K's dot products cancel heavily).  Still
 * memory-bound: 8 products cost one multiply, two widenings and two adds.
 *
 * F16/BF16 sum fused products in float over chunks of 256 elements (32 per
 * lane), each chunk then added to a double total.  The exact double sum
 * made decode compute-bound (27 GB/s with two threads, llama.cpp's float
 * sums ran 1.6x faster on the same F16 file); the f16 fixtures' logits stay
 * within their tolerance either way.
 */

/* Eight weights from element i of a float row, as floats. */
X86_INL __m256 float_load8(plm_type type, const void *row, int64_t i) {
    switch (type) {
    case PLM_TYPE_F16: return load_f16x8((const plm_fp16_t *)row + i);
    case PLM_TYPE_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(loadu128((const plm_bf16_t *)row + i)), 16));
    default: return _mm256_loadu_ps((const float *)row + i);
    }
}

/* One weight, for the tails. */
X86_INL float float_load1(plm_type type, const void *row, int64_t i) {
    switch (type) {
    case PLM_TYPE_F16: return plm_fp16_to_fp32(((const plm_fp16_t *)row)[i]);
    case PLM_TYPE_BF16: return plm_bf16_to_fp32(((const plm_bf16_t *)row)[i]);
    default: return ((const float *)row)[i];
    }
}

/* F32 keeps products rounded to float, summed in double. */
X86_INL bool float_exact(plm_type type) { return type == PLM_TYPE_F32; }

/* (lo, hi) += the 8 floats of p, widened to double. */
X86_INL void widen_add(__m256d *lo, __m256d *hi, __m256 p) {
    *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
    *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
}

/* F32: each product rounded to float, summed in double, 16 a step. */
X86_INL void vec_dot_float_exact(plm_type type, int64_t n, float *s, const void *w, const float *a) {
    __m256d acc0 = _mm256_setzero_pd(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        widen_add(&acc0, &acc1, _mm256_mul_ps(float_load8(type, w, i), _mm256_loadu_ps(a + i)));
        widen_add(&acc2, &acc3, _mm256_mul_ps(float_load8(type, w, i + 8), _mm256_loadu_ps(a + i + 8)));
    }
    for (; i + 8 <= n; i += 8) widen_add(&acc0, &acc1, _mm256_mul_ps(float_load8(type, w, i), _mm256_loadu_ps(a + i)));
    double sum = hsum_pd(_mm256_add_pd(_mm256_add_pd(acc0, acc1), _mm256_add_pd(acc2, acc3)));
    for (; i < n; i++) sum += (double)(float_load1(type, w, i) * a[i]);
    *s = (float)sum;
}

/* F16/BF16: fused products in float per chunk of 256, chunks in double. */
X86_INL void vec_dot_float_chunked(plm_type type, int64_t n, float *s, const void *w, const float *a) {
    __m256d tot_lo = _mm256_setzero_pd(), tot_hi = tot_lo;
    int64_t i = 0;
    while (i + 32 <= n) {
        const int64_t end = i + 256 <= n ? i + 256 : n & ~(int64_t)31;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
        for (; i < end; i += 32) {
            acc0 = _mm256_fmadd_ps(float_load8(type, w, i), _mm256_loadu_ps(a + i), acc0);
            acc1 = _mm256_fmadd_ps(float_load8(type, w, i + 8), _mm256_loadu_ps(a + i + 8), acc1);
            acc2 = _mm256_fmadd_ps(float_load8(type, w, i + 16), _mm256_loadu_ps(a + i + 16), acc2);
            acc3 = _mm256_fmadd_ps(float_load8(type, w, i + 24), _mm256_loadu_ps(a + i + 24), acc3);
        }
        widen_add(&tot_lo, &tot_hi, _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    }
    double sum = hsum_pd(_mm256_add_pd(tot_lo, tot_hi));
    for (; i < n; i++) sum += (double)(float_load1(type, w, i) * a[i]);
    *s = (float)sum;
}

X86_TARGET static void X86_FN(vec_dot_f32)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_float_exact(PLM_TYPE_F32, n, s, w, a);
}

X86_TARGET static void X86_FN(vec_dot_f16)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_float_chunked(PLM_TYPE_F16, n, s, w, a);
}

X86_TARGET static void X86_FN(vec_dot_bf16)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_float_chunked(PLM_TYPE_BF16, n, s, w, a);
}

/* gemm for float weights: a tile of FLOAT_R rows x FLOAT_T tokens, each
 * weight vector loaded (and widened) once for FLOAT_T tokens.  F16/BF16 sum
 * fused products in float for FLOAT_CHUNK elements per lane, each partial
 * sum then joining a double total, as llama.cpp sums its f16 dots in float.
 * F32 keeps vec_dot's arithmetic, products rounded to float and summed in
 * double: summing even eight products per lane in float moved
 * stories260K's logits 3x further from llama.cpp's (0.011 against 0.0034).
 * That costs F32 the speed-up (conversions, not loads, bound it). */
enum { FLOAT_R = 2, FLOAT_T = 4, FLOAT_CHUNK = 256 };

X86_INL void float_tile(plm_type type, int nr, int nt, int64_t k, const char *w, size_t ws, const char *act,
                        size_t as, float *out, int64_t os) {
    const bool exact = float_exact(type);
    double tot[FLOAT_R][FLOAT_T] = {{0}};
    const int64_t k8 = k & ~(int64_t)7;
    for (int64_t i0 = 0; i0 < k8; i0 += FLOAT_CHUNK) {
        const int64_t i1 = i0 + FLOAT_CHUNK < k8 ? i0 + FLOAT_CHUNK : k8;
        __m256 acc[FLOAT_R][FLOAT_T];
        __m256d lo[FLOAT_R][FLOAT_T], hi[FLOAT_R][FLOAT_T];
        for (int r = 0; r < nr; r++)
            for (int t = 0; t < nt; t++) acc[r][t] = _mm256_setzero_ps(), lo[r][t] = hi[r][t] = _mm256_setzero_pd();
        for (int64_t i = i0; i < i1; i += 8) {
            __m256 wv[FLOAT_R];
            for (int r = 0; r < nr; r++) wv[r] = float_load8(type, w + r * ws, i);
            for (int t = 0; t < nt; t++) {
                const __m256 av = _mm256_loadu_ps((const float *)(const void *)(act + t * as) + i);
                for (int r = 0; r < nr; r++) {
                    if (exact) widen_add(&lo[r][t], &hi[r][t], _mm256_mul_ps(wv[r], av));
                    else acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);
                }
            }
        }
        for (int r = 0; r < nr; r++)
            for (int t = 0; t < nt; t++) {
                if (!exact) widen_add(&lo[r][t], &hi[r][t], acc[r][t]);
                tot[r][t] += hsum_pd(_mm256_add_pd(lo[r][t], hi[r][t]));
            }
    }
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nt; t++) {
            const float *a = (const float *)(const void *)(act + t * as);
            for (int64_t i = k8; i < k; i++) tot[r][t] += (double)(float_load1(type, w + r * ws, i) * a[i]);
            out[t * os + r] = (float)tot[r][t];
        }
}

/* Whole tiles with constant sizes (accumulators in registers), edges with
 * variable ones. */
X86_INL void gemm_float(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                        int nt, float *out, int64_t os) {
    for (int64_t r = 0; r < nr; r += FLOAT_R)
        for (int t = 0; t < nt; t += FLOAT_T) {
            const int rn = nr - r < FLOAT_R ? (int)(nr - r) : FLOAT_R, tn = nt - t < FLOAT_T ? nt - t : FLOAT_T;
            const char *wr = (const char *)w + (size_t)r * ws, *at = (const char *)act + (size_t)t * as;
            if (rn == FLOAT_R && tn == FLOAT_T) float_tile(type, FLOAT_R, FLOAT_T, k, wr, ws, at, as, out + t * os + r, os);
            else float_tile(type, rn, tn, k, wr, ws, at, as, out + t * os + r, os);
        }
}

X86_TARGET static void X86_FN(gemm_f32)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                        int nt, float *out, int64_t os) {
    gemm_float(PLM_TYPE_F32, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_f16)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                        int nt, float *out, int64_t os) {
    gemm_float(PLM_TYPE_F16, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_bf16)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                                         int nt, float *out, int64_t os) {
    gemm_float(PLM_TYPE_BF16, k, w, ws, nr, act, as, nt, out, os);
}
