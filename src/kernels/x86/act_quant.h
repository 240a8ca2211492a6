/*
 * x86 activation quantizers: a float row to the Q8_0, Q8_1 or Q8_K blocks
 * the weight formats' dots take, or to F16 (the f16 KV cache's rows).  Part
 * of an x86 table (see x86.h).
 *
 * Bit-identical to quantize.c for finite inputs: the same float scale
 * arithmetic, roundf emulated exactly (trunc, then step away from zero when
 * the dropped fraction is >= 0.5, which is exact in float), and Q8_K's
 * round-half-even by the default MXCSR rounding of vcvtps2dq.  Rows with
 * NaN or infinities may differ from the reference (garbage either way),
 * except F16's, which match for every input. */

/* roundf(v) for 8 lanes, as int32. */
X86_INL __m256i roundf_epi32(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = abs_ps(_mm256_sub_ps(v, t));
    const __m256 step = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                      _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f))));
    return _mm256_cvttps_epi32(_mm256_add_ps(t, step));
}

/* 4 x 8 int32 -> 32 int8 in order (saturating). */
X86_INL __m256i pack32(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One 32-float block scaled by id and rounded like roundf. */
X86_INL __m256i q8_block(const float *x, float id, int *sum) {
    const __m256 vid = _mm256_set1_ps(id);
    const __m256i i0 = roundf_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), vid));
    const __m256i i1 = roundf_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), vid));
    const __m256i i2 = roundf_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), vid));
    const __m256i i3 = roundf_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), vid));
    if (sum) *sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
    return pack32(i0, i1, i2, i3);
}

X86_INL float absmax32(const float *x) {
    const __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(_mm256_loadu_ps(x)), abs_ps(_mm256_loadu_ps(x + 8))),
                                   _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + 16)), abs_ps(_mm256_loadu_ps(x + 24))));
    return hmax_ps(m);
}

X86_TARGET static void X86_FN(quantize_row_q8_0)(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        const float d = absmax32(x) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = plm_fp32_to_fp16(d);
        _mm256_storeu_si256((__m256i *)y[i].qs, q8_block(x, id, NULL));
    }
}

X86_TARGET static void X86_FN(quantize_row_q8_1)(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        const float d = absmax32(x) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        int sum;
        y[i].d = plm_fp32_to_fp16(d);
        _mm256_storeu_si256((__m256i *)y[i].qs, q8_block(x, id, &sum));
        y[i].s = plm_fp32_to_fp16((float)sum * d);
    }
}

/* The first element of x[0..QK_K) whose magnitude is amax, sign kept; 0
 * when there is none (amax 0 or NaN). */
X86_INL float first_of_magnitude(const float *x, float amax) {
    const __m256 m = _mm256_set1_ps(amax);
    for (int j = 0; j < QK_K; j += 8) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + j)), m, _CMP_EQ_OQ));
        if (hit) return x[j + __builtin_ctz((unsigned)hit)];
    }
    return 0.0f;
}

/* Q8_K: scale from the signed value of largest magnitude (first on ties),
 * round half to even, and the 16-element sums. */
X86_TARGET static void X86_FN(quantize_row_q8_K)(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + j)));
        const float max = first_of_magnitude(x, hmax_ps(m));
        if (max == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        for (int j = 0; j < QK_K; j += 32) {
            const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j), vs));
            const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8), vs));
            const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 16), vs));
            const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 24), vs));
            const __m256i q = pack32(i0, i1, i2, i3);
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), q);
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

/* F16 (the KV cache's rows, attention's rounded queries): vcvtps2ph rounds
 * to nearest even like plm_fp32_to_fp16, and quiets a NaN keeping its top
 * payload bits as it does. */
X86_TARGET static void X86_FN(quantize_row_f16)(const float *x, void *vy, int64_t n) {
    plm_fp16_t *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) y[i] = plm_fp32_to_fp16(x[i]);
}
