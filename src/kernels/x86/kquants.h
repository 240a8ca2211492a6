/*
 * x86 kernels for the K-quants (Q2_K..Q6_K) and IQ4_XS: 256-element
 * super-blocks against Q8_K activations.  Part of an x86 table (see
 * x86.h); `type` is a constant at every call.
 *
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
X86_INL __m256i pair_scales(__m128i s8, int j) {
    const __m128i idx = _mm_set_epi64x(0x0101010101010101LL * (2 * j + 1), 0x0101010101010101LL * (2 * j));
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s8, idx));
}

/* The 6-bit scales and mins of Q4_K/Q5_K (12 bytes) -> sc[0..7], mn[0..7]
 * as bytes 0-7 and 8-15 of out.  Bytes 0-3 hold scales 0-3 and bytes 4-7
 * mins 0-3 in their low 6 bits; scales/mins 4-7 take their low 4 bits from
 * the nibbles of bytes 8-11 and their top 2 bits from the top bits of
 * bytes 0-3 (scales) / 4-7 (mins). */
X86_INL void scales_k4(const uint8_t *p, uint32_t out[4]) {
    uint32_t u[3];
    memcpy(u, p, 12);
    out[0] = u[0] & 0x3f3f3f3fu;                                          /* sc 0-3 */
    out[1] = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 6) & 0x03030303u) << 4;     /* sc 4-7 */
    out[2] = u[1] & 0x3f3f3f3fu;                                          /* mn 0-3 */
    out[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 6) & 0x03030303u) << 4; /* mn 4-7 */
}

X86_INL void kdec_scales_k4(const uint8_t *scales, kdec *u) {
    uint32_t sm[4];
    scales_k4(scales, sm);
    const uint8_t *sc = (const uint8_t *)sm;
    for (int j = 0; j < 8; j++) u->sc[j] = _mm256_set1_epi16(sc[j]);
    /* mins 0-7 from registers (a load would miss store forwarding) */
    const __m128i m8 = _mm_cvtsi64_si128((long long)((uint64_t)sm[3] << 32 | sm[2]));
    u->off = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); /* m0 m0 m1 m1 ... */
}

X86_INL void kdec_q4_K(const block_q4_K *x, kdec *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    kdec_scales_k4(x->scales, u);
    for (int j = 0; j < 4; j++) {
        const __m256i q = loadu256(x->qs + 32 * j);
        store256(u->q + 64 * j, _mm256_and_si256(q, m4));
        store256(u->q + 64 * j + 32,
                           _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    }
    u->d = h2f(x->d);
    u->dm = h2f(x->dmin);
}

X86_INL void kdec_q5_K(const block_q5_K *x, kdec *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    kdec_scales_k4(x->scales, u);
    __m256i hb = loadu256(x->qh); /* bit 2j / 2j+1 of byte l: fifth bit of sub-block 2j / 2j+1 */
    for (int j = 0; j < 4; j++) {
        const __m256i q = loadu256(x->qs + 32 * j);
        const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(hb, one), 4);
        const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4);
        store256(u->q + 64 * j, _mm256_or_si256(_mm256_and_si256(q, m4), h0));
        store256(u->q + 64 * j + 32,
                           _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1));
        hb = _mm256_srli_epi16(hb, 2);
    }
    u->d = h2f(x->d);
    u->dm = h2f(x->dmin);
}

/* Q6_K: codes 0..63 (value + 32); off = 32 * scale. */
X86_INL void kdec_q6_K(const block_q6_K *x, kdec *u) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = loadu256(x->ql + 64 * h), l1 = loadu256(x->ql + 64 * h + 32);
        const __m256i qh = loadu256(x->qh + 32 * h);
        uint8_t *o = u->q + 128 * h;
        /* qh byte l: bits 0-1, 2-3, 4-5, 6-7 top up elements l, l+32, l+64, l+96 */
        const __m256i q0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
        const __m256i q1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
        const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30));
        const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
        store256(o, q0);
        store256(o + 32, q1);
        store256(o + 64, q2);
        store256(o + 96, q3);
    }
    const __m128i s8 = loadu128(x->scales);
    for (int j = 0; j < 8; j++) u->sc[j] = pair_scales(s8, j);
    u->off = _mm256_slli_epi16(_mm256_cvtepi8_epi16(s8), 5);
    u->d = u->dm = h2f(x->d);
}

/* Q3_K: codes 0..7 = low 2 bits + 4 * hmask bit (value + 4); off = 4 * scale.
 * The 16 6-bit scales (q3_scales, as signed bytes minus 32): low nibbles
 * from bytes 0-7 (low nibbles first), top two bits from bytes 8-11, one
 * 2-bit field per group of four scales. */
X86_INL __m128i q3_scales(const block_q3_K *x) {
    uint32_t a[3], s[4];
    memcpy(a, x->scales, 12);
    for (int g = 0; g < 4; g++) {
        const uint32_t lo = ((g < 2 ? a[g] : a[g - 2] >> 4)) & 0x0f0f0f0fu;
        const uint32_t hi = (a[2] >> (2 * g)) & 0x03030303u;
        s[g] = lo | hi << 4;
    }
    /* built in registers: a 16-byte load of four just-stored words would
     * miss store forwarding */
    return _mm_sub_epi8(_mm_setr_epi32((int)s[0], (int)s[1], (int)s[2], (int)s[3]), _mm_set1_epi8(32));
}

X86_INL void kdec_q3_K(const block_q3_K *x, kdec *u) {
    const __m128i s8 = q3_scales(x);
    for (int j = 0; j < 8; j++) u->sc[j] = pair_scales(s8, j);
    u->off = _mm256_slli_epi16(_mm256_cvtepi8_epi16(s8), 2);
    const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    __m256i hm = loadu256(x->hmask); /* shifted one bit per 32 elements */
    for (int h = 0; h < 2; h++) {
        __m256i qs = loadu256(x->qs + 32 * h); /* shifted two bits per plane */
        for (int p = 0; p < 4; p++) {
            const __m256i lo = _mm256_and_si256(qs, three);
            const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(hm, one), 2);
            store256(u->q + 128 * h + 32 * p, _mm256_or_si256(lo, hb));
            qs = _mm256_srli_epi16(qs, 2);
            hm = _mm256_srli_epi16(hm, 1);
        }
    }
    u->d = u->dm = h2f(x->d);
}

/* Q2_K: codes 0..3; scale = low nibble, min = high nibble, per 16. */
X86_INL void kdec_q2_K(const block_q2_K *x, kdec *u) {
    const __m128i s8 = loadu128(x->scales), m4 = _mm_set1_epi8(0x0f);
    const __m128i sc = _mm_and_si128(s8, m4);
    for (int j = 0; j < 8; j++) u->sc[j] = pair_scales(sc, j);
    u->off = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), m4));
    const __m256i three = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        __m256i qs = loadu256(x->qs + 32 * h);
        for (int p = 0; p < 4; p++) {
            store256(u->q + 128 * h + 32 * p, _mm256_and_si256(qs, three));
            qs = _mm256_srli_epi16(qs, 2);
        }
    }
    u->d = h2f(x->d);
    u->dm = h2f(x->dmin);
}

/* acc += one decoded super-block . one Q8_K block (8 lanes, summed later). */
X86_INL __m256 kdot(const kdec *u, const block_q8_K *y, __m256 acc) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0;
    for (int j = 0; j < 8; j += 2) {
        const __m256i p0 = _mm256_maddubs_epi16(load256(u->q + 32 * j),
                                                loadu256(y->qs + 32 * j));
        const __m256i p1 = _mm256_maddubs_epi16(
            load256(u->q + 32 * j + 32), loadu256(y->qs + 32 * j + 32));
        s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, u->sc[j]));
        s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, u->sc[j + 1]));
    }
    const __m256i off = _mm256_madd_epi16(u->off, loadu256(y->bsums));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), _mm256_set1_ps(u->d * y->d), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(off), _mm256_set1_ps(u->dm * y->d), acc);
}

/* IQ4_XS as a kdec (for the panel gemm): levels + 128, one 6-bit scale
 * (minus 32) per 32. */
X86_INL void kdec_iq4_xs(const block_iq4_xs *x, kdec *u) {
    const __m256i lut = lut_iq4(), flip = _mm256_set1_epi8((char)0x80);
    for (int ib = 0; ib < QK_K / 32; ib++) {
        const __m256i q = _mm256_shuffle_epi8(lut, nibbles32(x->qs + 16 * ib));
        store256(u->q + 32 * ib, _mm256_xor_si256(q, flip));
        u->sc[ib] = _mm256_set1_epi16((short)(plm_iq4_xs_scale(x, ib) - 32));
    }
    u->off = _mm256_setzero_si256();
    u->d = h2f(x->d);
    u->dm = 0.0f;
}

/* Super-block blk of `type` decoded. */
X86_INL void kdec_decode(plm_type type, const void *blk, kdec *u) {
    switch (type) {
    case PLM_TYPE_Q2_K: kdec_q2_K(blk, u); break;
    case PLM_TYPE_Q3_K: kdec_q3_K(blk, u); break;
    case PLM_TYPE_Q4_K: kdec_q4_K(blk, u); break;
    case PLM_TYPE_Q5_K: kdec_q5_K(blk, u); break;
    case PLM_TYPE_Q6_K: kdec_q6_K(blk, u); break;
    default: kdec_iq4_xs(blk, u); break;
    }
}

/* vec_dot of a K-quant: decode a super-block, dot it. */
X86_INL void vec_dot_k(plm_type type, int64_t n, float *s, const void *x, const block_q8_K *y) {
    __m256 acc = _mm256_setzero_ps();
    kdec u;
    for (int64_t i = 0; i < n / QK_K; i++) {
        kdec_decode(type, block_at(type, x, i), &u);
        acc = kdot(&u, &y[i], acc);
    }
    *s = hsum_ps(acc);
}

/* The row gemm's tile: a super-block decoded once for nt tokens. */
X86_INL void tile_k(plm_type type, int nt, int64_t nb, const void *x, const char *act, size_t as, float *out,
                    int64_t os) {
    __m256 acc[X86_GEMM_T];
    kdec u;
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        kdec_decode(type, block_at(type, x, b), &u);
        for (int t = 0; t < nt; t++) acc[t] = kdot(&u, (const block_q8_K *)(const void *)(act + t * as) + b, acc[t]);
    }
    for (int t = 0; t < nt; t++) out[t * os] = hsum_ps(acc[t]);
}

/* IQ4_XS decode: signed non-linear levels, sign trick, 6-bit scale per 32. */
X86_INL void vec_dot_iq4_xs_256(int64_t n, float *s, const block_iq4_xs *x, const block_q8_K *y) {
    const __m256i lut = lut_iq4();
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i isum = _mm256_setzero_si256();
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const __m256i w = _mm256_shuffle_epi8(lut, nibbles32(x[i].qs + 16 * ib));
            const __m256i p = dot_ss(_mm256_setzero_si256(), _mm256_abs_epi8(w), w, loadu256(y[i].qs + 32 * ib));
            isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(p, _mm256_set1_epi32(plm_iq4_xs_scale(&x[i], ib) - 32)));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(x[i].d) * y[i].d), acc);
    }
    *s = hsum_ps(acc);
}

/* Its row gemm's tile: a super-block's levels, their magnitudes and scales
 * decoded once for nt tokens. */
X86_INL void tile_iq4_xs(int nt, int64_t nb, const block_iq4_xs *x, const char *act, size_t as, float *out,
                         int64_t os) {
    const __m256i lut = lut_iq4();
    __m256 acc[X86_GEMM_T];
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
                const __m256i p = dot_ss(_mm256_setzero_si256(), wabs[ib], w[ib], loadu256(y->qs + 32 * ib));
                isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(p, sc[ib]));
            }
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dw * y->d), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) out[t * os] = hsum_ps(acc[t]);
}

#if X86_ZMM
/* ---- Q4_K decode on 512-bit registers ---------------------------------------
 * A super-block's 128 code bytes as four vectors of two 32-element
 * sub-blocks each: the low and high nibbles of qs[0..63] hold sub-blocks
 * 0, 2 and 1, 3; those of qs[64..127] 4, 6 and 5, 7.  The activation's
 * bytes are regrouped to match (k4_act), each vector meets them in one
 * vpdpbusd, and its int32 lanes are multiplied by their sub-block's scale;
 * the mins meet Q8_K's bsums as in kdot.  Fewer instructions per
 * super-block than the kdec path: one thread on weights in L2 (where the
 * memory does not hide it) went from 24.0 to 27.4 GB/s at 2048 columns and
 * from 19-25 to 29-30 GB/s at 8192.  (The same idea for Q6_K measured no
 * faster: 31 GB/s either way.) */
typedef struct k4_act {
    __m512i a[4]; /* a[v]: the activation bytes under code vector v */
} k4_act;

X86_INL void k4_act_make(const block_q8_K *y, k4_act *g) {
    g->a[0] = zmm_halves(loadu256(y->qs), loadu256(y->qs + 64));
    g->a[1] = zmm_halves(loadu256(y->qs + 32), loadu256(y->qs + 96));
    g->a[2] = zmm_halves(loadu256(y->qs + 128), loadu256(y->qs + 192));
    g->a[3] = zmm_halves(loadu256(y->qs + 160), loadu256(y->qs + 224));
}

/* A Q4_K super-block decoded for k4_dot: code vectors, per-lane scales,
 * the mins paired for bsums, and d, dmin. */
typedef struct k4_codes {
    __m512i c[4], sc[4];
    __m256i mins;
    __m128 dm; /* d, dmin */
} k4_codes;

/* d and dmin, adjacent f16, as floats 0 and 1. */
X86_INL __m128 d_dmin(const plm_fp16_t *d) {
    uint32_t h;
    memcpy(&h, d, 4);
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)h));
}

X86_INL void k4_decode(const block_q4_K *x, k4_codes *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i q01 = _mm512_loadu_si512(x->qs), q23 = _mm512_loadu_si512(x->qs + 64);
    u->c[0] = _mm512_and_si512(q01, m4);
    u->c[1] = _mm512_and_si512(_mm512_srli_epi16(q01, 4), m4);
    u->c[2] = _mm512_and_si512(q23, m4);
    u->c[3] = _mm512_and_si512(_mm512_srli_epi16(q23, 4), m4);
    uint32_t sm[4];
    scales_k4(x->scales, sm);
    const __m128i s8 = _mm_cvtsi64_si128((long long)((uint64_t)sm[1] << 32 | sm[0]));
    /* vector v's lanes 0-7 / 8-15: sub-blocks 0,2 / 1,3 / 4,6 / 5,7 */
    static const uint8_t pick[4][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2},
                                        {1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3},
                                        {4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6},
                                        {5, 5, 5, 5, 5, 5, 5, 5, 7, 7, 7, 7, 7, 7, 7, 7}};
    for (int v = 0; v < 4; v++) u->sc[v] = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(s8, loadu128(pick[v])));
    const __m128i m8 = _mm_cvtsi64_si128((long long)((uint64_t)sm[3] << 32 | sm[2]));
    u->mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); /* m0 m0 m1 m1 ...: bsums are per 16 */
    u->dm = d_dmin(&x->d);
}

/* Q2_K in the same shape: its 64 code bytes in one vector hold four bit
 * planes, plane p (bits 2p) being elements 32p..32p+31 (bytes 0-31) and
 * 128 + 32p.. (bytes 32-63); the activation is regrouped to match, and
 * four lanes always share one of the 16 scales (sub-blocks of 16).  One
 * core, from L2: 14.3 GB/s through kdec, this 16.5 (from memory both
 * ~14: the file layout's decode waits on the memory there). */
X86_INL void k2_act_make(const block_q8_K *y, k4_act *g) {
    for (int p = 0; p < 4; p++) g->a[p] = zmm_halves(loadu256(y->qs + 32 * p), loadu256(y->qs + 128 + 32 * p));
}

/* Plane p's dword k: sub-block (of 16) 2p + k / 4 (k < 8) or 8 + 2p + (k - 8) / 4. */
static const uint8_t k2_plane_scales[4][16] = {{0, 0, 0, 0, 1, 1, 1, 1, 8, 8, 8, 8, 9, 9, 9, 9},
                                               {2, 2, 2, 2, 3, 3, 3, 3, 10, 10, 10, 10, 11, 11, 11, 11},
                                               {4, 4, 4, 4, 5, 5, 5, 5, 12, 12, 12, 12, 13, 13, 13, 13},
                                               {6, 6, 6, 6, 7, 7, 7, 7, 14, 14, 14, 14, 15, 15, 15, 15}};

X86_INL void k2_decode(const block_q2_K *x, k4_codes *u) {
    const __m512i q = _mm512_loadu_si512(x->qs), three = _mm512_set1_epi8(3);
    const __m128i s8 = loadu128(x->scales), m4 = _mm_set1_epi8(0x0f);
    const __m128i sc = _mm_and_si128(s8, m4);
    for (int p = 0; p < 4; p++) {
        u->c[p] = _mm512_and_si512(_mm512_srli_epi16(q, 2 * p), three);
        u->sc[p] = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(sc, loadu128(k2_plane_scales[p])));
    }
    u->mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), m4)); /* one per 16, as bsums */
    u->dm = d_dmin(&x->d);
}

/* Q3_K in Q2_K's shape: the same four planes of 2-bit codes, each code's
 * third bit from hmask (bit p of hmask[l] for element 32p + l, bit 4 + p
 * for element 128 + 32p + l) adding 4 where set; the scales signed, and
 * the code offset 4 taken off as Q2_K's mins are: 4 * scale against
 * bsums, times d.  One core (bench_kernels, Zen 4): from L2 12.3 GB/s
 * through kdec, 14.9 this; from memory 11.8 and 13.7. */
X86_INL void k3_decode(const block_q3_K *x, k4_codes *u) {
    const __m512i q = _mm512_loadu_si512(x->qs), three = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    const __m512i hm = _mm512_broadcast_i64x4(loadu256(x->hmask)); /* bits 0-3 for the low half, 4-7 the high */
    const __m128i s8 = q3_scales(x);
    for (int p = 0; p < 4; p++) {
        const __m512i bit = zmm_halves(_mm256_set1_epi8((char)(1 << p)), _mm256_set1_epi8((char)(16 << p)));
        const __m512i low = _mm512_and_si512(_mm512_srli_epi16(q, 2 * p), three);
        u->c[p] = _mm512_mask_add_epi8(low, _mm512_test_epi8_mask(hm, bit), low, four);
        u->sc[p] = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(s8, loadu128(k2_plane_scales[p])));
    }
    u->mins = _mm256_slli_epi16(_mm256_cvtepi8_epi16(s8), 2); /* 4 * scale, one per 16 */
    u->dm = _mm_set1_ps(h2f(x->d));
}

/* The formats of this shape: Q4_K, and Q2_K and Q3_K (their planes). */
X86_INL void kz_decode(plm_type type, const void *blk, k4_codes *u) {
    if (type == PLM_TYPE_Q2_K) k2_decode(blk, u);
    else if (type == PLM_TYPE_Q3_K) k3_decode(blk, u);
    else k4_decode(blk, u);
}

X86_INL void kz_act_make(plm_type type, const block_q8_K *y, k4_act *g) {
    if (type == PLM_TYPE_Q2_K || type == PLM_TYPE_Q3_K) k2_act_make(y, g);
    else k4_act_make(y, g);
}

/* acc += the super-block's scaled dots with activation block y (regrouped
 * in g); accm += its mins' products (subtracted at the end). */
X86_INL void k4_dot(const k4_codes *u, const k4_act *g, const block_q8_K *y, __m512 *acc, __m256 *accm) {
    const __m512i z = _mm512_setzero_si512();
    __m512i isum = _mm512_mullo_epi32(_mm512_dpbusd_epi32(z, u->c[0], g->a[0]), u->sc[0]);
    for (int v = 1; v < 4; v++)
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(_mm512_dpbusd_epi32(z, u->c[v], g->a[v]), u->sc[v]));
    const __m128 dmy = _mm_mul_ps(u->dm, _mm_set1_ps(y->d));
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_broadcastss_ps(dmy), *acc);
    const __m256i off = _mm256_madd_epi16(u->mins, loadu256(y->bsums));
    *accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(off), _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dmy),
                                                                               _mm256_set1_epi32(1)), *accm);
}

/* A row's dot: the scaled sums less the mins' products. */
X86_INL float k_row_end(__m512 acc, __m256 accm) { return _mm512_reduce_add_ps(acc) - hsum_ps(accm); }

X86_INL void vec_dot_kz(plm_type type, int64_t n, float *s, const void *x, const block_q8_K *y) {
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        k4_codes u;
        k4_act g;
        kz_decode(type, block_at(type, x, i), &u);
        kz_act_make(type, &y[i], &g);
        k4_dot(&u, &g, &y[i], &acc, &accm);
    }
    *s = k_row_end(acc, accm);
}

/* Super-blocks gemv_kz regroups at most (on the stack: 16 KiB). */
enum { K4_ACT_MAX = 64 };

/* The decode matvec: the activation regrouped once for every row. */
X86_INL void gemv_kz(plm_type type, int64_t k, const void *w, size_t ws, int64_t n_rows, const block_q8_K *y,
                     float *out) {
    const int64_t nb = k / QK_K;
    if (nb > K4_ACT_MAX) {
        for (int64_t r = 0; r < n_rows; r++) vec_dot_kz(type, k, &out[r], (const char *)w + r * ws, y);
        return;
    }
    k4_act g[K4_ACT_MAX];
    for (int64_t i = 0; i < nb; i++) kz_act_make(type, &y[i], &g[i]);
    for (int64_t r = 0; r < n_rows; r++) {
        const void *x = (const char *)w + r * ws;
        __m512 acc = _mm512_setzero_ps();
        __m256 accm = _mm256_setzero_ps();
        for (int64_t i = 0; i < nb; i++) {
            k4_codes u;
            kz_decode(type, block_at(type, x, i), &u);
            k4_dot(&u, &g[i], &y[i], &acc, &accm);
        }
        out[r] = k_row_end(acc, accm);
    }
}
#endif /* X86_ZMM */

/* ---- the vec_dot entries --------------------------------------------------- */

X86_TARGET static void X86_FN(vec_dot_q2_K)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_kz(PLM_TYPE_Q2_K, n, s, w, a);
#else
    vec_dot_k(PLM_TYPE_Q2_K, n, s, w, a);
#endif
}

X86_TARGET static void X86_FN(vec_dot_q3_K)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_kz(PLM_TYPE_Q3_K, n, s, w, a);
#else
    vec_dot_k(PLM_TYPE_Q3_K, n, s, w, a);
#endif
}

X86_TARGET static void X86_FN(vec_dot_q4_K)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_kz(PLM_TYPE_Q4_K, n, s, w, a);
#else
    vec_dot_k(PLM_TYPE_Q4_K, n, s, w, a);
#endif
}

#if X86_ZMM
X86_TARGET static void X86_FN(gemv_q2_K)(int64_t k, const void *w, size_t ws, int64_t n_rows, const void *act,
                                         float *out) {
    gemv_kz(PLM_TYPE_Q2_K, k, w, ws, n_rows, act, out);
}

X86_TARGET static void X86_FN(gemv_q3_K)(int64_t k, const void *w, size_t ws, int64_t n_rows, const void *act,
                                         float *out) {
    gemv_kz(PLM_TYPE_Q3_K, k, w, ws, n_rows, act, out);
}

X86_TARGET static void X86_FN(gemv_q4_K)(int64_t k, const void *w, size_t ws, int64_t n_rows, const void *act,
                                         float *out) {
    gemv_kz(PLM_TYPE_Q4_K, k, w, ws, n_rows, act, out);
}
#endif

X86_TARGET static void X86_FN(vec_dot_q5_K)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_k(PLM_TYPE_Q5_K, n, s, w, a);
}

X86_TARGET static void X86_FN(vec_dot_q6_K)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_k(PLM_TYPE_Q6_K, n, s, w, a);
}

X86_TARGET static void X86_FN(vec_dot_iq4_xs)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_iq4_xs_256(n, s, w, a);
}
