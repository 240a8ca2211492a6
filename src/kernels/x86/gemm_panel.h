/*
 * Prefill gemm on 16-row panels: the AVX-512 VNNI table's matrix-matrix
 * kernel (X86_ZMM).  Part of an x86 table (see x86.h); `type` is a
 * constant at every call.
 *
 * Why panels.  vpdpbusd multiplies unsigned by signed bytes and sums them in
 * fours into 16 int32 lanes.  When lane j belongs to weight row j and holds
 * that row's codes 4g..4g+3, one instruction with the activation's four
 * bytes 4g..4g+3 broadcast does 64 multiply-adds for 16 rows, and the float
 * work of a block (convert, scale, accumulate) is paid once per 16 rows
 * instead of once per row.  Decoding a panel block and transposing it to
 * that layout costs a few dozen instructions, spread over every token of a
 * group (up to PANEL_TG).  This moved prefill from float-bound to about
 * half of the int8 peak (120-140 of 233 GMAC/s a core on Zen 4: the
 * block's scale work still shares the vector pipes; docs/BENCHMARKS.md).
 *
 * Codes become unsigned: a 32-element block stores u = w + o (o = 8 for
 * Q4_0, 16 for Q5_0, 128 for Q8_0, IQ4_NL and MXFP4), and the offset comes back
 * exactly, in integers, by starting the block's sum at -o * sum(a).  K-quant
 * sub-blocks do the same with their own code offset (Q6_K 32, Q3_K 4) or
 * carry a per-row min (Q4_K, Q5_K, Q2_K) dotted with the activation sums.
 *
 * Working set.  k is cut in slices (PANEL_KS elements), tokens in groups of
 * PANEL_TG whose activation sums and scales are tabled once per slice, rows
 * in panels of 16: the packed panel (24 KiB), the table (80 KiB) and the
 * K-quant decode buffers (9 KiB) live on the stack and in L1/L2, small
 * enough for a phone's 1 MiB thread stacks (the memory plan counts 128 KiB
 * a thread).  The first slice writes the output, later slices add.
 * Small batches (fewer than PANEL_MIN_TOK tokens) keep the row-by-row gemm:
 * packing a panel would cost more than it saves.
 */
enum {
    PANEL_R = 16,        /* rows per panel: one per int32 lane */
    PANEL_KS = 1024,     /* elements per k slice */
    PANEL_TG = 128,      /* tokens per group */
    PANEL_C = 8,         /* tokens per register tile */
    PANEL_MIN_TOK = 16,
    PANEL_SB = PANEL_KS / 32, /* 32-element sub-blocks per slice */
};

/* One 32-element sub-block of a panel, transposed for vpdpbusd. */
typedef struct {
    __m512i q[8];  /* q[g] lane j: row j's unsigned codes 4g..4g+3 */
    __m512 d;      /* lane j: scale of row j's codes 0..15 (or 0..31) */
    __m512 d_hi;   /* lane j: scale of codes 16..31 (K-quants with 16-scales) */
    __m512 m;      /* lane j: row j's min (of codes 0..15), times the activation sum */
    __m512 m_hi;   /* lane j: min of codes 16..31 */
} pblk;

/* Per token and sub-block: where the integer sums start, the activation
 * scale, and the activation sums a min multiplies. */
typedef struct {
    int32_t init_lo[PANEL_TG][PANEL_SB]; /* -o * sum(a), or of elements 0..15 (PANEL_K_OFS2) */
    int32_t init_hi[PANEL_TG][PANEL_SB]; /* -o * sum(a 16..31) (PANEL_K_OFS2) */
    float d[PANEL_TG][PANEL_SB];         /* activation scale */
    float sum[PANEL_TG][PANEL_SB];       /* d_a * sum(a) (q8_1), sum(a) of 0..31 (PANEL_K_MIN1), of 0..15 (PANEL_K_MIN2) */
    float sum_hi[PANEL_TG][PANEL_SB];    /* sum(a 16..31) (PANEL_K_MIN2) */
} ptab;

/* In-register transpose of 8 rows of 8 dwords (r[j] dword g -> r[g] dword j). */
X86_INL void transpose8x8(__m256i r[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);     /* dwords 0 1 | 4 5 of the pair */
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]); /* dwords 2 3 | 6 7 */
    }
    for (int h = 0; h < 2; h++) { /* rows 0-3, then 4-7 */
        u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);     /* dword 0 | 4 */
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);     /* dword 1 | 5 */
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]); /* dword 2 | 6 */
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]); /* dword 3 | 7 */
    }
    for (int g = 0; g < 4; g++) {
        r[g] = _mm256_permute2x128_si256(u[g], u[4 + g], 0x20);
        r[g + 4] = _mm256_permute2x128_si256(u[g], u[4 + g], 0x31);
    }
}

/* 16 rows of 32 codes (row j in r[j]) -> the transposed q[8]. */
X86_INL void panel_transpose(__m256i r[PANEL_R], pblk *p) {
    transpose8x8(r);
    transpose8x8(r + 8);
    for (int g = 0; g < 8; g++) p->q[g] = zmm_halves(r[g], r[8 + g]);
}

/* Four activation bytes in all 16 lanes, straight from memory (a broadcast
 * load; going through a general register costs a cross-domain move). */
X86_INL __m512i bcast4(const void *p) { return _mm512_broadcastd_epi32(_mm_loadu_si32(p)); }

/* 16 f16 scales -> one float vector. */
X86_INL __m512 panel_scales(const plm_fp16_t h[PANEL_R]) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)h));
}

/* ---- what each format needs -------------------------------------------------
 * A 32-element format's codes carry an offset (Q8_0 activations) or its
 * block a min (Q8_1 activations).  A K-quant super-block is 8 sub-blocks of
 * 32; per row and sub-block the panel holds the codes and float scales
 * S = d * sc for elements 0-15 and 16-31 (equal for Q4_K/Q5_K), and mins
 * M = dmin * m where the format has them.  The activation scale d_a is per
 * super-block (the table keeps it per sub-block) and is applied once a
 * super-block (panel_tile_k):
 *   PANEL_K_MIN1  Q4_K, Q5_K: (cvt(dot) * S - M * bsum32) * d_a
 *   PANEL_K_OFS2  Q6_K, Q3_K: codes carry an offset o (32, 4) under the
 *                 same scale as their half, so each half's integer sum
 *                 starts at -o * bsum16, as in the 32-element formats
 *   PANEL_K_MIN2  Q2_K: a scale and a min per 16 elements
 *   PANEL_K_OFS1  IQ4_XS: signed levels + 128 under one scale per 32
 * The codebook formats (IQ1..IQ3, TQ1_0, TQ2_0) decode to signed values
 * q (|q| <= 62) with an integer scale ls per 32 or per 16 and a factor
 * d * post per super-block (iq_unpack.h: x = d * ls * q * post), so
 * q + 128 under the float scale S = d * post * ls is exact per element:
 * K_OFS1 for one ls per 32, K_OFS2 for two (IQ2_XS, IQ2_S, IQ1_M). */
enum panel_mode { PANEL_Q8_0, PANEL_Q8_1, PANEL_K_MIN1, PANEL_K_OFS2, PANEL_K_MIN2, PANEL_K_OFS1 };

X86_INL enum panel_mode panel_mode_of(plm_type type) {
    switch (type) {
    case PLM_TYPE_Q4_1:
    case PLM_TYPE_Q5_1: return PANEL_Q8_1;
    case PLM_TYPE_Q4_K:
    case PLM_TYPE_Q5_K: return PANEL_K_MIN1;
    case PLM_TYPE_Q3_K:
    case PLM_TYPE_Q6_K: return PANEL_K_OFS2;
    case PLM_TYPE_Q2_K: return PANEL_K_MIN2;
    case PLM_TYPE_IQ4_XS: return PANEL_K_OFS1;
    case PLM_TYPE_IQ2_XS:
    case PLM_TYPE_IQ2_S:
    case PLM_TYPE_IQ1_M: return PANEL_K_OFS2;
    default: return is_codebook(type) ? PANEL_K_OFS1 : PANEL_Q8_0; /* Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 */
    }
}

/* The code offset o (code = weight + o) of the offset modes. */
X86_INL int panel_offset(plm_type type) {
    switch (type) {
    case PLM_TYPE_Q3_K: return 4;
    case PLM_TYPE_Q6_K: return 32;
    case PLM_TYPE_IQ4_XS:
    case PLM_TYPE_MXFP4: return 128;
    default: return is_codebook(type) ? 128 : block32_offset(type);
    }
}

/* ---- tabling the activations of a token group for one k slice ------------ */

/* Q8_0 activations: one sum and one scale per 32-block. */
X86_INL void panel_tabulate_q8_0(const char *act, size_t as, int tn, int64_t b0, int kb, int o, ptab *t) {
    const __m256i ones = _mm256_set1_epi8(1);
    for (int c = 0; c < tn; c++) {
        const block_q8_0 *y = (const block_q8_0 *)(const void *)(act + (size_t)c * as) + b0;
        for (int b = 0; b < kb; b++) {
            const int s = hsum_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, loadu256(y[b].qs)));
            t->init_lo[c][b] = -o * s;
            t->d[c][b] = h2f(y[b].d);
        }
    }
}

/* Q8_1 activations (Q4_1, Q5_1): codes carry no offset; the min m of a
 * weight block meets s = d_a * sum(a), stored by the quantizer. */
X86_INL void panel_tabulate_q8_1(const char *act, size_t as, int tn, int64_t b0, int kb, ptab *t) {
    for (int c = 0; c < tn; c++) {
        const block_q8_1 *y = (const block_q8_1 *)(const void *)(act + (size_t)c * as) + b0;
        for (int b = 0; b < kb; b++) {
            t->init_lo[c][b] = 0;
            t->d[c][b] = h2f(y[b].d);
            t->sum[c][b] = h2f(y[b].s);
        }
    }
}

/* Q8_K activations, by the mode's needs: slices start at sub-block s0 (a
 * whole super-block: ks and s0 are multiples of 8).  A super-block's 16
 * bsums (pairs lo, hi per sub-block) in one load: the pairs summed by
 * vpmaddwd, or split by shifts; its one scale stored for each sub-block.
 * Scalar, this table (one load, convert and store per value, for every
 * token of the group) was a quarter of the Q4_K gemm's own time outside the
 * tiles. */
X86_INL void panel_tabulate_q8_K(const char *act, size_t as, int tn, int64_t s0, int ks, enum panel_mode mode, int o,
                                 ptab *t) {
    const __m256i neg_o = _mm256_set1_epi32(-o);
    for (int c = 0; c < tn; c++) {
        const block_q8_K *y = (const block_q8_K *)(const void *)(act + (size_t)c * as) + s0 / 8;
        for (int s = 0; s < ks; s += 8) {
            const block_q8_K *q = y + s / 8;
            const __m256i b = loadu256(q->bsums);
            const __m256i lo = _mm256_srai_epi32(_mm256_slli_epi32(b, 16), 16), hi = _mm256_srai_epi32(b, 16);
            const __m256i both = _mm256_madd_epi16(b, _mm256_set1_epi16(1));
            _mm256_storeu_ps(&t->d[c][s], _mm256_set1_ps(q->d));
            if (mode == PANEL_K_MIN1) _mm256_storeu_ps(&t->sum[c][s], _mm256_cvtepi32_ps(both));
            if (mode == PANEL_K_MIN2) {
                _mm256_storeu_ps(&t->sum[c][s], _mm256_cvtepi32_ps(lo));
                _mm256_storeu_ps(&t->sum_hi[c][s], _mm256_cvtepi32_ps(hi));
            }
            if (mode == PANEL_K_OFS2) {
                _mm256_storeu_si256((__m256i *)(void *)&t->init_lo[c][s], _mm256_mullo_epi32(lo, neg_o));
                _mm256_storeu_si256((__m256i *)(void *)&t->init_hi[c][s], _mm256_mullo_epi32(hi, neg_o));
            }
            if (mode == PANEL_K_OFS1)
                _mm256_storeu_si256((__m256i *)(void *)&t->init_lo[c][s], _mm256_mullo_epi32(both, neg_o));
        }
    }
}

X86_INL void panel_tabulate(plm_type type, const char *act, size_t as, int tn, int64_t s0, int ks, ptab *t) {
    const enum panel_mode mode = panel_mode_of(type);
    if (mode == PANEL_Q8_0) panel_tabulate_q8_0(act, as, tn, s0, ks, panel_offset(type), t);
    else if (mode == PANEL_Q8_1) panel_tabulate_q8_1(act, as, tn, s0, ks, t);
    else panel_tabulate_q8_K(act, as, tn, s0, ks, mode, panel_offset(type), t);
}

/* ---- packing 16 weight rows of one k slice --------------------------------- */

/* 32-element formats: codes + offset, scales d and mins m (Q4_1, Q5_1). */
X86_INL void panel_pack_32(plm_type type, const char *w, size_t ws, int rn, int64_t b0, int kb, pblk *p) {
    for (int b = 0; b < kb; b++) {
        __m256i r[PANEL_R];
        plm_fp16_t d[PANEL_R], m[PANEL_R];
        for (int j = 0; j < PANEL_R; j++) { /* rows past the end: row 0, scale 0 */
            const void *x = block_at(type, w + (size_t)(j < rn ? j : 0) * ws, b0 + b);
            r[j] = block32_unsigned(type, x);
            d[j] = j < rn ? block32_d(x) : 0;
            m[j] = j < rn && has_min32(type) ? block32_m(x) : 0;
        }
        panel_transpose(r, &p[b]);
        p[b].d = panel_scales(d);
        p[b].m = panel_scales(m);
    }
}

/* MXFP4: its levels + 128 (IQ4_NL's codes with another table), under the
 * E8M0 scale halved (plm_e8m0_half, as its vec_dot), which an f16 cannot
 * hold (2^-128 .. 2^127), so the scales go in as floats.  Row tiles alone,
 * its prefill had run at 0.66x llama.cpp's (docs/BENCHMARKS.md). */
X86_INL void panel_pack_mxfp4(const char *w, size_t ws, int rn, int64_t b0, int kb, pblk *p) {
    for (int b = 0; b < kb; b++) {
        __m256i r[PANEL_R];
        _Alignas(64) float d[PANEL_R];
        for (int j = 0; j < PANEL_R; j++) { /* rows past the end: row 0, scale 0 */
            const block_mxfp4 *x = block_at(PLM_TYPE_MXFP4, w + (size_t)(j < rn ? j : 0) * ws, b0 + b);
            r[j] = _mm256_xor_si256(mxfp4_weights(x), _mm256_set1_epi8((char)0x80));
            d[j] = j < rn ? plm_e8m0_half(x->e) : 0.0f;
        }
        panel_transpose(r, &p[b]);
        p[b].d = _mm512_load_ps(d);
        p[b].m = _mm512_setzero_ps();
    }
}

/* lane c of in[j] -> lane j of out[c]: 16 vectors of 16 floats transposed
 * as four 8 x 8 blocks of dwords. */
X86_INL void transpose16_ps(const __m512 in[PANEL_R], __m512 out[PANEL_R]) {
    __m256i a[8], b[8], c[8], d[8]; /* rows 0-7 / 8-15 x columns 0-7 (a, b) and 8-15 (c, d) */
    for (int j = 0; j < 8; j++) {
        a[j] = _mm512_castsi512_si256(_mm512_castps_si512(in[j]));
        c[j] = _mm512_extracti64x4_epi64(_mm512_castps_si512(in[j]), 1);
        b[j] = _mm512_castsi512_si256(_mm512_castps_si512(in[8 + j]));
        d[j] = _mm512_extracti64x4_epi64(_mm512_castps_si512(in[8 + j]), 1);
    }
    transpose8x8(a);
    transpose8x8(b);
    transpose8x8(c);
    transpose8x8(d);
    for (int k = 0; k < 8; k++) {
        out[k] = _mm512_castsi512_ps(zmm_halves(a[k], b[k]));
        out[8 + k] = _mm512_castsi512_ps(zmm_halves(c[k], d[k]));
    }
}

/* A decoded super-block's 16 scales as floats: lane s scales sub-block s's
 * elements 0-15, lane 8 + s its elements 16-31 (sc[s] holds them in lanes
 * 0-7 and 8-15, so word s of each half comes from sc[s]). */
X86_INL __m512 kdec_half_scales(const kdec *u) {
    __m256i h = u->sc[0];
    h = _mm256_blend_epi16(h, u->sc[1], 0x02);
    h = _mm256_blend_epi16(h, u->sc[2], 0x04);
    h = _mm256_blend_epi16(h, u->sc[3], 0x08);
    h = _mm256_blend_epi16(h, u->sc[4], 0x10);
    h = _mm256_blend_epi16(h, u->sc[5], 0x20);
    h = _mm256_blend_epi16(h, u->sc[6], 0x40);
    h = _mm256_blend_epi16(h, u->sc[7], 0x80);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(h)), _mm512_set1_ps(u->d));
}

/* Its 16 mins (or offsets) as floats, one per 16 elements: lane 2s and 2s + 1 for sub-block s. */
X86_INL __m512 kdec_half_mins(const kdec *u) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(u->off)), _mm512_set1_ps(u->dm));
}

/* K-quants: 16 rows' super-blocks decoded (kdec), then transposed a
 * sub-block at a time; the scales and mins (S = d * sc, M = dm * min) of
 * all 16 rows and halves as one 16 x 16 float transpose each (scalar, per
 * row and sub-block, they cost a third of the packing). */
X86_INL void panel_pack_k(plm_type type, const char *w, size_t ws, int rn, int64_t s0, int ks, pblk *p) {
    const enum panel_mode mode = panel_mode_of(type);
    const bool has_min = mode == PANEL_K_MIN1 || mode == PANEL_K_MIN2;
    kdec u[PANEL_R];
    for (int sb = 0; sb < ks; sb += 8) {
        __m512 S[PANEL_R], M[PANEL_R], rows[PANEL_R];
        for (int j = 0; j < PANEL_R; j++) {
            kdec_decode(type, block_at(type, w + (size_t)(j < rn ? j : 0) * ws, (s0 + sb) / 8), &u[j]);
            rows[j] = j < rn ? kdec_half_scales(&u[j]) : _mm512_setzero_ps(); /* rows past the end: scale 0 */
        }
        transpose16_ps(rows, S);
        if (has_min) {
            for (int j = 0; j < PANEL_R; j++) rows[j] = j < rn ? kdec_half_mins(&u[j]) : _mm512_setzero_ps();
            transpose16_ps(rows, M);
        }
        for (int s = 0; s < 8; s++) {
            __m256i r[PANEL_R];
            for (int j = 0; j < PANEL_R; j++) r[j] = load256(u[j].q + 32 * s);
            pblk *b = &p[sb + s];
            panel_transpose(r, b);
            b->d = S[s];
            b->d_hi = S[8 + s];
            if (has_min) b->m = M[2 * s], b->m_hi = M[2 * s + 1];
        }
    }
}

/* Codebook formats: each row's super-block decoded once, its signed
 * values + 128 and per-half scales set aside by sub-block, then 16 rows
 * transposed a sub-block at a time.  The decoders are the vec_dot's: the
 * 512-bit one (codebooks.h: cbz_*, iq1z_*) where a format has it, cb_decode
 * else and for IQ3_S (its gathered grid rows measured 72 against 78 GMAC/s
 * here, bench_kernels avx512, while they speed its vec_dot up). */
X86_INL void cb_pack_row(plm_type type, const void *blk, float dp, __m256i codes[8][PANEL_R], int j,
                         float S_lo[8][PANEL_R], float S_hi[8][PANEL_R]) {
    if (has_cbz(type) && type != PLM_TYPE_IQ3_S) {
        const __m256i signs = cbz_signs(type, blk);
        _Alignas(64) int32_t ls[16]; /* per 16 elements, the scale in both halves */
        _mm512_store_si512(ls, cbz_scales(type, blk));
        _Alignas(64) uint16_t idx[32];
        if (is_iq1(type)) iq1z_indices(type, blk, idx);
        for (int h = 0; h < 4; h++) {
            __m512i v;
            if (is_iq1(type)) { /* q + 9, so q + 128 is 119 more */
                v = _mm512_add_epi8(iq1z_values(type, blk, idx, h, true), _mm512_set1_epi8(119));
            } else {
                const __m512i g = cbz_grid(type, blk, h);
                v = _mm512_xor_si512(_mm512_mask_sub_epi8(g, cbz_sign_mask(signs, h), _mm512_setzero_si512(), g),
                                     _mm512_set1_epi8((char)0x80));
            }
            codes[2 * h][j] = _mm512_castsi512_si256(v);
            codes[2 * h + 1][j] = _mm512_extracti64x4_epi64(v, 1);
        }
        for (int s = 0; s < 8; s++) {
            S_lo[s][j] = dp * (float)(ls[2 * s] & 0xffff);
            S_hi[s][j] = dp * (float)(ls[2 * s + 1] & 0xffff);
        }
        return;
    }
    cbdec u;
    cb_decode(type, blk, &u);
    for (int s = 0; s < 8; s++) {
        codes[s][j] = _mm256_xor_si256(_mm256_sign_epi8(u.mag[s], u.sgn[s]), _mm256_set1_epi8((char)0x80));
        S_lo[s][j] = dp * (float)_mm256_extract_epi16(u.sc[s], 0);
        S_hi[s][j] = dp * (float)_mm256_extract_epi16(u.sc[s], 8);
    }
}

X86_INL void panel_pack_cb(plm_type type, const char *w, size_t ws, int rn, int64_t s0, int ks, pblk *p) {
    const float post = plm_iq_post(type);
    for (int sb = 0; sb < ks; sb += 8) {
        __m256i codes[8][PANEL_R];
        _Alignas(64) float S_lo[8][PANEL_R], S_hi[8][PANEL_R];
        for (int j = 0; j < PANEL_R; j++) { /* rows past the end: row 0, scale 0 */
            const void *blk = block_at(type, w + (size_t)(j < rn ? j : 0) * ws, (s0 + sb) / 8);
            cb_pack_row(type, blk, j < rn ? cb_d(type, blk) * post : 0.0f, codes, j, S_lo, S_hi);
        }
        for (int s = 0; s < 8; s++) {
            pblk *b = &p[sb + s];
            panel_transpose(codes[s], b);
            b->d = _mm512_load_ps(S_lo[s]);
            b->d_hi = _mm512_load_ps(S_hi[s]);
        }
    }
}

X86_INL void panel_pack(plm_type type, const char *w, size_t ws, int rn, int64_t s0, int ks, pblk *p) {
    if (is_codebook(type)) panel_pack_cb(type, w, ws, rn, s0, ks, p);
    else if (type == PLM_TYPE_MXFP4) panel_pack_mxfp4(w, ws, rn, s0, ks, p);
    else if (is_k_quant(type)) panel_pack_k(type, w, ws, rn, s0, ks, p);
    else panel_pack_32(type, w, ws, rn, s0, ks, p);
}

/* ---- tiles: C tokens against one packed panel ------------------------------ */

/* 32-element formats: 16 rows x C tokens of float sums in acc.  A 32-block
 * is one chain of eight vpdpbusd; the C tokens' chains are independent,
 * which hides the latency (two chains a token measured the same). */
X86_INL void panel_tile_32(int C, bool q8_1, const pblk *p, int kb, const ptab *t, int c0, const char *act,
                           size_t as, int64_t b0, __m512 *acc) {
    const size_t ab = q8_1 ? sizeof(block_q8_1) : sizeof(block_q8_0); /* qs is last in both */
    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int b = 0; b < kb; b++) {
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
            const char *qs = act + (size_t)(c0 + c) * as + (size_t)(b0 + b + 1) * ab - 32;
            __m512i s0 = _mm512_set1_epi32(t->init_lo[c0 + c][b]);
            for (int g = 0; g < 8; g++) s0 = _mm512_dpbusd_epi32(s0, p[b].q[g], bcast4(qs + 4 * g));
            const __m512 scale = _mm512_mul_ps(p[b].d, _mm512_set1_ps(t->d[c0 + c][b]));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), scale, acc[c]);
            if (q8_1) acc[c] = _mm512_fmadd_ps(p[b].m, _mm512_set1_ps(t->sum[c0 + c][b]), acc[c]);
        }
    }
}

/* K-quants: every mode sums a super-block's sub-blocks in float before
 * applying the activation scale, which is one per super-block:
 *   acc += d_a * sum_s (cvt(dot_s) * S_s - M_s * bsum_s)
 * with one scale per 32 (K_MIN1, K_OFS1) the halves' integer sums are added
 * first, with two (K_OFS2, K_MIN2) each half has its own scale and min.
 * A sub-block's dot is two chains of four (one chain of eight measured
 * slower: too few independent chains in flight). */
X86_INL void panel_tile_k(int C, enum panel_mode mode, const pblk *p, int ks, const ptab *t, int c0, const char *act,
                          size_t as, int64_t s0, __m512 *acc) {
    const bool one_scale = mode == PANEL_K_MIN1 || mode == PANEL_K_OFS1;
    const bool has_min = mode == PANEL_K_MIN1 || mode == PANEL_K_MIN2;
    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int sb = 0; sb < ks / 8; sb++) {
        __m512 part[PANEL_C];
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) part[c] = _mm512_setzero_ps();
        for (int s = 0; s < 8; s++) {
            const pblk *b = &p[8 * sb + s];
            const int st = 8 * sb + s;
            _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
                const block_q8_K *y = (const block_q8_K *)(const void *)(act + (size_t)(c0 + c) * as) + s0 / 8 + sb;
                const int8_t *qs = y->qs + 32 * s;
                __m512i lo = mode == PANEL_K_OFS1 || mode == PANEL_K_OFS2 ? _mm512_set1_epi32(t->init_lo[c0 + c][st])
                                                                          : _mm512_setzero_si512();
                __m512i hi = mode == PANEL_K_OFS2 ? _mm512_set1_epi32(t->init_hi[c0 + c][st]) : _mm512_setzero_si512();
                for (int g = 0; g < 4; g++) {
                    lo = _mm512_dpbusd_epi32(lo, b->q[g], bcast4(qs + 4 * g));
                    hi = _mm512_dpbusd_epi32(hi, b->q[g + 4], bcast4(qs + 4 * g + 16));
                }
                __m512 v = part[c];
                if (one_scale) {
                    v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi)), b->d, v);
                } else {
                    v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), b->d, v);
                    v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), b->d_hi, v);
                }
                if (has_min) v = _mm512_fnmadd_ps(b->m, _mm512_set1_ps(t->sum[c0 + c][st]), v);
                if (mode == PANEL_K_MIN2) v = _mm512_fnmadd_ps(b->m_hi, _mm512_set1_ps(t->sum_hi[c0 + c][st]), v);
                part[c] = v;
            }
        }
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++)
            acc[c] = _mm512_fmadd_ps(part[c], _mm512_set1_ps(t->d[c0 + c][8 * sb]), acc[c]);
    }
}

/* Store (first slice) or add (later slices) 16 rows x C tokens. */
X86_INL void panel_store(int C, const __m512 *acc, float *out, int64_t os, int rn, bool add) {
    const __mmask16 m = (__mmask16)((1u << rn) - 1);
    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
        float *o = out + c * os;
        _mm512_mask_storeu_ps(o, m, add ? _mm512_add_ps(acc[c], _mm512_maskz_loadu_ps(m, o)) : acc[c]);
    }
}

/* One tile of C tokens (C constant here, so acc stays in registers). */
X86_INL void panel_tile_c(int C, enum panel_mode mode, const pblk *p, int ks, const ptab *t, int c0, const char *act,
                          size_t as, int64_t s0, float *out, int64_t os, int rn, bool add) {
    __m512 acc[PANEL_C];
    if (mode == PANEL_Q8_0 || mode == PANEL_Q8_1) panel_tile_32(C, mode == PANEL_Q8_1, p, ks, t, c0, act, as, s0, acc);
    else panel_tile_k(C, mode, p, ks, t, c0, act, as, s0, acc);
    panel_store(C, acc, out, os, rn, add);
}

/* A tile of any C in 1..PANEL_C, by a constant C each. */
X86_INL void panel_tile(enum panel_mode mode, int C, const pblk *p, int ks, const ptab *t, int c0, const char *act,
                        size_t as, int64_t s0, float *out, int64_t os, int rn, bool add) {
    switch (C) {
    case 8: panel_tile_c(8, mode, p, ks, t, c0, act, as, s0, out, os, rn, add); break;
    case 7: panel_tile_c(7, mode, p, ks, t, c0, act, as, s0, out, os, rn, add); break;
    case 6: panel_tile_c(6, mode, p, ks, t, c0, act, as, s0, out, os, rn, add); break;
    case 5: panel_tile_c(5, mode, p, ks, t, c0, act, as, s0, out, os, rn, add); break;
    case 4: panel_tile_c(4, mode, p, ks, t, c0, act, as, s0, out, os, rn, add); break;
    case 3: panel_tile_c(3, mode, p, ks, t, c0, act, as, s0, out, os, rn, add); break;
    case 2: panel_tile_c(2, mode, p, ks, t, c0, act, as, s0, out, os, rn, add); break;
    default: panel_tile_c(1, mode, p, ks, t, c0, act, as, s0, out, os, rn, add); break;
    }
}

/* The tiles are functions of their own, one per mode (shared by the
 * formats of that mode: eight unrolled tile sizes each). */
typedef void (*panel_tile_fn)(int C, const pblk *p, int ks, const ptab *t, int c0, const char *act, size_t as,
                              int64_t s0, float *out, int64_t os, int rn, bool add);

X86_TARGET static void X86_FN(panel_tile_q8_0)(int C, const pblk *p, int ks, const ptab *t, int c0, const char *act,
                                               size_t as, int64_t s0, float *out, int64_t os, int rn, bool add) {
    panel_tile(PANEL_Q8_0, C, p, ks, t, c0, act, as, s0, out, os, rn, add);
}

X86_TARGET static void X86_FN(panel_tile_q8_1)(int C, const pblk *p, int ks, const ptab *t, int c0, const char *act,
                                               size_t as, int64_t s0, float *out, int64_t os, int rn, bool add) {
    panel_tile(PANEL_Q8_1, C, p, ks, t, c0, act, as, s0, out, os, rn, add);
}

X86_TARGET static void X86_FN(panel_tile_k_min1)(int C, const pblk *p, int ks, const ptab *t, int c0, const char *act,
                                                 size_t as, int64_t s0, float *out, int64_t os, int rn, bool add) {
    panel_tile(PANEL_K_MIN1, C, p, ks, t, c0, act, as, s0, out, os, rn, add);
}

X86_TARGET static void X86_FN(panel_tile_k_ofs2)(int C, const pblk *p, int ks, const ptab *t, int c0, const char *act,
                                                 size_t as, int64_t s0, float *out, int64_t os, int rn, bool add) {
    panel_tile(PANEL_K_OFS2, C, p, ks, t, c0, act, as, s0, out, os, rn, add);
}

X86_TARGET static void X86_FN(panel_tile_k_min2)(int C, const pblk *p, int ks, const ptab *t, int c0, const char *act,
                                                 size_t as, int64_t s0, float *out, int64_t os, int rn, bool add) {
    panel_tile(PANEL_K_MIN2, C, p, ks, t, c0, act, as, s0, out, os, rn, add);
}

X86_TARGET static void X86_FN(panel_tile_k_ofs1)(int C, const pblk *p, int ks, const ptab *t, int c0, const char *act,
                                                 size_t as, int64_t s0, float *out, int64_t os, int rn, bool add) {
    panel_tile(PANEL_K_OFS1, C, p, ks, t, c0, act, as, s0, out, os, rn, add);
}

X86_INL panel_tile_fn panel_tile_of(plm_type type) {
    switch (panel_mode_of(type)) {
    case PANEL_Q8_1: return X86_FN(panel_tile_q8_1);
    case PANEL_K_MIN1: return X86_FN(panel_tile_k_min1);
    case PANEL_K_OFS2: return X86_FN(panel_tile_k_ofs2);
    case PANEL_K_MIN2: return X86_FN(panel_tile_k_min2);
    case PANEL_K_OFS1: return X86_FN(panel_tile_k_ofs1);
    default: return X86_FN(panel_tile_q8_0);
    }
}

/* ---- the gemm: k in slices, tokens in groups, rows in panels ---------------
 * (see the top of the file).  Slices and groups are counted in 32-element
 * sub-blocks for every format. */
X86_INL void gemm_panel(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                        int nt, float *out, int64_t os) {
    const panel_tile_fn tile = panel_tile_of(type);
    _Alignas(64) pblk panel[PANEL_SB];
    _Alignas(64) ptab tab;
    const int64_t ns = k / 32;
    for (int64_t s0 = 0; s0 < ns; s0 += PANEL_SB) {
        const int ks = (int)(ns - s0 < PANEL_SB ? ns - s0 : PANEL_SB);
        for (int t0 = 0; t0 < nt; t0 += PANEL_TG) {
            const int tn = nt - t0 < PANEL_TG ? nt - t0 : PANEL_TG;
            const char *at = (const char *)act + (size_t)t0 * as;
            panel_tabulate(type, at, as, tn, s0, ks, &tab);
            for (int64_t r0 = 0; r0 < nr; r0 += PANEL_R) {
                const int rn = (int)(nr - r0 < PANEL_R ? nr - r0 : PANEL_R);
                panel_pack(type, (const char *)w + (size_t)r0 * ws, ws, rn, s0, ks, panel);
                for (int c = 0; c < tn; c += PANEL_C)
                    tile(tn - c < PANEL_C ? tn - c : PANEL_C, panel, ks, &tab, c, at, as, s0, out + (t0 + c) * os + r0,
                         os, rn, s0 > 0);
            }
        }
    }
}
