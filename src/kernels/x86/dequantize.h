/*
 * x86 row conversions to floats for the KV cache types (F16, Q8_0, Q4_0):
 * the value rows of attention over a quantized cache, and token embeddings.
 * Part of an x86 table (see x86.h); `type` is a constant at every call.
 * Exact, like the reference: d * integer in float, f16 widened by F16C.
 */

/* 32 signed bytes times d -> 32 floats. */
X86_INL void scale_bytes32(float *y, __m256i q, float d) {
    const __m256 vd = _mm256_set1_ps(d);
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), vd));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), vd));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), vd));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), vd));
}

/* Q8_0, Q4_0 (any signed-decoder 32-element format). */
X86_INL void dequantize_32(plm_type type, const void *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const void *b = block_at(type, x, i);
        scale_bytes32(y, block32_signed(type, b), h2f(block32_d(b)));
    }
}

X86_TARGET static void X86_FN(dequantize_row_q8_0)(const void *x, float *y, int64_t n) {
    dequantize_32(PLM_TYPE_Q8_0, x, y, n);
}

X86_TARGET static void X86_FN(dequantize_row_q4_0)(const void *x, float *y, int64_t n) {
    dequantize_32(PLM_TYPE_Q4_0, x, y, n);
}

X86_TARGET static void X86_FN(dequantize_row_f16)(const void *x, float *y, int64_t n) {
    const plm_fp16_t *h = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_f16x8(h + i));
    for (; i < n; i++) y[i] = plm_fp16_to_fp32(h[i]);
}
