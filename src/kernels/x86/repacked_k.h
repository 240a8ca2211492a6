/*
 * x86 kernel for row-interleaved super-block weights (quant/repack.h):
 * Q4_K, Q5_K, Q6_K and IQ4_XS in groups of 16 rows.  Included by
 * repacked.h (after its 32-element kernels, whose helpers it shares); part
 * of an x86 table, `type` a constant at every call.
 *
 * One kernel for the four.  AVX-512 holds the 16 rows' int32 lanes in one
 * zmm; the 256-bit tables take two halves of 8 rows (rk_v below names the
 * vector either way).  Per super-block:
 *
 *  - the 16 rows' sub-block scales are unpacked together from their byte
 *    planes into int8 (16 bytes a sub-block), once for every token of the
 *    tile (Q6_K's planes are already that);
 *  - every element becomes one unsigned byte u: its nibble, with Q5_K's
 *    fifth bit or Q6_K's two top bits OR'ed in at bit 4, or IQ4_XS's level
 *    looked up by vpshufb as level + 128 (Q4_K's odd sub-blocks in rk_tile
 *    on the VNNI tables: the high nibble in place, 16 u; rk_high_in_place);
 *  - a sub-block is 8 byte dots a token, in two chains of 16 elements, each
 *    started at -o * (the activation's 16-element sum, Q8_K's bsums), so
 *    it adds up (u - o) * a = w * a exactly (o = 32 for Q6_K, 128 for
 *    IQ4_XS, 0 for Q4_K/Q5_K, whose mins come separately);
 *  - times the integer scale (vpmulld) it joins the row's integer total of
 *    the super-block, as in ggml's reference, and only that total meets
 *    the floats:  acc += d_a * (d * isum - dmin * sum_s m_s * bsum_s),
 *    the mins' sum by int16 pair dots, two sub-blocks at a time.
 *
 * On AVX2 without VNNI, vpmaddubsw would saturate at IQ4_XS's 241 * 127 * 2,
 * so IQ4_XS keeps signed levels there and the sign trick (o = 0); Q6_K's
 * 63 * 127 * 2 does not saturate.
 */

enum { RK_KS = 32, RK_TAB = 1024 }; /* most super-blocks per k slice; tokens x super-blocks per slice */

#if X86_ZMM
typedef __m512i rk_vi;
typedef __m512 rk_vf;
enum { RK_N = 16 };
X86_INL rk_vi rk_load(const uint8_t *p) { return _mm512_loadu_si512(p); }
X86_INL rk_vi rk_set1_8(int v) { return _mm512_set1_epi8((char)v); }
X86_INL rk_vi rk_set1(int v) { return _mm512_set1_epi32(v); }
X86_INL rk_vi rk_and(rk_vi a, rk_vi b) { return _mm512_and_si512(a, b); }
X86_INL rk_vi rk_or(rk_vi a, rk_vi b) { return _mm512_or_si512(a, b); }
X86_INL rk_vi rk_srl16(rk_vi v, int n) { return _mm512_srl_epi16(v, _mm_cvtsi32_si128(n)); }
X86_INL rk_vi rk_sll16(rk_vi v, int n) { return _mm512_sll_epi16(v, _mm_cvtsi32_si128(n)); }
X86_INL rk_vi rk_lookup(__m128i lut, rk_vi u) { return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(lut), u); }
X86_INL rk_vi rk_add(rk_vi a, rk_vi b) { return _mm512_add_epi32(a, b); }
X86_INL rk_vi rk_sra32(rk_vi v, int n) { return _mm512_srai_epi32(v, n); }
X86_INL rk_vi rk_mul(rk_vi a, rk_vi b) { return _mm512_mullo_epi32(a, b); }
X86_INL rk_vi rk_i8(const int8_t *p) { return _mm512_cvtepi8_epi32(loadu128(p)); }
X86_INL rk_vi rk_dot(plm_type type, rk_vi acc, rk_vi u, const int8_t *a) {
    (void)type;
    return _mm512_dpbusd_epi32(acc, u, _mm512_broadcastd_epi32(_mm_loadu_si32(a)));
}
/* acc + m * b over int16 pairs; m: the rows' mins of sub-blocks 2t, 2t+1
 * (lane j: row j's pair), bp: the activation's pair of 32-element sums. */
X86_INL rk_vi rk_min_dot(rk_vi acc, const int8_t mn[8][16], int t, int h, const int32_t *bp) {
    (void)h;
    const __m128i m0 = loadu128(mn[2 * t]), m1 = loadu128(mn[2 * t + 1]);
    const __m512i m = _mm512_cvtepu8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(m0, m1), _mm_unpacklo_epi8(m0, m1)));
    return _mm512_dpwssd_epi32(acc, m, _mm512_set1_epi32(*bp));
}
X86_INL rk_vf rk_zero(void) { return _mm512_setzero_ps(); }
X86_INL rk_vf rk_f16(const uint8_t *p) { return _mm512_cvtph_ps(loadu256(p)); }
X86_INL rk_vf rk_fma(rk_vi i, rk_vf scale, rk_vf acc) { return _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), scale, acc); }
X86_INL rk_vf rk_fnma(rk_vi i, rk_vf scale, rk_vf acc) { return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(i), scale, acc); }
X86_INL rk_vf rk_scale(rk_vf d, float da) { return _mm512_mul_ps(d, _mm512_set1_ps(da)); }
X86_INL void rk_store(float *o, rk_vf v, bool add) { _mm512_storeu_ps(o, add ? _mm512_add_ps(_mm512_loadu_ps(o), v) : v); }
#else
typedef __m256i rk_vi;
typedef __m256 rk_vf;
enum { RK_N = 8 };
X86_INL rk_vi rk_load(const uint8_t *p) { return loadu256(p); }
X86_INL rk_vi rk_set1_8(int v) { return _mm256_set1_epi8((char)v); }
X86_INL rk_vi rk_set1(int v) { return _mm256_set1_epi32(v); }
X86_INL rk_vi rk_and(rk_vi a, rk_vi b) { return _mm256_and_si256(a, b); }
X86_INL rk_vi rk_or(rk_vi a, rk_vi b) { return _mm256_or_si256(a, b); }
X86_INL rk_vi rk_srl16(rk_vi v, int n) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n)); }
X86_INL rk_vi rk_sll16(rk_vi v, int n) { return _mm256_sll_epi16(v, _mm_cvtsi32_si128(n)); }
X86_INL rk_vi rk_lookup(__m128i lut, rk_vi u) { return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(lut), u); }
X86_INL rk_vi rk_add(rk_vi a, rk_vi b) { return _mm256_add_epi32(a, b); }
X86_INL rk_vi rk_sra32(rk_vi v, int n) { return _mm256_srai_epi32(v, n); }
X86_INL rk_vi rk_mul(rk_vi a, rk_vi b) { return _mm256_mullo_epi32(a, b); }
X86_INL rk_vi rk_i8(const int8_t *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)); }
X86_INL rk_vi rk_dot(plm_type type, rk_vi acc, rk_vi u, const int8_t *a) {
    return rp_dot_ymm(type, acc, u, bcast4_ymm(a));
}
X86_INL rk_vi rk_min_dot(rk_vi acc, const int8_t mn[8][16], int t, int h, const int32_t *bp) {
    const __m128i m0 = _mm_loadl_epi64((const __m128i *)(const void *)(mn[2 * t] + RK_N * h));
    const __m128i m1 = _mm_loadl_epi64((const __m128i *)(const void *)(mn[2 * t + 1] + RK_N * h));
    const __m256i m = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m0, m1)), b = _mm256_set1_epi32(*bp);
#if X86_ISA == X86_ISA_AVXVNNI
    return _mm256_dpwssd_avx_epi32(acc, m, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(m, b));
#endif
}
X86_INL rk_vf rk_zero(void) { return _mm256_setzero_ps(); }
X86_INL rk_vf rk_f16(const uint8_t *p) { return _mm256_cvtph_ps(loadu128(p)); }
X86_INL rk_vf rk_fma(rk_vi i, rk_vf scale, rk_vf acc) { return _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), scale, acc); }
X86_INL rk_vf rk_fnma(rk_vi i, rk_vf scale, rk_vf acc) { return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(i), scale, acc); }
X86_INL rk_vf rk_scale(rk_vf d, float da) { return _mm256_mul_ps(d, _mm256_set1_ps(da)); }
X86_INL void rk_store(float *o, rk_vf v, bool add) { _mm256_storeu_ps(o, add ? _mm256_add_ps(_mm256_loadu_ps(o), v) : v); }
#endif

enum { RK_H = RP_R / RK_N }; /* row vectors per group */

X86_INL int rk_offset(plm_type type) {
    if (type == PLM_TYPE_Q6_K) return 32;
    return type == PLM_TYPE_IQ4_XS && rp_unsigned(type) ? 128 : 0;
}

X86_INL bool rk_mins(plm_type type) { return type == PLM_TYPE_Q4_K || type == PLM_TYPE_Q5_K; }

X86_INL __m128i srl16x(__m128i v, int n) { return _mm_srl_epi16(v, _mm_cvtsi32_si128(n)); }

/* The 16 rows' scales (sc) and mins (mn) of Q4_K/Q5_K's 8 sub-blocks:
 * plm_get_scale_min_k4 on 16 bytes at a time (plane p holds byte p of
 * every row). */
X86_INL void rk_scales_k4(const uint8_t *planes, int8_t sc[8][16], int8_t mn[8][16]) {
    const __m128i m63 = _mm_set1_epi8(63), m0f = _mm_set1_epi8(0x0f), m30 = _mm_set1_epi8(0x30);
    __m128i P[K_SCALE_SIZE];
    for (int p = 0; p < K_SCALE_SIZE; p++) P[p] = loadu128(planes + 16 * p);
    for (int j = 0; j < 8; j++) {
        __m128i s, m;
        if (j < 4) {
            s = _mm_and_si128(P[j], m63);
            m = _mm_and_si128(P[j + 4], m63);
        } else { /* the top two bits come from bits 6-7 of bytes j-4 and j */
            s = _mm_or_si128(_mm_and_si128(P[j + 4], m0f), _mm_and_si128(_mm_srli_epi16(P[j - 4], 2), m30));
            m = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(P[j + 4], 4), m0f),
                             _mm_and_si128(_mm_srli_epi16(P[j], 2), m30));
        }
        _mm_storeu_si128((__m128i *)(void *)sc[j], s);
        _mm_storeu_si128((__m128i *)(void *)mn[j], m);
    }
}

/* IQ4_XS's 8 scales of the 16 rows, unbiased (ls - 32): 4 low bits from the
 * scales_l planes, 2 high bits from the scales_h planes. */
X86_INL void rk_scales_xs(const uint8_t *planes, int8_t sc[8][16]) {
    const __m128i m0f = _mm_set1_epi8(0x0f), m03 = _mm_set1_epi8(3), bias = _mm_set1_epi8(32);
    for (int s = 0; s < 8; s++) {
        const __m128i lo = _mm_and_si128(srl16x(loadu128(planes + 16 * (s / 2)), 4 * (s % 2)), m0f);
        const __m128i hi = _mm_and_si128(srl16x(loadu128(planes + 16 * (4 + s / 4)), 2 * (s % 4)), m03);
        _mm_storeu_si128((__m128i *)(void *)sc[s], _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), bias));
    }
}

/* Whether an odd sub-block's codes may stay 16 times themselves: Q4_K's
 * high nibbles masked in place, one shift a vector fewer (32 of ~450
 * instructions a super-block of 16 rows).  Only where the byte dots cannot
 * saturate: vpdpbusd's int32 lanes hold it (a super-block's odd sum at most
 * 4 sub-blocks * 63 * 32 * 240 * 128 < 2^28), vpmaddubsw's int16 pairs
 * would not.  rk_tile keeps the odd sub-blocks' sum apart and takes the 16
 * back out by a shift, exact: each term is a multiple of 16. */
X86_INL bool rk_high_in_place(plm_type type) { return type == PLM_TYPE_Q4_K && X86_ISA != X86_ISA_AVX2; }

/* Group g of sub-block s of row vector h as unsigned codes (IQ4_XS on
 * AVX2: signed levels); `in_place`: see rk_high_in_place. */
X86_INL rk_vi rk_codes(plm_type type, const uint8_t *blk, int s, int g, int h, bool in_place) {
    const int at = 64 * g + 4 * RK_N * h;
    const rk_vi v = rk_load(blk + plm_repack_k_codes(type, s / 2) + at);
    if (in_place && s % 2) return rk_and(v, rk_set1_8(0xf0));
    const rk_vi u = rk_and(s % 2 ? rk_srl16(v, 4) : v, rk_set1_8(0x0f));
    if (type == PLM_TYPE_IQ4_XS) return rk_lookup(_mm256_castsi256_si128(rp_lut_ymm(type)), u);
    if (type == PLM_TYPE_Q5_K) { /* bit s of the high byte to bit 4 */
        const rk_vi hb = rk_load(blk + plm_repack_k_high(type, 0) + at);
        return rk_or(u, rk_and(s < 4 ? rk_sll16(hb, 4 - s) : rk_srl16(hb, s - 4), rk_set1_8(0x10)));
    }
    if (type == PLM_TYPE_Q6_K) { /* bits 2q, 2q + 1 of run s / 4 to bits 4, 5 */
        const rk_vi hb = rk_load(blk + plm_repack_k_high(type, s / 4) + at);
        const int q = s % 4;
        return rk_or(u, rk_and(q < 2 ? rk_sll16(hb, 4 - 2 * q) : rk_srl16(hb, 2 * q - 4), rk_set1_8(0x30)));
    }
    return u;
}

/* Software prefetch for a tile of C tokens at super-block blk.  A batch
 * computes long enough per super-block for the hardware prefetcher to fall
 * behind: two super-blocks ahead into L1.  Decode (C = 1) prefetches
 * RK_DECODE_AHEAD bytes on (2-4 super-blocks), which the hardware
 * prefetcher does not: within a super-block the tile reads scales, then
 * code runs, not one stream.  Measured on one core of a Zen 5, repacked
 * decode from memory (bench_kernels, 2026-12-05): with no prefetch Q4_K
 * 18.5, Q5_K 17.0, Q6_K 25.5 (its super-block prefetched as it is read),
 * IQ4_XS 17.0 GB/s; 8 KiB ahead 29-33 (the plain sweep 30-40); 4 KiB or
 * one super-block a little less, 24 KiB less end to end.  Into L1 (T0),
 * not only L2 (T1): two-thread decode end to end 1.04-1.13x (BENCHMARKS,
 * 2026-12-05 19:35).  One prefetch an iteration of a loop: the same 36
 * lines unrolled into one burst made the kernel faster from L2 but slower
 * from memory, and spread over the sub-blocks no faster than this.
 * Q6_K also prefetches the super-block it is about to read, in order, as
 * a Zen 4 needed (16 -> 24-27 GB/s; the Zen 5 does not mind). */
enum { RK_DECODE_AHEAD = 8192 };

X86_INL void rk_prefetch(plm_type type, int C, const uint8_t *blk, size_t sb) {
    if (C > 1) {
        rp_prefetch(blk, sb, 2);
        return;
    }
    rp_prefetch_at(blk, sb, RK_DECODE_AHEAD);
    if (type == PLM_TYPE_Q6_K) rp_prefetch(blk, sb, 0);
}

/* C tokens x 16 rows of one group over kb super-blocks. */
X86_INL void rk_tile(plm_type type, int C, const uint8_t *grp, int64_t b0, int kb, const char *act, size_t as,
                     float *out, int64_t os, bool add) {
    const plm_repack_k_layout L = plm_repack_k(type);
    const size_t sb = RP_R * block_bytes(type);
    const int o = rk_offset(type);
    rk_vf acc[RK_H][RP_C];
    for (int h = 0; h < RK_H; h++)
        for (int c = 0; c < C; c++) acc[h][c] = rk_zero();
    for (int b = 0; b < kb; b++) {
        const uint8_t *blk = grp + (size_t)(b0 + b) * sb;
        rk_prefetch(type, C, blk, sb);
        _Alignas(16) int8_t sc[8][16], mn[8][16];
        if (rk_mins(type)) rk_scales_k4(blk + L.scales, sc, mn);
        else if (type == PLM_TYPE_IQ4_XS) rk_scales_xs(blk + L.scales, sc);
        const int8_t *q6sc = (const int8_t *)(blk + L.scales); /* Q6_K: 16 planes of int8 scales */
        const block_q8_K *y[RP_C];
        for (int c = 0; c < C; c++) y[c] = (const block_q8_K *)(const void *)(act + (size_t)c * as) + b0 + b;
        _Alignas(16) int32_t bpair[RP_C][4]; /* the activations' 32-element sums as int16, two sub-blocks a pair */
        for (int c = 0; rk_mins(type) && c < C; c++) {
            const __m128i ones = _mm_set1_epi16(1);
            const __m128i lo = _mm_madd_epi16(loadu128(y[c]->bsums), ones);
            const __m128i hi = _mm_madd_epi16(loadu128(y[c]->bsums + 8), ones);
            _mm_store_si128((__m128i *)(void *)bpair[c], _mm_packs_epi32(lo, hi)); /* |sum| <= 32 * 128 */
        }
        for (int h = 0; h < RK_H; h++) {
            rk_vi isum[RP_C], isum_odd[RP_C]; /* isum_odd: 16 times the odd sub-blocks' where in place */
            for (int c = 0; c < C; c++) isum[c] = isum_odd[c] = rk_set1(0);
            _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) { /* constant shifts and offsets */
                rk_vi q[8];
                for (int g = 0; g < 8; g++) q[g] = rk_codes(type, blk, s, g, h, rk_high_in_place(type));
                /* Q6_K: a scale for each 16-element half */
                const rk_vi scA = rk_i8((type == PLM_TYPE_Q6_K ? q6sc + 32 * s : sc[s]) + RK_N * h);
                const rk_vi scB = type == PLM_TYPE_Q6_K ? rk_i8(q6sc + 32 * s + 16 + RK_N * h) : scA;
                for (int c = 0; c < C; c++) {
                    const int8_t *qs = y[c]->qs + 32 * s;
                    rk_vi s0 = rk_set1(-o * y[c]->bsums[2 * s]), s1 = rk_set1(-o * y[c]->bsums[2 * s + 1]);
                    for (int g = 0; g < 4; g++) {
                        s0 = rk_dot(type, s0, q[g], qs + 4 * g);
                        s1 = rk_dot(type, s1, q[g + 4], qs + 16 + 4 * g);
                    }
                    if (type == PLM_TYPE_Q6_K) isum[c] = rk_add(isum[c], rk_add(rk_mul(s0, scA), rk_mul(s1, scB)));
                    else if (rk_high_in_place(type) && s % 2)
                        isum_odd[c] = rk_add(isum_odd[c], rk_mul(rk_add(s0, s1), scA));
                    else isum[c] = rk_add(isum[c], rk_mul(rk_add(s0, s1), scA));
                }
            }
            if (rk_high_in_place(type))
                for (int c = 0; c < C; c++) isum[c] = rk_add(isum[c], rk_sra32(isum_odd[c], 4));
            const rk_vf dw = rk_f16(blk + 2 * RK_N * h);
            for (int c = 0; c < C; c++) {
                acc[h][c] = rk_fma(isum[c], rk_scale(dw, y[c]->d), acc[h][c]);
                if (!rk_mins(type)) continue;
                rk_vi imin = rk_set1(0);
                for (int t = 0; t < 4; t++) imin = rk_min_dot(imin, mn, t, h, &bpair[c][t]);
                acc[h][c] = rk_fnma(imin, rk_scale(rk_f16(blk + L.dmin + 2 * RK_N * h), y[c]->d), acc[h][c]);
            }
        }
    }
    for (int c = 0; c < C; c++)
        for (int h = 0; h < RK_H; h++) rk_store(out + c * os + RK_N * h, acc[h][c], add);
}

#if X86_ZMM

/* A batch's path (AVX-512).  rk_tile decodes a super-block's codes and
 * integer scales again for every tile of 8 tokens, and its vpmulld and
 * per-token mins cost as much as the decode: with 16+ tokens the
 * group's slice of super-blocks is decoded once, into the layout below,
 * and every token tile reads it.  Per sub-block and token that leaves the
 * 8 byte dots, one convert and one fma against the float scale d * sc
 * (the row's sum of the super-block stays in floats, times the
 * activation's scale once per super-block), and one vpdpwssd for the
 * mins: m times the two 16-element activation sums, in integers. */
enum { RKD_KS = 4, RKD_MIN_TOK = 16 }; /* super-blocks per slice (22 KiB decoded); tokens that pay for it */

typedef struct {
    __m512i q[8][8];          /* [sub-block][group]: lane j, row j's unsigned codes 4g..4g+3 */
    __m512 d_lo[8], d_hi[8];  /* d * sub-block scale (Q6_K: of elements 0..15, 16..31) */
    __m512i m[8];             /* Q4_K/Q5_K: the sub-block's min in both int16 halves of lane j */
    __m512 dmin;
} rk_dec;

X86_INL void rk_decode(plm_type type, const uint8_t *blk, rk_dec *o) {
    const plm_repack_k_layout L = plm_repack_k(type);
    _Alignas(16) int8_t sc[8][16], mn[8][16];
    if (rk_mins(type)) rk_scales_k4(blk + L.scales, sc, mn);
    else if (type == PLM_TYPE_IQ4_XS) rk_scales_xs(blk + L.scales, sc);
    const int8_t *q6sc = (const int8_t *)(blk + L.scales);
    const __m512 d = rk_f16(blk);
    _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
        for (int g = 0; g < 8; g++) o->q[s][g] = rk_codes(type, blk, s, g, 0, false);
        const rk_vi scA = rk_i8(type == PLM_TYPE_Q6_K ? q6sc + 32 * s : sc[s]);
        o->d_lo[s] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(scA));
        if (type == PLM_TYPE_Q6_K) o->d_hi[s] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(rk_i8(q6sc + 32 * s + 16)));
        if (!rk_mins(type)) continue;
        const __m512i m = rk_i8(mn[s]);
        o->m[s] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
    }
    if (rk_mins(type)) o->dmin = rk_f16(blk + L.dmin);
}

/* C tokens x 16 rows over kb decoded super-blocks. */
X86_INL void rk_tile_dec(plm_type type, int C, const rk_dec *dec, int64_t b0, int kb, const char *act, size_t as,
                         float *out, int64_t os, bool add) {
    const int o = rk_offset(type);
    __m512 acc[RP_C];
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int b = 0; b < kb; b++) {
        const rk_dec *p = dec + b;
        const block_q8_K *y[RP_C];
        __m512 sum[RP_C];
        for (int c = 0; c < C; c++) {
            y[c] = (const block_q8_K *)(const void *)(act + (size_t)c * as) + b0 + b;
            sum[c] = _mm512_setzero_ps();
        }
        _Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
            __m512i q[8];
            for (int g = 0; g < 8; g++) q[g] = p->q[s][g];
            for (int c = 0; c < C; c++) {
                const int8_t *qs = y[c]->qs + 32 * s;
                __m512i s0 = _mm512_set1_epi32(-o * y[c]->bsums[2 * s]);
                __m512i s1 = _mm512_set1_epi32(-o * y[c]->bsums[2 * s + 1]);
                for (int g = 0; g < 4; g++) {
                    s0 = _mm512_dpbusd_epi32(s0, q[g], bcast4(qs + 4 * g));
                    s1 = _mm512_dpbusd_epi32(s1, q[g + 4], bcast4(qs + 16 + 4 * g));
                }
                if (type == PLM_TYPE_Q6_K)
                    sum[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), p->d_hi[s],
                                             _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), p->d_lo[s], sum[c]));
                else sum[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), p->d_lo[s], sum[c]);
            }
        }
        for (int c = 0; c < C; c++) {
            const __m512 da = _mm512_set1_ps(y[c]->d);
            acc[c] = _mm512_fmadd_ps(sum[c], da, acc[c]);
            if (!rk_mins(type)) continue;
            __m512i imin = _mm512_setzero_si512();
            for (int s = 0; s < 8; s++) imin = _mm512_dpwssd_epi32(imin, p->m[s], bcast4(y[c]->bsums + 2 * s));
            acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(imin), _mm512_mul_ps(p->dmin, da), acc[c]);
        }
    }
    for (int c = 0; c < C; c++) rk_store(out + c * os, acc[c], add);
}

#endif

/* As gemm_repacked: tokens in groups, k in slices short enough for a
 * batch to find the group's slice in cache, then row groups and token
 * tiles. */
X86_INL void gemm_repacked_k(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                             size_t as, int nt, float *out, int64_t os) {
#if X86_ZMM
    _Alignas(64) rk_dec dec[RKD_KS];
    const bool decoded = nt >= RKD_MIN_TOK;
    const int ks_max = decoded ? RKD_KS : RK_KS;
    const size_t sb = RP_R * block_bytes(type);
#else
    const int ks_max = RK_KS;
#endif
    const int64_t nb = k / QK_K;
    int tg, ks;
    rp_split(nt, RK_TAB, ks_max, &tg, &ks);
    for (int t0 = 0; t0 < nt; t0 += tg) {
        const int tn = nt - t0 < tg ? nt - t0 : tg;
        const char *at = (const char *)act + (size_t)t0 * as;
        for (int64_t b0 = 0; b0 < nb; b0 += ks) {
            const int kb = (int)(nb - b0 < ks ? nb - b0 : ks);
            for (int64_t r = 0; r < nr; r += RP_R) {
                const uint8_t *grp = (const uint8_t *)w + (size_t)r * ws;
#if X86_ZMM
                for (int b = 0; decoded && b < kb; b++) rk_decode(type, grp + (size_t)(b0 + b) * sb, &dec[b]);
#endif
                for (int c0 = 0; c0 < tn; c0 += RP_C) {
                    const int cn = tn - c0 < RP_C ? tn - c0 : RP_C;
                    const char *ac = at + (size_t)c0 * as;
                    float *o = out + (int64_t)(t0 + c0) * os + r;
#if X86_ZMM
                    if (decoded) {
                        if (cn == RP_C) rk_tile_dec(type, RP_C, dec, b0, kb, ac, as, o, os, b0 > 0);
                        else rk_tile_dec(type, cn, dec, b0, kb, ac, as, o, os, b0 > 0);
                        continue;
                    }
#endif
                    if (cn == RP_C) rk_tile(type, RP_C, grp, b0, kb, ac, as, o, os, b0 > 0);
                    else if (cn == 1) rk_tile(type, 1, grp, b0, kb, ac, as, o, os, b0 > 0);
                    else rk_tile(type, cn, grp, b0, kb, ac, as, o, os, b0 > 0);
                }
            }
        }
    }
}

X86_TARGET static void X86_FN(gemm_repacked_q4_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                  size_t as, int nt, float *out, int64_t os) {
    gemm_repacked_k(PLM_TYPE_Q4_K, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_repacked_q5_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                  size_t as, int nt, float *out, int64_t os) {
    gemm_repacked_k(PLM_TYPE_Q5_K, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_repacked_q6_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                  size_t as, int nt, float *out, int64_t os) {
    gemm_repacked_k(PLM_TYPE_Q6_K, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_repacked_iq4_xs)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                    size_t as, int nt, float *out, int64_t os) {
    gemm_repacked_k(PLM_TYPE_IQ4_XS, k, w, ws, nr, act, as, nt, out, os);
}
