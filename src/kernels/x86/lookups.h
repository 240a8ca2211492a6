/*
 * x86 decode of TQ1_0, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S by byte lookups, on
 * AVX-512 CPUs with VBMI (Ice Lake, Zen 4 and later).  Part of the AVX-512
 * table (see x86.h), included after codebooks.h, whose helpers it uses
 * (cbz_scales, xxs_aux, h2f); without VBMI the table keeps codebooks.h's
 * entries for these formats.
 *
 * vpermt2b looks 64 bytes up at once in a 128-entry table, so two of them
 * on the halves of a 256-entry table, blended by each index byte's top
 * bit, decode 64 codes of a byte each: a TQ1_0 byte's trits, an IQ3_XXS
 * or IQ2_XXS grid row (IQ3_S's and IQ2_XS's 512 rows: four of them, IQ2_S's
 * 1024: eight).  The lanes of the
 * result are in the order of the codes, not of the elements (code L's
 * element p in lane L of "plane" p), so the activations are put in that
 * order instead, once per matrix by the gemv (per super-block by the
 * vec_dot), and every plane is one vpdpbusd.  The scales and signs stay per sub-block of 32 elements: four
 * lanes of a plane always belong to one sub-block, the four vpdpbusd
 * sums into one dword.
 *
 * These functions need VBMI on top of the table's instruction set
 * (X86_TARGET_VBMI, kernels_avx512.c); lookups_install_vbmi puts them
 * in the table when the CPU has it.  Each vec_dot and its gemv run the
 * same operations per super-block, so the gemv is bit for bit the vec_dot.
 *
 * TQ1_0.  tq1_trits spends about nine instructions on 32 trits (two 16-bit
 * multiplies per byte parity and their clean-up).  Here the 52 code bytes
 * of a super-block (qs[0..47], qh[0..3]) sit in one register; one table
 * gives trits 0-3 as 2-bit fields (t0 + 4 t1 + 16 t2 + 64 t3), the other
 * trit 4, and a field is then a shift and a vpand: four permutes a
 * super-block where a table per trit took ten (9.4 GB/s from memory on
 * one core; this 10.6, tq1_trits 5.5).  Lane m holds element 32n + m
 * (m < 32), 160 + 16n + m - 32 (m < 48) or 240 + 4n + m - 48 (the qh
 * bytes, n < 4) of trit n; tq1_act_make puts the activations there,
 * zero in the lanes no element uses.  The trits t are unsigned (value t - 1): the
 * offset comes back from Q8_K's sums as in vec_dot_tq1_zmm. */

#define X86_VBMI_INL static inline __attribute__((always_inline)) X86_TARGET_VBMI

/* By code byte b: [0] trits 0-3 as t0 + 4 t1 + 16 t2 + 64 t3, [1] trit 4;
 * trit n is ggml's (uint8_t)(b * 3^n) * 3 >> 8.  Filled once, before the
 * table is handed out (lookups_install_vbmi). */
static _Alignas(64) uint8_t tq1_trit_lut[2][256];

/* A super-block's activations in the lanes of its codes (planes; TQ1_0
 * has five, the others four), TQ1_0's offset sums (-sum of 32
 * activations a lane) and Q8_K's d. */
typedef struct {
    __m512i a[5];
    __m256i neg_sum;
    float d;
} lookup_act;

/* The tables of a format in registers (IQ2_S's 32 pieces partly spilled):
 * t, its table (tq1_trit_lut, iq2_field_lut, iq2xs_field_lut,
 * iq2s_field_lut, iq3_plane_lut or iq3s_field_lut) in 64-byte pieces, and
 * for IQ2_XXS, IQ2_XS and IQ3_XXS the sign bytes' (iq_sign_bytes). */
typedef struct {
    __m512i t[32], signs[2];
} lookup_tables;

/* Super-blocks whose activations the gemv prepares on the stack (24 KiB);
 * longer rows take the vec_dot loop. */
enum { LOOKUP_ACT_MAX = 64 };

X86_VBMI_INL void tq1_act_make(const block_q8_K *y, lookup_act *g) {
    for (int n = 0; n < 5; n++) {
        const __m128i last = n < 4 ? _mm_cvtsi32_si128((int)iq_u32(y->qs + 240 + 4 * n)) : _mm_setzero_si128();
        const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(loadu128(y->qs + 160 + 16 * n)), last, 1);
        g->a[n] = _mm512_inserti64x4(_mm512_castsi256_si512(loadu256(y->qs + 32 * n)), hi, 1);
    }
    g->neg_sum = _mm256_madd_epi16(loadu256(y->bsums), _mm256_set1_epi16(-1));
    g->d = y->d;
}

/* A 256-entry table (registers r[0..3]) looked up at the bytes q, whose
 * top bits are `top`. */
X86_VBMI_INL __m512i lookup256(const __m512i *r, __m512i q, __mmask64 top) {
    return _mm512_mask_blend_epi8(top, _mm512_permutex2var_epi8(r[0], q, r[1]), _mm512_permutex2var_epi8(r[2], q, r[3]));
}

/* The activations in the planes' lane order: a[p][L] = y->qs[first[L] + p]
 * (p < 4; first[L] + 3 stays below 128 or above, so bit 7 of the index
 * picks qs[0..127] or qs[128..255]). */
X86_VBMI_INL void planes_act_make(const block_q8_K *y, const uint8_t first[64], lookup_act *g) {
    const __m512i q0 = _mm512_loadu_si512(y->qs), q1 = _mm512_loadu_si512(y->qs + 64);
    const __m512i q2 = _mm512_loadu_si512(y->qs + 128), q3 = _mm512_loadu_si512(y->qs + 192);
    for (int p = 0; p < 4; p++) {
        const __m512i e = _mm512_add_epi8(_mm512_load_si512(first), _mm512_set1_epi8((char)p));
        g->a[p] = _mm512_mask_blend_epi8(_mm512_movepi8_mask(e), _mm512_permutex2var_epi8(q0, e, q1),
                                         _mm512_permutex2var_epi8(q2, e, q3));
    }
    g->d = y->d;
}

/* acc + the super-block's four planes of magnitudes against their
 * activations, negated where neg says, each dword's sum times its
 * sub-block scale ls, times d and Q8_K's d (IQ2_XXS, IQ3_XXS, IQ3_S). */
X86_VBMI_INL __m512 planes_dot(const __m512i mag[4], const __mmask64 neg[4], __m512i ls, float d, const lookup_act *g,
                               __m512 acc) {
    __m512i s[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}; /* two chains */
    for (int p = 0; p < 4; p++) {
        const __m512i a = _mm512_mask_sub_epi8(g->a[p], neg[p], _mm512_setzero_si512(), g->a[p]);
        s[p % 2] = _mm512_dpbusd_epi32(s[p % 2], mag[p], a);
    }
    const __m512i sum = _mm512_mullo_epi32(_mm512_add_epi32(s[0], s[1]), ls);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d * g->d), acc);
}

/* acc + the super-block's dot times its two scales, in 16 float lanes. */
X86_VBMI_INL __m512 tq1_block(const block_tq1_0 *x, const lookup_tables *t, const lookup_act *g, __m512 acc) {
    const __m512i q = _mm512_maskz_loadu_epi8(((__mmask64)1 << 52) - 1, x); /* qs and qh, not d */
    const __mmask64 top = _mm512_movepi8_mask(q);
    const __m512i f = lookup256(t->t, q, top);
    const __m512i three = _mm512_set1_epi8(3);
    __m512i s[2] = {_mm512_zextsi256_si512(g->neg_sum), _mm512_setzero_si512()}; /* two chains */
    for (int n = 0; n < 4; n++) /* field n down to bits 0-1 (16-bit shifts: the vpand drops what crossed) */
        s[n % 2] = _mm512_dpbusd_epi32(s[n % 2], _mm512_and_si512(_mm512_srli_epi16(f, 2 * n), three), g->a[n]);
    s[0] = _mm512_dpbusd_epi32(s[0], lookup256(t->t + 4, q, top), g->a[4]);
    const __m512i sum = _mm512_add_epi32(s[0], s[1]);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(h2f(x->d) * g->d), acc);
}

/* ---- sign codes by lookup (AVX-512 VBMI) ------------------------------------
 * IQ2_XXS and IQ3_XXS store a 7-bit code per 8 signs, the eighth its
 * parity (an even count of negatives).  vpmultishiftqb picks the codes
 * out of their 32-bit words (one a byte, the byte's top bit left over),
 * and one vpermt2b on a 128-entry table (which reads only 7 index bits)
 * gives the 8 sign bits: three instructions where spreading and the
 * parity by nibbles took a dozen (cbz_signs). */

/* iq_sign_bytes[c]: code c with its parity as bit 7 (lookups_install_vbmi). */
static _Alignas(64) uint8_t iq_sign_bytes[128];

/* vpmultishiftqb's bit offsets of the four codes of a 32-bit word, for
 * the words in both halves of each qword (IQ3_XXS) or the high one twice
 * (IQ2_XXS, whose low words hold grid indices). */
#define SIGN_CODES_BOTH_WORDS 0x352e2720150e0700LL
#define SIGN_CODES_HIGH_WORD 0x352e2720352e2720LL

/* The sign bytes of the codes that the offsets pick out of each qword of w. */
X86_VBMI_INL __m512i sign_bytes(__m512i w, long long offsets, const __m512i ks[2]) {
    return _mm512_permutex2var_epi8(ks[0], _mm512_multishift_epi64_epi8(_mm512_set1_epi64(offsets), w), ks[1]);
}

/* ---- IQ3_XXS by byte lookups (AVX-512 VBMI) ----------------------------------
 * A super-block's 64 grid indices fill one register, and byte p of every
 * index's grid row (its element p of 4) is one lookup in a 256-entry
 * table, as TQ1_0's trits above: plane p, lane L holds the magnitude of
 * element 4L + p.  iq3_act_make puts the activations in that order (a
 * transpose of 4-byte groups), made once per matrix by the gemv.  The
 * sign of element 4L + p is bit 4 (L % 2) + p of sign byte L / 2 (seven
 * stored bits and their parity: sign_bytes), spread to the lanes by one
 * vpermb and tested per plane into a mask that negates the activations.
 * vpdpbusd sums four lanes L = 4k..4k+3 into dword k, all of sub-block
 * k / 2, so the four planes share one sum, multiplied by the sub-block
 * scales once.  Same integers as the reference: d * ls * q * post. */

/* iq3_plane_lut[p][i]: byte p of plm_iq3xxs_grid[i] (lookups_install_vbmi). */
static _Alignas(64) uint8_t iq3_plane_lut[4][256];

/* 4L for lane L: with p added, vpermt2b's index of element 4L + p (bits
 * 0-6: within qs[0..127] for lanes 0-31, qs[128..255] for 32-63). */
static _Alignas(64) const uint8_t iq3_lane4[64] = {
    0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64, 68, 72, 76, 80, 84, 88, 92, 96,
    100, 104, 108, 112, 116, 120, 124, 128, 132, 136, 140, 144, 148, 152, 156, 160, 164, 168, 172, 176,
    180, 184, 188, 192, 196, 200, 204, 208, 212, 216, 220, 224, 228, 232, 236, 240, 244, 248, 252
};

/* The activations by plane: a[p][L] = element 4L + p. */
X86_VBMI_INL void iq3_act_make(const block_q8_K *y, lookup_act *g) { planes_act_make(y, iq3_lane4, g); }

/* Plane p's negative lanes from the 32 sign bytes in lanes 0-31 of sb32:
 * lane L takes bit 4 (L % 2) + p of sign byte L / 2 (IQ3_XXS, IQ3_S). */
X86_VBMI_INL void iq3_negatives(__m512i sb32, __mmask64 neg[4]) {
    const __m512i half = _mm512_srli_epi16(_mm512_load_si512(iq3_lane4), 3); /* L / 2 */
    const __m512i sb = _mm512_permutexvar_epi8(half, sb32);
    for (int p = 0; p < 4; p++) neg[p] = _mm512_test_epi8_mask(sb, _mm512_set1_epi16((short)(1 << p | 1 << (12 + p))));
}

X86_VBMI_INL __m512 iq3_block(const block_iq3_xxs *x, const lookup_tables *t, const lookup_act *g, __m512 acc) {
    const __m512i idx = _mm512_loadu_si512(x->qs);
    const __mmask64 top = _mm512_movepi8_mask(idx);
    const __m512i codes = _mm512_castsi256_si512(loadu256(x->qs + QK_K / 4)); /* 8 words of 4 codes */
    __mmask64 neg[4];
    iq3_negatives(sign_bytes(codes, SIGN_CODES_BOTH_WORDS, t->signs), neg);
    __m512i mag[4];
    for (int p = 0; p < 4; p++) mag[p] = lookup256(t->t + 4 * p, idx, top);
    const __m512i ls = _mm512_and_si512(cbz_scales(PLM_TYPE_IQ3_XXS, x), _mm512_set1_epi32(0xffff));
    return planes_dot(mag, neg, ls, h2f(x->d), g, acc);
}

/* ---- IQ2_XXS by byte lookups (AVX-512 VBMI) ----------------------------------
 * IQ2_XXS's 32 grid indices a super-block name rows of eight elements
 * from three levels (8, 25, 43), so a row's level indices fit two bytes of
 * four 2-bit fields: table A holds elements 0-3 of every row, table B
 * 4-7 (iq2_field_lut).  The indices fill both halves of a register, the
 * low half looked up in A, the high one in B; field f then is plane f:
 * lane L < 32 element 8L + f, lane 32 + L element 8L + 4 + f, its level
 * index shifted down, masked and mapped to the level by vpshufb.  The
 * sign of that element is bit f (low half) or 4 + f (high half) of sign
 * byte L (sign_bytes), the activations are in plane order (iq2_act_make), and
 * dword k of the planes' vpdpbusd sum is sub-block k % 8's, multiplied by
 * its scale once.  Same integers as the reference. */

/* iq2_field_lut[h][i]: the level indices of elements 4h..4h+3 of
 * plm_iq2xxs_grid[i], 2 bits each (lookups_install_vbmi). */
static _Alignas(64) uint8_t iq2_field_lut[2][256];

/* For lane L of plane 0, the activation's element: 8 (L % 32) + 4 (L / 32). */
static _Alignas(64) const uint8_t iq2_lane_element[64] = {
    0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144, 152, 160, 168, 176,
    184, 192, 200, 208, 216, 224, 232, 240, 248, 4, 12, 20, 28, 36, 44, 52, 60, 68, 76, 84, 92, 100,
    108, 116, 124, 132, 140, 148, 156, 164, 172, 180, 188, 196, 204, 212, 220, 228, 236, 244, 252
};

/* The activations by plane: a[f][L] = element 8 (L % 32) + 4 (L / 32) + f. */
X86_VBMI_INL void iq2_act_make(const block_q8_K *y, lookup_act *g) { planes_act_make(y, iq2_lane_element, g); }

/* Byte 4j + l of qword j for lane L = 8j + l (and again for 32 + L): the
 * low word of each 8-byte group (grid indices, or sign bytes once looked up). */
static _Alignas(64) const uint8_t iq2_low_words[64] = {
    0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27, 32, 33, 34, 35, 40, 41, 42, 43,
    48, 49, 50, 51, 56, 57, 58, 59, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27,
    32, 33, 34, 35, 40, 41, 42, 43, 48, 49, 50, 51, 56, 57, 58, 59};

/* The four planes of magnitudes and negative lanes of the IQ2 formats from
 * their level fields (field f of a lane: plane f) and each lane's sign
 * byte sb: plane f's sign is bit f of sign0 shifted up by f, sign0 holding
 * 1 in the lanes of table A's elements and 16 (bit 4) in table B's. */
X86_VBMI_INL void iq2_level_planes(__m512i fields, __m512i sb, __m512i sign0, __m512i mag[4], __mmask64 neg[4]) {
    const __m512i levels = _mm512_broadcast_i32x4(_mm_setr_epi8(8, 25, 43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
    for (int f = 0; f < 4; f++) {
        const __m512i lvl = _mm512_and_si512(_mm512_srli_epi16(fields, 2 * f), _mm512_set1_epi8(3));
        mag[f] = _mm512_shuffle_epi8(levels, lvl);
        neg[f] = _mm512_test_epi8_mask(sb, _mm512_slli_epi16(sign0, f)); /* 16 << 3 stays in its byte */
    }
}

X86_VBMI_INL __m512 iq2_block(const block_iq2_xxs *x, const lookup_tables *t, const lookup_act *g, __m512 acc) {
    const __m512i q = _mm512_loadu_si512(x->qs), low_words = _mm512_load_si512(iq2_low_words);
    const __m512i idx = _mm512_permutexvar_epi8(low_words, q); /* the 32 indices in both halves */
    const __mmask64 top = _mm512_movepi8_mask(idx), high_half = (__mmask64)0xffffffff00000000ULL;
    /* table A (t[0..3]) for the low half, B (t[4..7]) for the high one: entries 0-127, then 128-255 */
    const __m512i lo = _mm512_mask_blend_epi8(high_half, _mm512_permutex2var_epi8(t->t[0], idx, t->t[1]),
                                              _mm512_permutex2var_epi8(t->t[4], idx, t->t[5]));
    const __m512i hi = _mm512_mask_blend_epi8(high_half, _mm512_permutex2var_epi8(t->t[2], idx, t->t[3]),
                                              _mm512_permutex2var_epi8(t->t[6], idx, t->t[7]));
    const __m512i fields = _mm512_mask_blend_epi8(top, lo, hi);
    const __m512i sb = _mm512_permutexvar_epi8(low_words, sign_bytes(q, SIGN_CODES_HIGH_WORD, t->signs));
    __m512i mag[4];
    __mmask64 neg[4];
    iq2_level_planes(fields, sb, _mm512_mask_blend_epi8(high_half, _mm512_set1_epi8(1), _mm512_set1_epi8(16)), mag, neg);
    const __m512i ls4 = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14),
                                                 _mm512_srli_epi64(q, 60)); /* dword k: sub-block k % 8's */
    const __m512i ls = _mm512_add_epi32(_mm512_add_epi32(ls4, ls4), _mm512_set1_epi32(1));
    return planes_dot(mag, neg, ls, h2f(x->d), g, acc);
}

/* ---- IQ3_S by byte lookups (AVX-512 VBMI) ------------------------------------
 * IQ3_XXS's planes with 9-bit indices: the grid has 512 rows of four
 * elements 1..15, so a row's elements fit two bytes of two 4-bit fields
 * (iq3s_field_lut: elements 0-1, 2-3), each a 512-entry table looked up
 * by four vpermt2b and three blends (index bit 7 from the byte, bit 8 from
 * qh, which is already the 64-bit mask: bit L for index L).  A field is
 * then the magnitude itself: a vpand, or a shift and a vpand.  The sign
 * bytes are stored, in IQ3_XXS's order; so are the activations
 * (iq3_act_make).  Two tables of 8 registers in place of four 16-row
 * vpgatherdd a super-block (cbz_grid). */

/* iq3s_field_lut[h][i]: elements 2h and 2h + 1 of plm_iq3s_grid[i] as
 * the low and high nibble (lookups_install_vbmi). */
static _Alignas(64) uint8_t iq3s_field_lut[2][512];

/* A 512-entry table (registers r[0..7]) at the 64 indices: their low 8
 * bits idx, bit 7 in top, bit 8 in b8. */
X86_VBMI_INL __m512i lookup512(const __m512i *r, __m512i idx, __mmask64 top, __mmask64 b8) {
    return _mm512_mask_blend_epi8(b8, lookup256(r, idx, top), lookup256(r + 4, idx, top));
}

/* The 64 ninth index bits, bit L for index L. */
X86_VBMI_INL __mmask64 qh_bits(const uint8_t qh[8]) {
    uint64_t m;
    memcpy(&m, qh, sizeof m);
    return (__mmask64)m;
}

X86_VBMI_INL __m512 iq3s_block(const block_iq3_s *x, const lookup_tables *t, const lookup_act *g, __m512 acc) {
    const __m512i idx = _mm512_loadu_si512(x->qs);
    const __mmask64 top = _mm512_movepi8_mask(idx), b8 = qh_bits(x->qh);
    __mmask64 neg[4];
    iq3_negatives(_mm512_castsi256_si512(loadu256(x->signs)), neg);
    const __m512i nib = _mm512_set1_epi8(15);
    const __m512i f01 = lookup512(t->t, idx, top, b8), f23 = lookup512(t->t + 8, idx, top, b8);
    const __m512i mag[4] = {_mm512_and_si512(f01, nib), _mm512_and_si512(_mm512_srli_epi16(f01, 4), nib),
                            _mm512_and_si512(f23, nib), _mm512_and_si512(_mm512_srli_epi16(f23, 4), nib)};
    const __m512i ls = _mm512_and_si512(cbz_scales(PLM_TYPE_IQ3_S, x), _mm512_set1_epi32(0xffff));
    return planes_dot(mag, neg, ls, h2f(x->d), g, acc);
}

/* ---- IQ2_XS by byte lookups (AVX-512 VBMI) -----------------------------------
 * IQ2_XXS's level fields with IQ3_S's 9-bit indices: 512 rows of eight
 * elements at levels 8, 25, 43, so table A (elements 0-3 of every row)
 * and table B (4-7) are 512 entries each (iq2xs_field_lut, 16 registers).
 * IQ2_XS's scale covers 16 elements (two rows), so the lanes go by rows:
 * lane 2r looks row r up in A, lane 2r + 1 in B, and plane f's lane L
 * holds element 4L + f, IQ3_XXS's order (iq3_act_make); dword k of the
 * planes' vpdpbusd sum is then the 16 elements of scale k.  A row's index
 * word is 9 index bits and a 7-bit sign code: vpshufb gives each lane of
 * the pair its word's low byte (the index, bit 7 as `top`) or high one
 * (bit 8 of the index as its bit 0, the sign code above it). */

/* iq2xs_field_lut[h][i]: the level indices of elements 4h..4h+3 of
 * plm_iq2xs_grid[i], 2 bits each (lookups_install_vbmi). */
static _Alignas(64) uint8_t iq2xs_field_lut[2][512];

/* Table A (registers a[0..7]) in the even lanes, B (b[0..7]) in the odd
 * ones, at 9-bit indices: low 8 bits idx, bit 7 in top, bit 8 in b8. */
X86_VBMI_INL __m512i lookup512_pairs(const __m512i *a, const __m512i *b, __m512i idx, __mmask64 top, __mmask64 b8) {
    const __mmask64 odd = (__mmask64)0xaaaaaaaaaaaaaaaaULL;
    __m512i quarter[4]; /* entries 128j..128j+127 */
    for (int j = 0; j < 4; j++)
        quarter[j] = _mm512_mask_blend_epi8(odd, _mm512_permutex2var_epi8(a[2 * j], idx, a[2 * j + 1]),
                                            _mm512_permutex2var_epi8(b[2 * j], idx, b[2 * j + 1]));
    return _mm512_mask_blend_epi8(b8, _mm512_mask_blend_epi8(top, quarter[0], quarter[1]),
                                  _mm512_mask_blend_epi8(top, quarter[2], quarter[3]));
}

X86_VBMI_INL __m512 iq2xs_block(const block_iq2_xs *x, const lookup_tables *t, const lookup_act *g, __m512 acc) {
    const __m512i q = _mm512_loadu_si512(x->qs);
    const __m512i low_bytes = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14));
    const __m512i idx = _mm512_shuffle_epi8(q, low_bytes); /* both lanes of a row: its word's low byte */
    const __m512i hi = _mm512_shuffle_epi8(q, _mm512_add_epi8(low_bytes, _mm512_set1_epi8(1)));
    const __mmask64 top = _mm512_movepi8_mask(idx), b8 = _mm512_test_epi8_mask(hi, _mm512_set1_epi8(1));
    const __m512i sb = _mm512_permutex2var_epi8(t->signs[0], _mm512_srli_epi16(hi, 1), t->signs[1]);
    __m512i mag[4];
    __mmask64 neg[4];
    iq2_level_planes(lookup512_pairs(t->t, t->t + 8, idx, top, b8), sb, _mm512_set1_epi16(1 | 16 << 8), mag, neg);
    const __m512i ls = _mm512_and_si512(cbz_scales(PLM_TYPE_IQ2_XS, x), _mm512_set1_epi32(0xffff));
    return planes_dot(mag, neg, ls, h2f(x->d), g, acc);
}

/* ---- IQ2_S by byte lookups (AVX-512 VBMI) ------------------------------------
 * IQ2_XS's planes with 10-bit indices and stored sign bytes: tables A and
 * B of 1024 entries (iq2s_field_lut, 32 registers' worth, more than the
 * gemv keeps in registers), looked up as two 512-entry halves chosen by
 * index bit 9.  Row r's bits 8 and 9 are bits 2r and 2r + 1 of the qh
 * bytes read as one word, spread to the row's two lanes as masks. */

/* iq2s_field_lut[h][i]: the level indices of elements 4h..4h+3 of
 * plm_iq2s_grid[i], 2 bits each (lookups_install_vbmi). */
static _Alignas(64) uint8_t iq2s_field_lut[2][1024];

/* Lane L: row L / 2 (its index byte, 32 + that its sign byte). */
static _Alignas(64) const uint8_t iq2_row_of_lane[64] = {
    0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15,
    16, 16, 17, 17, 18, 18, 19, 19, 20, 20, 21, 21, 22, 22, 23, 23, 24, 24, 25, 25, 26, 26, 27, 27, 28, 28, 29, 29,
    30, 30, 31, 31};

/* Bit 2r of m (r < 32) to bits 2r and 2r + 1: a row's bit to both its lanes. */
X86_VBMI_INL __mmask64 rows_to_lanes(uint64_t m) {
    m &= 0x5555555555555555ULL;
    return (__mmask64)(m | m << 1);
}

X86_VBMI_INL __m512 iq2s_block(const block_iq2_s *x, const lookup_tables *t, const lookup_act *g, __m512 acc) {
    const __m512i q = _mm512_loadu_si512(x->qs), rows = _mm512_load_si512(iq2_row_of_lane);
    const __m512i idx = _mm512_permutexvar_epi8(rows, q);
    const __m512i sb = _mm512_permutexvar_epi8(_mm512_add_epi8(rows, _mm512_set1_epi8(QK_K / 8)), q);
    const __mmask64 top = _mm512_movepi8_mask(idx);
    const uint64_t qh = (uint64_t)qh_bits(x->qh);
    const __mmask64 b8 = rows_to_lanes(qh), b9 = rows_to_lanes(qh >> 1);
    const __m512i fields = _mm512_mask_blend_epi8(b9, lookup512_pairs(t->t, t->t + 16, idx, top, b8),
                                                  lookup512_pairs(t->t + 8, t->t + 24, idx, top, b8));
    __m512i mag[4];
    __mmask64 neg[4];
    iq2_level_planes(fields, sb, _mm512_set1_epi16(1 | 16 << 8), mag, neg);
    const __m512i ls = _mm512_and_si512(cbz_scales(PLM_TYPE_IQ2_S, x), _mm512_set1_epi32(0xffff));
    return planes_dot(mag, neg, ls, h2f(x->d), g, acc);
}

/* ---- the six formats' vec_dot and gemv ------------------------------------- */

X86_VBMI_INL void lookup_act_make(plm_type type, const block_q8_K *y, lookup_act *g) {
    switch (type) {
    case PLM_TYPE_TQ1_0: tq1_act_make(y, g); break;
    case PLM_TYPE_IQ2_XXS: iq2_act_make(y, g); break;
    default: iq3_act_make(y, g); break; /* IQ3_XXS, IQ3_S, IQ2_XS, IQ2_S */
    }
}

X86_VBMI_INL void lookup_tables_load(plm_type type, lookup_tables *t) {
    const uint8_t *lut = type == PLM_TYPE_TQ1_0     ? &tq1_trit_lut[0][0]
                         : type == PLM_TYPE_IQ2_XXS ? &iq2_field_lut[0][0]
                         : type == PLM_TYPE_IQ3_XXS ? &iq3_plane_lut[0][0]
                         : type == PLM_TYPE_IQ2_XS  ? &iq2xs_field_lut[0][0]
                         : type == PLM_TYPE_IQ2_S   ? &iq2s_field_lut[0][0]
                                                    : &iq3s_field_lut[0][0];
    const int n = type == PLM_TYPE_TQ1_0 || type == PLM_TYPE_IQ2_XXS ? 8 : type == PLM_TYPE_IQ2_S ? 32 : 16;
    for (int i = 0; i < n; i++) t->t[i] = _mm512_load_si512(lut + 64 * i);
    if (type == PLM_TYPE_IQ2_XXS || type == PLM_TYPE_IQ3_XXS || type == PLM_TYPE_IQ2_XS)
        for (int i = 0; i < 2; i++) t->signs[i] = _mm512_load_si512(iq_sign_bytes + 64 * i);
}

X86_VBMI_INL __m512 lookup_block(plm_type type, const void *blk, const lookup_tables *t, const lookup_act *g,
                                 __m512 acc) {
    switch (type) {
    case PLM_TYPE_TQ1_0: return tq1_block(blk, t, g, acc);
    case PLM_TYPE_IQ2_XXS: return iq2_block(blk, t, g, acc);
    case PLM_TYPE_IQ3_XXS: return iq3_block(blk, t, g, acc);
    case PLM_TYPE_IQ2_XS: return iq2xs_block(blk, t, g, acc);
    case PLM_TYPE_IQ2_S: return iq2s_block(blk, t, g, acc);
    default: return iq3s_block(blk, t, g, acc);
    }
}

X86_VBMI_INL void vec_dot_lookup(plm_type type, int64_t n, float *s, const void *x, const block_q8_K *y) {
    lookup_tables t;
    lookup_tables_load(type, &t);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        lookup_act g;
        lookup_act_make(type, &y[i], &g);
        acc = lookup_block(type, block_at(type, x, i), &t, &g, acc);
    }
    *s = _mm512_reduce_add_ps(acc) * plm_iq_post(type);
}

/* The decode matvec: vec_dot_lookup with the activations arranged once.
 * One row at a time: two rows a step (two streams) read TQ1_0 at 6.5 GB/s
 * from memory against 10.6. */
X86_VBMI_INL void gemv_lookup(plm_type type, int64_t k, const void *w, size_t ws, int64_t n_rows, const block_q8_K *y,
                              float *out) {
    const int64_t nb = k / QK_K;
    if (nb > LOOKUP_ACT_MAX) {
        for (int64_t r = 0; r < n_rows; r++) vec_dot_lookup(type, k, &out[r], (const char *)w + r * ws, y);
        return;
    }
    lookup_act g[LOOKUP_ACT_MAX];
    for (int64_t i = 0; i < nb; i++) lookup_act_make(type, &y[i], &g[i]);
    lookup_tables t;
    lookup_tables_load(type, &t);
    for (int64_t r = 0; r < n_rows; r++) {
        const void *x = (const char *)w + r * ws;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i = 0; i < nb; i++) acc = lookup_block(type, block_at(type, x, i), &t, &g[i], acc);
        out[r] = _mm512_reduce_add_ps(acc) * plm_iq_post(type);
    }
}

X86_TARGET_VBMI static void X86_FN(vec_dot_tq1_0_vbmi)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_lookup(PLM_TYPE_TQ1_0, n, s, w, a);
}

X86_TARGET_VBMI static void X86_FN(vec_dot_iq2_xxs_vbmi)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_lookup(PLM_TYPE_IQ2_XXS, n, s, w, a);
}

X86_TARGET_VBMI static void X86_FN(vec_dot_iq3_xxs_vbmi)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_lookup(PLM_TYPE_IQ3_XXS, n, s, w, a);
}

X86_TARGET_VBMI static void X86_FN(vec_dot_iq2_xs_vbmi)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_lookup(PLM_TYPE_IQ2_XS, n, s, w, a);
}

X86_TARGET_VBMI static void X86_FN(vec_dot_iq2_s_vbmi)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_lookup(PLM_TYPE_IQ2_S, n, s, w, a);
}

X86_TARGET_VBMI static void X86_FN(vec_dot_iq3_s_vbmi)(int64_t n, float *s, const void *w, const void *a) {
    vec_dot_lookup(PLM_TYPE_IQ3_S, n, s, w, a);
}

X86_TARGET_VBMI static void X86_FN(gemv_tq1_0_vbmi)(int64_t k, const void *w, size_t ws, int64_t n_rows,
                                                   const void *act, float *out) {
    gemv_lookup(PLM_TYPE_TQ1_0, k, w, ws, n_rows, act, out);
}

X86_TARGET_VBMI static void X86_FN(gemv_iq2_xxs_vbmi)(int64_t k, const void *w, size_t ws, int64_t n_rows,
                                                     const void *act, float *out) {
    gemv_lookup(PLM_TYPE_IQ2_XXS, k, w, ws, n_rows, act, out);
}

X86_TARGET_VBMI static void X86_FN(gemv_iq3_xxs_vbmi)(int64_t k, const void *w, size_t ws, int64_t n_rows,
                                                     const void *act, float *out) {
    gemv_lookup(PLM_TYPE_IQ3_XXS, k, w, ws, n_rows, act, out);
}

X86_TARGET_VBMI static void X86_FN(gemv_iq2_xs_vbmi)(int64_t k, const void *w, size_t ws, int64_t n_rows,
                                                    const void *act, float *out) {
    gemv_lookup(PLM_TYPE_IQ2_XS, k, w, ws, n_rows, act, out);
}

X86_TARGET_VBMI static void X86_FN(gemv_iq2_s_vbmi)(int64_t k, const void *w, size_t ws, int64_t n_rows,
                                                   const void *act, float *out) {
    gemv_lookup(PLM_TYPE_IQ2_S, k, w, ws, n_rows, act, out);
}

X86_TARGET_VBMI static void X86_FN(gemv_iq3_s_vbmi)(int64_t k, const void *w, size_t ws, int64_t n_rows,
                                                   const void *act, float *out) {
    gemv_lookup(PLM_TYPE_IQ3_S, k, w, ws, n_rows, act, out);
}

/* Elements 4h..4h+3 of an IQ2 grid row (bytes of the levels 8, 25, 43) as
 * four 2-bit level indices. */
static uint8_t level_fields(uint64_t row, int h) {
    unsigned fields = 0;
    for (int e = 0; e < 4; e++) {
        const unsigned v = (unsigned)(row >> (8 * (4 * h + e)) & 0xff);
        fields |= (v == 8 ? 0u : v == 25 ? 1u : 2u) << (2 * e);
    }
    return (uint8_t)fields;
}

/* The lookup tables above, from ggml's definitions. */
static void vbmi_tables_fill(void) {
    for (unsigned b = 0; b < 256; b++) {
        unsigned t[5];
        for (unsigned n = 0, pow3 = 1; n < 5; n++, pow3 *= 3) t[n] = (uint8_t)(b * pow3) * 3u >> 8;
        tq1_trit_lut[0][b] = (uint8_t)(t[0] | t[1] << 2 | t[2] << 4 | t[3] << 6);
        tq1_trit_lut[1][b] = (uint8_t)t[4];
    }
    for (unsigned c = 0; c < 128; c++) iq_sign_bytes[c] = (uint8_t)(c | (__builtin_popcount(c) & 1) << 7);
    for (int i = 0; i < 256; i++) {
        for (int p = 0; p < 4; p++) iq3_plane_lut[p][i] = (uint8_t)(plm_iq3xxs_grid[i] >> 8 * p);
        for (int h = 0; h < 2; h++) iq2_field_lut[h][i] = level_fields(plm_iq2xxs_grid[i], h);
    }
    for (int i = 0; i < 1024; i++)
        for (int h = 0; h < 2; h++) iq2s_field_lut[h][i] = level_fields(plm_iq2s_grid[i], h);
    for (int i = 0; i < 512; i++)
        for (int h = 0; h < 2; h++) {
            iq2xs_field_lut[h][i] = level_fields(plm_iq2xs_grid[i], h);
            iq3s_field_lut[h][i] = (uint8_t)((plm_iq3s_grid[i] >> 16 * h & 0x0f) | (plm_iq3s_grid[i] >> (16 * h + 4) & 0xf0));
        }
}

/* With VBMI (and PLM_NO_VBMI unset: the tests' way to reach the other
 * path on such a CPU), TQ1_0's, IQ2_XXS's, IQ2_XS's, IQ2_S's, IQ3_XXS's and
 * IQ3_S's entries become the lookups above. */
static void lookups_install_vbmi(plm_kernels *kt) {
    const char *off = getenv("PLM_NO_VBMI");
    if (!plm_x86_has_avx512vbmi() || (off && *off && strcmp(off, "0") != 0)) return;
    vbmi_tables_fill();
    kt->vec_dot[PLM_TYPE_TQ1_0] = X86_FN(vec_dot_tq1_0_vbmi);
    kt->gemv[PLM_TYPE_TQ1_0] = X86_FN(gemv_tq1_0_vbmi);
    kt->vec_dot[PLM_TYPE_IQ3_XXS] = X86_FN(vec_dot_iq3_xxs_vbmi);
    kt->gemv[PLM_TYPE_IQ3_XXS] = X86_FN(gemv_iq3_xxs_vbmi);
    kt->vec_dot[PLM_TYPE_IQ2_XXS] = X86_FN(vec_dot_iq2_xxs_vbmi);
    kt->gemv[PLM_TYPE_IQ2_XXS] = X86_FN(gemv_iq2_xxs_vbmi);
    kt->vec_dot[PLM_TYPE_IQ3_S] = X86_FN(vec_dot_iq3_s_vbmi);
    kt->gemv[PLM_TYPE_IQ3_S] = X86_FN(gemv_iq3_s_vbmi);
    kt->vec_dot[PLM_TYPE_IQ2_XS] = X86_FN(vec_dot_iq2_xs_vbmi);
    kt->gemv[PLM_TYPE_IQ2_XS] = X86_FN(gemv_iq2_xs_vbmi);
    kt->vec_dot[PLM_TYPE_IQ2_S] = X86_FN(vec_dot_iq2_s_vbmi);
    kt->gemv[PLM_TYPE_IQ2_S] = X86_FN(gemv_iq2_s_vbmi);
}
