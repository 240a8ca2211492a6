/*
 * Prefill attention by tiles (plm_attn_tile, kernels.h): a tile of query
 * rows (a few tokens x the query heads of one KV head) meets each block of
 * cached keys and values once, like a small gemm, instead of once per
 * token; the online softmax is attention.h's, exact or flash.  Part of an
 * x86 table; after dequantize.h (dequantize_32) and attention.h
 * (stage_rows, exp_ps).
 *
 * The rows lie across vector lanes: the queries transposed, Qt[d][r], and
 * the output too, Ot[d][r].  A block's scores are St[j][r] = sum_d k_j[d]
 * Qt[d][r], one key element broadcast against row vectors (no horizontal
 * sums); the softmax's max, exp and sum run lane by lane down the key
 * vectors; the values are Ot[d][r] += v_j[d] Pt[j][r] in the same shape.
 * Keys and values are staged in f32 once per block for every row: f16
 * rows widened, Q8_0 / Q4_0 rows dequantized (a quantized cache costs the
 * tile no more than an f16 one, where token by token it scores the keys
 * with integer dots against a quantized query instead: attn_quant.c).
 *
 * Over an f16 cache, bit for bit attention.h's kernel (attn_f16) for each
 * row, when the rows' keys all begin at the same key: the same blocks of
 * keys; each score summed as block_scores sums it (eight lane chains over d
 * mod 8, combined in sum4's order, or hsum_ps's for the keys past a row's
 * last group of 8, then the tail of d past the last 32 and the scale); each
 * block's exps summed in softmax_run_block's lanes (key mod 8) and order,
 * the running max's shrink by expf; the values in key order.  Rows whose
 * keys end inside a block see -inf past their end (weight 0, adding +0).
 *
 * A row vector holds TILE_W rows: 16 in a zmm on AVX-512 tables, 8 in a
 * ymm otherwise.  Every operation on it is lane by lane, so the width
 * changes how many rows one instruction serves, not any row's arithmetic:
 * the rv_* functions below are the only place the two widths differ.
 */

#if X86_ZMM
enum { TILE_W = 16 };
typedef __m512 rowv;       /* one float per row */
typedef __m512i rowvi;     /* one int per row */
typedef __mmask16 rowmask; /* one bit per row */
X86_INL rowv rv_load(const float *p) { return _mm512_loadu_ps(p); }
X86_INL void rv_store(float *p, rowv x) { _mm512_storeu_ps(p, x); }
X86_INL rowv rv_set1(float x) { return _mm512_set1_ps(x); }
X86_INL rowv rv_add(rowv a, rowv b) { return _mm512_add_ps(a, b); }
X86_INL rowv rv_sub(rowv a, rowv b) { return _mm512_sub_ps(a, b); }
X86_INL rowv rv_mul(rowv a, rowv b) { return _mm512_mul_ps(a, b); }
X86_INL rowv rv_max(rowv a, rowv b) { return _mm512_max_ps(a, b); }
X86_INL rowv rv_fmadd(rowv a, rowv b, rowv c) { return _mm512_fmadd_ps(a, b, c); }
X86_INL rowv rv_blend(rowv a, rowv b, rowmask take_b) { return _mm512_mask_blend_ps(take_b, a, b); }
X86_INL rowmask rv_eq(rowv a, rowv b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
X86_INL rowv rv_f16_round(rowv x) { return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)); }
X86_INL rowvi rvi_load(const int *p) { return _mm512_loadu_si512(p); }
X86_INL rowvi rvi_set1(int x) { return _mm512_set1_epi32(x); }
X86_INL rowvi rvi_sub(rowvi a, rowvi b) { return _mm512_sub_epi32(a, b); }
X86_INL rowvi rvi_min(rowvi a, rowvi b) { return _mm512_min_epi32(a, b); }
X86_INL rowvi rvi_and(rowvi a, rowvi b) { return _mm512_and_si512(a, b); }
X86_INL rowmask rvi_gt(rowvi a, rowvi b) { return _mm512_cmpgt_epi32_mask(a, b); }
X86_INL rowmask mask_or(rowmask a, rowmask b) { return a | b; }
X86_INL rowmask mask_not(rowmask a) { return (rowmask)~a; }

/* exp_ps (attention.h) on 16 lanes: its constants and operations, lane by
 * lane (splitting into two exp_ps calls measured 15% slower tiles). */
X86_INL rowv rv_exp(rowv x) {
    const __m512 lo = _mm512_set1_ps(exp_lo), hi = _mm512_set1_ps(exp_hi);
    const __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ), over = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(exp_log2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(exp_ln2_hi), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(exp_ln2_lo), r);
    __m512 p = _mm512_set1_ps(exp_taylor[0]);
    for (int i = 1; i < 8; i++) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(exp_taylor[i]));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    const __m512 y = _mm512_maskz_mov_ps(keep, _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
    return _mm512_mask_blend_ps(over, y, _mm512_set1_ps(INFINITY));
}
#else
enum { TILE_W = 8 };
typedef __m256 rowv;
typedef __m256i rowvi;
typedef __m256 rowmask; /* all ones or zeros per lane */
X86_INL rowv rv_load(const float *p) { return _mm256_loadu_ps(p); }
X86_INL void rv_store(float *p, rowv x) { _mm256_storeu_ps(p, x); }
X86_INL rowv rv_set1(float x) { return _mm256_set1_ps(x); }
X86_INL rowv rv_add(rowv a, rowv b) { return _mm256_add_ps(a, b); }
X86_INL rowv rv_sub(rowv a, rowv b) { return _mm256_sub_ps(a, b); }
X86_INL rowv rv_mul(rowv a, rowv b) { return _mm256_mul_ps(a, b); }
X86_INL rowv rv_max(rowv a, rowv b) { return _mm256_max_ps(a, b); }
X86_INL rowv rv_fmadd(rowv a, rowv b, rowv c) { return _mm256_fmadd_ps(a, b, c); }
X86_INL rowv rv_blend(rowv a, rowv b, rowmask take_b) { return _mm256_blendv_ps(a, b, take_b); }
X86_INL rowmask rv_eq(rowv a, rowv b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
X86_INL rowv rv_f16_round(rowv x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)); }
X86_INL rowvi rvi_load(const int *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }
X86_INL rowvi rvi_set1(int x) { return _mm256_set1_epi32(x); }
X86_INL rowvi rvi_sub(rowvi a, rowvi b) { return _mm256_sub_epi32(a, b); }
X86_INL rowvi rvi_min(rowvi a, rowvi b) { return _mm256_min_epi32(a, b); }
X86_INL rowvi rvi_and(rowvi a, rowvi b) { return _mm256_and_si256(a, b); }
X86_INL rowmask rvi_gt(rowvi a, rowvi b) { return _mm256_castsi256_ps(_mm256_cmpgt_epi32(a, b)); }
X86_INL rowmask mask_or(rowmask a, rowmask b) { return _mm256_or_ps(a, b); }
X86_INL rowmask mask_not(rowmask a) { return _mm256_xor_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(-1))); }
X86_INL rowv rv_exp(rowv x) { return exp_ps(x); }
#endif

enum {
    TILE_RV = X86_ZMM ? 4 : 2, /* row vectors of a value register tile: 16 or 8 accumulators */
    TILE_ND = 4,               /* head elements of a value register tile */
    TILE_SRV = 2,              /* row vectors of a score register tile ... */
    TILE_SNJ = 2,              /* ... and keys: four lane chains of it live at once */
};

_Static_assert(PLM_ATTN_TILE_ROWS % TILE_W == 0 && PLM_ATTN_TILE_ROUND % TILE_W == 0,
               "a tile's rows are whole row vectors");

/* One tile in flight: rows padded to whole vectors (the padding rows repeat
 * the last real row, so they need no mask of their own), each with its key
 * range and softmax run. */
typedef struct attn_tile_state {
    int rows, nv, hd;        /* rows: a multiple of TILE_W; nv = rows / TILE_W */
    int kbeg, kend;          /* every row's keys lie in [kbeg, kend) */
    int maxlo, minhi;        /* a block inside [maxlo, minhi) needs no mask */
    float *qt, *ot;          /* [hd][rows] */
    _Alignas(64) float max[PLM_ATTN_TILE_ROWS];
    _Alignas(64) double sum[PLM_ATTN_TILE_ROWS]; /* as plm_softmax_run's: block sums added in double */
    _Alignas(64) int lo[PLM_ATTN_TILE_ROWS];
    _Alignas(64) int hi[PLM_ATTN_TILE_ROWS];
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
    s->rows = (real + TILE_W - 1) / TILE_W * TILE_W, s->nv = s->rows / TILE_W, s->hd = hd;
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
X86_INL void lane_chains(rowv A[TILE_SNJ][TILE_SRV], rowv B[TILE_SNJ][TILE_SRV], const float *kb,
                         const attn_tile_state *s, int h8, int la, int lb, int j, int v, const int RV) {
    const int rows = s->rows, hd = s->hd;
    _Pragma("GCC unroll 4") for (int a = 0; a < TILE_SNJ; a++)
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) A[a][x] = B[a][x] = rv_set1(0.0f);
    for (int d0 = 0; d0 < h8; d0 += 8) {
        const float *qa = s->qt + (size_t)(d0 + la) * rows + v * TILE_W;
        const float *qb = s->qt + (size_t)(d0 + lb) * rows + v * TILE_W;
        rowv va[TILE_SRV], vb[TILE_SRV];
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) va[x] = rv_load(qa + x * TILE_W), vb[x] = rv_load(qb + x * TILE_W);
        _Pragma("GCC unroll 4") for (int a = 0; a < TILE_SNJ; a++) {
            const float *k = kb + (size_t)(j + a) * hd + d0;
            const rowv ka = rv_set1(k[la]), kbb = rv_set1(k[lb]);
            _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) {
                A[a][x] = rv_fmadd(ka, va[x], A[a][x]);
                B[a][x] = rv_fmadd(kbb, vb[x], B[a][x]);
            }
        }
    }
}

/* X = (A + B) + (C + D), the register tiles summed lane by lane (C, D: another pair). */
X86_INL void pair_sum(rowv X[TILE_SNJ][TILE_SRV], rowv A[TILE_SNJ][TILE_SRV], rowv B[TILE_SNJ][TILE_SRV],
                      const int RV) {
    _Pragma("GCC unroll 4") for (int a = 0; a < TILE_SNJ; a++)
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) X[a][x] = rv_add(A[a][x], B[a][x]);
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
    rowv A[TILE_SNJ][TILE_SRV], B[TILE_SNJ][TILE_SRV], P[TILE_SNJ][TILE_SRV], Q[TILE_SNJ][TILE_SRV];
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
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) A[a][x] = rv_set1(0.0f);
    for (int d = h8; d < hd; d++) {
        const float *q = s->qt + (size_t)d * rows + v * TILE_W;
        _Pragma("GCC unroll 4") for (int a = 0; a < TILE_SNJ; a++) {
            const rowv k = rv_set1(kb[(size_t)(j + a) * hd + d]);
            _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) A[a][x] = rv_fmadd(k, rv_load(q + x * TILE_W), A[a][x]);
        }
    }
    const rowv sc = rv_set1(scale);
    _Pragma("GCC unroll 4") for (int a = 0; a < TILE_SNJ; a++)
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) {
            const rowv t = h8 < hd ? rv_add(Q[a][x], A[a][x]) : Q[a][x];
            rv_store(st + (size_t)(j + a) * rows + (v + x) * TILE_W, rv_mul(t, sc));
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
        const rowvi nb = rvi_min(rvi_sub(rvi_load(s->hi + v * TILE_W), rvi_set1(j0)), rvi_set1(bk));
        const rowvi grouped = rvi_and(nb, rvi_set1(~7));
        for (int j = from; j < to; j++) {
            /* the row sums key j alone when grouped <= j (past nb: masked later) */
            const rowmask alone = rvi_gt(rvi_set1(j + 1), grouped);
            float *sj = st + (size_t)j * s->rows + v * TILE_W;
            const float *aj = single + (size_t)j * s->rows + v * TILE_W;
            rv_store(sj, rv_blend(rv_load(sj), rv_load(aj), alone));
        }
    }
}

/* Scores of keys outside a row's range (block keys from j0 on) -> -inf. */
X86_INL void tile_mask(float *st, const attn_tile_state *s, int j0, int nbp) {
    const rowv ninf = rv_set1(-INFINITY);
    for (int v = 0; v < s->nv; v++) {
        const rowvi lo = rvi_load(s->lo + v * TILE_W), hi = rvi_load(s->hi + v * TILE_W);
        for (int j = 0; j < nbp; j++) {
            const rowvi p = rvi_set1(j0 + j);
            /* outside: lo > p or p >= hi, i.e. not (hi > p) */
            const rowmask out = mask_or(rvi_gt(lo, p), mask_not(rvi_gt(hi, p)));
            float *sj = st + (size_t)j * s->rows + v * TILE_W;
            rv_store(sj, rv_blend(rv_load(sj), ninf, out));
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
        float *mx = s->max + v * TILE_W;
        rowv m = rv_load(mx);
        for (int j = 0; j < nbp; j++) m = rv_max(m, rv_load(st + (size_t)j * rows + v * TILE_W));
        _Alignas(64) float shrink[TILE_W], nm[TILE_W], bs[TILE_W];
        rv_store(nm, m);
        for (int i = 0; i < TILE_W; i++) { /* plm_softmax_run_raise */
            shrink[i] = !(nm[i] > mx[i]) ? 1.0f : mx[i] == -INFINITY ? 0.0f : expf(mx[i] - nm[i]);
            mx[i] = nm[i] > mx[i] ? nm[i] : mx[i];
        }
        const rowv sh = rv_load(shrink);
        if (flash)
            for (int d = 0; d < s->hd; d++) {
                float *o = s->ot + (size_t)d * rows + v * TILE_W;
                rv_store(o, rv_mul(rv_load(o), sh));
            }
        m = rv_blend(m, rv_set1(0.0f), rv_eq(m, rv_set1(-INFINITY)));
        rowv lane[8];
        for (int i = 0; i < 8; i++) lane[i] = rv_set1(0.0f);
        for (int j = 0; j < nbp; j++) {
            float *sj = st + (size_t)j * rows + v * TILE_W;
            const rowv e = rv_exp(rv_sub(rv_load(sj), m));
            if (flash) rv_store(sj, e);
            lane[j & 7] = rv_add(lane[j & 7], e);
        }
        rv_store(bs, rv_add(rv_add(rv_add(lane[0], lane[4]), rv_add(lane[2], lane[6])),
                            rv_add(rv_add(lane[1], lane[5]), rv_add(lane[3], lane[7]))));
        double *run = s->sum + v * TILE_W;
        for (int h = 0; h < TILE_W; h += 4) {
            __m256d r = _mm256_mul_pd(_mm256_load_pd(run + h), _mm256_cvtps_pd(_mm_load_ps(shrink + h)));
            /* two roundings, as the run's (its product is stored first):
             * keep the compiler from fusing the multiply into the add */
            __asm__("" : "+x"(r));
            _mm256_store_pd(run + h, _mm256_add_pd(r, _mm256_cvtps_pd(_mm_load_ps(bs + h))));
        }
    }
}

/* The exact mode's weights, f16(exp(s - max) * (1 / sum)) with the
 * complete runs (block_weights, lane by lane). */
X86_INL void tile_weights(float *st, const attn_tile_state *s, int nbp) {
    const int rows = s->rows;
    for (int v = 0; v < s->nv; v++) {
        const rowv m = rv_load(s->max + v * TILE_W);
        _Alignas(64) float inv_sum[TILE_W];
        for (int h = 0; h < TILE_W; h += 4)
            _mm_store_ps(inv_sum + h, _mm256_cvtpd_ps(_mm256_div_pd(_mm256_set1_pd(1.0), _mm256_load_pd(s->sum + v * TILE_W + h))));
        const rowv inv = rv_load(inv_sum);
        for (int j = 0; j < nbp; j++) {
            float *sj = st + (size_t)j * rows + v * TILE_W;
            rv_store(sj, rv_f16_round(rv_mul(rv_exp(rv_sub(rv_load(sj), m)), inv)));
        }
    }
}

/* Ot[d][r] += sum_j v_j[d] Pt[j][r] for d in [d0, d0 + TILE_ND) and row
 * vectors [v, v + RV). */
X86_INL void tile_values_rv(attn_tile_state *s, const float *pt, const float *vb, int nbp, int d0, int v,
                            const int RV) {
    const int rows = s->rows, hd = s->hd;
    rowv acc[TILE_ND][TILE_RV];
    float *o = s->ot + (size_t)d0 * rows + v * TILE_W;
    _Pragma("GCC unroll 8") for (int a = 0; a < TILE_ND; a++)
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) acc[a][x] = rv_load(o + (size_t)a * rows + x * TILE_W);
    const float *p = pt + v * TILE_W, *vj = vb + d0;
    for (int j = 0; j < nbp; j++, p += rows, vj += hd) {
        rowv pv[TILE_RV];
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) pv[x] = rv_load(p + x * TILE_W);
        _Pragma("GCC unroll 8") for (int a = 0; a < TILE_ND; a++) {
            const rowv e = rv_set1(vj[a]);
            _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) acc[a][x] = rv_fmadd(e, pv[x], acc[a][x]);
        }
    }
    _Pragma("GCC unroll 8") for (int a = 0; a < TILE_ND; a++)
        _Pragma("GCC unroll 4") for (int x = 0; x < RV; x++) rv_store(o + (size_t)a * rows + x * TILE_W, acc[a][x]);
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

/* Rows j0..j0+nb-1 of a cache of type `type` -> floats (dequantize.h's
 * arithmetic for Q8_0 / Q4_0, the table's dequantize_row bits), and zeros
 * up to nbp rows. */
X86_INL void tile_stage(float *dst, plm_type type, const void *src, size_t stride, int j0, int nb, int nbp, int hd) {
    const char *rows = (const char *)src + (size_t)j0 * stride;
    if (type == PLM_TYPE_Q8_0)
        for (int j = 0; j < nb; j++) dequantize_32(PLM_TYPE_Q8_0, rows + (size_t)j * stride, dst + (size_t)j * hd, hd);
    else if (type == PLM_TYPE_Q4_0)
        for (int j = 0; j < nb; j++) dequantize_32(PLM_TYPE_Q4_0, rows + (size_t)j * stride, dst + (size_t)j * hd, hd);
    else
        stage_rows(dst, rows, stride, nb, hd);
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
            tile_stage(kst, t->type_k, t->k, t->k_stride, j0, nb, nbp, hd);
            tile_scores(sb, single, kst, s, j0, bk, nbp, t->scale);
            if (j0 < s->maxlo || j0 + nbp > s->minhi) tile_mask(sb, s, j0, nbp);
        }
        if (pass == 2) tile_weights(sb, s, nbp);
        else tile_softmax(sb, s, nbp, pass == 0);
        if (values) {
            tile_stage(vst, t->type_v, t->v, t->v_stride, j0, nb, nbp, hd);
            tile_values(s, sb, vst, nbp);
        }
    }
}

X86_TARGET static void X86_FN(attn_tile)(const plm_attn_tile *t) {
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
