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
 * Keys and values are staged in f32 once per block for every row.
 *
 * Bit for bit attention.h's kernel (attn_f16) for each row, when the rows'
 * keys all begin at the same key: the same blocks of keys; each score summed
 * as block_scores sums it (eight lane chains over d mod 8, combined in
 * sum4's order, or hsum_ps's for the keys past a row's last group of 8,
 * then the tail of d past the last 32 and the scale); each block's exps
 * summed in softmax_run_block's lanes (key mod 8) and order, the running
 * max's shrink by expf; the values in key order.  Rows whose keys end
 * inside a block see -inf past their end (weight 0, adding +0).
 */

enum {
    TILE_RV = X86_ZMM ? 4 : 2, /* row vectors (8 rows each) of a value register tile: 32 or 16 registers */
    TILE_ND = 4,               /* head elements of a value register tile */
    TILE_SRV = 2,              /* row vectors of a score register tile ... */
    TILE_SNJ = 2,              /* ... and keys: four lane chains of it live at once */
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
    _Alignas(32) double sum[PLM_ATTN_TILE_ROWS]; /* as plm_softmax_run's: block sums added in double */
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
        s->max[r] = -INFINITY, s->sum[r] = 0.0;
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
                _mm256_storeu_ps(o, t->flash ? _mm256_mul_ps(x[i], _mm256_set1_ps((float)(1.0 / s->sum[r]))) : x[i]);
            }
        }
}

/* Two of the eight lane chains of block_scores for keys [j, j + TILE_SNJ)
 * and row vectors [v, v + RV): A over d = la mod 8, B over d = lb mod 8,
 * for d < h8, each in d order. */
X86_INL void lane_chains(__m256 A[TILE_SNJ][TILE_SRV], __m256 B[TILE_SNJ][TILE_SRV], const float *kb,
                         const attn_tile_state *s, int h8, int la, int lb, int j, int v, const int RV) {
    const int rows = s->rows, hd = s->hd;
    _Pragma("GCC unroll 4") for (int a = 0; a < TILE_SNJ; a++)
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) A[a][x] = B[a][x] = _mm256_setzero_ps();
    for (int d0 = 0; d0 < h8; d0 += 8) {
        const float *qa = s->qt + (size_t)(d0 + la) * rows + v * 8, *qb = s->qt + (size_t)(d0 + lb) * rows + v * 8;
        __m256 va[TILE_SRV], vb[TILE_SRV];
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) va[x] = _mm256_loadu_ps(qa + x * 8), vb[x] = _mm256_loadu_ps(qb + x * 8);
        _Pragma("GCC unroll 4") for (int a = 0; a < TILE_SNJ; a++) {
            const float *k = kb + (size_t)(j + a) * hd + d0;
            const __m256 ka = _mm256_broadcast_ss(k + la), kbb = _mm256_broadcast_ss(k + lb);
            _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) {
                A[a][x] = _mm256_fmadd_ps(ka, va[x], A[a][x]);
                B[a][x] = _mm256_fmadd_ps(kbb, vb[x], B[a][x]);
            }
        }
    }
}

/* X = (A + B) + (C + D), the register tiles summed lane by lane (C, D: another pair). */
X86_INL void pair_sum(__m256 X[TILE_SNJ][TILE_SRV], __m256 A[TILE_SNJ][TILE_SRV], __m256 B[TILE_SNJ][TILE_SRV],
                      const int RV) {
    _Pragma("GCC unroll 4") for (int a = 0; a < TILE_SNJ; a++)
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) X[a][x] = _mm256_add_ps(A[a][x], B[a][x]);
}

/* St for keys [j, j + TILE_SNJ) and row vectors [v, v + RV), summed as
 * block_scores sums a key: the lanes in sum4's order ((0+1)+(2+3)) +
 * ((4+5)+(6+7)), or with `single` hsum_ps's ((0+4)+(2+6)) + ((1+5)+(3+7));
 * then the tail of d from h8 in order, added; then the scale. */
X86_INL void tile_scores_rv(float *st, const float *kb, const attn_tile_state *s, int j, int v, float scale,
                            bool single, const int RV) {
    const int rows = s->rows, hd = s->hd, h8 = hd & ~31;
    const int o[8] = {0, 1, 2, 3, 4, 5, 6, 7}, h[8] = {0, 4, 2, 6, 1, 5, 3, 7};
    const int *l = single ? h : o;
    __m256 A[TILE_SNJ][TILE_SRV], B[TILE_SNJ][TILE_SRV], P[TILE_SNJ][TILE_SRV], Q[TILE_SNJ][TILE_SRV];
    lane_chains(A, B, kb, s, h8, l[0], l[1], j, v, RV);
    pair_sum(P, A, B, RV);
    lane_chains(A, B, kb, s, h8, l[2], l[3], j, v, RV);
    pair_sum(A, A, B, RV);
    pair_sum(Q, P, A, RV); /* first half */
    lane_chains(A, B, kb, s, h8, l[4], l[5], j, v, RV);
    pair_sum(P, A, B, RV);
    lane_chains(A, B, kb, s, h8, l[6], l[7], j, v, RV);
    pair_sum(A, A, B, RV);
    pair_sum(P, P, A, RV); /* second half */
    pair_sum(Q, Q, P, RV);
    /* the tail, one chain from 0 in d order (dot_tail) */
    _Pragma("GCC unroll 4") for (int a = 0; a < TILE_SNJ; a++)
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) A[a][x] = _mm256_setzero_ps();
    for (int d = h8; d < hd; d++) {
        const float *q = s->qt + (size_t)d * rows + v * 8;
        _Pragma("GCC unroll 4") for (int a = 0; a < TILE_SNJ; a++) {
            const __m256 k = _mm256_broadcast_ss(kb + (size_t)(j + a) * hd + d);
            _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++)
                A[a][x] = _mm256_fmadd_ps(k, _mm256_loadu_ps(q + x * 8), A[a][x]);
        }
    }
    const __m256 sc = _mm256_set1_ps(scale);
    _Pragma("GCC unroll 4") for (int a = 0; a < TILE_SNJ; a++)
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) {
            const __m256 t = h8 < hd ? _mm256_add_ps(Q[a][x], A[a][x]) : Q[a][x];
            _mm256_storeu_ps(st + (size_t)(j + a) * rows + (v + x) * 8, _mm256_mul_ps(t, sc));
        }
}

X86_INL void tile_scores_keys(float *st, const float *kb, const attn_tile_state *s, int j, float scale, bool single) {
    int v = 0;
    for (; v + TILE_SRV <= s->nv; v += TILE_SRV) tile_scores_rv(st, kb, s, j, v, scale, single, TILE_SRV);
    if (v < s->nv) tile_scores_rv(st, kb, s, j, v, scale, single, 1);
}

/* Every row's scores of the block's nbp staged keys (a multiple of
 * TILE_SNJ), from j0 on.  block_scores takes a row's keys in groups of 8
 * from the block's start and the rest (nb mod 8, nb the row's keys in the
 * block) one by one, each summed in its own order: those keys are summed
 * both ways and each row takes its own. */
X86_INL void tile_scores(float *st, float *single, const float *kb, const attn_tile_state *s, int j0, int bk, int nbp,
                         float scale) {
    for (int j = 0; j < nbp; j += TILE_SNJ) tile_scores_keys(st, kb, s, j, scale, false);
    int from = nbp, to = 0; /* block keys some row sums one by one */
    for (int r = 0; r < s->rows; r++) {
        const int nb = s->hi[r] - j0 < bk ? s->hi[r] - j0 : bk;
        if (nb > 0 && (nb & 7) && (nb & ~7) < from) from = nb & ~7;
        if (nb > 0 && (nb & 7) && nb > to) to = nb;
    }
    if (from >= to) return;
    from &= ~(TILE_SNJ - 1);
    for (int j = from; j < to; j += TILE_SNJ) tile_scores_keys(single, kb, s, j, scale, true);
    for (int v = 0; v < s->nv; v++) {
        __m256i nb = _mm256_sub_epi32(_mm256_load_si256((const __m256i *)(const void *)(s->hi + v * 8)),
                                      _mm256_set1_epi32(j0));
        nb = _mm256_min_epi32(nb, _mm256_set1_epi32(bk));
        const __m256i grouped = _mm256_and_si256(nb, _mm256_set1_epi32(~7));
        for (int j = from; j < to; j++) {
            /* the row sums key j alone when grouped <= j (past nb: masked later) */
            const __m256 alone = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(j + 1), grouped));
            float *sj = st + (size_t)j * s->rows + v * 8;
            const float *aj = single + (size_t)j * s->rows + v * 8;
            _mm256_storeu_ps(sj, _mm256_blendv_ps(_mm256_loadu_ps(sj), _mm256_loadu_ps(aj), alone));
        }
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

/* The online softmax's step for a block, row vector by row vector, as
 * softmax_run_block takes it for each row: the running max, raised by the
 * block's, shrinks the sum (and with flash the output) by expf of the
 * difference; St becomes exp(s - max) (kept only with flash: the exact
 * mode's first pass needs only the runs); the block's exps are summed in
 * eight lanes by key mod 8, the lanes in hsum_ps's order, and added to the
 * run in double.  A row with no key yet keeps max -inf; its exponents are
 * taken against 0 (its scores are all -inf: every exp is 0). */
X86_INL void tile_softmax(float *st, attn_tile_state *s, int nbp, bool flash) {
    const int rows = s->rows;
    for (int v = 0; v < s->nv; v++) {
        float *mx = s->max + v * 8;
        __m256 m = _mm256_load_ps(mx);
        for (int j = 0; j < nbp; j++) m = _mm256_max_ps(m, _mm256_loadu_ps(st + (size_t)j * rows + v * 8));
        _Alignas(32) float shrink[8], nm[8];
        _mm256_store_ps(nm, m);
        for (int i = 0; i < 8; i++) { /* plm_softmax_run_raise */
            shrink[i] = !(nm[i] > mx[i]) ? 1.0f : mx[i] == -INFINITY ? 0.0f : expf(mx[i] - nm[i]);
            mx[i] = nm[i] > mx[i] ? nm[i] : mx[i];
        }
        const __m256 sh = _mm256_load_ps(shrink);
        if (flash)
            for (int d = 0; d < s->hd; d++) {
                float *o = s->ot + (size_t)d * rows + v * 8;
                _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_loadu_ps(o), sh));
            }
        m = _mm256_blendv_ps(m, _mm256_setzero_ps(), _mm256_cmp_ps(m, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
        __m256 lane[8];
        for (int i = 0; i < 8; i++) lane[i] = _mm256_setzero_ps();
        for (int j = 0; j < nbp; j++) {
            float *sj = st + (size_t)j * rows + v * 8;
            const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(sj), m));
            if (flash) _mm256_storeu_ps(sj, e);
            lane[j & 7] = _mm256_add_ps(lane[j & 7], e);
        }
        const __m256 sum = _mm256_add_ps(
            _mm256_add_ps(_mm256_add_ps(lane[0], lane[4]), _mm256_add_ps(lane[2], lane[6])),
            _mm256_add_ps(_mm256_add_ps(lane[1], lane[5]), _mm256_add_ps(lane[3], lane[7])));
        double *run = s->sum + v * 8;
        for (int h = 0; h < 2; h++) {
            const __m128 shh = h ? _mm256_extractf128_ps(sh, 1) : _mm256_castps256_ps128(sh);
            const __m128 bs = h ? _mm256_extractf128_ps(sum, 1) : _mm256_castps256_ps128(sum);
            __m256d r = _mm256_mul_pd(_mm256_load_pd(run + 4 * h), _mm256_cvtps_pd(shh));
            /* two roundings, as the run's (its product is stored first):
             * keep the compiler from fusing the multiply into the add */
            __asm__("" : "+x"(r));
            _mm256_store_pd(run + 4 * h, _mm256_add_pd(r, _mm256_cvtps_pd(bs)));
        }
    }
}

/* The exact mode's weights, f16(exp(s - max) * (1 / sum)) with the
 * complete runs (block_weights, lane by lane). */
X86_INL void tile_weights(float *st, const attn_tile_state *s, int nbp) {
    const int rows = s->rows;
    for (int v = 0; v < s->nv; v++) {
        const __m256 m = _mm256_load_ps(s->max + v * 8);
        const __m256d one = _mm256_set1_pd(1.0);
        const __m256 inv = _mm256_set_m128(_mm256_cvtpd_ps(_mm256_div_pd(one, _mm256_load_pd(s->sum + v * 8 + 4))),
                                           _mm256_cvtpd_ps(_mm256_div_pd(one, _mm256_load_pd(s->sum + v * 8))));
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

/* One pass over the tile's keys (0: flash; 1, 2: exact, as attn_pass), in
 * attn_pass's blocks from the rows' common first key.  With `kept`, the
 * first pass leaves its scores there (block after block, rows floats per
 * key) and the second reads them instead of recomputing. */
X86_INL void tile_pass(attn_tile_state *s, const plm_attn_tile *t, int pass, float *kept) {
    enum { STAGE = ATTN_STAGE + PLM_ATTN_TILE_MAX_HD, SCORES = PLM_ATTN_BLOCK * PLM_ATTN_TILE_ROWS };
    _Alignas(32) float kst[STAGE], vst[STAGE], st[SCORES], single[SCORES];
    const bool values = pass != 1;
    const int hd = s->hd, bk = ATTN_STAGE / hd < PLM_ATTN_BLOCK ? ATTN_STAGE / hd : PLM_ATTN_BLOCK;
    for (int j0 = s->kbeg; j0 < s->kend; j0 += bk) {
        const int nb = s->kend - j0 < bk ? s->kend - j0 : bk, nbp = (nb + TILE_SNJ - 1) / TILE_SNJ * TILE_SNJ;
        float *sb = kept ? kept + (size_t)(j0 - s->kbeg) * s->rows : st;
        if (pass != 2 || !kept) {
            tile_stage(kst, t->k, t->k_stride, j0, nb, nbp, hd);
            tile_scores(sb, single, kst, s, j0, bk, nbp, t->scale);
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
        const size_t need = (size_t)(s.kend - s.kbeg + TILE_SNJ) * s.rows;
        float *kept = t->kept && need <= t->kept_floats ? t->kept : NULL;
        tile_pass(&s, t, 1, kept);
        tile_pass(&s, t, 2, kept);
    }
    tile_store(&s, t);
}
