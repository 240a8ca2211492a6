/*
 * x86 kernels for the codebook formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S, IQ1_S, IQ1_M), the ternary ones (TQ1_0, TQ2_0) against Q8_K, and
 * MXFP4 against Q8_0.  Part of an x86 table (see x86.h); `type` is a
 * constant at every call.
 *
 * A 256-element super-block is read 32 elements at a time (cb_weights32):
 * grid rows fetched by index (four 8-byte or eight 4-byte rows a vector)
 * are the magnitudes, <= 62, and the stored signs become a vector of +-1
 * bytes put on the activations (vpsignb), with a 16-lane int16 scale
 * vector (lanes 0-7 scale elements 0-15, lanes 8-15 elements 16-31,
 * vpmaddubsw's pair layout).  The formats stored as signed values (IQ1's
 * 8 * grid +- 1, the ternary ones) use the sign trick of x86.h, which is
 * the same dot.  vpmaddubsw, then vpmaddwd by the scales, so each
 * block total is the reference's exact integer (iq_unpack.h has the same
 * numbers in scalar form: x = d * ls * q * post).  TQ1_0's base-3 bytes
 * are decoded 32 trits at a time by 16-bit multiplies (tq1_trits).
 */
#include "quant/iq_unpack.h"

X86_INL bool is_codebook(plm_type type) { return plm_iq_unpacker(type) != NULL; }

/* The sign vector of 32 bits (bit j: element j negative): -1 or +1 bytes. */
X86_INL __m256i signs_of_bits(const uint8_t *bits) {
    return _mm256_or_si256(bits32(bits), _mm256_set1_epi8(1));
}

/* The sign vector of four IQ2 sign codes (7 bits each, low first). */
X86_INL __m256i signs_of_codes(uint32_t codes) {
    const __m256i m = _mm256_set_epi64x((long long)plm_iq2_sign_masks[(codes >> 21) & 127],
                                        (long long)plm_iq2_sign_masks[(codes >> 14) & 127],
                                        (long long)plm_iq2_sign_masks[(codes >> 7) & 127],
                                        (long long)plm_iq2_sign_masks[codes & 127]);
    return _mm256_or_si256(m, _mm256_set1_epi8(1));
}

X86_INL __m256i grid8x4(const uint64_t *grid, int i0, int i1, int i2, int i3) {
    return _mm256_set_epi64x((long long)grid[i3], (long long)grid[i2], (long long)grid[i1], (long long)grid[i0]);
}

X86_INL __m256i grid4x8(const uint32_t *grid, const int i[8]) {
    return _mm256_setr_epi32((int)grid[i[0]], (int)grid[i[1]], (int)grid[i[2]], (int)grid[i[3]], (int)grid[i[4]],
                             (int)grid[i[5]], (int)grid[i[6]], (int)grid[i[7]]);
}

/* Scale vector of two 16-element halves. */
X86_INL __m256i scale_pair(int lo, int hi) {
    return _mm256_setr_m128i(_mm_set1_epi16((short)lo), _mm_set1_epi16((short)hi));
}

/* IQ1: 8 * grid (-1, 0, 1) + shift, the shift one byte per 8 elements. */
X86_INL __m256i iq1_weights(const uint64_t *grid, const int idx[4], const int shift[4]) {
    const __m256i g = grid8x4(grid, idx[0], idx[1], idx[2], idx[3]);
    const __m256i sh = _mm256_set_epi64x((long long)(0x0101010101010101ULL * (uint8_t)shift[3]),
                                         (long long)(0x0101010101010101ULL * (uint8_t)shift[2]),
                                         (long long)(0x0101010101010101ULL * (uint8_t)shift[1]),
                                         (long long)(0x0101010101010101ULL * (uint8_t)shift[0]));
    return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), sh);
}

/* A signed sub-block as magnitudes and the signs to put on the activations. */
X86_INL __m256i mag_of(__m256i w, __m256i *sgn) {
    *sgn = w;
    return _mm256_abs_epi8(w);
}

/* Sub-block j (elements 32j..32j+31) of super-block blk as unsigned
 * magnitudes (returned) and a sign vector *sgn (negative, zero or positive
 * bytes: the weight is magnitude * sign), with its scale vector in *sc.
 * The dot is then vpmaddubsw(magnitudes, vpsignb(a, sgn)): the IQ2/IQ3
 * signs go on the activations, never on the weights.  (TQ1_0: tq1_decode.) */
X86_INL __m256i cb_weights32(plm_type type, const void *blk, int j, __m256i *sc, __m256i *sgn) {
    switch (type) {
    case PLM_TYPE_IQ2_XXS: {
        const uint8_t *q = (const uint8_t *)((const block_iq2_xxs *)blk)->qs + 8 * j;
        const uint32_t aux = iq_u32(q + 4);
        *sc = _mm256_set1_epi16((short)(2 * (aux >> 28) + 1));
        *sgn = signs_of_codes(aux);
        return grid8x4(plm_iq2xxs_grid, q[0], q[1], q[2], q[3]);
    }
    case PLM_TYPE_IQ2_XS: {
        const block_iq2_xs *b = blk;
        const uint16_t *q = b->qs + 4 * j;
        *sc = scale_pair(2 * (b->scales[j] & 15) + 1, 2 * (b->scales[j] >> 4) + 1);
        *sgn = signs_of_codes((uint32_t)(q[0] >> 9) | (uint32_t)(q[1] >> 9) << 7 | (uint32_t)(q[2] >> 9) << 14 |
                              (uint32_t)(q[3] >> 9) << 21);
        return grid8x4(plm_iq2xs_grid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511);
    }
    case PLM_TYPE_IQ2_S: {
        const block_iq2_s *b = blk;
        const uint8_t *q = b->qs + 4 * j;
        const int h = b->qh[j];
        *sc = scale_pair(2 * (b->scales[j] & 15) + 1, 2 * (b->scales[j] >> 4) + 1);
        *sgn = signs_of_bits(b->qs + QK_K / 8 + 4 * j);
        return grid8x4(plm_iq2s_grid, q[0] | (h << 8 & 0x300), q[1] | (h << 6 & 0x300), q[2] | (h << 4 & 0x300),
                       q[3] | (h << 2 & 0x300));
    }
    case PLM_TYPE_IQ3_XXS: {
        const block_iq3_xxs *b = blk;
        const uint8_t *q = b->qs + 8 * j;
        const uint32_t aux = iq_u32(b->qs + QK_K / 4 + 4 * j);
        *sc = _mm256_set1_epi16((short)(2 * (aux >> 28) + 1));
        *sgn = signs_of_codes(aux);
        const int idx[8] = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
        return grid4x8(plm_iq3xxs_grid, idx);
    }
    case PLM_TYPE_IQ3_S: {
        const block_iq3_s *b = blk;
        const uint8_t *q = b->qs + 8 * j;
        const int h = b->qh[j];  /* bit i: ninth bit of index i */
        *sc = _mm256_set1_epi16((short)(2 * ((b->scales[j / 2] >> (4 * (j % 2))) & 15) + 1));
        *sgn = signs_of_bits(b->signs + 4 * j);
        int idx[8];
        for (int i = 0; i < 8; i++) idx[i] = q[i] | ((h << (8 - i)) & 256);
        return grid4x8(plm_iq3s_grid, idx);
    }
    case PLM_TYPE_IQ1_S: {
        const block_iq1_s *b = blk;
        const uint8_t *q = b->qs + 4 * j;
        const int h = b->qh[j];
        *sc = _mm256_set1_epi16((short)(2 * ((h >> 12) & 7) + 1));
        const int s = h & 0x8000 ? -1 : 1;
        const int idx[4] = {q[0] | (h << 8 & 0x700), q[1] | (h << 5 & 0x700), q[2] | (h << 2 & 0x700),
                            q[3] | (h >> 1 & 0x700)};
        const int shift[4] = {s, s, s, s};
        return mag_of(iq1_weights(plm_iq1s_grid, idx, shift), sgn);
    }
    case PLM_TYPE_IQ1_M: {
        const block_iq1_m *b = blk;
        const uint8_t *q = b->qs + 4 * j, h0 = b->qh[2 * j], h1 = b->qh[2 * j + 1];
        uint16_t s16[4];
        memcpy(s16, b->scales, sizeof s16);
        const int s = s16[j / 2] >> (6 * (j % 2));
        *sc = scale_pair(2 * (s & 7) + 1, 2 * ((s >> 3) & 7) + 1);
        const int idx[4] = {q[0] | (h0 << 8 & 0x700), q[1] | (h0 << 4 & 0x700), q[2] | (h1 << 8 & 0x700),
                            q[3] | (h1 << 4 & 0x700)};
        const int shift[4] = {h0 & 0x08 ? -1 : 1, h0 & 0x80 ? -1 : 1, h1 & 0x08 ? -1 : 1, h1 & 0x80 ? -1 : 1};
        return mag_of(iq1_weights(plm_iq1s_grid, idx, shift), sgn);
    }
    default: { /* TQ2_0: element 128h + 32l + m is bits 2l of qs[32h + m] */
        const block_tq2_0 *b = blk;
        *sc = _mm256_set1_epi16(1);
        const __m256i q = _mm256_srli_epi16(loadu256(b->qs + 32 * (j / 4)), 2 * (j % 4));
        return mag_of(_mm256_sub_epi8(_mm256_and_si256(q, _mm256_set1_epi8(3)), _mm256_set1_epi8(1)), sgn);
    }
    }
}

/* The block scale d (f16; IQ1_M's is spread over its sub-block scales). */
X86_INL float cb_d(plm_type type, const void *blk) {
    switch (type) {
    case PLM_TYPE_IQ1_M: {
        const block_iq1_m *b = blk;
        uint16_t sc[4];
        memcpy(sc, b->scales, sizeof sc);
        return h2f((plm_fp16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
    }
    case PLM_TYPE_TQ1_0: return h2f(((const block_tq1_0 *)blk)->d);
    case PLM_TYPE_TQ2_0: return h2f(((const block_tq2_0 *)blk)->d);
    default: {
        plm_fp16_t h;
        memcpy(&h, blk, sizeof h);  /* the IQ2/IQ3/IQ1_S blocks lead with d */
        return h2f(h);
    }
    }
}

/* A decoded super-block: 8 sub-blocks of magnitudes, sign vectors and
 * scale vectors, and d. */
typedef struct {
    __m256i mag[8], sgn[8], sc[8];
    float d;
} cbdec;

/* Trits of TQ1_0 bytes: each byte is a base-3 fraction scaled to 256, so
 * (byte * 3^n mod 256) * 3 >> 8 is its trit n; pow holds 3^n per 16-bit
 * lane (both bytes).  Even and odd bytes are multiplied apart so that no
 * carry crosses a byte.  Returns trit - 1, in -1..1. */
X86_INL __m256i tq1_trits(__m256i b, __m256i pow) {
    const __m256i lo8 = _mm256_set1_epi16(0x00ff), hi8 = _mm256_set1_epi16((short)0xff00);
    const __m256i three = _mm256_set1_epi16(3);
    const __m256i prod = _mm256_or_si256(_mm256_and_si256(_mm256_mullo_epi16(b, pow), lo8),
                                         _mm256_mullo_epi16(_mm256_and_si256(b, hi8), pow));
    const __m256i even = _mm256_mulhi_epu16(_mm256_slli_epi16(prod, 8), three);
    const __m256i odd = _mm256_slli_epi16(_mm256_mulhi_epu16(_mm256_and_si256(prod, hi8), three), 8);
    return _mm256_sub_epi8(_mm256_or_si256(even, odd), _mm256_set1_epi8(1));
}

/* TQ1_0's 8 sub-blocks: trits 0-4 of qs[0..31] are elements 0-159, trits
 * 0-4 of qs[32..47] elements 160-239 (16 a trit), trits 0-3 of qh[0..3]
 * the last 16 (4 a trit). */
X86_INL void tq1_decode(const block_tq1_0 *b, __m256i w[8]) {
    const __m256i q = loadu256(b->qs);
    for (int n = 0; n < 5; n++) {
        static const short pow3[5] = {1, 3, 9, 27, 81};
        w[n] = tq1_trits(q, _mm256_set1_epi16(pow3[n]));
    }
    const __m256i t = _mm256_broadcastsi128_si256(loadu128(b->qs + 32));
    w[5] = tq1_trits(t, _mm256_setr_m128i(_mm_set1_epi16(1), _mm_set1_epi16(3)));
    w[6] = tq1_trits(t, _mm256_setr_m128i(_mm_set1_epi16(9), _mm_set1_epi16(27)));
    const __m256i last = _mm256_setr_m128i(loadu128(b->qs + 32), _mm_set1_epi32((int)iq_u32(b->qh)));
    w[7] = tq1_trits(last, _mm256_setr_m128i(_mm_set1_epi16(81), _mm_setr_epi16(1, 1, 3, 3, 9, 9, 27, 27)));
}

X86_INL void cb_decode(plm_type type, const void *blk, cbdec *u) {
    if (type == PLM_TYPE_TQ1_0) {
        __m256i w[8];
        tq1_decode(blk, w);
        for (int j = 0; j < 8; j++) {
            u->mag[j] = mag_of(w[j], &u->sgn[j]);
            u->sc[j] = _mm256_set1_epi16(1);
        }
        u->d = h2f(((const block_tq1_0 *)blk)->d);
    } else {
        for (int j = 0; j < 8; j++) u->mag[j] = cb_weights32(type, blk, j, &u->sc[j], &u->sgn[j]);
        u->d = cb_d(type, blk);
    }
}

/* sum_j sc_j * dot(w_j, a_j) as 8 int32 lanes (pairs never saturate:
 * 2 * 62 * 127 < 32767). */
X86_INL __m256i cb_dot(const cbdec *u, const int8_t *a) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0;
    for (int j = 0; j < 8; j += 2) {
        const __m256i p0 = _mm256_maddubs_epi16(u->mag[j], _mm256_sign_epi8(loadu256(a + 32 * j), u->sgn[j]));
        const __m256i p1 = _mm256_maddubs_epi16(u->mag[j + 1], _mm256_sign_epi8(loadu256(a + 32 * j + 32), u->sgn[j + 1]));
        s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, u->sc[j]));
        s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, u->sc[j + 1]));
    }
    return _mm256_add_epi32(s0, s1);
}

/* vec_dot: decode, dot; the format's power of two once at the end. */
X86_INL void vec_dot_cb(plm_type type, int64_t n, float *s, const void *x, const block_q8_K *y) {
    const size_t bx = plm_type_info_get(type)->type_size;
    __m256 acc = _mm256_setzero_ps();
    cbdec u;
    for (int64_t i = 0; i < n / QK_K; i++) {
        cb_decode(type, (const char *)x + (size_t)i * bx, &u);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(cb_dot(&u, y[i].qs)), _mm256_set1_ps(u.d * y[i].d), acc);
    }
    *s = hsum_ps(acc) * plm_iq_post(type);
}

#if X86_ZMM
/* ---- the codebook vec_dot on AVX-512 -----------------------------------------
 * The scalar decode above spends most of its time fetching: per 32
 * elements four (eight) grid rows and four sign masks, each a load and an
 * insert, and a scale broadcast.  Here the signs and scales of a whole
 * super-block are expanded in one vector each: IQ2_XXS/IQ2_XS/IQ3_XXS's
 * 7-bit sign codes spread to bytes and given their parity bit (the eighth
 * sign: ggml's ksigns rule, an even count of negatives; IQ2_S and IQ3_S
 * store the 8 bits), so a sub-block's 32 signs are 32 bits, which vptestmb
 * turns into a mask that negates the activations (vpsubb under the mask:
 * the bytes vpsignb gives).  The grid rows are loaded one by one (a
 * gather instruction measured slower on Zen 4 for 8-byte rows), two
 * sub-blocks per 512-bit register; IQ3_S's sixteen 4-byte rows, whose
 * indices take a ninth bit each, are one vpgatherdd (faster there).  The integer sums are the scalar decode's:
 * sum_j ls_j * dot(grid_j, sign_j * a_j).
 *
 * IQ1_S and IQ1_M have no signs but a shift: q = 8 * grid + s, grid in
 * {-1, 0, 1}, s = +-1 per 32 (IQ1_S) or per 8 elements (IQ1_M).  They are
 * made unsigned, u = 8 * (grid + 1) + (s + 1) = q + 9 in 0..18, and the
 * offset comes back from the activations' sums per 16 (Q8_K's bsums):
 * sum_j ls_j * (dot(u_j, a_j) - 9 * sum(a_j)), the same integer. */

/* The formats with the 512-bit decode below. */
X86_INL bool has_cbz(plm_type type) {
    return type == PLM_TYPE_IQ2_XXS || type == PLM_TYPE_IQ2_XS || type == PLM_TYPE_IQ2_S || type == PLM_TYPE_IQ3_XXS ||
           type == PLM_TYPE_IQ3_S || type == PLM_TYPE_IQ1_S || type == PLM_TYPE_IQ1_M;
}

/* IQ1_S, IQ1_M: unsigned values q + offset, no signs (see above). */
X86_INL bool is_iq1(plm_type type) { return type == PLM_TYPE_IQ1_S || type == PLM_TYPE_IQ1_M; }

/* Bytes of 7-bit sign codes given their parity bit as bit 7: the two
 * nibbles xor-ed (one vpternlogd with the mask), then a 16-entry table of
 * nibble parities (0x80 where odd) by vpshufb. */
X86_INL __m256i with_parity(__m256i b) {
    const __m256i odd = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0, 0,
                                         -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
    const __m256i n = _mm256_ternarylogic_epi32(b, _mm256_srli_epi32(b, 4), _mm256_set1_epi8(0x0f), 0x28); /* (a^b)&c */
    return _mm256_or_si256(b, _mm256_shuffle_epi8(odd, n));
}

/* The aux words of IQ2_XXS/IQ3_XXS (four 7-bit sign codes, a 4-bit scale
 * on top), one per sub-block. */
X86_INL __m256i xxs_aux(plm_type type, const uint8_t *qs) {
    if (type == PLM_TYPE_IQ2_XXS) /* the odd dwords of 8-byte groups */
        return _mm512_cvtepi64_epi32(_mm512_srli_epi64(_mm512_loadu_si512(qs), 32));
    return loadu256(qs + QK_K / 4);
}

/* Per dword j the 32 sign bits of sub-block j (bit e: element e negative). */
X86_INL __m256i cbz_signs(plm_type type, const void *blk) {
    switch (type) {
    case PLM_TYPE_IQ2_XS: { /* the top 7 bits of each index word */
        const __m512i w = _mm512_loadu_si512(((const block_iq2_xs *)blk)->qs);
        return with_parity(_mm512_cvtepi16_epi8(_mm512_srli_epi16(w, 9)));
    }
    case PLM_TYPE_IQ2_S: return loadu256(((const block_iq2_s *)blk)->qs + QK_K / 8);
    case PLM_TYPE_IQ3_S: return loadu256(((const block_iq3_s *)blk)->signs);
    case PLM_TYPE_IQ1_S:
    case PLM_TYPE_IQ1_M: return _mm256_setzero_si256(); /* unsigned (is_iq1) */
    default: { /* IQ2_XXS, IQ3_XXS: four codes spread to bytes */
        const __m256i aux = xxs_aux(type, (const uint8_t *)blk + 2);
        const __m256i b0 = _mm256_and_si256(aux, _mm256_set1_epi32(0x7f));
        const __m256i b1 = _mm256_and_si256(_mm256_slli_epi32(aux, 1), _mm256_set1_epi32(0x7f00));
        const __m256i b2 = _mm256_and_si256(_mm256_slli_epi32(aux, 2), _mm256_set1_epi32(0x7f0000));
        const __m256i b3 = _mm256_and_si256(_mm256_slli_epi32(aux, 3), _mm256_set1_epi32(0x7f000000));
        return with_parity(_mm256_or_si256(_mm256_or_si256(b0, b1), _mm256_or_si256(b2, b3)));
    }
    }
}

/* Nibble k of 16 (dword k): byte bi[k] of 16 bytes, shifted right by sh[k]. */
X86_INL __m512i nibbles16(__m128i bytes, __m128i bi, __m512i sh) {
    const __m512i v = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(bytes, bi));
    return _mm512_and_si512(_mm512_srlv_epi32(v, sh), _mm512_set1_epi32(15));
}

/* Per 16 elements (dword k: elements 16k..16k+15) the scale 2s+1 in both
 * 16-bit halves, the pair vpmaddwd multiplies by. */
X86_INL __m512i cbz_scales(plm_type type, const void *blk) {
    __m512i s;
    switch (type) {
    case PLM_TYPE_IQ2_XXS:
    case PLM_TYPE_IQ3_XXS: { /* one per 32: the aux words' top nibbles */
        const __m256i top = _mm256_srli_epi32(xxs_aux(type, (const uint8_t *)blk + 2), 28);
        s = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                                     _mm512_castsi256_si512(top));
        break;
    }
    case PLM_TYPE_IQ3_S: /* one per 32, a nibble each, low first */
        s = nibbles16(_mm_cvtsi32_si128((int)iq_u32(((const block_iq3_s *)blk)->scales)),
                      _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                      _mm512_setr_epi32(0, 0, 4, 4, 0, 0, 4, 4, 0, 0, 4, 4, 0, 0, 4, 4));
        break;
    case PLM_TYPE_IQ1_S: { /* one per 32: bits 12-14 of the sub-block's qh */
        const __m256i qh = _mm256_zextsi128_si256(loadu128(((const block_iq1_s *)blk)->qh));
        const __m512i w = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                                                   _mm512_cvtepu16_epi32(qh));
        s = _mm512_and_si512(_mm512_srli_epi32(w, 12), _mm512_set1_epi32(7));
        break;
    }
    case PLM_TYPE_IQ1_M: { /* one per 16: 3 bits each, four to a u16 */
        const __m512i sc = _mm512_cvtepu16_epi32(_mm256_zextsi128_si256(
            _mm_loadl_epi64((const __m128i *)(const void *)((const block_iq1_m *)blk)->scales)));
        const __m512i w =
            _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), sc);
        s = _mm512_and_si512(_mm512_srlv_epi32(w, _mm512_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9, 0, 3, 6, 9)),
                             _mm512_set1_epi32(7));
        break;
    }
    default: { /* IQ2_XS, IQ2_S: one per 16, a byte per sub-block, low nibble first */
        const uint8_t *sc = type == PLM_TYPE_IQ2_XS ? ((const block_iq2_xs *)blk)->scales
                                                    : ((const block_iq2_s *)blk)->scales;
        s = nibbles16(_mm_loadl_epi64((const __m128i *)(const void *)sc),
                      _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                      _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4));
    }
    }
    s = _mm512_add_epi32(_mm512_add_epi32(s, s), _mm512_set1_epi32(1));
    return _mm512_or_si512(s, _mm512_slli_epi32(s, 16));
}

/* ---- IQ2_XXS and IQ3_XXS grid rows from registers -------------------------
 * Their grids have 256 rows of 3 levels (IQ2_XXS: 8 bytes of 8, 25, 43) or
 * 8 levels (IQ3_XXS: 4 bytes of 4..62), so a row is a 16-bit code of level
 * indices, and the 256 codes (512 bytes) fit in 8 registers: a super-block's
 * 32 indices (IQ2_XXS; IQ3_XXS: 64, two vectors) become codes by four
 * vpermi2w on 64-code quarters, blended by index bits 6 and 7.  A code is
 * then spread to its row's words (vpermw), each word shifted right by its
 * own count (vpsrlvw) so that its two bytes' low bits hold their elements'
 * level indices, and vpshufb maps indices to levels: about 6 vector
 * instructions per 64 weights where the loads took 8 or 16 loads and as
 * many inserts.  All AVX-512 BW.  Element e's level index sits at bit
 * (e & 1) * 8 + (e >> 1) * 2 (IQ2_XXS) or (e & 1) * 8 + (e >> 1) * 3
 * (IQ3_XXS) of its row's code: word j, shifted by 2j (3j), holds elements
 * 2j and 2j + 1 in its low and high byte.  The codes were computed from
 * plm_iq2xxs_grid and plm_iq3xxs_grid; test_kernels holds every table's
 * vec_dot to the reference's dot on random indices. */
static _Alignas(64) const uint16_t cbz_iq2xxs_codes[256] = {
    0x0000, 0x0002, 0x0101, 0x0200, 0x0202, 0x0005, 0x0104, 0x0008, 0x000a, 0x0208, 0x020a, 0x0401,
    0x0500, 0x0404, 0x0604, 0x0409, 0x0508, 0x0800, 0x0802, 0x0a02, 0x080a, 0x0011, 0x0110, 0x0014,
    0x0115, 0x0410, 0x0910, 0x0a14, 0x0020, 0x0022, 0x002a, 0x0822, 0x1001, 0x1100, 0x1004, 0x1009,
    0x1108, 0x1400, 0x1402, 0x1600, 0x1408, 0x1801, 0x1900, 0x1804, 0x1908, 0x1010, 0x1012, 0x1210,
    0x1018, 0x1512, 0x1619, 0x1810, 0x1815, 0x1221, 0x1024, 0x1420, 0x1920, 0x1928, 0x2000, 0x2101,
    0x2200, 0x2104, 0x2208, 0x2401, 0x2500, 0x2404, 0x2406, 0x2a00, 0x2110, 0x2410, 0x2022, 0x2124,
    0x0041, 0x0140, 0x0044, 0x0049, 0x0440, 0x0448, 0x0940, 0x0844, 0x0945, 0x0050, 0x0250, 0x0058,
    0x0454, 0x0656, 0x0850, 0x0168, 0x0561, 0x1040, 0x1240, 0x1048, 0x1149, 0x1641, 0x1840, 0x1254,
    0x145a, 0x1060, 0x1166, 0x2041, 0x2140, 0x2044, 0x2440, 0x2841, 0x2050, 0x2151, 0x2858, 0x2465,
    0x0080, 0x0082, 0x0282, 0x0580, 0x0489, 0x0880, 0x0882, 0x0299, 0x0690, 0x00a0, 0x00a2, 0x1081,
    0x1180, 0x1084, 0x1480, 0x1586, 0x1090, 0x1491, 0x1598, 0x18a4, 0x2280, 0x2088, 0x2984, 0x25a0,
    0x4001, 0x4100, 0x4004, 0x4204, 0x4009, 0x4108, 0x4400, 0x4600, 0x4506, 0x4408, 0x4801, 0x4900,
    0x4804, 0x4010, 0x4018, 0x4419, 0x4810, 0x4911, 0x4021, 0x4024, 0x4620, 0x4526, 0x4628, 0x5000,
    0x5200, 0x5008, 0x5800, 0x5a05, 0x5016, 0x5118, 0x5020, 0x6001, 0x6100, 0x6004, 0x6400, 0x6501,
    0x6010, 0x6614, 0x6419, 0x6812, 0x6521, 0x6824, 0x4040, 0x4240, 0x4045, 0x4245, 0x4048, 0x4840,
    0x4a40, 0x4150, 0x4452, 0x4958, 0x4865, 0x5844, 0x5846, 0x5252, 0x5061, 0x5564, 0x6040, 0x6045,
    0x6245, 0x6548, 0x6450, 0x6260, 0x4180, 0x4084, 0x4480, 0x4688, 0x4090, 0x4595, 0x42a4, 0x44a8,
    0x5080, 0x5181, 0x5094, 0x5096, 0x5990, 0x6482, 0x8000, 0x8002, 0x8202, 0x8401, 0x8802, 0x8110,
    0x8214, 0x8410, 0x8025, 0x9001, 0x9100, 0x9004, 0x9105, 0x9400, 0x9408, 0x9010, 0x9512, 0x9914,
    0x9221, 0x9420, 0x9428, 0xa002, 0xa110, 0xa025, 0x8140, 0x8044, 0x8148, 0x8440, 0x8849, 0x8156,
    0x8850, 0x8561, 0x9040, 0x904a, 0x9540, 0x9455, 0xa841, 0xa058, 0x8082, 0x8484, 0x8981, 0x8291,
    0x80a0, 0x9284, 0xa484, 0xa190
};
static _Alignas(64) const uint16_t cbz_iq3xxs_codes[256] = {
    0x0000, 0x0002, 0x0004, 0x0101, 0x0103, 0x0107, 0x0200, 0x0202, 0x0301, 0x0402, 0x0703, 0x0705,
    0x0009, 0x000b, 0x0108, 0x010a, 0x0209, 0x020d, 0x0308, 0x030a, 0x0409, 0x050c, 0x0708, 0x0010,
    0x0012, 0x0014, 0x0111, 0x0210, 0x0212, 0x0311, 0x0313, 0x0317, 0x0511, 0x0517, 0x0715, 0x0019,
    0x001f, 0x0118, 0x011a, 0x021d, 0x0718, 0x0123, 0x0327, 0x0424, 0x0527, 0x0723, 0x0725, 0x0029,
    0x002f, 0x032a, 0x052a, 0x0335, 0x0634, 0x0138, 0x013c, 0x013e, 0x043b, 0x0639, 0x0801, 0x0803,
    0x0900, 0x0902, 0x0a01, 0x0a03, 0x0b00, 0x0b02, 0x0b04, 0x0c07, 0x0d00, 0x0808, 0x080a, 0x0909,
    0x0a08, 0x0a0a, 0x0811, 0x0813, 0x0910, 0x0912, 0x0a11, 0x0b10, 0x0f12, 0x0818, 0x081a, 0x0a18,
    0x0b19, 0x0c1e, 0x0e1e, 0x0821, 0x0825, 0x0d20, 0x0a28, 0x0a2c, 0x0c2e, 0x0f29, 0x0835, 0x0a3a,
    0x0c38, 0x1000, 0x1002, 0x1101, 0x1103, 0x1200, 0x1202, 0x1206, 0x1301, 0x1402, 0x1009, 0x100b,
    0x100d, 0x1108, 0x110a, 0x1209, 0x1308, 0x160b, 0x160f, 0x1708, 0x1010, 0x1012, 0x1111, 0x1117,
    0x1210, 0x1212, 0x1317, 0x1410, 0x1515, 0x1019, 0x1118, 0x111c, 0x1718, 0x171c, 0x1325, 0x1523,
    0x102b, 0x122f, 0x1429, 0x172c, 0x1039, 0x103b, 0x113e, 0x143d, 0x1801, 0x1900, 0x1902, 0x1a01,
    0x1a03, 0x1d00, 0x1e05, 0x1f02, 0x1808, 0x180a, 0x1a08, 0x1b09, 0x1c0c, 0x1c0e, 0x1811, 0x1813,
    0x1910, 0x1a15, 0x1d12, 0x1f12, 0x1919, 0x1b1b, 0x1b20, 0x1c27, 0x1f22, 0x1828, 0x182e, 0x1a2a,
    0x1d2d, 0x1934, 0x1b36, 0x1e33, 0x1b3b, 0x1e38, 0x2004, 0x2107, 0x2305, 0x2307, 0x2503, 0x2507,
    0x270c, 0x2210, 0x2317, 0x2410, 0x2610, 0x2616, 0x201f, 0x241d, 0x2024, 0x2521, 0x2624, 0x222d,
    0x242b, 0x2728, 0x203d, 0x2138, 0x213a, 0x2338, 0x2902, 0x2c01, 0x2f00, 0x2808, 0x280e, 0x2a0e,
    0x2d0d, 0x2914, 0x2b12, 0x2f12, 0x281a, 0x2d1b, 0x2920, 0x2a23, 0x2a27, 0x2f22, 0x282a, 0x2b29,
    0x2d30, 0x2a3c, 0x2c3a, 0x3204, 0x3404, 0x3406, 0x3604, 0x3209, 0x3609, 0x3117, 0x3614, 0x3318,
    0x331e, 0x3424, 0x302d, 0x352a, 0x3333, 0x303b, 0x3239, 0x3803, 0x3805, 0x3807, 0x3900, 0x3b02,
    0x3d02, 0x3a0e, 0x3c08, 0x3912, 0x3c15, 0x3d12, 0x3818, 0x391d, 0x3b1b, 0x3e18, 0x3a21, 0x3c21,
    0x3828, 0x382a, 0x3a2c, 0x3b30
};

X86_INL bool has_xxs_codes(plm_type type) { return type == PLM_TYPE_IQ2_XXS || type == PLM_TYPE_IQ3_XXS; }

/* The code table of a format in 8 registers (quarter q: t[2q], t[2q + 1]). */
typedef struct {
    __m512i t[8];
} xxs_table;

X86_INL void xxs_table_load(plm_type type, xxs_table *tb) {
    const uint16_t *c = type == PLM_TYPE_IQ2_XXS ? cbz_iq2xxs_codes : cbz_iq3xxs_codes;
    for (int i = 0; i < 8; i++) tb->t[i] = _mm512_load_si512(c + 32 * i);
}

/* The codes of 32 grid indices (16-bit lanes, 0..255). */
X86_INL __m512i xxs_codes(const xxs_table *tb, __m512i idx) {
    const __m512i q0 = _mm512_permutex2var_epi16(tb->t[0], idx, tb->t[1]);
    const __m512i q1 = _mm512_permutex2var_epi16(tb->t[2], idx, tb->t[3]);
    const __m512i q2 = _mm512_permutex2var_epi16(tb->t[4], idx, tb->t[5]);
    const __m512i q3 = _mm512_permutex2var_epi16(tb->t[6], idx, tb->t[7]);
    const __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(64));
    const __mmask32 b7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(128));
    return _mm512_mask_blend_epi16(b7, _mm512_mask_blend_epi16(b6, q0, q1), _mm512_mask_blend_epi16(b6, q2, q3));
}

/* The codes of a super-block's rows: c[0] rows 0-31, c[1] rows 32-63 (IQ3_XXS). */
X86_INL void xxs_block_codes(plm_type type, const xxs_table *tb, const void *blk, __m512i c[2]) {
    const uint8_t *qs = (const uint8_t *)blk + 2;
    if (type == PLM_TYPE_IQ2_XXS) { /* the even dwords of 8-byte groups */
        c[0] = xxs_codes(tb, _mm512_cvtepu8_epi16(_mm512_cvtepi64_epi32(_mm512_loadu_si512(qs))));
        c[1] = c[0];
    } else {
        c[0] = xxs_codes(tb, _mm512_cvtepu8_epi16(loadu256(qs)));
        c[1] = xxs_codes(tb, _mm512_cvtepu8_epi16(loadu256(qs + 32)));
    }
}

/* Magnitudes of sub-blocks 2h and 2h+1 from the codes. */
X86_INL __m512i xxs_grid(plm_type type, const __m512i c[2], int h) {
    __m512i spread, shift, mask, levels;
    if (type == PLM_TYPE_IQ2_XXS) { /* row 8h + w / 4 in word w, shifted by 2 (w % 4) */
        const int r = 8 * h;
        spread = _mm512_set_epi16(r + 7, r + 7, r + 7, r + 7, r + 6, r + 6, r + 6, r + 6, r + 5, r + 5, r + 5, r + 5,
                                  r + 4, r + 4, r + 4, r + 4, r + 3, r + 3, r + 3, r + 3, r + 2, r + 2, r + 2, r + 2,
                                  r + 1, r + 1, r + 1, r + 1, r, r, r, r);
        shift = _mm512_set_epi16(6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0, 6,
                                 4, 2, 0);
        mask = _mm512_set1_epi16(0x0303);
        levels = _mm512_broadcast_i32x4(_mm_setr_epi8(8, 25, 43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
    } else { /* rows 16h.. of 64: row 16 (h % 2) + w / 2 of c[h / 2] in word w, shifted by 3 (w % 2) */
        const int r = 16 * (h % 2);
        spread = _mm512_set_epi16(r + 15, r + 15, r + 14, r + 14, r + 13, r + 13, r + 12, r + 12, r + 11, r + 11,
                                  r + 10, r + 10, r + 9, r + 9, r + 8, r + 8, r + 7, r + 7, r + 6, r + 6, r + 5, r + 5,
                                  r + 4, r + 4, r + 3, r + 3, r + 2, r + 2, r + 1, r + 1, r, r);
        shift = _mm512_set_epi16(3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0, 3,
                                 0, 3, 0);
        mask = _mm512_set1_epi16(0x0707);
        levels = _mm512_broadcast_i32x4(_mm_setr_epi8(4, 12, 20, 28, 36, 44, 52, 62, 0, 0, 0, 0, 0, 0, 0, 0));
    }
    const __m512i w = _mm512_srlv_epi16(_mm512_permutexvar_epi16(spread, c[h / 2]), shift);
    return _mm512_shuffle_epi8(levels, _mm512_and_si512(w, mask));
}

/* Eight 8-byte grid rows as one register. */
X86_INL __m512i grid8x8(const uint64_t *g, const int i[8]) {
    return _mm512_set_epi64((long long)g[i[7]], (long long)g[i[6]], (long long)g[i[5]], (long long)g[i[4]],
                            (long long)g[i[3]], (long long)g[i[2]], (long long)g[i[1]], (long long)g[i[0]]);
}

/* Grid rows (magnitudes) of sub-blocks 2h and 2h+1. */
X86_INL __m512i cbz_grid(plm_type type, const void *blk, int h) {
    int i[8];
    switch (type) {
    case PLM_TYPE_IQ2_XXS: { /* 8-byte groups: 4 index bytes, then the aux word */
        const uint8_t *q = (const uint8_t *)((const block_iq2_xxs *)blk)->qs + 16 * h;
        for (int k = 0; k < 4; k++) i[k] = q[k], i[4 + k] = q[8 + k];
        return grid8x8(plm_iq2xxs_grid, i);
    }
    case PLM_TYPE_IQ2_XS: {
        const uint16_t *q = ((const block_iq2_xs *)blk)->qs + 8 * h;
        for (int k = 0; k < 8; k++) i[k] = q[k] & 511;
        return grid8x8(plm_iq2xs_grid, i);
    }
    case PLM_TYPE_IQ2_S: { /* 8 low index bits, 2 high ones from qh */
        const block_iq2_s *b = blk;
        for (int k = 0; k < 8; k++) i[k] = b->qs[8 * h + k] | (b->qh[2 * h + k / 4] << (8 - 2 * (k % 4)) & 0x300);
        return grid8x8(plm_iq2s_grid, i);
    }
    case PLM_TYPE_IQ3_S: { /* 8 low index bits, the ninth from qh (bit k of 16), then a gather:
                          * 16 rows of 4 bytes, where it measured faster than 16 loads */
        const block_iq3_s *b = blk;
        const uint8_t *q = b->qs + 16 * h;
        const int hb = b->qh[2 * h] | b->qh[2 * h + 1] << 8;
        const __m512i bit = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        const __m512i hi = _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(hb), bit), _mm512_set1_epi32(1));
        const __m512i idx = _mm512_or_si512(_mm512_cvtepu8_epi32(loadu128(q)), _mm512_slli_epi32(hi, 8));
        return _mm512_i32gather_epi32(idx, (const void *)plm_iq3s_grid, 4);
    }
    default: { /* IQ3_XXS */
        const uint8_t *q = ((const block_iq3_xxs *)blk)->qs + 16 * h;
        const uint32_t *g = plm_iq3xxs_grid;
        return _mm512_setr_epi32((int)g[q[0]], (int)g[q[1]], (int)g[q[2]], (int)g[q[3]], (int)g[q[4]], (int)g[q[5]],
                                 (int)g[q[6]], (int)g[q[7]], (int)g[q[8]], (int)g[q[9]], (int)g[q[10]],
                                 (int)g[q[11]], (int)g[q[12]], (int)g[q[13]], (int)g[q[14]], (int)g[q[15]]);
    }
    }
}

/* IQ1's 32 grid indices of 11 bits (8 in qs, 3 in qh), computed in one
 * vector (cheaper than 32 scalar extractions) and stored for the loads. */
X86_INL void iq1z_indices(plm_type type, const void *blk, uint16_t idx[32]) {
    __m512i hi;
    if (type == PLM_TYPE_IQ1_S) { /* row k: bits 3(k%4).. of the u16 qh[k/4] */
        const __m512i qh = _mm512_castsi128_si512(loadu128(((const block_iq1_s *)blk)->qh));
        const __m512i lane = _mm512_set_epi16(7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5, 4, 4, 4, 4, /* k / 4 */
                                              3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
        const __m512i sh = _mm512_set_epi16(9, 6, 3, 0, 9, 6, 3, 0, 9, 6, 3, 0, 9, 6, 3, 0, /* 3 * (k % 4) */
                                            9, 6, 3, 0, 9, 6, 3, 0, 9, 6, 3, 0, 9, 6, 3, 0);
        hi = _mm512_srlv_epi16(_mm512_permutexvar_epi16(lane, qh), sh);
    } else { /* IQ1_M, row k: the low 3 bits of nibble k of qh */
        const __m512i qh = _mm512_cvtepu8_epi16(_mm256_zextsi128_si256(loadu128(((const block_iq1_m *)blk)->qh)));
        const __m512i lane = _mm512_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8, /* k / 2 */
                                              7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
        const __m512i sh = _mm512_set_epi16(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, /* 4 * (k % 2) */
                                            4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0);
        hi = _mm512_srlv_epi16(_mm512_permutexvar_epi16(lane, qh), sh);
    }
    const uint8_t *qs = type == PLM_TYPE_IQ1_S ? ((const block_iq1_s *)blk)->qs : ((const block_iq1_m *)blk)->qs;
    _mm512_store_si512(idx, _mm512_or_si512(_mm512_cvtepu8_epi16(loadu256(qs)),
                                            _mm512_slli_epi16(_mm512_and_si512(hi, _mm512_set1_epi16(7)), 8)));
}

/* IQ1 values of sub-blocks 2h and 2h+1 as u = 8 * (grid + 1) + (s + 1):
 * eight grid rows by their indices (idx[8h..8h+7]), the shift's
 * sign bit per row tested in a byte of qh spread over the row's qword. */
X86_INL __m512i iq1z_values(plm_type type, const void *blk, const uint16_t idx[32], int h, bool with_shift) {
    uint32_t qh4; /* the qh bytes of sub-blocks 2h, 2h+1 */
    __m512i spread, bit;
    if (type == PLM_TYPE_IQ1_S) { /* a u16 per sub-block, the sign in bit 15 */
        memcpy(&qh4, ((const block_iq1_s *)blk)->qh + 2 * h, 4);
        spread = _mm512_set_epi64(0x0303030303030303, 0x0303030303030303, 0x0303030303030303, 0x0303030303030303,
                                  0x0101010101010101, 0x0101010101010101, 0x0101010101010101, 0x0101010101010101);
        bit = _mm512_set1_epi8((char)0x80);
    } else { /* IQ1_M: a nibble per row, the sign in its bit 3 */
        memcpy(&qh4, ((const block_iq1_m *)blk)->qh + 4 * h, 4);
        spread = _mm512_set_epi64(0x0303030303030303, 0x0303030303030303, 0x0202020202020202, 0x0202020202020202,
                                  0x0101010101010101, 0x0101010101010101, 0x0000000000000000, 0x0000000000000000);
        bit = _mm512_set_epi64(0x8080808080808080, 0x0808080808080808, 0x8080808080808080, 0x0808080808080808,
                               0x8080808080808080, 0x0808080808080808, 0x8080808080808080, 0x0808080808080808);
    }
    const int k[8] = {idx[8 * h], idx[8 * h + 1], idx[8 * h + 2], idx[8 * h + 3],
                      idx[8 * h + 4], idx[8 * h + 5], idx[8 * h + 6], idx[8 * h + 7]};
    const __m512i g = grid8x8(plm_iq1s_grid, k); /* loads: faster than a gather of 8 here */
    const __m512i g8 = _mm512_slli_epi16(_mm512_add_epi8(g, _mm512_set1_epi8(1)), 3); /* 0, 8, 16: no carry */
    if (!with_shift) return g8;
    const __mmask64 neg = _mm512_test_epi8_mask(_mm512_shuffle_epi8(_mm512_set1_epi32((int)qh4), spread), bit);
    return _mm512_mask_add_epi8(g8, ~neg, g8, _mm512_set1_epi8(2));
}

/* The 64 sign bits of sub-blocks 2h, 2h+1 (qword h of signs) as a byte mask. */
X86_INL __mmask64 cbz_sign_mask(__m256i signs, int h) {
    const __m512i q = _mm512_permutexvar_epi64(_mm512_set1_epi64(h), _mm512_castsi256_si512(signs));
    const __m512i rep = _mm512_set_epi64(0x0707070707070707, 0x0606060606060606, 0x0505050505050505,
                                         0x0404040404040404, 0x0303030303030303, 0x0202020202020202,
                                         0x0101010101010101, 0x0000000000000000);
    const __m512i bit = _mm512_set1_epi64((long long)0x8040201008040201ULL);
    return _mm512_test_epi8_mask(_mm512_shuffle_epi8(q, rep), bit); /* byte e: bit e % 8 of byte e / 8 */
}

/* IQ1: the offset sum over 16-element groups of ls * o * sum(a), for
 * values stored as q + o.  IQ1_M: u = q + 9 (iq1z_values with the shift).
 * IQ1_S, whose shift s is one per 32 like its scale, leaves the shift out
 * of the values, u = 8 * (grid + 1) = q + 8 - s, so o = 8 - s, 7 or 9,
 * from bit 15 of qh: four vector instructions a sub-block fewer. */
X86_INL __m512i iq1z_offset(plm_type type, const void *blk, __m512i ls, const block_q8_K *y) {
    __m256i o;
    if (type == PLM_TYPE_IQ1_S) {
        const __m128i neg = _mm_srli_epi16(loadu128(((const block_iq1_s *)blk)->qh), 15);
        const __m128i o8 = _mm_add_epi16(_mm_set1_epi16(7), _mm_add_epi16(neg, neg));
        const __m256i o16 = _mm256_cvtepu16_epi32(o8);
        o = _mm256_or_si256(o16, _mm256_slli_epi32(o16, 16)); /* per 16 elements */
    } else {
        o = _mm256_set1_epi16(9);
    }
    const __m256i c = _mm256_mullo_epi16(_mm512_cvtepi32_epi16(ls), o);
    return _mm512_zextsi256_si512(_mm256_madd_epi16(c, loadu256(y->bsums)));
}

/* What a super-block's dots need besides its grid rows, prepared one
 * super-block ahead (the long dependency chains: see vec_dot_xxs_zmm). */
typedef struct {
    __m512i ls;                     /* cbz_scales */
    __m512i sum0;                   /* the integer sum's start: IQ1's offset, 0 otherwise */
    _Alignas(64) uint16_t idx[32];  /* IQ1's grid indices */
    _Alignas(32) __mmask64 neg[4];  /* qword h of the signs: sub-blocks 2h, 2h+1's byte mask */
} cbz_prep;

X86_INL void cbz_prepare(plm_type type, const void *blk, const block_q8_K *y, cbz_prep *p) {
    p->ls = cbz_scales(type, blk);
    if (is_iq1(type)) {
        p->sum0 = _mm512_sub_epi32(_mm512_setzero_si512(), iq1z_offset(type, blk, p->ls, y));
        iq1z_indices(type, blk, p->idx);
    } else {
        p->sum0 = _mm512_setzero_si512();
        _mm256_store_si256((__m256i *)(void *)p->neg, cbz_signs(type, blk));
    }
}

X86_INL void vec_dot_cb_zmm(plm_type type, int64_t n, float *s, const void *x, const block_q8_K *y) {
    const size_t bx = plm_type_info_get(type)->type_size;
    const int64_t nb = n / QK_K;
    __m512 acc = _mm512_setzero_ps();
    /* IQ1 prepares one super-block ahead (measured 1.2x); for the others,
     * whose grid loads are not chained to the preparation, that measured
     * slower, so they prepare the super-block at hand. */
    const bool ahead = is_iq1(type);
    cbz_prep prep[2]; /* super-block i's in prep[i % 2] (ahead) or prep[0] */
    if (ahead && nb > 0) cbz_prepare(type, x, y, &prep[0]);
    for (int64_t i = 0; i < nb; i++) {
        const void *blk = (const char *)x + (size_t)i * bx;
        const int64_t in = i + 1 < nb ? i + 1 : i; /* the last one prepares itself again: no branch */
        if (ahead)
            cbz_prepare(type, (const char *)x + (size_t)in * bx, &y[in], &prep[(i + 1) % 2]);
        else
            cbz_prepare(type, blk, &y[i], &prep[0]);
        cbz_prep *cur = &prep[ahead ? i % 2 : 0];
        __m512i sum = cur->sum0;
        for (int h = 0; h < 4; h++) {
            const __m512i a = _mm512_loadu_si512(y[i].qs + 64 * h);
            __m512i p;
            if (is_iq1(type)) {
                p = _mm512_maddubs_epi16(iq1z_values(type, blk, cur->idx, h, type == PLM_TYPE_IQ1_M), a);
            } else {
                const __m512i as = _mm512_mask_sub_epi8(a, _load_mask64(&cur->neg[h]), _mm512_setzero_si512(), a);
                p = _mm512_maddubs_epi16(cbz_grid(type, blk, h), as);
            }
            const __m512i sc = _mm512_permutexvar_epi32( /* 128-bit lane l: elements 16l..16l+15 */
                _mm512_setr_epi32(4 * h, 4 * h, 4 * h, 4 * h, 4 * h + 1, 4 * h + 1, 4 * h + 1, 4 * h + 1, 4 * h + 2,
                                  4 * h + 2, 4 * h + 2, 4 * h + 2, 4 * h + 3, 4 * h + 3, 4 * h + 3, 4 * h + 3),
                cur->ls);
            sum = _mm512_add_epi32(sum, _mm512_madd_epi16(p, sc));
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(cb_d(type, blk) * y[i].d), acc);
    }
    *s = _mm512_reduce_add_ps(acc) * plm_iq_post(type);
}

/* IQ2_XXS and IQ3_XXS: vec_dot_cb_zmm's sums with the grid codes
 * (xxs_grid), software-pipelined: super-block i + 1's signs, scales and
 * codes (the long dependency chains: loads, widenings, the table lookup)
 * are computed while super-block i's dots run, so the core's vector
 * scheduler holds independent work instead of waiting on them. */
typedef struct {
    __m512i codes[2], ls;
    _Alignas(32) __mmask64 neg[4]; /* qword h of the signs: sub-blocks 2h, 2h+1's byte mask */
} xxs_prep;

X86_INL void xxs_prepare(plm_type type, const xxs_table *tb, const void *blk, xxs_prep *p) {
    _mm256_store_si256((__m256i *)(void *)p->neg, cbz_signs(type, blk));
    p->ls = cbz_scales(type, blk);
    xxs_block_codes(type, tb, blk, p->codes);
}

X86_INL void vec_dot_xxs_zmm(plm_type type, int64_t n, float *s, const void *x, const block_q8_K *y) {
    const size_t bx = plm_type_info_get(type)->type_size;
    const int64_t nb = n / QK_K;
    __m512 acc = _mm512_setzero_ps();
    xxs_table tb;
    xxs_table_load(type, &tb);
    xxs_prep cur, next;
    if (nb > 0) xxs_prepare(type, &tb, x, &cur);
    for (int64_t i = 0; i < nb; i++) {
        const void *blk = (const char *)x + (size_t)i * bx;
        const int64_t in = i + 1 < nb ? i + 1 : i; /* the last one prepares itself again: no branch */
        xxs_prepare(type, &tb, (const char *)x + (size_t)in * bx, &next);
        __m512i sum = _mm512_setzero_si512();
        for (int h = 0; h < 4; h++) {
            const __m512i a = _mm512_loadu_si512(y[i].qs + 64 * h);
            const __m512i as = _mm512_mask_sub_epi8(a, _load_mask64(&cur.neg[h]), _mm512_setzero_si512(), a);
            const __m512i p = _mm512_maddubs_epi16(xxs_grid(type, cur.codes, h), as);
            const __m512i sc = _mm512_permutexvar_epi32( /* 128-bit lane l: elements 16l..16l+15 */
                _mm512_setr_epi32(4 * h, 4 * h, 4 * h, 4 * h, 4 * h + 1, 4 * h + 1, 4 * h + 1, 4 * h + 1, 4 * h + 2,
                                  4 * h + 2, 4 * h + 2, 4 * h + 2, 4 * h + 3, 4 * h + 3, 4 * h + 3, 4 * h + 3),
                cur.ls);
            sum = _mm512_add_epi32(sum, _mm512_madd_epi16(p, sc));
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(cb_d(type, blk) * y[i].d), acc);
        cur = next;
    }
    *s = _mm512_reduce_add_ps(acc) * plm_iq_post(type);
}

/* TQ1_0 on AVX-512: tq1_decode's trits t - 1 made unsigned again (t in
 * 0..2) for vpdpbusd, sum(a) from Q8_K's sums, as TQ2_0 below: no sign
 * or widening instructions after the decode. */
X86_INL void vec_dot_tq1_zmm(int64_t n, float *s, const block_tq1_0 *x, const block_q8_K *y) {
    const __m256i one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m256i w[8];
        tq1_decode(&x[i], w);
        __m256i sum = _mm256_madd_epi16(loadu256(y[i].bsums), _mm256_set1_epi16(-1));
        for (int j = 0; j < 8; j++)
            sum = _mm256_dpbusd_epi32(sum, _mm256_add_epi8(w[j], one), loadu256(y[i].qs + 32 * j));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(h2f(x[i].d) * y[i].d), acc);
    }
    *s = hsum_ps(acc);
}

/* TQ2_0 on AVX-512: the 2-bit codes q (value q - 1) are unsigned, so
 * vpdpbusd takes them as they are, and the offset comes back from Q8_K's
 * sums: sum(q * a) - sum(a).  64 elements a step: elements 64c..64c+63
 * are bits 2l and 2l + 2 (l = 2 (c % 2)) of the 32 bytes qs[32 (c / 2)..],
 * one broadcast and a shift per 256-bit half.  No sign instruction and
 * no 256-bit decode (vec_dot_cb: 10 -> 20 GB/s measured, one thread). */
X86_INL void vec_dot_tq2_zmm(int64_t n, float *s, const block_tq2_0 *x, const block_q8_K *y) {
    const __m512i three = _mm512_set1_epi8(3);
    const __m512i sh0 = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2), sh1 = _mm512_setr_epi64(4, 4, 4, 4, 6, 6, 6, 6);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        __m512i sum = _mm512_zextsi256_si512(_mm256_madd_epi16(loadu256(y[i].bsums), _mm256_set1_epi16(-1)));
        for (int h = 0; h < 2; h++) {
            const __m512i q = _mm512_broadcast_i64x4(loadu256(x[i].qs + 32 * h));
            const __m512i w0 = _mm512_and_si512(_mm512_srlv_epi64(q, sh0), three);
            const __m512i w1 = _mm512_and_si512(_mm512_srlv_epi64(q, sh1), three);
            sum = _mm512_dpbusd_epi32(sum, w0, _mm512_loadu_si512(y[i].qs + 128 * h));
            sum = _mm512_dpbusd_epi32(sum, w1, _mm512_loadu_si512(y[i].qs + 128 * h + 64));
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(h2f(x[i].d) * y[i].d), acc);
    }
    *s = _mm512_reduce_add_ps(acc);
}
#endif

/* The row gemm's tile: a super-block decoded once for nt tokens. */
X86_INL void tile_cb(plm_type type, int nt, int64_t nb, const void *x, const char *act, size_t as, float *out,
                     int64_t os) {
    const size_t bx = plm_type_info_get(type)->type_size;
    __m256 acc[X86_GEMM_T];
    cbdec u;
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        cb_decode(type, (const char *)x + (size_t)b * bx, &u);
        for (int t = 0; t < nt; t++) {
            const block_q8_K *y = (const block_q8_K *)(const void *)(act + t * as) + b;
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(cb_dot(&u, y->qs)), _mm256_set1_ps(u.d * y->d), acc[t]);
        }
    }
    const float post = plm_iq_post(type);
    for (int t = 0; t < nt; t++) out[t * os] = hsum_ps(acc[t]) * post;
}

/* ---- the row gemm by k slices: each weight decoded once per call -----------
 * tile_cb decodes a super-block again for every X86_GEMM_T tokens, so at
 * 64 tokens each weight is decoded 16 times (AVX2) and the decode, not the
 * multiply, bounds prefill.  Here a band of CBS_R rows is decoded once per
 * slice of CBS_SB super-blocks into an int8 buffer (36 KiB on the stack, in
 * L1/L2), which every token tile then reads (from CBS_MIN_TOK tokens).
 * The signed values q (|q| <= 62) are stored as u = q + 64 (2..126), so
 * the dot needs no sign instruction: vpmaddubsw(u, a) cannot saturate
 * (2 * 126 * 127 < 32767),
 * and the offset comes back from Q8_K's sums per 16 elements:
 * sum_j ls_j dot(q_j, a_j) = sum_j ls_j dot(u_j, a_j) - 64 sum_k ls_k bsum_k,
 * the same integer as the vec_dot's. */
enum {
    CBS_R = 16, /* rows per band */
    CBS_SB = 4, /* super-blocks per k slice */
    CBS_T = 4,  /* tokens per tile: 8 accumulators of 16 ymm registers */
    /* Fewer tokens take tile_cb, which then decodes each weight once or
     * twice as well, without the buffer's stores and reloads: the slices
     * measured 10% slower at 4 tokens on AVX2, faster from 8.  (Not used
     * on AVX-512: gemm_quant.) */
    CBS_MIN_TOK = 8,
};

/* One row's super-block, decoded for the slice gemm. */
typedef struct {
    __m256i u[8];  /* q + 64, sub-block j's 32 elements */
    __m256i sc[8]; /* sub-block j's scale vector (cbdec.sc) */
    __m256i ls64;  /* 64 * ls per 16 elements, as 16 int16: the offset's weights on bsums */
    float d;
} cbslice;

X86_INL void cbs_decode(plm_type type, const void *blk, cbslice *c) {
    cbdec u;
    cb_decode(type, blk, &u);
    _Alignas(32) int16_t ls[16];
    for (int j = 0; j < 8; j++) {
        c->u[j] = _mm256_add_epi8(_mm256_sign_epi8(u.mag[j], u.sgn[j]), _mm256_set1_epi8(64));
        c->sc[j] = u.sc[j];
        ls[2 * j] = (int16_t)_mm256_extract_epi16(u.sc[j], 0);
        ls[2 * j + 1] = (int16_t)_mm256_extract_epi16(u.sc[j], 8);
    }
    c->ls64 = _mm256_slli_epi16(load256(ls), 6);
    c->d = u.d;
}

/* Per token its 8 lanes summed in integers (lanes hold offset parts that
 * cancel only in the total: converted to float apart they lost up to 1e-5
 * of the result), the T totals side by side in 4 lanes. */
X86_INL __m128i cbs_totals(int T, const __m256i is[CBS_T]) {
    const __m256i z = _mm256_setzero_si256();
    const __m256i h01 = _mm256_hadd_epi32(is[0], T > 1 ? is[1] : z);
    const __m256i h23 = _mm256_hadd_epi32(T > 2 ? is[2] : z, T > 3 ? is[3] : z);
    const __m256i h = _mm256_hadd_epi32(h01, h23); /* token t: lane t of each half */
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* One row x T tokens over nsb decoded super-blocks (T constant: the
 * accumulators stay in registers); returns the T sums, post applied. */
X86_INL void cbs_tile(int T, float post, const cbslice *c, int nsb, const char *act, size_t as, int64_t sb0,
                      float *sums) {
    __m128 acc = _mm_setzero_ps(); /* lane t: token t */
    for (int b = 0; b < nsb; b++) {
        __m256i is[CBS_T];
        _Alignas(16) float dd[4] = {0, 0, 0, 0};
        _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) {
            const block_q8_K *y = (const block_q8_K *)(const void *)(act + (size_t)t * as) + sb0 + b;
            is[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(c[b].ls64, loadu256(y->bsums)));
            dd[t] = c[b].d * y->d;
        }
        for (int j = 0; j < 8; j++) {
            const __m256i u = load256(&c[b].u[j]), sc = load256(&c[b].sc[j]);
            _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) {
                const block_q8_K *y = (const block_q8_K *)(const void *)(act + (size_t)t * as) + sb0 + b;
                const __m256i p = _mm256_maddubs_epi16(u, loadu256(y->qs + 32 * j));
                is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(p, sc));
            }
        }
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(cbs_totals(T, is)), _mm_load_ps(dd), acc);
    }
    _Alignas(16) float a4[4];
    _mm_store_ps(a4, acc);
    for (int t = 0; t < T; t++) sums[t] = a4[t] * post;
}

X86_INL void cbs_tile_n(int T, float post, const cbslice *c, int nsb, const char *act, size_t as, int64_t sb0,
                        float *sums) {
    switch (T) {
    case 4: cbs_tile(4, post, c, nsb, act, as, sb0, sums); break;
    case 3: cbs_tile(3, post, c, nsb, act, as, sb0, sums); break;
    case 2: cbs_tile(2, post, c, nsb, act, as, sb0, sums); break;
    default: cbs_tile(1, post, c, nsb, act, as, sb0, sums); break;
    }
}

/* Rows in bands, k in slices, tokens in tiles of CBS_T; the first
 * slice writes the output, later ones add. */
X86_INL void gemm_cb_slices(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                            size_t as, int nt, float *out, int64_t os) {
    const size_t bx = plm_type_info_get(type)->type_size;
    const float post = plm_iq_post(type);
    const int64_t nb = k / QK_K;
    _Alignas(32) cbslice buf[CBS_R][CBS_SB];
    for (int64_t r0 = 0; r0 < nr; r0 += CBS_R) {
        const int rn = (int)(nr - r0 < CBS_R ? nr - r0 : CBS_R);
        for (int64_t b0 = 0; b0 < nb; b0 += CBS_SB) {
            const int nsb = (int)(nb - b0 < CBS_SB ? nb - b0 : CBS_SB);
            for (int r = 0; r < rn; r++)
                for (int b = 0; b < nsb; b++)
                    cbs_decode(type, (const char *)w + (size_t)(r0 + r) * ws + (size_t)(b0 + b) * bx, &buf[r][b]);
            for (int t0 = 0; t0 < nt; t0 += CBS_T) {
                const int T = nt - t0 < CBS_T ? nt - t0 : CBS_T;
                for (int r = 0; r < rn; r++) {
                    float sums[CBS_T];
                    cbs_tile_n(T, post, buf[r], nsb, (const char *)act + (size_t)t0 * as, as, b0, sums);
                    for (int t = 0; t < T; t++) {
                        float *o = out + (t0 + t) * os + r0 + r;
                        *o = b0 == 0 ? sums[t] : *o + sums[t];
                    }
                }
            }
        }
    }
}

/* ---- MXFP4 against Q8_0: IQ4_NL's shape with another level table and an
 * E8M0 scale ------------------------------------------------------------------ */

X86_INL __m256i mxfp4_weights(const block_mxfp4 *b) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(loadu128(kvalues_mxfp4)), nibbles32(b->qs));
}

X86_INL void vec_dot_mxfp4_256(int64_t n, float *s, const block_mxfp4 *x, const block_q8_0 *y) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    int64_t i = 0;
    for (; i + 2 <= n / QK_MXFP4; i += 2) {
        acc0 = _mm256_fmadd_ps(block32_dot_signed(mxfp4_weights(&x[i]), &y[i]),
                               _mm256_set1_ps(plm_e8m0_half(x[i].e) * h2f(y[i].d)), acc0);
        acc1 = _mm256_fmadd_ps(block32_dot_signed(mxfp4_weights(&x[i + 1]), &y[i + 1]),
                               _mm256_set1_ps(plm_e8m0_half(x[i + 1].e) * h2f(y[i + 1].d)), acc1);
    }
    if (i < n / QK_MXFP4)
        acc0 = _mm256_fmadd_ps(block32_dot_signed(mxfp4_weights(&x[i]), &y[i]),
                               _mm256_set1_ps(plm_e8m0_half(x[i].e) * h2f(y[i].d)), acc0);
    *s = hsum_ps(_mm256_add_ps(acc0, acc1));
}

X86_INL void tile_mxfp4(int nt, int64_t nb, const block_mxfp4 *x, const char *act, size_t as, float *out,
                        int64_t os) {
    __m256 acc[X86_GEMM_T];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256i w = mxfp4_weights(&x[b]), wabs = _mm256_abs_epi8(w);
        const float dw = plm_e8m0_half(x[b].e);
        for (int t = 0; t < nt; t++) {
            const block_q8_0 *y = (const block_q8_0 *)(const void *)(act + t * as) + b;
            const __m256i p = dot_ss(_mm256_setzero_si256(), wabs, w, loadu256(y->qs));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * h2f(y->d)), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) out[t * os] = hsum_ps(acc[t]);
}

#if X86_ZMM
/* MXFP4 on AVX-512: IQ4_NL's four-blocks-a-step decode (blocks32.h's
 * nibble_act4 and nibble_dot4) with MXFP4's levels + 128 as the unsigned
 * codes and the E8M0 scales (times 1/2: plm_e8m0_half) as d. */
X86_INL __m512i mxfp4_lut(void) {
    return _mm512_add_epi8(_mm512_broadcast_i32x4(loadu128(kvalues_mxfp4)), _mm512_set1_epi8((char)0x80));
}

/* The codes of the four blocks at x (lane b of *lo: block b's elements
 * 0-15, of *hi: 16-31) and their scales. */
X86_INL __m128 mxfp4_codes4(const block_mxfp4 *x, __m512i lut, __m512i *lo, __m512i *hi) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i q = lanes4(x->qs, sizeof *x);
    *lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(q, m4));
    *hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
    return _mm_setr_ps(plm_e8m0_half(x[0].e), plm_e8m0_half(x[1].e), plm_e8m0_half(x[2].e), plm_e8m0_half(x[3].e));
}

/* A row's dot from its accumulator and its last 0-3 blocks (256-bit code). */
X86_INL float mxfp4_row_end(__m512 acc, int64_t nb, const block_mxfp4 *x, const block_q8_0 *y) {
    float sum = _mm512_reduce_add_ps(acc);
    const int64_t done = nb / 4 * 4;
    if (done < nb) {
        float t;
        vec_dot_mxfp4_256((nb - done) * QK_MXFP4, &t, x + done, y + done);
        sum += t;
    }
    return sum;
}

X86_INL __m512 mxfp4_step4(const block_mxfp4 *x, __m512i lut, const nibble_act4 *g, __m512 acc) {
    __m512i lo, hi;
    const __m128 dw = mxfp4_codes4(x, lut, &lo, &hi);
    return nibble_dot4(lo, hi, dw, g, acc);
}

X86_INL void vec_dot_mxfp4_zmm(int64_t n, float *s, const block_mxfp4 *x, const block_q8_0 *y) {
    const int64_t nb = n / QK_MXFP4;
    const __m512i lut = mxfp4_lut();
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i + 4 <= nb; i += 4) {
        nibble_act4 g;
        nibble_act4_make(PLM_TYPE_IQ4_NL, y + i, &g); /* bias 128, as IQ4_NL's codes */
        acc = mxfp4_step4(x + i, lut, &g, acc);
    }
    *s = mxfp4_row_end(acc, nb, x, y);
}

/* The decode matvec: vec_dot_mxfp4_zmm with the activation groups made
 * once per matrix (gemv_nibbles_zmm's shape); the same operations per row,
 * so bit for bit its vec_dot. */
X86_INL void gemv_mxfp4_zmm(int64_t k, const void *w, size_t ws, int64_t n_rows, const block_q8_0 *y, float *out) {
    const int64_t nb = k / QK_MXFP4, groups = nb / 4;
    if (groups > NIBBLE_ACT4_MAX) {
        for (int64_t r = 0; r < n_rows; r++) vec_dot_mxfp4_zmm(k, &out[r], (const void *)((const char *)w + r * ws), y);
        return;
    }
    nibble_act4 g[NIBBLE_ACT4_MAX];
    for (int64_t i = 0; i < groups; i++) nibble_act4_make(PLM_TYPE_IQ4_NL, y + 4 * i, &g[i]);
    const __m512i lut = mxfp4_lut();
    for (int64_t r = 0; r < n_rows; r++) {
        const block_mxfp4 *x = (const block_mxfp4 *)(const void *)((const char *)w + r * ws);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i = 0; i < groups; i++) acc = mxfp4_step4(x + 4 * i, lut, &g[i], acc);
        out[r] = mxfp4_row_end(acc, nb, x, y);
    }
}
#endif

/* ---- the entries ----------------------------------------------------------- */

X86_TARGET static void X86_FN(vec_dot_iq2_xxs)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_xxs_zmm(PLM_TYPE_IQ2_XXS, n, s, w, a);
#else
    vec_dot_cb(PLM_TYPE_IQ2_XXS, n, s, w, a);
#endif
}

X86_TARGET static void X86_FN(vec_dot_iq2_xs)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_cb_zmm(PLM_TYPE_IQ2_XS, n, s, w, a);
#else
    vec_dot_cb(PLM_TYPE_IQ2_XS, n, s, w, a);
#endif
}

X86_TARGET static void X86_FN(vec_dot_iq2_s)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_cb_zmm(PLM_TYPE_IQ2_S, n, s, w, a);
#else
    vec_dot_cb(PLM_TYPE_IQ2_S, n, s, w, a);
#endif
}

X86_TARGET static void X86_FN(vec_dot_iq3_xxs)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_xxs_zmm(PLM_TYPE_IQ3_XXS, n, s, w, a);
#else
    vec_dot_cb(PLM_TYPE_IQ3_XXS, n, s, w, a);
#endif
}

X86_TARGET static void X86_FN(vec_dot_iq3_s)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_cb_zmm(PLM_TYPE_IQ3_S, n, s, w, a);
#else
    vec_dot_cb(PLM_TYPE_IQ3_S, n, s, w, a);
#endif
}

X86_TARGET static void X86_FN(vec_dot_iq1_s)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_cb_zmm(PLM_TYPE_IQ1_S, n, s, w, a);
#else
    vec_dot_cb(PLM_TYPE_IQ1_S, n, s, w, a);
#endif
}

X86_TARGET static void X86_FN(vec_dot_iq1_m)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_cb_zmm(PLM_TYPE_IQ1_M, n, s, w, a);
#else
    vec_dot_cb(PLM_TYPE_IQ1_M, n, s, w, a);
#endif
}

X86_TARGET static void X86_FN(vec_dot_tq1_0)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_tq1_zmm(n, s, w, a);
#else
    vec_dot_cb(PLM_TYPE_TQ1_0, n, s, w, a);
#endif
}

X86_TARGET static void X86_FN(vec_dot_tq2_0)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_tq2_zmm(n, s, w, a);
#else
    vec_dot_cb(PLM_TYPE_TQ2_0, n, s, w, a);
#endif
}

X86_TARGET static void X86_FN(vec_dot_mxfp4)(int64_t n, float *s, const void *w, const void *a) {
#if X86_ZMM
    vec_dot_mxfp4_zmm(n, s, w, a);
#else
    vec_dot_mxfp4_256(n, s, w, a);
#endif
}

#if X86_ZMM
X86_TARGET static void X86_FN(gemv_mxfp4)(int64_t k, const void *w, size_t ws, int64_t n_rows, const void *act,
                                          float *out) {
    gemv_mxfp4_zmm(k, w, ws, n_rows, act, out);
}
#endif
