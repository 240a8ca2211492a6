/*
 * Prefill attention by tiles (plm_attn_tile, kernels.h): a tile of query
 * rows (a few tokens x the query heads of one KV head) meets each block of
 * cached keys and values once, like a small gemm, instead of once per
 * token; the online softmax is attention.h's, exact or flash.  Part of an
 * x86 table; after attention.h (stage_rows, exp_ps).
 *
 * The rows lie across vector lanes: the queries transposed, Qt[d][r], and
 * the output too, Ot[d][r].  A block's scores are St[j][r] = sum_d k_j[d]
 * Qt[d][r], one key element broadcast against row vectors (no horizontal
 * sums); the softmax's max, exp and sum run lane by lane down the key
 * vectors; the values are Ot[d][r] += v_j[d] Pt[j][r] in the same shape.
 * Keys and values are staged in f32 once per block for every row.  Each
 * score sums over d in order (one FMA chain per row and key), not in
 * plm_dot_f16's lane order: plm_attn_f16's numbers up to summation order.
 */

enum {
    TILE_RV = X86_ZMM ? 4 : 2, /* row vectors (8 rows each) of a register tile: 32 or 16 registers */
    TILE_NJ = 6,               /* keys of a score register tile */
    TILE_ND = 4,               /* head elements of a value register tile */
    TILE_KEYS = 48,            /* keys of a block at most, a multiple of TILE_NJ */
};

/* One tile in flight: rows padded to whole vectors (the padding rows repeat
 * the last real row, so they need no mask of their own), each with its key
 * range and softmax run. */
typedef struct attn_tile_state {
    int rows, nv, hd;        /* rows: a multiple of 8; nv = rows / 8 */
    int kbeg, kend;          /* every row's keys lie in [kbeg, kend) */
    int maxlo, minhi;        /* a block inside [maxlo, minhi) needs no mask */
    float *qt, *ot;          /* [hd][rows] */
    _Alignas(32) float max[PLM_ATTN_TILE_ROWS];
    _Alignas(32) float sum[PLM_ATTN_TILE_ROWS];
    _Alignas(32) int lo[PLM_ATTN_TILE_ROWS];
    _Alignas(32) int hi[PLM_ATTN_TILE_ROWS];
} attn_tile_state;

/* Eight rows of eight floats transposed in place: r[i]'s lane j <-> r[j]'s lane i. */
X86_INL void transpose8(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20), r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20), r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20), r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20), r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

X86_INL void tile_setup(attn_tile_state *s, const plm_attn_tile *t) {
    const int real = t->n_tok * t->n_q, hd = t->hd;
    s->rows = (real + 7) & ~7, s->nv = s->rows / 8, s->hd = hd;
    s->kbeg = s->minhi = 1 << 30, s->kend = s->maxlo = 0;
    for (int r = 0; r < s->rows; r++) {
        const int tok = (r < real ? r : real - 1) / t->n_q;
        s->lo[r] = t->key_begin[tok], s->hi[r] = t->key_end[tok];
        s->max[r] = -INFINITY, s->sum[r] = 0.0f;
        if (s->lo[r] < s->kbeg) s->kbeg = s->lo[r];
        if (s->lo[r] > s->maxlo) s->maxlo = s->lo[r];
        if (s->hi[r] > s->kend) s->kend = s->hi[r];
        if (s->hi[r] < s->minhi) s->minhi = s->hi[r];
    }
    for (int r0 = 0; r0 < s->rows; r0 += 8)
        for (int d0 = 0; d0 < hd; d0 += 8) {
            __m256 x[8];
            for (int i = 0; i < 8; i++) x[i] = load_f16x8(t->q + (size_t)(r0 + i < real ? r0 + i : real - 1) * hd + d0);
            transpose8(x);
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(s->qt + (size_t)(d0 + i) * s->rows + r0, x[i]);
        }
    memset(s->ot, 0, sizeof(float) * (size_t)hd * s->rows);
}

/* The real rows' outputs, Ot transposed back (and divided by the sums with flash). */
X86_INL void tile_store(const attn_tile_state *s, const plm_attn_tile *t) {
    const int real = t->n_tok * t->n_q, hd = s->hd;
    for (int r0 = 0; r0 < real; r0 += 8)
        for (int d0 = 0; d0 < hd; d0 += 8) {
            __m256 x[8];
            for (int i = 0; i < 8; i++) x[i] = _mm256_loadu_ps(s->ot + (size_t)(d0 + i) * s->rows + r0);
            transpose8(x);
            for (int i = 0; i < 8 && r0 + i < real; i++) {
                const int r = r0 + i;
                float *o = t->o + (size_t)(r / t->n_q) * t->o_stride + (size_t)(r % t->n_q) * hd + d0;
                _mm256_storeu_ps(o, t->flash ? _mm256_mul_ps(x[i], _mm256_set1_ps(1.0f / s->sum[r])) : x[i]);
            }
        }
}

/* St[j][r] = scale * k_j . q_r for keys [j, j + TILE_NJ) of the staged
 * block and row vectors [v, v + RV). */
X86_INL void tile_scores_rv(float *st, const float *kb, const attn_tile_state *s, int j, int v, float scale,
                            const int RV) {
    const int rows = s->rows, hd = s->hd;
    __m256 acc[TILE_NJ][TILE_RV];
    _Pragma("GCC unroll 8") for (int a = 0; a < TILE_NJ; a++)
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) acc[a][x] = _mm256_setzero_ps();
    const float *k0 = kb + (size_t)j * hd, *q0 = s->qt + v * 8;
    for (int d = 0; d < hd; d++, q0 += rows) {
        __m256 qv[TILE_RV];
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) qv[x] = _mm256_loadu_ps(q0 + x * 8);
        _Pragma("GCC unroll 8") for (int a = 0; a < TILE_NJ; a++) {
            const __m256 kv = _mm256_broadcast_ss(k0 + (size_t)a * hd + d);
            _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) acc[a][x] = _mm256_fmadd_ps(kv, qv[x], acc[a][x]);
        }
    }
    const __m256 sc = _mm256_set1_ps(scale);
    _Pragma("GCC unroll 8") for (int a = 0; a < TILE_NJ; a++)
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++)
            _mm256_storeu_ps(st + (size_t)(j + a) * rows + (v + x) * 8, _mm256_mul_ps(acc[a][x], sc));
}

/* Every row's scores of nbp staged keys (a multiple of TILE_NJ). */
X86_INL void tile_scores(float *st, const float *kb, const attn_tile_state *s, int nbp, float scale) {
    for (int j = 0; j < nbp; j += TILE_NJ) {
        int v = 0;
        for (; v + TILE_RV <= s->nv; v += TILE_RV) tile_scores_rv(st, kb, s, j, v, scale, TILE_RV);
        if (TILE_RV > 3 && s->nv - v >= 3) tile_scores_rv(st, kb, s, j, v, scale, 3), v += 3;
        if (TILE_RV > 2 && s->nv - v >= 2) tile_scores_rv(st, kb, s, j, v, scale, 2), v += 2;
        if (s->nv - v >= 1) tile_scores_rv(st, kb, s, j, v, scale, 1);
    }
}

/* Scores of keys outside a row's range (block keys from j0 on) -> -inf. */
X86_INL void tile_mask(float *st, const attn_tile_state *s, int j0, int nbp) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int v = 0; v < s->nv; v++) {
        const __m256i lo = _mm256_load_si256((const __m256i *)(const void *)(s->lo + v * 8));
        const __m256i hi = _mm256_load_si256((const __m256i *)(const void *)(s->hi + v * 8));
        for (int j = 0; j < nbp; j++) {
            const __m256i p = _mm256_set1_epi32(j0 + j);
            /* outside: lo > p or p >= hi, i.e. not (hi > p) */
            const __m256i out = _mm256_or_si256(_mm256_cmpgt_epi32(lo, p),
                                                _mm256_xor_si256(_mm256_cmpgt_epi32(hi, p), _mm256_set1_epi32(-1)));
            float *sj = st + (size_t)j * s->rows + v * 8;
            _mm256_storeu_ps(sj, _mm256_blendv_ps(_mm256_loadu_ps(sj), ninf, _mm256_castsi256_ps(out)));
        }
    }
}

/* The online softmax's step for a block, row vector by row vector (as
 * softmax_run_block): the runs' max and sum, and with flash St becomes
 * exp(s - running max) and the rows' outputs shrink when their max rises
 * (the exact mode's first pass needs only the runs).  A row with no key yet
 * keeps max -inf; its exponents are taken against 0 (all its scores are
 * -inf, so every exp is 0, and so is the shrink of its empty output and
 * sum). */
X86_INL void tile_softmax(float *st, attn_tile_state *s, int nbp, bool flash) {
    const int rows = s->rows;
    for (int v = 0; v < s->nv; v++) {
        const __m256 old = _mm256_load_ps(s->max + v * 8);
        __m256 m = old;
        for (int j = 0; j < nbp; j++) m = _mm256_max_ps(m, _mm256_loadu_ps(st + (size_t)j * rows + v * 8));
        _mm256_store_ps(s->max + v * 8, m);
        m = _mm256_blendv_ps(m, _mm256_setzero_ps(), _mm256_cmp_ps(m, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
        const __m256 shrink = exp_ps(_mm256_sub_ps(old, m));
        if (flash)
            for (int d = 0; d < s->hd; d++) {
                float *o = s->ot + (size_t)d * rows + v * 8;
                _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_loadu_ps(o), shrink));
            }
        __m256 sum = _mm256_mul_ps(_mm256_load_ps(s->sum + v * 8), shrink);
        for (int j = 0; j < nbp; j++) {
            float *sj = st + (size_t)j * rows + v * 8;
            const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(sj), m));
            if (flash) _mm256_storeu_ps(sj, e);
            sum = _mm256_add_ps(sum, e);
        }
        _mm256_store_ps(s->sum + v * 8, sum);
    }
}

/* The exact mode's weights, f16(exp(s - max) * (1 / sum)) with the
 * complete runs (block_weights, lane by lane). */
X86_INL void tile_weights(float *st, const attn_tile_state *s, int nbp) {
    const int rows = s->rows;
    for (int v = 0; v < s->nv; v++) {
        const __m256 m = _mm256_load_ps(s->max + v * 8);
        const __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_load_ps(s->sum + v * 8));
        for (int j = 0; j < nbp; j++) {
            float *sj = st + (size_t)j * rows + v * 8;
            const __m256 w = _mm256_mul_ps(exp_ps(_mm256_sub_ps(_mm256_loadu_ps(sj), m)), inv);
            _mm256_storeu_ps(sj, _mm256_cvtph_ps(_mm256_cvtps_ph(w, _MM_FROUND_TO_NEAREST_INT)));
        }
    }
}

/* Ot[d][r] += sum_j v_j[d] Pt[j][r] for d in [d0, d0 + TILE_ND) and row
 * vectors [v, v + RV). */
X86_INL void tile_values_rv(attn_tile_state *s, const float *pt, const float *vb, int nbp, int d0, int v,
                            const int RV) {
    const int rows = s->rows, hd = s->hd;
    __m256 acc[TILE_ND][TILE_RV];
    float *o = s->ot + (size_t)d0 * rows + v * 8;
    _Pragma("GCC unroll 8") for (int a = 0; a < TILE_ND; a++)
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) acc[a][x] = _mm256_loadu_ps(o + (size_t)a * rows + x * 8);
    const float *p = pt + v * 8, *vj = vb + d0;
    for (int j = 0; j < nbp; j++, p += rows, vj += hd) {
        __m256 pv[TILE_RV];
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) pv[x] = _mm256_loadu_ps(p + x * 8);
        _Pragma("GCC unroll 8") for (int a = 0; a < TILE_ND; a++) {
            const __m256 e = _mm256_broadcast_ss(vj + a);
            _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) acc[a][x] = _mm256_fmadd_ps(e, pv[x], acc[a][x]);
        }
    }
    _Pragma("GCC unroll 8") for (int a = 0; a < TILE_ND; a++)
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) _mm256_storeu_ps(o + (size_t)a * rows + x * 8, acc[a][x]);
}

X86_INL void tile_values(attn_tile_state *s, const float *pt, const float *vb, int nbp) {
    for (int d0 = 0; d0 < s->hd; d0 += TILE_ND) {
        int v = 0;
        for (; v + TILE_RV <= s->nv; v += TILE_RV) tile_values_rv(s, pt, vb, nbp, d0, v, TILE_RV);
        if (TILE_RV > 3 && s->nv - v >= 3) tile_values_rv(s, pt, vb, nbp, d0, v, 3), v += 3;
        if (TILE_RV > 2 && s->nv - v >= 2) tile_values_rv(s, pt, vb, nbp, d0, v, 2), v += 2;
        if (s->nv - v >= 1) tile_values_rv(s, pt, vb, nbp, d0, v, 1);
    }
}

/* n f16 rows -> floats, and zeros up to nbp rows. */
X86_INL void tile_stage(float *dst, const void *src, size_t stride, int j0, int nb, int nbp, int hd) {
    stage_rows(dst, (const char *)src + (size_t)j0 * stride, stride, nb, hd);
    memset(dst + (size_t)nb * hd, 0, sizeof(float) * (size_t)(nbp - nb) * hd);
}

/* One pass over the tile's keys (0: flash; 1, 2: exact, as attn_pass).
 * With `kept`, the first pass leaves its scores there (block after block,
 * rows floats per key) and the second reads them instead of recomputing. */
X86_INL void tile_pass(attn_tile_state *s, const plm_attn_tile *t, int pass, float *kept) {
    _Alignas(32) float kst[ATTN_STAGE], vst[ATTN_STAGE], st[TILE_KEYS * PLM_ATTN_TILE_ROWS];
    const bool values = pass != 1;
    const int hd = s->hd, per = ATTN_STAGE / hd / TILE_NJ * TILE_NJ;  /* >= TILE_NJ: hd <= 512 */
    const int bk = per < TILE_KEYS ? per : TILE_KEYS;
    for (int j0 = s->kbeg; j0 < s->kend; j0 += bk) {
        const int nb = s->kend - j0 < bk ? s->kend - j0 : bk, nbp = (nb + TILE_NJ - 1) / TILE_NJ * TILE_NJ;
        float *sb = kept ? kept + (size_t)(j0 - s->kbeg) * s->rows : st;
        if (pass != 2 || !kept) {
            tile_stage(kst, t->k, t->k_stride, j0, nb, nbp, hd);
            tile_scores(sb, kst, s, nbp, t->scale);
            if (j0 < s->maxlo || j0 + nbp > s->minhi) tile_mask(sb, s, j0, nbp);
        }
        if (pass == 2) tile_weights(sb, s, nbp);
        else tile_softmax(sb, s, nbp, pass == 0);
        if (values) {
            tile_stage(vst, t->v, t->v_stride, j0, nb, nbp, hd);
            tile_values(s, sb, vst, nbp);
        }
    }
}

X86_TARGET static void X86_FN(attn_f16_tile)(const plm_attn_tile *t) {
    _Alignas(32) float qt[PLM_ATTN_TILE_ELEMS], ot[PLM_ATTN_TILE_ELEMS];
    attn_tile_state s = {.qt = qt, .ot = ot};
    tile_setup(&s, t);
    if (t->flash) {
        tile_pass(&s, t, 0, NULL);
    } else {
        const size_t need = (size_t)(s.kend - s.kbeg + TILE_NJ) * s.rows;
        float *kept = t->kept && need <= t->kept_floats ? t->kept : NULL;
        tile_pass(&s, t, 1, kept);
        tile_pass(&s, t, 2, kept);
    }
    tile_store(&s, t);
}
