/*
 * x86 kernels for the 32-element formats: Q4_0, Q5_0, Q8_0, IQ4_NL against
 * Q8_0 activations, Q4_1 and Q5_1 against Q8_1.  Part of an x86 table (see
 * x86.h); `type` is a constant at every call.
 *
 * A block decodes to its 32 weights in element order, as signed bytes
 * (block32_signed) or as unsigned codes w + block32_offset(type)
 * (block32_unsigned).  The vec_dot and the row gemm's tile are shared by
 * every format; the AVX-512 table adds 512-bit decode kernels for the
 * nibble formats whose decode is a table look-up or an offset (Q4_0, Q5_0,
 * IQ4_NL: vec_dot and the gemv matvec), and a panel gemm (gemm_panel.h).
 */

/* Every 32-element block starts with its f16 scale d; Q4_1 and Q5_1 follow
 * it with their f16 min m. */
_Static_assert(offsetof(block_q4_0, d) == 0 && offsetof(block_q5_0, d) == 0 && offsetof(block_q8_0, d) == 0 &&
                   offsetof(block_iq4_nl, d) == 0 && offsetof(block_q4_1, d) == 0 && offsetof(block_q5_1, d) == 0 &&
                   offsetof(block_q8_1, d) == 0,
               "32-element blocks start with d");
_Static_assert(offsetof(block_q4_1, m) == 2 && offsetof(block_q5_1, m) == 2 && offsetof(block_q8_1, s) == 2,
               "Q4_1/Q5_1 blocks carry m (Q8_1: s) after d");

X86_INL plm_fp16_t block32_d(const void *blk) {
    plm_fp16_t h;
    memcpy(&h, blk, sizeof h);
    return h;
}

/* Q4_1/Q5_1's min, Q8_1's d * sum(q). */
X86_INL plm_fp16_t block32_m(const void *blk) {
    plm_fp16_t h;
    memcpy(&h, (const char *)blk + 2, sizeof h);
    return h;
}

/* Q5_0/Q5_1: 0x10 in the bytes whose fifth bit is set. */
X86_INL __m256i fifth_bits(const uint8_t *qh) { return _mm256_and_si256(bits32(qh), _mm256_set1_epi8(0x10)); }

/* The block's 32 weights as signed bytes (Q4_0, Q5_0, Q8_0, IQ4_NL). */
X86_INL __m256i block32_signed(plm_type type, const void *blk) {
    switch (type) {
    case PLM_TYPE_Q4_0: return _mm256_sub_epi8(nibbles32(((const block_q4_0 *)blk)->qs), _mm256_set1_epi8(8));
    case PLM_TYPE_Q5_0: {
        const block_q5_0 *b = blk;
        return _mm256_sub_epi8(_mm256_or_si256(nibbles32(b->qs), fifth_bits(b->qh)), _mm256_set1_epi8(16));
    }
    case PLM_TYPE_IQ4_NL: return _mm256_shuffle_epi8(lut_iq4(), nibbles32(((const block_iq4_nl *)blk)->qs));
    default: return loadu256(((const block_q8_0 *)blk)->qs);
    }
}

/* The offset o that makes codes unsigned: code = weight + o. */
X86_INL int block32_offset(plm_type type) {
    switch (type) {
    case PLM_TYPE_Q4_0: return 8;
    case PLM_TYPE_Q5_0: return 16;
    case PLM_TYPE_Q8_0:
    case PLM_TYPE_IQ4_NL: return 128;
    default: return 0; /* Q4_1, Q5_1: codes are the stored values */
    }
}

/* The block's 32 unsigned codes, weight + block32_offset(type). */
X86_INL __m256i block32_unsigned(plm_type type, const void *blk) {
    switch (type) {
    case PLM_TYPE_Q4_0: return nibbles32(((const block_q4_0 *)blk)->qs);
    case PLM_TYPE_Q4_1: return nibbles32(((const block_q4_1 *)blk)->qs);
    case PLM_TYPE_Q5_0: {
        const block_q5_0 *b = blk;
        return _mm256_or_si256(nibbles32(b->qs), fifth_bits(b->qh));
    }
    case PLM_TYPE_Q5_1: {
        const block_q5_1 *b = blk;
        return _mm256_or_si256(nibbles32(b->qs), fifth_bits(b->qh));
    }
    default: /* Q8_0, IQ4_NL: signed + 128 */
        return _mm256_xor_si256(block32_signed(type, blk), _mm256_set1_epi8((char)0x80));
    }
}

/* d_w * d_a of four consecutive blocks (block strides in bytes): one
 * vcvtph2ps instead of eight scalar conversions. */
X86_INL __m128 scales4(const void *w, size_t sw, const void *a, size_t sa) {
    const uint8_t *pw = w, *pa = a;
    uint64_t hw = 0, ha = 0;
    for (int b = 0; b < 4; b++) { /* gathered in general registers */
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
X86_INL __m256 lane(__m128 s4, int b) {
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s4), _mm256_set1_epi32(b));
}

/* One block of signed weights w against Q8_0 activations, as 8 int32 lanes
 * converted to float (exact: |lane| < 2^24). */
X86_INL __m256 block32_dot_signed(__m256i w, const block_q8_0 *y) {
    return _mm256_cvtepi32_ps(dot_ss(_mm256_setzero_si256(), _mm256_abs_epi8(w), w, loadu256(y->qs)));
}

/* Q4_0 with its nibbles kept unsigned: dot(u, a) - 8 * sum(a), one dot more
 * but no sign juggling (the gemm amortizes the sign trick instead). */
X86_INL __m256 block32_dot_q4_0_unsigned(const block_q4_0 *x, const block_q8_0 *y) {
    const __m256i a = loadu256(y->qs);
    const __m256i p = dot_us(_mm256_setzero_si256(), nibbles32(x->qs), a);
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(p, dot_us(_mm256_setzero_si256(), _mm256_set1_epi8(8), a)));
}

/* Block i of row x against block i of y (Q8_0), as 8 float lanes. */
X86_INL __m256 block32_dot(plm_type type, bool unsigned_q4_0, const void *x, const block_q8_0 *y, int64_t i) {
    if (type == PLM_TYPE_Q4_0 && unsigned_q4_0) return block32_dot_q4_0_unsigned((const block_q4_0 *)x + i, y + i);
    return block32_dot_signed(block32_signed(type, block_at(type, x, i)), y + i);
}

/* vec_dot of a signed-decoder format (Q4_0 by unsigned nibbles when
 * unsigned_q4_0): four blocks a step into two chains, their scales
 * converted together. */
X86_INL void vec_dot_32(plm_type type, bool unsigned_q4_0, int64_t n, float *s, const void *x,
                        const block_q8_0 *y) {
    const int64_t nb = n / 32;
    const size_t bx = block_bytes(type);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const __m128 s4 = scales4(block_at(type, x, i), bx, &y[i].d, sizeof *y);
        acc0 = _mm256_fmadd_ps(block32_dot(type, unsigned_q4_0, x, y, i), lane(s4, 0), acc0);
        acc1 = _mm256_fmadd_ps(block32_dot(type, unsigned_q4_0, x, y, i + 1), lane(s4, 1), acc1);
        acc0 = _mm256_fmadd_ps(block32_dot(type, unsigned_q4_0, x, y, i + 2), lane(s4, 2), acc0);
        acc1 = _mm256_fmadd_ps(block32_dot(type, unsigned_q4_0, x, y, i + 3), lane(s4, 3), acc1);
    }
    for (; i < nb; i++) {
        const float d = h2f(block32_d(block_at(type, x, i))) * h2f(y[i].d);
        acc0 = _mm256_fmadd_ps(block32_dot(type, unsigned_q4_0, x, y, i), _mm256_set1_ps(d), acc0);
    }
    *s = hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* Q4_1/Q5_1 against Q8_1: unsigned codes, and the min term m * s where
 * Q8_1's s = d_a * sum(q_a). */
X86_INL void vec_dot_32_min(plm_type type, int64_t n, float *s, const void *x, const block_q8_1 *y) {
    const int64_t nb = n / 32;
    __m256 acc = _mm256_setzero_ps();
    float summ = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        const void *b = block_at(type, x, i);
        const __m256i p = dot_us(_mm256_setzero_si256(), block32_unsigned(type, b), loadu256(y[i].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(block32_d(b)) * h2f(y[i].d)), acc);
        summ += h2f(block32_m(b)) * h2f(y[i].s);
    }
    *s = hsum_ps(acc) + summ;
}

/* f16 scales of 4 blocks (stride bytes apart) as 4 floats. */
X86_INL __m128 scales4_one(const void *p, size_t stride) {
    const uint8_t *b = p;
    uint64_t h = 0;
    for (int i = 0; i < 4; i++) {
        uint16_t u;
        memcpy(&u, b + i * stride, 2);
        h |= (uint64_t)u << (16 * i);
    }
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)h));
}

/* ---- 512-bit decode kernels (the AVX-512 table) ---------------------------
 * Four 32-element blocks per step: 128-bit lane b of `lo` holds block b's
 * low nibbles (elements 0-15), lane b of `hi` its high nibbles (16-31); the
 * activations are regrouped to match with two cross-lane permutes.  Half
 * the instructions per block of the 256-bit code, which matters because a
 * single core runs those kernels at the edge of memory bandwidth. */
#if X86_ZMM

X86_INL __m512i lanes4(const uint8_t *p, size_t stride) {
    __m512i q = _mm512_castsi128_si512(loadu128(p));
    q = _mm512_inserti32x4(q, loadu128(p + stride), 1);
    q = _mm512_inserti32x4(q, loadu128(p + 2 * stride), 2);
    return _mm512_inserti32x4(q, loadu128(p + 3 * stride), 3);
}

X86_INL void act4(const block_q8_0 *y, __m512i *alo, __m512i *ahi) {
    const __m512i a01 = zmm_halves(loadu256(y[0].qs), loadu256(y[1].qs));
    const __m512i a23 = zmm_halves(loadu256(y[2].qs), loadu256(y[3].qs));
    *alo = _mm512_permutex2var_epi64(a01, _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13), a23);
    *ahi = _mm512_permutex2var_epi64(a01, _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15), a23);
}

/* s4[b] repeated over the four floats of lane b. */
X86_INL __m512 spread4(__m128 s4) {
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                 _mm512_castps128_ps512(s4));
}

/* Q5_0's d and fifth bits of four blocks (stride bytes apart) from one
 * 8-byte load per block (d: bytes 0-1, qh: 2-5): two byte shuffles sort
 * them into the four scales and the two 64-bit masks of fifth_bit_masks4,
 * where building them from scalar loads, shifts and ors cost a quarter of
 * the Q5_0 decode loop.  Mask layout: bit j of block b's qh belongs to
 * element j (lane b of `lo`, byte j), bit 16 + j to element 16 + j (lane b
 * of `hi`, byte j), as nibble_codes4 lays the codes out. */
X86_INL __m128 q5_0_heads4(const uint8_t *p, size_t stride, __mmask64 *lo, __mmask64 *hi) {
    uint64_t h[4];
    for (int b = 0; b < 4; b++) memcpy(&h[b], p + b * stride, 8);
    const __m128i a = _mm_set_epi64x((long long)h[1], (long long)h[0]);
    const __m128i c = _mm_set_epi64x((long long)h[3], (long long)h[2]);
    /* per pair of blocks: dword 0 the low qh halves, 1 the high ones, 2 the d's */
    const __m128i sort = _mm_setr_epi8(2, 3, 10, 11, 4, 5, 12, 13, 0, 1, 8, 9, -1, -1, -1, -1);
    const __m128i sa = _mm_shuffle_epi8(a, sort), sc = _mm_shuffle_epi8(c, sort);
    const __m128i masks = _mm_unpacklo_epi32(sa, sc); /* lo01 lo23 hi01 hi23 */
    *lo = _cvtu64_mask64((uint64_t)_mm_cvtsi128_si64(masks));
    *hi = _cvtu64_mask64((uint64_t)_mm_extract_epi64(masks, 1));
    return _mm_cvtph_ps(_mm_unpackhi_epi32(sa, sc)); /* d01 d23 */
}

/* The unsigned codes u of four nibble blocks starting at block xi, blocks
 * bx bytes apart: lane b of *lo holds block b's elements 0-15, of *hi its
 * elements 16-31.  u = nibble (Q4_0), nibble + 16 * fifth bit (Q5_0) or
 * lut[nibble] (IQ4_NL, levels + 128).  Returns the blocks' scales d. */
X86_INL __m128 nibble_codes4(plm_type type, const uint8_t *xi, size_t bx, __m512i lut, __m512i *lo, __m512i *hi) {
    const size_t qs_at = type == PLM_TYPE_IQ4_NL  ? offsetof(block_iq4_nl, qs)
                         : type == PLM_TYPE_Q5_0 ? offsetof(block_q5_0, qs)
                                                 : offsetof(block_q4_0, qs);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i q = lanes4(xi + qs_at, bx);
    *lo = _mm512_and_si512(q, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    if (type == PLM_TYPE_IQ4_NL) {
        *lo = _mm512_shuffle_epi8(lut, *lo);
        *hi = _mm512_shuffle_epi8(lut, *hi);
    }
    if (type != PLM_TYPE_Q5_0) return scales4_one(xi, bx);
    const __m512i bit5 = _mm512_set1_epi8(0x10);
    __mmask64 mlo, mhi;
    const __m128 d = q5_0_heads4(xi, bx, &mlo, &mhi);
    *lo = _mm512_mask_add_epi8(*lo, mlo, *lo, bit5); /* nibble + 16 = nibble | 16 */
    *hi = _mm512_mask_add_epi8(*hi, mhi, *hi, bit5);
    return d;
}

/* The codes' bias: a block's value is u - bias. */
X86_INL char nibble_bias(plm_type type) {
    return (char)(type == PLM_TYPE_IQ4_NL ? 0x80 : type == PLM_TYPE_Q5_0 ? 16 : 8);
}

/* Four blocks of one token's Q8_0 activation as the nibble kernels meet
 * them: the bytes regrouped to nibble_codes4's lanes, the bias products
 * and the scales.  vec_dot makes one per step; the decode matvec
 * (gemv_nibbles_zmm) makes them once per matrix instead of once per row,
 * which for short rows (gemma's 1152 columns) was a third of the loop. */
typedef struct nibble_act4 {
    __m512i lo, hi; /* act4 */
    __m512i bias;   /* bias * sum(a), as dpbusd(bias, lo) + dpbusd(bias, hi) */
    __m128 d;       /* the four blocks' scales */
} nibble_act4;

X86_INL void nibble_act4_make(plm_type type, const block_q8_0 *y, nibble_act4 *g) {
    const __m512i z = _mm512_setzero_si512(), bias = _mm512_set1_epi8(nibble_bias(type));
    act4(y, &g->lo, &g->hi);
    g->bias = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, bias, g->lo), bias, g->hi);
    g->d = scales4_one(&y->d, sizeof *y);
}

/* acc + four decoded nibble blocks (nibble_codes4: codes lo, hi, scales
 * dw) against activation group g: sum(u * a) - bias * sum(a), scaled by
 * d_w * d_a. */
X86_INL __m512 nibble_dot4(__m512i lo, __m512i hi, __m128 dw, const nibble_act4 *g, __m512 acc) {
    const __m512i z = _mm512_setzero_si512();
    const __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, lo, g->lo), hi, g->hi);
    const __m512 pf = _mm512_cvtepi32_ps(_mm512_sub_epi32(p, g->bias));
    return _mm512_fmadd_ps(pf, spread4(_mm_mul_ps(dw, g->d)), acc);
}

/* The same for the four blocks at x, decoded here. */
X86_INL __m512 nibble_step4(plm_type type, const uint8_t *x, size_t bx, __m512i lut, const nibble_act4 *g,
                            __m512 acc) {
    __m512i lo, hi;
    const __m128 dw = nibble_codes4(type, x, bx, lut, &lo, &hi);
    return nibble_dot4(lo, hi, dw, g, acc);
}

/* IQ4_NL's levels + 128 as unsigned bytes (nibble_codes4's lut). */
X86_INL __m512i nibble_lut(void) {
    return _mm512_add_epi8(_mm512_broadcast_i32x4(loadu128(kvalues_iq4nl)), _mm512_set1_epi8((char)0x80));
}

/* A row's dot from its accumulator and its last 0-3 blocks (the 256-bit
 * code). */
X86_INL float nibble_row_end(plm_type type, __m512 acc, int64_t nb, const uint8_t *x, const block_q8_0 *y) {
    float sum = _mm512_reduce_add_ps(acc);
    const int64_t done = nb / 4 * 4;
    if (done < nb) {
        float t;
        vec_dot_32(type, type != PLM_TYPE_IQ4_NL, (nb - done) * 32, &t, x + done * block_bytes(type), y + done);
        sum += t;
    }
    return sum;
}

/* Q4_0 (u = nibble, bias 8), Q5_0 (u = 5-bit code, bias 16) or IQ4_NL
 * (u = level + 128, bias 128), four blocks a step.  One accumulator:
 * measured 15% faster than two interleaved chains of eight (the loop stays
 * within the registers). */
X86_INL void vec_dot_nibbles_zmm(plm_type type, int64_t n, float *s, const void *x, const block_q8_0 *y) {
    const size_t bx = block_bytes(type);
    const int64_t nb = n / 32;
    const __m512i lut = nibble_lut();
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i + 4 <= nb; i += 4) {
        nibble_act4 g;
        nibble_act4_make(type, y + i, &g);
        acc = nibble_step4(type, (const uint8_t *)x + i * bx, bx, lut, &g, acc);
    }
    *s = nibble_row_end(type, acc, nb, x, y);
}

/* Groups gemv_nibbles_zmm prepares at most (on the stack: 32 KiB); longer
 * rows take the row loop. */
enum { NIBBLE_ACT4_MAX = 128 };

/* n_rows rows of w (ws bytes apart) against one token: vec_dot_nibbles_zmm
 * with the activation groups made once.  Two rows a step (sharing each
 * group's loads) measured half the speed, as a 4-row version did before:
 * one row at a time it is. */
X86_INL void gemv_nibbles_zmm(plm_type type, int64_t k, const void *w, size_t ws, int64_t n_rows,
                              const block_q8_0 *y, float *out) {
    const int64_t nb = k / 32, groups = nb / 4;
    if (groups > NIBBLE_ACT4_MAX) {
        for (int64_t r = 0; r < n_rows; r++) vec_dot_nibbles_zmm(type, k, &out[r], (const char *)w + r * ws, y);
        return;
    }
    nibble_act4 g[NIBBLE_ACT4_MAX];
    for (int64_t i = 0; i < groups; i++) nibble_act4_make(type, y + 4 * i, &g[i]);
    const size_t bx = block_bytes(type);
    const __m512i lut = nibble_lut();
    for (int64_t r = 0; r < n_rows; r++) {
        const uint8_t *x = (const uint8_t *)w + r * ws;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i = 0; i < groups; i++) acc = nibble_step4(type, x + 4 * i * bx, bx, lut, &g[i], acc);
        out[r] = nibble_row_end(type, acc, nb, x, y);
    }
}

#endif /* X86_ZMM */

/* ---- the vec_dot entries --------------------------------------------------- */

X86_TARGET static void X86_FN(vec_dot_q4_0)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_nibbles_zmm(PLM_TYPE_Q4_0, n, s, w, a);
#else
    vec_dot_32(PLM_TYPE_Q4_0, true, n, s, w, a);
#endif
}

X86_TARGET static void X86_FN(vec_dot_iq4_nl)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_nibbles_zmm(PLM_TYPE_IQ4_NL, n, s, w, a);
#else
    vec_dot_32(PLM_TYPE_IQ4_NL, false, n, s, w, a);
#endif
}

X86_TARGET static void X86_FN(vec_dot_q5_0)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_nibbles_zmm(PLM_TYPE_Q5_0, n, s, w, a);
#else
    vec_dot_32(PLM_TYPE_Q5_0, false, n, s, w, a);
#endif
}

#if X86_ZMM
X86_TARGET static void X86_FN(gemv_q4_0)(int64_t k, const void *w, size_t ws, int64_t n_rows, const void *act,
                                         float *out) {
    gemv_nibbles_zmm(PLM_TYPE_Q4_0, k, w, ws, n_rows, act, out);
}

X86_TARGET static void X86_FN(gemv_q5_0)(int64_t k, const void *w, size_t ws, int64_t n_rows, const void *act,
                                         float *out) {
    gemv_nibbles_zmm(PLM_TYPE_Q5_0, k, w, ws, n_rows, act, out);
}

X86_TARGET static void X86_FN(gemv_iq4_nl)(int64_t k, const void *w, size_t ws, int64_t n_rows, const void *act,
                                           float *out) {
    gemv_nibbles_zmm(PLM_TYPE_IQ4_NL, k, w, ws, n_rows, act, out);
}
#endif

X86_TARGET static void X86_FN(vec_dot_q8_0)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_32(PLM_TYPE_Q8_0, false, n, s, w, a);
}

#if X86_ZMM
/* vec_dot_q8_0 row by row, inlined: what a quantized KV cache's scores go
 * through (attn_quant.c), rows of a head's 2-8 blocks, where the call per
 * key cost as much as its dot (qwen3-1.7b, Q8_0 cache, 3000 keys: a
 * quarter of a decoded token's time was in vec_dot_q8_0). */
X86_TARGET static void X86_FN(gemv_q8_0)(int64_t k, const void *w, size_t ws, int64_t n_rows, const void *act,
                                         float *out) {
    for (int64_t r = 0; r < n_rows; r++) vec_dot_32(PLM_TYPE_Q8_0, false, k, &out[r], (const char *)w + r * ws, act);
}
#endif

X86_TARGET static void X86_FN(vec_dot_q4_1)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_32_min(PLM_TYPE_Q4_1, n, s, w, a);
}

X86_TARGET static void X86_FN(vec_dot_q5_1)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_32_min(PLM_TYPE_Q5_1, n, s, w, a);
}

/* ---- the row gemm's tiles --------------------------------------------------
 * One weight row x nt tokens (nt a constant where it matters, so the
 * accumulators live in registers): each block decoded once for nt tokens. */

X86_INL void tile_32(plm_type type, int nt, int64_t nb, const void *x, const char *act, size_t as, float *out,
                     int64_t os) {
    __m256 acc[X86_GEMM_T];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const void *xb = block_at(type, x, b);
        const __m256i w = block32_signed(type, xb), wabs = _mm256_abs_epi8(w);
        const float dw = h2f(block32_d(xb));
        for (int t = 0; t < nt; t++) {
            const block_q8_0 *y = (const block_q8_0 *)(const void *)(act + t * as) + b;
            const __m256i p = dot_ss(_mm256_setzero_si256(), wabs, w, loadu256(y->qs));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * h2f(y->d)), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) out[t * os] = hsum_ps(acc[t]);
}

X86_INL void tile_32_min(plm_type type, int nt, int64_t nb, const void *x, const char *act, size_t as, float *out,
                         int64_t os) {
    __m256 acc[X86_GEMM_T];
    float summ[X86_GEMM_T];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps(), summ[t] = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const void *xb = block_at(type, x, b);
        const __m256i u = block32_unsigned(type, xb);
        const float dw = h2f(block32_d(xb)), m = h2f(block32_m(xb));
        for (int t = 0; t < nt; t++) {
            const block_q8_1 *y = (const block_q8_1 *)(const void *)(act + t * as) + b;
            const __m256i p = dot_us(_mm256_setzero_si256(), u, loadu256(y->qs));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * h2f(y->d)), acc[t]);
            summ[t] += m * h2f(y->s);
        }
    }
    for (int t = 0; t < nt; t++) out[t * os] = hsum_ps(acc[t]) + summ[t];
}
