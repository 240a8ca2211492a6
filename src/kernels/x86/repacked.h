/*
 * x86 kernels for row-interleaved weights (quant/repack.h): Q4_0, Q5_0, Q8_0
 * and IQ4_NL (below), Q4_K, Q5_K, Q6_K and IQ4_XS (the super-block kernel at
 * the end), in groups of 16 rows.  Part of an x86 table (see x86.h); `type` is a
 * constant at every call.
 *
 * The layout is the panel gemm's transposed block (gemm_panel.h) stored
 * ahead of time: the 4-byte group g of the 16 rows is one 64-byte run, so
 * one vpdpbusd with the activation's bytes 4g..4g+3 broadcast does 64
 * multiply-adds for 16 rows (AVX-512: one zmm; 256-bit tables: two ymm
 * halves of 8 rows), and the float work of a block (convert, scale,
 * accumulate) is paid once per 16 rows.  Unlike the panel gemm nothing is
 * packed at run time, so the same kernel serves decode (one token) and
 * prefill (tiles of RP_C tokens against each decoded block).
 *
 * Codes are unsigned (u = w + o); the offset comes back exactly by starting
 * each block's integer sum at -o * sum(a), tabled once per call for the
 * token tile and k slice.  Q5_0's fifth bits join the nibbles as a byte
 * mask (AVX-512) or a spread bitmap (256-bit).  IQ4_NL's nibbles become
 * their level + 128 by one vpshufb (offset 128).  On AVX2 without VNNI, vpmaddubsw would saturate
 * on Q8_0's and IQ4_NL's codes (255 * 127 * 2 > 32767), so those go back to
 * signed bytes and the sign trick there (no offset).
 */
enum {
    RP_R = 16,                 /* rows per group (PLM_REPACK_ROWS) */
    RP_TAB = 4096,             /* table entries (token x block): 32 KiB */
    RP_KS = 256,               /* most blocks per k slice */
    RP_TG = 128,               /* most tokens per group */
    RP_C = X86_ZMM ? 8 : 2,    /* tokens per register tile */
    RP_FAR = 128 * 1024,       /* bytes of prefetch distance into L2 when streaming whole rows */
};

_Static_assert((int)RP_R == (int)PLM_REPACK_ROWS, "x86 repacked kernels are written for 16-row groups");

/* Per token of the group and block of the slice (entry c * kb + b): where
 * the block's integer sum starts, and the activation scale. */
typedef struct {
    int32_t init[RP_TAB];
    float d[RP_TAB];
} rp_tab;

/* Software prefetch into L1 of the sb-byte block `ahead` bytes further on,
 * one line an iteration of a loop (unrolled into a burst, the K-quant
 * decode measured slower from memory: repacked_k.h, rk_prefetch). */
X86_INL void rp_prefetch_at(const uint8_t *blk, size_t sb, size_t ahead) {
    const uint8_t *p = blk + ahead;
    _Pragma("GCC unroll 1") for (size_t o = 0; o < sb; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T0);
}

/* Software prefetch of the super-block `ahead` blocks further: the hardware
 * prefetcher alone left decode waiting on memory (perf: the code loads). */
X86_INL void rp_prefetch(const uint8_t *blk, size_t sb, int ahead) { rp_prefetch_at(blk, sb, (size_t)ahead * sb); }

/* Software prefetch into L2 of the block `ahead` bytes further on, which
 * the gemm reads after the hardware prefetcher would have run dry: a tile
 * of 2-16 tokens computes long enough per block that the hardware
 * prefetcher fell behind, and its time was the memory's plus the
 * compute's, not the larger of the two.  Measured on one core, 2048 x 65536
 * Q8_0 (142 MB), 8 tokens: 2.0-2.5x a single token's time with 8 blocks
 * ahead into L1, 1.24x with 128 KiB ahead into L2 (4 tokens: 1.3-1.6x ->
 * 1.24x); a single token (decode) measured no faster with it. */
X86_INL void rp_prefetch_l2(const uint8_t *blk, size_t sb, size_t ahead) {
    const uint8_t *p = blk + ahead;
    for (size_t o = 0; o < sb; o += 64) _mm_prefetch((const char *)p + o, _MM_HINT_T1);
}

/* Whether the codes keep their offset in the dot (all but AVX2 Q8_0). */
X86_INL bool rp_unsigned(plm_type type) {
    return X86_ISA != X86_ISA_AVX2 || (type != PLM_TYPE_Q8_0 && type != PLM_TYPE_IQ4_NL && type != PLM_TYPE_IQ4_XS);
}

/* The 16 IQ4_NL levels as the kernel's codes: level + 128 where the codes
 * are unsigned, the signed levels otherwise (both 128-bit lanes). */
X86_INL __m256i rp_lut_ymm(plm_type type) {
    const __m256i lut = lut_iq4();
    return rp_unsigned(type) ? _mm256_xor_si256(lut, _mm256_set1_epi8((char)0x80)) : lut;
}

X86_INL void rp_tabulate(plm_type type, const char *act, size_t as, int tn, int64_t b0, int kb, rp_tab *t) {
    const int o = rp_unsigned(type) ? plm_repack_offset(type) : 0;
    const __m256i ones = _mm256_set1_epi8(1);
    for (int c = 0; c < tn; c++) {
        const block_q8_0 *y = (const block_q8_0 *)(const void *)(act + (size_t)c * as) + b0;
        for (int b = 0; b < kb; b++) {
            t->init[c * kb + b] = o ? -o * hsum_epi32(dot_us(_mm256_setzero_si256(), ones, loadu256(y[b].qs))) : 0;
            t->d[c * kb + b] = h2f(y[b].d);
        }
    }
}

/* Tokens per group and blocks per k slice: the table holds tg x ks
 * entries.  Decode (one token) takes whole rows in one slice, one pass over
 * the weights in memory order; a batch takes slices short enough that a
 * row group's slice (16 rows x ks blocks, ~17 KiB) stays in L1 while every
 * token tile of the group passes over it. */
X86_INL void rp_split(int nt, int tab, int ks_max, int *tg, int *ks) {
    *tg = nt < RP_TG ? nt : RP_TG;
    *ks = tab / *tg < ks_max ? tab / *tg : ks_max;
}

/* Four activation bytes in every 32-bit lane. */
X86_INL __m256i bcast4_ymm(const void *p) { return _mm256_broadcastd_epi32(_mm_loadu_si32(p)); }

/* Group g of rows 8h..8h+7 of a super-block's codes, as unsigned codes
 * (or, for AVX2 Q8_0, signed weights). */
X86_INL __m256i rp_codes_ymm(plm_type type, const uint8_t *codes, int g, int h) {
    if (type == PLM_TYPE_Q8_0) {
        const __m256i u = loadu256(codes + 64 * g + 32 * h);
        return rp_unsigned(type) ? u : _mm256_xor_si256(u, _mm256_set1_epi8((char)0x80));
    }
    const __m256i q = loadu256(codes + 64 * (g & 3) + 32 * h);
    const __m256i u = _mm256_and_si256(g < 4 ? q : _mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0f));
    if (type == PLM_TYPE_Q5_0) /* the bitmap's 32 bits for these slots, 0x10 where set */
        return _mm256_or_si256(u, _mm256_and_si256(bits32(codes + 256 + 8 * g + 4 * h), _mm256_set1_epi8(0x10)));
    return type == PLM_TYPE_IQ4_NL ? _mm256_shuffle_epi8(rp_lut_ymm(type), u) : u;
}

X86_INL __m256i rp_dot_ymm(plm_type type, __m256i acc, __m256i q, __m256i a) {
    if (rp_unsigned(type)) return dot_us(acc, q, a);
    return dot_ss(acc, _mm256_abs_epi8(q), q, a);
}

/* C tokens x 16 rows of one group over kb blocks, 256-bit: two halves. */
X86_INL void rp_tile_ymm(plm_type type, int C, const uint8_t *grp, int64_t b0, int kb, const rp_tab *t, int c0,
                         const char *act, size_t as, float *out, int64_t os, bool add, size_t ahead) {
    const size_t sb = RP_R * block_bytes(type);
    __m256 acc[2][RP_C];
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < C; c++) acc[h][c] = _mm256_setzero_ps();
    for (int b = 0; b < kb; b++) {
        const uint8_t *blk = grp + (size_t)(b0 + b) * sb, *codes = blk + RP_R * sizeof(plm_fp16_t);
        if (ahead) rp_prefetch_l2(blk, sb, ahead);
        for (int h = 0; h < 2; h++) {
            const __m256 dw = _mm256_cvtph_ps(loadu128(blk + 16 * h));
            __m256i q[8];
            for (int g = 0; g < 8; g++) q[g] = rp_codes_ymm(type, codes, g, h);
            for (int c = 0; c < C; c++) {
                const int8_t *qs = ((const block_q8_0 *)(const void *)(act + (size_t)c * as))[b0 + b].qs;
                __m256i s0 = _mm256_set1_epi32(t->init[(c0 + c) * kb + b]), s1 = _mm256_setzero_si256();
                for (int g = 0; g < 8; g += 2) {
                    s0 = rp_dot_ymm(type, s0, q[g], bcast4_ymm(qs + 4 * g));
                    s1 = rp_dot_ymm(type, s1, q[g + 1], bcast4_ymm(qs + 4 * g + 4));
                }
                const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(t->d[(c0 + c) * kb + b]));
                acc[h][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), scale, acc[h][c]);
            }
        }
    }
    for (int c = 0; c < C; c++)
        for (int h = 0; h < 2; h++) {
            float *o = out + c * os + 8 * h;
            _mm256_storeu_ps(o, add ? _mm256_add_ps(_mm256_loadu_ps(o), acc[h][c]) : acc[h][c]);
        }
}

#if X86_ZMM

/* Group g of the 16 rows as one zmm of unsigned codes. */
X86_INL __m512i rp_codes_zmm(plm_type type, const uint8_t *codes, int g) {
    if (type == PLM_TYPE_Q8_0) return _mm512_loadu_si512(codes + 64 * g);
    const __m512i q = _mm512_loadu_si512(codes + 64 * (g & 3));
    const __m512i u = _mm512_and_si512(g < 4 ? q : _mm512_srli_epi16(q, 4), _mm512_set1_epi8(0x0f));
    if (type == PLM_TYPE_Q5_0) { /* nibble + 16 = nibble | 16 where the bitmap's bit is set */
        uint64_t fifth;
        memcpy(&fifth, codes + 256 + 8 * g, 8);
        return _mm512_mask_add_epi8(u, _cvtu64_mask64(fifth), u, _mm512_set1_epi8(0x10));
    }
    if (type != PLM_TYPE_IQ4_NL) return u;
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm256_castsi256_si128(rp_lut_ymm(type))), u);
}

/* C tokens x 16 rows of one group over kb blocks, one zmm a token. */
X86_INL void rp_tile_zmm(plm_type type, int C, const uint8_t *grp, int64_t b0, int kb, const rp_tab *t, int c0,
                         const char *act, size_t as, float *out, int64_t os, bool add, size_t ahead) {
    const size_t sb = RP_R * block_bytes(type);
    __m512 acc[RP_C];
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int b = 0; b < kb; b++) {
        const uint8_t *blk = grp + (size_t)(b0 + b) * sb, *codes = blk + RP_R * sizeof(plm_fp16_t);
        if (ahead) rp_prefetch_l2(blk, sb, ahead);
        const __m512 dw = _mm512_cvtph_ps(loadu256(blk));
        __m512i q[8];
        for (int g = 0; g < 8; g++) q[g] = rp_codes_zmm(type, codes, g);
        for (int c = 0; c < C; c++) {
            const int8_t *qs = ((const block_q8_0 *)(const void *)(act + (size_t)c * as))[b0 + b].qs;
            __m512i s0 = _mm512_set1_epi32(t->init[(c0 + c) * kb + b]), s1 = _mm512_setzero_si512();
            for (int g = 0; g < 8; g += 2) { /* two chains: decode has no other token to overlap */
                s0 = _mm512_dpbusd_epi32(s0, q[g], bcast4(qs + 4 * g));
                s1 = _mm512_dpbusd_epi32(s1, q[g + 1], bcast4(qs + 4 * g + 4));
            }
            const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(t->d[(c0 + c) * kb + b]));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), scale, acc[c]);
        }
    }
    for (int c = 0; c < C; c++) {
        float *o = out + c * os;
        _mm512_storeu_ps(o, add ? _mm512_add_ps(_mm512_loadu_ps(o), acc[c]) : acc[c]);
    }
}

/* A batch's path: with 16+ tokens each row group's slice is decoded once
 * (the nibbles split, IQ4_NL looked up, the scales widened) for every token
 * tile, and a register tile is two row groups x 4 tokens: per 4-byte group
 * 2 code vectors and 4 broadcasts feed 8 byte dots (one group x 8 tokens
 * loaded 8 + 8: measured Q8_0 221 -> 251 GMAC/s, Q4_0 260 -> 289, one
 * core), and each of the 8 block sums is one chain of 8 byte dots. */
enum {
    RPD_KS = 16,      /* blocks per slice (9 KiB decoded a row group; 32: no faster) */
    RPD_MIN_TOK = 16, /* tokens that pay for decoding */
    RPD_C = 4,        /* tokens per register tile ... */
    RPD_R = 2,        /* ... of this many row groups (3: no faster) */
};

typedef struct {
    __m512i q[8]; /* group g: lane j, row j's unsigned codes 4g..4g+3 */
    __m512 d;     /* lane j: row j's scale */
} rp_dec;

/* C tokens x R decoded row groups (dec[h * RPD_KS + b]: group h's block
 * b), R * C chains: each group's codes and each token's broadcast bytes are
 * loaded once for the R * C byte dots they feed. */
X86_INL void rp_tile_dec(int R, int C, const rp_dec *dec, int64_t b0, int kb, const rp_tab *t, int c0,
                         const char *act, size_t as, float *out, int64_t os, bool add) {
    __m512 acc[RPD_R][RPD_C];
    for (int h = 0; h < R; h++)
        for (int c = 0; c < C; c++) acc[h][c] = _mm512_setzero_ps();
    for (int b = 0; b < kb; b++) {
        const int8_t *qs[RPD_C];
        __m512i s[RPD_R][RPD_C];
        for (int c = 0; c < C; c++) {
            qs[c] = ((const block_q8_0 *)(const void *)(act + (size_t)c * as))[b0 + b].qs;
            for (int h = 0; h < R; h++) s[h][c] = _mm512_set1_epi32(t->init[(c0 + c) * kb + b]);
        }
        for (int g = 0; g < 8; g++) {
            __m512i q[RPD_R];
            for (int h = 0; h < R; h++) q[h] = dec[h * RPD_KS + b].q[g];
            for (int c = 0; c < C; c++) {
                const __m512i a = bcast4(qs[c] + 4 * g);
                for (int h = 0; h < R; h++) s[h][c] = _mm512_dpbusd_epi32(s[h][c], q[h], a);
            }
        }
        for (int c = 0; c < C; c++) {
            const __m512 da = _mm512_set1_ps(t->d[(c0 + c) * kb + b]);
            for (int h = 0; h < R; h++)
                acc[h][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[h][c]), _mm512_mul_ps(dec[h * RPD_KS + b].d, da), acc[h][c]);
        }
    }
    for (int c = 0; c < C; c++)
        for (int h = 0; h < R; h++) {
            float *o = out + c * os + RP_R * h;
            _mm512_storeu_ps(o, add ? _mm512_add_ps(_mm512_loadu_ps(o), acc[h][c]) : acc[h][c]);
        }
}

/* Decodes blocks b0..b0+kb-1 of a row group for a batch's token tiles,
 * prefetching the next group's slice (`ahead` bytes on) into L2. */
X86_INL void rp_decode(plm_type type, const uint8_t *grp, int64_t b0, int kb, size_t ahead, rp_dec *dec) {
    const size_t sb = RP_R * block_bytes(type);
    for (int b = 0; b < kb; b++) {
        const uint8_t *blk = grp + (size_t)(b0 + b) * sb;
        rp_prefetch_l2(blk, sb, ahead);
        dec[b].d = _mm512_cvtph_ps(loadu256(blk));
        for (int g = 0; g < 8; g++) dec[b].q[g] = rp_codes_zmm(type, blk + RP_R * sizeof(plm_fp16_t), g);
    }
}

/* Every row group's slice b0..b0+kb-1 against tn tokens (a batch): the
 * groups two at a time (one left over when nr / 16 is odd), each pair's
 * slices decoded once for all token tiles, the next pair's prefetched. */
X86_INL void rp_rows_decoded(plm_type type, const uint8_t *w, size_t ws, int64_t nr, int64_t b0, int kb,
                             size_t group_slice, const rp_tab *tab, const char *at, size_t as, int tn, float *out,
                             int64_t os, rp_dec *dec) {
    for (int64_t r = 0; r < nr;) {
        const int R = nr - r >= RPD_R * RP_R ? RPD_R : 1;
        for (int h = 0; h < R; h++)
            rp_decode(type, w + (size_t)(r + RP_R * h) * ws, b0, kb, (size_t)R * group_slice, dec + h * RPD_KS);
        for (int c0 = 0; c0 < tn; c0 += RPD_C) {
            const int cn = tn - c0 < RPD_C ? tn - c0 : RPD_C;
            const char *ac = at + (size_t)c0 * as;
            float *o = out + (int64_t)c0 * os + r;
            if (R == RPD_R && cn == RPD_C) rp_tile_dec(RPD_R, RPD_C, dec, b0, kb, tab, c0, ac, as, o, os, b0 > 0);
            else if (R == RPD_R) rp_tile_dec(RPD_R, cn, dec, b0, kb, tab, c0, ac, as, o, os, b0 > 0);
            else rp_tile_dec(1, cn, dec, b0, kb, tab, c0, ac, as, o, os, b0 > 0);
        }
        r += R * RP_R;
    }
}

#endif

/* `ahead`: bytes from each block to the one to prefetch (0: none). */
X86_INL void rp_tile(plm_type type, int C, const uint8_t *grp, int64_t b0, int kb, const rp_tab *t, int c0,
                     const char *act, size_t as, float *out, int64_t os, bool add, size_t ahead) {
#if X86_ZMM
    rp_tile_zmm(type, C, grp, b0, kb, t, c0, act, as, out, os, add, ahead);
#else
    rp_tile_ymm(type, C, grp, b0, kb, t, c0, act, as, out, os, add, ahead);
#endif
}

/* Tokens in groups (the table), k in slices, then row groups, then token
 * tiles of RP_C; the first slice writes the output, later ones add.  Whole
 * tiles and single tokens (decode) get code for their constant size.  On
 * AVX-512 a batch of RPD_MIN_TOK+ tokens takes rp_rows_decoded instead. */
X86_INL void gemm_repacked(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                           int nt, float *out, int64_t os) {
    _Alignas(64) rp_tab tab;
#if X86_ZMM
    _Alignas(64) rp_dec dec[RPD_R * RPD_KS];
    const bool decoded = nt >= RPD_MIN_TOK;
    const int ks_max = decoded ? RPD_KS : RP_KS;
#else
    const int ks_max = RP_KS;
#endif
    const int64_t nb = k / 32;
    const size_t group_slice = (size_t)nb * RP_R * block_bytes(type); /* bytes to the next group's slice */
    int tg, ks;
    rp_split(nt, RP_TAB, ks_max, &tg, &ks);
    for (int t0 = 0; t0 < nt; t0 += tg) {
        const int tn = nt - t0 < tg ? nt - t0 : tg;
        const char *at = (const char *)act + (size_t)t0 * as;
        for (int64_t b0 = 0; b0 < nb; b0 += ks) {
            const int kb = (int)(nb - b0 < ks ? nb - b0 : ks);
            rp_tabulate(type, at, as, tn, b0, kb, &tab);
            /* The first token tile of a row group prefetches what comes
             * next: with whole rows, RP_FAR on in memory order; with
             * slices, the next group's slice, read once the other tiles of
             * this group are done with the slice in L1. */
            const size_t next = kb == nb ? RP_FAR : group_slice;
#if X86_ZMM
            if (decoded) {
                rp_rows_decoded(type, w, ws, nr, b0, kb, group_slice, &tab, at, as, tn, out + (int64_t)t0 * os, os, dec);
                continue;
            }
#endif
            for (int64_t r = 0; r < nr; r += RP_R) {
                const uint8_t *grp = (const uint8_t *)w + (size_t)r * ws;
                for (int c0 = 0; c0 < tn; c0 += RP_C) {
                    const int cn = tn - c0 < RP_C ? tn - c0 : RP_C;
                    const char *ac = at + (size_t)c0 * as;
                    float *o = out + (int64_t)(t0 + c0) * os + r;
                    const size_t ahead = tn > 1 && c0 == 0 ? next : 0;
                    if (cn == RP_C) rp_tile(type, RP_C, grp, b0, kb, &tab, c0, ac, as, o, os, b0 > 0, ahead);
                    else if (cn == 1) rp_tile(type, 1, grp, b0, kb, &tab, c0, ac, as, o, os, b0 > 0, ahead);
                    else rp_tile(type, cn, grp, b0, kb, &tab, c0, ac, as, o, os, b0 > 0, ahead);
                }
            }
        }
    }
}

#include "kernels/x86/repacked_k.h"

X86_TARGET static void X86_FN(gemm_repacked_q4_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                  size_t as, int nt, float *out, int64_t os) {
    gemm_repacked(PLM_TYPE_Q4_0, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_repacked_q5_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                  size_t as, int nt, float *out, int64_t os) {
    gemm_repacked(PLM_TYPE_Q5_0, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_repacked_q8_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                  size_t as, int nt, float *out, int64_t os) {
    gemm_repacked(PLM_TYPE_Q8_0, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_repacked_iq4_nl)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                                    size_t as, int nt, float *out, int64_t os) {
    gemm_repacked(PLM_TYPE_IQ4_NL, k, w, ws, nr, act, as, nt, out, os);
}
