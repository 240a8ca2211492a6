/*
 * Coarse int8 prefill on AVX-512 VNNI (X86_ZMM): kernels/coarse.h says what
 * and why; the reference there (coarse.c) is the arithmetic.  Part of an
 * x86 table (see x86.h); `type` is a constant at every call.
 *
 * Shape.  Rows in panels of 16 (one per int32 lane), k in slices of
 * CO_KS super-blocks, tokens in groups of up to CO_TG.  A panel slice is
 * converted once for the group: each row's super-block is decoded (kdec),
 * dequantized to floats exactly as the reference dequantizer does, scaled
 * to int8 under its own D and stored as unsigned codes u = q + 128, then
 * transposed so that zmm g of sub-block s holds the 16 rows' codes
 * 32s+4g..32s+4g+3 (as gemm_panel.h's pblk).  A tile of CO_C tokens then
 * does, per super-block and token, 64 vpdpbusd into one int32 chain that
 * starts at -128 * sum(a) (the offset, exactly, from Q8_K's bsums), and one
 * convert-scale-accumulate; the CO_C chains hide vpdpbusd's latency.
 *
 * Working set: the converted slice (16 KiB, in L1 while every token of the
 * group passes over it), the activation table (16 KiB) and the row buffer
 * (4 KiB) on the stack.
 */
enum {
    CO_R = 16,    /* rows per panel */
    CO_KS = 4,    /* super-blocks per k slice */
    CO_TG = 512,  /* most tokens per group */
    CO_C = 8,     /* tokens per register tile */
};

typedef struct {
    __m512i q[CO_KS][QK_K / 4]; /* [super-block][8 * sub-block + g]: 64 zmm of codes */
    __m512 d[CO_KS];                     /* lane j: row j's D */
} cpanel;

typedef struct {
    int32_t init[CO_TG][CO_KS]; /* -128 * sum(a) over the super-block */
    float d[CO_TG][CO_KS];      /* activation scale */
} ctab;

/* Whether the format's reference dequantizer computes S * q - M (a min per
 * 16 or 32 elements) rather than S * (q - o). */
X86_INL bool co_has_min(plm_type type) {
    return type == PLM_TYPE_Q2_K || type == PLM_TYPE_Q4_K || type == PLM_TYPE_Q5_K;
}

/* The code offset o of the S * (q - o) formats (kdec's codes). */
X86_INL int co_offset(plm_type type) {
    return type == PLM_TYPE_Q6_K ? 32 : type == PLM_TYPE_Q3_K ? 4 : 128; /* IQ4_XS: levels + 128 */
}

/* A super-block dequantized into v[h] (elements 16h..16h+15), with the
 * reference dequantizer's roundings: S = d * sc, then S * q - M or
 * S * (q - o), each product and difference rounded once. */
X86_INL void co_dequantize(plm_type type, const void *blk, __m512 v[16]) {
    kdec u;
    kdec_decode(type, blk, &u);
    _Alignas(32) int16_t sc[8][16], off[16];
    for (int s = 0; s < 8; s++) _mm256_store_si256((__m256i *)(void *)sc[s], u.sc[s]);
    _mm256_store_si256((__m256i *)(void *)off, u.off);
    for (int h = 0; h < 16; h++) {
        const __m512 S = _mm512_set1_ps(u.d * (float)sc[h / 2][8 * (h % 2)]);
        const __m512i q = _mm512_cvtepu8_epi32(loadu128(u.q + 16 * h));
        if (co_has_min(type))
            v[h] = _mm512_sub_ps(_mm512_mul_ps(S, _mm512_cvtepi32_ps(q)), _mm512_set1_ps(u.dm * (float)off[h]));
        else
            v[h] = _mm512_mul_ps(S, _mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(co_offset(type)))));
    }
}

/* plm_coarse_quantize_256 on v, as unsigned codes q + 128 into u; returns D. */
X86_INL float co_quantize(const __m512 v[16], uint8_t *u) {
    __m512 m = _mm512_abs_ps(v[0]);
    for (int h = 1; h < 16; h++) m = _mm512_max_ps(m, _mm512_abs_ps(v[h]));
    const float amax = _mm512_reduce_max_ps(m);
    const __m512 id = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    const __m512i o = _mm512_set1_epi32(128);
    for (int h = 0; h < 16; h++) { /* vcvtps2dq rounds half to even, as nearbyintf */
        const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v[h], id)), o);
        _mm_storeu_si128((__m128i *)(void *)(u + 16 * h), _mm512_cvtepi32_epi8(q));
    }
    return amax / 127.0f;
}

/* Super-block b0 + b of rows [0, rn) into the panel (rows past rn: code 0,
 * D 0). */
X86_INL void co_convert(plm_type type, const char *w, size_t ws, int rn, int64_t sb, int b, cpanel *p) {
    _Alignas(64) uint8_t rows[CO_R][QK_K];
    _Alignas(64) float d[CO_R];
    for (int j = 0; j < CO_R; j++) {
        if (j >= rn) {
            memset(rows[j], 128, QK_K);
            d[j] = 0.0f;
            continue;
        }
        __m512 v[16];
        co_dequantize(type, block_at(type, w + (size_t)j * ws, sb), v);
        d[j] = co_quantize(v, rows[j]);
    }
    p->d[b] = _mm512_load_ps(d);
    for (int s = 0; s < 8; s++) {
        __m256i r[CO_R];
        for (int j = 0; j < CO_R; j++) r[j] = load256(rows[j] + 32 * s);
        transpose8x8(r);
        transpose8x8(r + 8);
        for (int g = 0; g < 8; g++) p->q[b][8 * s + g] = zmm_halves(r[g], r[8 + g]);
    }
}

X86_INL void co_tabulate(const char *act, size_t as, int tn, int64_t b0, int kb, ctab *t) {
    for (int c = 0; c < tn; c++)
        for (int b = 0; b < kb; b++) {
            const block_q8_K *y = (const block_q8_K *)(const void *)(act + (size_t)c * as) + b0 + b;
            const __m256i s16 = loadu256(y->bsums);
            const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
            t->init[c][b] = -128 * hsum_epi32(s32);
            t->d[c][b] = y->d;
        }
}

/* C tokens (C constant) against the panel slice: see the top of the file. */
X86_INL void co_tile_c(int C, const cpanel *p, int kb, const ctab *t, int c0, const char *act, size_t as, int64_t b0,
                       float *out, int64_t os, int rn, bool add) {
    __m512 acc[CO_C];
    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int b = 0; b < kb; b++) {
        __m512i s[CO_C];
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) s[c] = _mm512_set1_epi32(t->init[c0 + c][b]);
        for (int sb = 0; sb < 8; sb++) {
            __m512i q[8];
            for (int g = 0; g < 8; g++) q[g] = _mm512_load_si512(&p->q[b][8 * sb + g]);
            _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
                const int8_t *qs = ((const block_q8_K *)(const void *)(act + (size_t)(c0 + c) * as))[b0 + b].qs + 32 * sb;
                for (int g = 0; g < 8; g++) s[c] = _mm512_dpbusd_epi32(s[c], q[g], bcast4(qs + 4 * g));
            }
        }
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
            const __m512 scale = _mm512_mul_ps(p->d[b], _mm512_set1_ps(t->d[c0 + c][b]));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[c]), scale, acc[c]);
        }
    }
    panel_store(C, acc, out, os, rn, add);
}

/* A tile of any C in 1..CO_C, its own function (eight unrolled sizes). */
X86_TARGET static void X86_FN(co_tile)(int C, const cpanel *p, int kb, const ctab *t, int c0, const char *act,
                                       size_t as, int64_t b0, float *out, int64_t os, int rn, bool add) {
    switch (C) {
    case 8: co_tile_c(8, p, kb, t, c0, act, as, b0, out, os, rn, add); break;
    case 7: co_tile_c(7, p, kb, t, c0, act, as, b0, out, os, rn, add); break;
    case 6: co_tile_c(6, p, kb, t, c0, act, as, b0, out, os, rn, add); break;
    case 5: co_tile_c(5, p, kb, t, c0, act, as, b0, out, os, rn, add); break;
    case 4: co_tile_c(4, p, kb, t, c0, act, as, b0, out, os, rn, add); break;
    case 3: co_tile_c(3, p, kb, t, c0, act, as, b0, out, os, rn, add); break;
    case 2: co_tile_c(2, p, kb, t, c0, act, as, b0, out, os, rn, add); break;
    default: co_tile_c(1, p, kb, t, c0, act, as, b0, out, os, rn, add); break;
    }
}

/* k in slices, tokens in groups (the table), rows in panels converted once
 * per group; the first slice writes the output, later ones add. */
X86_INL void gemm_coarse(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                         int nt, float *out, int64_t os) {
    _Alignas(64) cpanel panel;
    _Alignas(64) ctab tab;
    const int64_t nb = k / QK_K;
    for (int64_t b0 = 0; b0 < nb; b0 += CO_KS) {
        const int kb = (int)(nb - b0 < CO_KS ? nb - b0 : CO_KS);
        for (int t0 = 0; t0 < nt; t0 += CO_TG) {
            const int tn = nt - t0 < CO_TG ? nt - t0 : CO_TG;
            const char *at = (const char *)act + (size_t)t0 * as;
            co_tabulate(at, as, tn, b0, kb, &tab);
            for (int64_t r0 = 0; r0 < nr; r0 += CO_R) {
                const int rn = (int)(nr - r0 < CO_R ? nr - r0 : CO_R);
                for (int b = 0; b < kb; b++) co_convert(type, (const char *)w + (size_t)r0 * ws, ws, rn, b0 + b, b, &panel);
                for (int c = 0; c < tn; c += CO_C)
                    X86_FN(co_tile)(tn - c < CO_C ? tn - c : CO_C, &panel, kb, &tab, c, at, as, b0,
                                    out + (int64_t)(t0 + c) * os + r0, os, rn, b0 > 0);
            }
        }
    }
}

X86_TARGET static void X86_FN(gemm_coarse_q2_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                size_t as, int nt, float *out, int64_t os) {
    gemm_coarse(PLM_TYPE_Q2_K, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_coarse_q3_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                size_t as, int nt, float *out, int64_t os) {
    gemm_coarse(PLM_TYPE_Q3_K, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_coarse_q4_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                size_t as, int nt, float *out, int64_t os) {
    gemm_coarse(PLM_TYPE_Q4_K, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_coarse_q5_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                size_t as, int nt, float *out, int64_t os) {
    gemm_coarse(PLM_TYPE_Q5_K, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_coarse_q6_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                size_t as, int nt, float *out, int64_t os) {
    gemm_coarse(PLM_TYPE_Q6_K, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_coarse_iq4_xs)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                  size_t as, int nt, float *out, int64_t os) {
    gemm_coarse(PLM_TYPE_IQ4_XS, k, w, ws, nr, act, as, nt, out, os);
}
