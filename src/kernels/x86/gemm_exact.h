/*
 * The exact multi-token gemm entries (kernels.h: gemm_exact): several
 * tokens dotted with each weight block while it is in registers, every
 * output bit for bit the table's own vec_dot of that row and token.  Part of
 * an x86 table (see x86.h); `type` is a constant at every call.
 *
 * Why it can be exact: a block's integer dot is exact whatever instructions
 * compute it, so only the float steps must match vec_dot's: the same lanes
 * (the same elements summed into each int32 lane), the same scale products,
 * the same accumulator chains fed in the same order, the same final
 * reduction.  Each tile below repeats its vec_dot's float sequence per token
 * with the block decode hoisted out of the token loop:
 *
 *   vec_dot_32 (Q8_0; Q4_0, Q5_0 and IQ4_NL off AVX-512): two chains, the
 *       even and odd blocks of each group of four, summed by hsum_ps at the
 *       end; a 0-3 block tail into the first chain.  (vec_dot_32's unsigned
 *       Q4_0 dot gives the same lane integers as the signed one used here.)
 *       On AVX-512 both chains share one 512-bit register, half each, so
 *       one instruction does two blocks; the activation scales of a token
 *       tile are converted to floats once for all rows (gemm_exact_32).
 *   vec_dot_nibbles_zmm (Q4_0, Q5_0, IQ4_NL on AVX-512): one 512-bit chain over
 *       groups of four blocks, _mm512_reduce_add_ps, then the tail's
 *       vec_dot_32 added as one float.
 *   vec_dot_kz (Q4_K, Q2_K on AVX-512): a 512-bit and a 256-bit (mins)
 *       chain per token, each super-block decoded once for the tile.
 *   vec_dot_k, vec_dot_iq4_xs_256, vec_dot_32_min: one chain per token that
 *       the row gemm's tiles (tile_k, tile_iq4_xs, tile_32_min) already
 *       follow step for step, so those formats call the table's gemm entry
 *       in batches below the panel gemm's (gemm_exact_by_rows): no second
 *       copy of the code.
 *
 * test_kernels holds every entry to the table's vec_dot with memcmp.
 * This file's tiles take X86_GEMM_T, 4, 2 or 1 tokens and a whole row
 * range (the range a thread gets is cache-sized: forward.c).
 */

enum {
    /* 32-element blocks per row whose activation scales (floats, per token
     * of a tile) fit the stack buffer: k <= 32768; longer rows loop vec_dot */
    EXACT_MAX_NB = 1024,
    EXACT_T_MAX = 8, /* >= X86_GEMM_T of every table */
};

/* vec_dot_32 for nt tokens: each block's weights and magnitudes decoded
 * once; da holds the tokens' activation scales as floats (nb apart). */
X86_INL void exact_tile_32(plm_type type, int nt, int64_t nb, const void *x, const char *act, size_t as,
                           const float *da, float *out, int64_t os) {
    const size_t bx = block_bytes(type);
    __m256 acc0[EXACT_T_MAX], acc1[EXACT_T_MAX];
    for (int t = 0; t < nt; t++) acc0[t] = acc1[t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const void *xi = block_at(type, x, i);
        const __m128 dw = scales4_one(xi, bx);
        for (int b = 0; b < 4; b++) {
            const __m256i w = block32_signed(type, block_at(type, xi, b)), wabs = _mm256_abs_epi8(w);
            for (int t = 0; t < nt; t++) {
                const block_q8_0 *y = (const block_q8_0 *)(const void *)(act + t * as) + i + b;
                const __m128 s4 = _mm_mul_ps(dw, _mm_loadu_ps(da + t * nb + i)); /* as scales4 */
                const __m256 p = _mm256_cvtepi32_ps(dot_ss(_mm256_setzero_si256(), wabs, w, loadu256(y->qs)));
                if (b & 1) acc1[t] = _mm256_fmadd_ps(p, lane(s4, b), acc1[t]);
                else acc0[t] = _mm256_fmadd_ps(p, lane(s4, b), acc0[t]);
            }
        }
    }
    for (; i < nb; i++) {
        const void *xb = block_at(type, x, i);
        const __m256i w = block32_signed(type, xb), wabs = _mm256_abs_epi8(w);
        const float dw = h2f(block32_d(xb));
        for (int t = 0; t < nt; t++) {
            const block_q8_0 *y = (const block_q8_0 *)(const void *)(act + t * as) + i;
            const __m256 p = _mm256_cvtepi32_ps(dot_ss(_mm256_setzero_si256(), wabs, w, loadu256(y->qs)));
            acc0[t] = _mm256_fmadd_ps(p, _mm256_set1_ps(dw * da[t * nb + i]), acc0[t]);
        }
    }
    for (int t = 0; t < nt; t++) out[t * os] = hsum_ps(_mm256_add_ps(acc0[t], acc1[t]));
}

#if X86_ZMM

/* exact_tile_32 on 512-bit registers: vec_dot_32's two chains side by side
 * in one register (lanes 0-7 the even blocks' chain acc0, 8-15 the odd
 * blocks' acc1), so one vpdpbusd, convert and multiply-add serve two
 * blocks with vec_dot_32's arithmetic lane for lane.  No vpsignb on zmm:
 * the activations are negated where the weight is negative (where it is 0
 * the product is 0 either way). */
X86_INL void exact_tile_32_zmm(plm_type type, int nt, int64_t nb, const void *x, const char *act, size_t as,
                               const float *da, float *out, int64_t os) {
    const size_t bx = block_bytes(type);
    const __m512i z = _mm512_setzero_si512();
    const __m512i even = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i odd = _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    __m512 acc[EXACT_T_MAX];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const char *xi = block_at(type, x, i);
        const __m128 dw = scales4_one(xi, bx);
        const __m512i w01 = zmm_halves(block32_signed(type, xi), block32_signed(type, xi + bx));
        const __m512i w23 = zmm_halves(block32_signed(type, xi + 2 * bx), block32_signed(type, xi + 3 * bx));
        const __m512i abs01 = _mm512_abs_epi8(w01), abs23 = _mm512_abs_epi8(w23);
        const __mmask64 neg01 = _mm512_movepi8_mask(w01), neg23 = _mm512_movepi8_mask(w23);
        for (int t = 0; t < nt; t++) {
            const block_q8_0 *y = (const block_q8_0 *)(const void *)(act + t * as) + i;
            const __m512 s4 = _mm512_castps128_ps512(_mm_mul_ps(dw, _mm_loadu_ps(da + t * nb + i)));
            __m512i a01 = zmm_halves(loadu256(y[0].qs), loadu256(y[1].qs));
            __m512i a23 = zmm_halves(loadu256(y[2].qs), loadu256(y[3].qs));
            a01 = _mm512_mask_sub_epi8(a01, neg01, z, a01);
            a23 = _mm512_mask_sub_epi8(a23, neg23, z, a23);
            const __m512 p01 = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(z, abs01, a01));
            const __m512 p23 = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(z, abs23, a23));
            acc[t] = _mm512_fmadd_ps(p01, _mm512_permutexvar_ps(even, s4), acc[t]);
            acc[t] = _mm512_fmadd_ps(p23, _mm512_permutexvar_ps(odd, s4), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) {
        __m256 acc0 = _mm512_castps512_ps256(acc[t]);
        const __m256 acc1 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[t]), 1));
        for (int64_t b = i; b < nb; b++) { /* the tail, into acc0 as vec_dot_32 */
            const void *xb = block_at(type, x, b);
            const block_q8_0 *y = (const block_q8_0 *)(const void *)(act + t * as) + b;
            const __m256i w = block32_signed(type, xb);
            const __m256 p = _mm256_cvtepi32_ps(dot_ss(_mm256_setzero_si256(), _mm256_abs_epi8(w), w, loadu256(y->qs)));
            acc0 = _mm256_fmadd_ps(p, _mm256_set1_ps(h2f(block32_d(xb)) * da[t * nb + b]), acc0);
        }
        out[t * os] = hsum_ps(_mm256_add_ps(acc0, acc1));
    }
}

#endif /* X86_ZMM */

#if X86_ZMM

/* vec_dot_nibbles_zmm for nt tokens: four blocks' unsigned codes (lo: each
 * block's elements 0-15, hi: 16-31) decoded once per step. */
X86_INL void exact_tile_nibbles_zmm(plm_type type, int nt, int64_t nb, const void *x, const char *act, size_t as,
                                    float *out, int64_t os) {
    const size_t bx = block_bytes(type);
    const __m512i lut = nibble_lut();
    __m512 acc[EXACT_T_MAX];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i + 4 <= nb; i += 4) {
        __m512i lo, hi;
        const __m128 dw = nibble_codes4(type, (const uint8_t *)x + i * bx, bx, lut, &lo, &hi);
        for (int t = 0; t < nt; t++) {
            nibble_act4 g;
            nibble_act4_make(type, (const block_q8_0 *)(const void *)(act + t * as) + i, &g);
            acc[t] = nibble_dot4(lo, hi, dw, &g, acc[t]);
        }
    }
    for (int t = 0; t < nt; t++)
        out[t * os] = nibble_row_end(type, acc[t], nb, x, (const block_q8_0 *)(const void *)(act + t * as));
}

/* vec_dot_kz for nt tokens: each super-block decoded once, then its
 * dot per token in the order vec_dot takes. */
X86_INL void exact_tile_kz(plm_type type, int nt, int64_t nb, const void *x, const char *act, size_t as, float *out,
                           int64_t os) {
    __m512 acc[EXACT_T_MAX];
    __m256 accm[EXACT_T_MAX];
    for (int t = 0; t < nt; t++) {
        acc[t] = _mm512_setzero_ps();
        accm[t] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        k4_codes u;
        kz_decode(type, block_at(type, x, i), &u);
        for (int t = 0; t < nt; t++) {
            const block_q8_K *y = (const block_q8_K *)(const void *)(act + t * as) + i;
            k4_act g;
            kz_act_make(type, y, &g);
            k4_dot(&u, &g, y, &acc[t], &accm[t]);
        }
    }
    for (int t = 0; t < nt; t++) out[t * os] = k_row_end(acc[t], accm[t]);
}

/* Token tiles of 8, 4, 2 or 1 (constants: the accumulators stay in
 * registers), each over the whole row range. */
X86_INL void gemm_exact_kz(plm_type type, int64_t nb, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                           int nt, float *out, int64_t os) {
    for (int t0 = 0; t0 < nt;) {
        const int left = nt - t0, n = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        const char *at = (const char *)act + (size_t)t0 * as;
        for (int64_t r = 0; r < nr; r++) {
            const void *x = (const char *)w + r * ws;
            float *o = out + t0 * os + r;
            if (n == 8) exact_tile_kz(type, 8, nb, x, at, as, o, os);
            else if (n == 4) exact_tile_kz(type, 4, nb, x, at, as, o, os);
            else if (n == 2) exact_tile_kz(type, 2, nb, x, at, as, o, os);
            else exact_tile_kz(type, 1, nb, x, at, as, o, os);
        }
        t0 += n;
    }
}

#endif /* X86_ZMM */

/* Whether this table's vec_dot of `type` is vec_dot_nibbles_zmm. */
X86_INL bool exact_uses_zmm(plm_type type) {
    return X86_ZMM && (type == PLM_TYPE_Q4_0 || type == PLM_TYPE_Q5_0 || type == PLM_TYPE_IQ4_NL);
}

/* The table's vec_dot of the formats of this file's tiles. */
X86_INL void exact_vec_dot(plm_type type, int64_t n, float *s, const void *x, const void *y) {
#if X86_ZMM
    if (exact_uses_zmm(type)) {
        vec_dot_nibbles_zmm(type, n, s, x, y);
        return;
    }
#endif
    vec_dot_32(type, type == PLM_TYPE_Q4_0, n, s, x, y);
}

/* One weight row x nt tokens by this file's tiles (nt a constant). */
X86_INL void exact_tile(plm_type type, int nt, int64_t nb, const void *x, const char *act, size_t as,
                        const float *da, float *out, int64_t os) {
#if X86_ZMM
    if (exact_uses_zmm(type)) exact_tile_nibbles_zmm(type, nt, nb, x, act, as, out, os);
    else exact_tile_32_zmm(type, nt, nb, x, act, as, da, out, os);
#else
    exact_tile_32(type, nt, nb, x, act, as, da, out, os);
#endif
}

/* gemm_exact of the 32-element formats of this file's tiles: tokens in
 * tiles of X86_GEMM_T, then 4, 2, 1 (each size a constant inside, so the
 * accumulators stay in registers, in four copies of the code rather than
 * eight), their activation scales converted once for all rows. */
X86_INL void gemm_exact_32(plm_type type, int64_t nb, const void *w, size_t ws, int64_t nr, const void *act,
                           size_t as, int nt, float *out, int64_t os) {
    const char *wr = w, *ar = act;
    if (nb > EXACT_MAX_NB) {
        for (int64_t r = 0; r < nr; r++)
            for (int t = 0; t < nt; t++) exact_vec_dot(type, nb * 32, &out[t * os + r], wr + r * ws, ar + t * as);
        return;
    }
    float da[X86_GEMM_T * EXACT_MAX_NB];
    for (int t0 = 0; t0 < nt;) {
        const int left = nt - t0;
        const int n = left >= X86_GEMM_T ? X86_GEMM_T : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        for (int t = 0; t < n; t++) {
            const block_q8_0 *y = (const block_q8_0 *)(const void *)(ar + (size_t)(t0 + t) * as);
            for (int64_t b = 0; b < nb; b++) da[t * nb + b] = h2f(y[b].d);
        }
        const char *at = ar + (size_t)t0 * as;
        for (int64_t r = 0; r < nr; r++) {
            const void *x = wr + r * ws;
            float *o = out + t0 * os + r;
            if (n == X86_GEMM_T) exact_tile(type, X86_GEMM_T, nb, x, at, as, da, o, os);
            else if (n == 4) exact_tile(type, 4, nb, x, at, as, da, o, os);
            else if (n == 2) exact_tile(type, 2, nb, x, at, as, da, o, os);
            else exact_tile(type, 1, nb, x, at, as, da, o, os);
        }
        t0 += n;
    }
}

/* The formats whose row gemm tile (gemm_rows.h: tile_k, tile_iq4_xs,
 * tile_32_min) already follows their vec_dot step for step: the table's
 * own gemm entry, in batches small enough to stay on those tiles (the
 * AVX-512 panel gemm takes PANEL_MIN_TOK tokens or more).  test_gemm_exact
 * fails if a gemm entry ever stops being exact for small batches. */
X86_INL void gemm_exact_by_rows(plm_gemm_fn gemm, int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                size_t as, int nt, float *out, int64_t os) {
#if X86_ZMM
    _Static_assert((int)X86_GEMM_T < (int)PANEL_MIN_TOK, "a token tile takes the panel gemm");
    const int step = X86_GEMM_T;
#else
    const int step = nt;
#endif
    for (int t = 0; t < nt; t += step)
        gemm(k, w, ws, nr, (const char *)act + (size_t)t * as, as, nt - t < step ? nt - t : step, out + t * os, os);
}

/* ---- the gemm_exact entries ------------------------------------------------ */

X86_TARGET static void X86_FN(gemm_exact_q4_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                               size_t as, int nt, float *out, int64_t os) {
    gemm_exact_32(PLM_TYPE_Q4_0, k / 32, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_exact_q5_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                               size_t as, int nt, float *out, int64_t os) {
    gemm_exact_32(PLM_TYPE_Q5_0, k / 32, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_exact_q8_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                               size_t as, int nt, float *out, int64_t os) {
    gemm_exact_32(PLM_TYPE_Q8_0, k / 32, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_exact_iq4_nl)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                 size_t as, int nt, float *out, int64_t os) {
    gemm_exact_32(PLM_TYPE_IQ4_NL, k / 32, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_exact_q4_1)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                               size_t as, int nt, float *out, int64_t os) {
    gemm_exact_by_rows(X86_FN(gemm_q4_1), k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_exact_q5_1)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                               size_t as, int nt, float *out, int64_t os) {
    gemm_exact_by_rows(X86_FN(gemm_q5_1), k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_exact_q2_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                               size_t as, int nt, float *out, int64_t os) {
#if X86_ZMM
    gemm_exact_kz(PLM_TYPE_Q2_K, k / QK_K, w, ws, nr, act, as, nt, out, os);
#else
    gemm_exact_by_rows(X86_FN(gemm_q2_K), k, w, ws, nr, act, as, nt, out, os);
#endif
}

X86_TARGET static void X86_FN(gemm_exact_q3_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                               size_t as, int nt, float *out, int64_t os) {
#if X86_ZMM
    gemm_exact_kz(PLM_TYPE_Q3_K, k / QK_K, w, ws, nr, act, as, nt, out, os);
#else
    gemm_exact_by_rows(X86_FN(gemm_q3_K), k, w, ws, nr, act, as, nt, out, os);
#endif
}

X86_TARGET static void X86_FN(gemm_exact_q4_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                               size_t as, int nt, float *out, int64_t os) {
#if X86_ZMM
    gemm_exact_kz(PLM_TYPE_Q4_K, k / QK_K, w, ws, nr, act, as, nt, out, os);
#else
    gemm_exact_by_rows(X86_FN(gemm_q4_K), k, w, ws, nr, act, as, nt, out, os);
#endif
}

X86_TARGET static void X86_FN(gemm_exact_q5_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                               size_t as, int nt, float *out, int64_t os) {
    gemm_exact_by_rows(X86_FN(gemm_q5_K), k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_exact_q6_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                               size_t as, int nt, float *out, int64_t os) {
    gemm_exact_by_rows(X86_FN(gemm_q6_K), k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_exact_iq4_xs)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                 size_t as, int nt, float *out, int64_t os) {
    gemm_exact_by_rows(X86_FN(gemm_iq4_xs), k, w, ws, nr, act, as, nt, out, os);
}
