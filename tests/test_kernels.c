/*
 * Every kernel table this CPU can run (plm_kernels_list) against the scalar
 * reference table, on random data:
 *
 *  - quantize_row for the activation formats (Q8_0, Q8_1, Q8_K) and F16
 *    (the KV cache's rows): the SIMD quantizers are meant to be
 *    bit-identical to the reference for finite input (F16 also for inf and
 *    NaN), so bytes are compared exactly.
 *  - vec_dot for every supported weight type, rows of 1..9 blocks (and
 *    odd lengths for the float types), weights from random bytes (every
 *    code, including Q8_0's -128) with sane random scales, activations from
 *    the reference quantizer.
 *  - gemm and plm_matmul: n_tok 1..9 and 17 (not multiples of any tile),
 *    row ranges that split 37 rows unevenly, an out_stride wider than the
 *    rows; outputs outside the requested rows/tokens must stay untouched.
 *  - gemm_exact / plm_matmul_exact: bit for bit the same table's vec_dot
 *    (memcmp), 1..17 tokens, rows of 1..9 blocks.
 *  - gemm at prefill size: k = 4352 and 137 tokens, so a blocked gemm must
 *    cross k slices and token groups (the AVX-512 panels cut k every 1024
 *    elements and tokens every 128), on 21 rows (a ragged 16-row panel).
 *  - gemm_repacked (row-interleaved Q4_0/Q5_0/Q8_0/IQ4_NL/Q4_K/Q5_K/Q6_K/IQ4_XS,
 *    quant/repack.h): the reference on repacked rows (plm_repack_gather
 *    for the newer types) must equal the reference vec_dot on the
 *    original rows bit for bit (which checks the layout too), and every
 *    table's version must be close to it; k up to 296 blocks (past the
 *    x86 k slice of 256) or 37 super-blocks (past 32), 1..17 tokens, row
 *    ranges of whole groups.
 *
 * Tolerance: |simd - ref| <= 2e-5 * sum_j |w_j * a_j| + 1e-30, with w and a
 * the dequantized weight and activation rows.  Both sides sum the same exact
 * integer block totals; they differ only in the float scaling and summation
 * order (a few ulps of the block terms), which the bound covers with a wide
 * margin while any wrong code, scale or offset shows up as an error of the
 * order of the sum itself.  For K-quants with mins the block terms can
 * exceed sum|w*a| (d*sc*q and dmin*m partly cancel inside w), so the
 * magnitude there also counts |d*sc*q*a| + |dmin*m*a| via sum|w*a| of the
 * two parts, approximated by sum |w|*|a| + 2*dmin*m*|a| (see k_extra).
 */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/attn_quant.h"
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/quant.h"
#include "quant/repack.h"
#include "test.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static float rng_uniform(void) { return (rng_u32() >> 8) * (1.0f / 16777216.0f); }

static float rng_sym(void) { return 2.0f * rng_uniform() - 1.0f; }

static const plm_type weight_types[] = {
    PLM_TYPE_Q4_0, PLM_TYPE_Q8_0, PLM_TYPE_Q4_K, PLM_TYPE_Q6_K, PLM_TYPE_Q5_K,
    PLM_TYPE_Q5_0, PLM_TYPE_Q3_K, PLM_TYPE_Q2_K, PLM_TYPE_IQ4_NL, PLM_TYPE_IQ4_XS,
    PLM_TYPE_Q4_1, PLM_TYPE_Q5_1, PLM_TYPE_F16, PLM_TYPE_BF16, PLM_TYPE_F32,
    PLM_TYPE_IQ2_XXS, PLM_TYPE_IQ2_XS, PLM_TYPE_IQ2_S, PLM_TYPE_IQ3_XXS, PLM_TYPE_IQ3_S,
    PLM_TYPE_IQ1_S, PLM_TYPE_IQ1_M, PLM_TYPE_TQ1_0, PLM_TYPE_TQ2_0, PLM_TYPE_MXFP4,
};
enum { N_WTYPES = (int)(sizeof weight_types / sizeof weight_types[0]) };

/* Byte offsets of the f16 scale fields of each block type (-1 ends). */
static void scale_offsets(plm_type t, int off[3]) {
    off[0] = off[1] = off[2] = -1;
    switch (t) {
    case PLM_TYPE_Q4_0: off[0] = offsetof(block_q4_0, d); break;
    case PLM_TYPE_Q4_1: off[0] = offsetof(block_q4_1, d); off[1] = offsetof(block_q4_1, m); break;
    case PLM_TYPE_Q5_0: off[0] = offsetof(block_q5_0, d); break;
    case PLM_TYPE_Q5_1: off[0] = offsetof(block_q5_1, d); off[1] = offsetof(block_q5_1, m); break;
    case PLM_TYPE_Q8_0: off[0] = offsetof(block_q8_0, d); break;
    case PLM_TYPE_Q2_K: off[0] = offsetof(block_q2_K, d); off[1] = offsetof(block_q2_K, dmin); break;
    case PLM_TYPE_Q3_K: off[0] = offsetof(block_q3_K, d); break;
    case PLM_TYPE_Q4_K: off[0] = offsetof(block_q4_K, d); off[1] = offsetof(block_q4_K, dmin); break;
    case PLM_TYPE_Q5_K: off[0] = offsetof(block_q5_K, d); off[1] = offsetof(block_q5_K, dmin); break;
    case PLM_TYPE_Q6_K: off[0] = offsetof(block_q6_K, d); break;
    case PLM_TYPE_IQ4_NL: off[0] = offsetof(block_iq4_nl, d); break;
    case PLM_TYPE_IQ4_XS: off[0] = offsetof(block_iq4_xs, d); break;
    case PLM_TYPE_IQ2_XXS: case PLM_TYPE_IQ2_XS: case PLM_TYPE_IQ2_S: case PLM_TYPE_IQ3_XXS:
    case PLM_TYPE_IQ3_S: case PLM_TYPE_IQ1_S: off[0] = 0; break;  /* they lead with d */
    case PLM_TYPE_TQ1_0: off[0] = offsetof(block_tq1_0, d); break;
    case PLM_TYPE_TQ2_0: off[0] = offsetof(block_tq2_0, d); break;
    default: break;  /* IQ1_M and MXFP4: see odd_scales */
    }
}

/* The scales that are not an f16 field: MXFP4's E8M0 exponent (kept
 * near 2^0, an occasional subnormal 2^-128 / 2^-127) and IQ1_M's f16
 * spread over the top nibbles of its four u16 sub-block scales. */
static void odd_scales(plm_type t, uint8_t *b) {
    if (t == PLM_TYPE_MXFP4) {
        b[0] = (uint8_t)(rng_u32() % 16 == 0 ? rng_u32() % 2 : 118 + rng_u32() % 10);
    } else if (t == PLM_TYPE_IQ1_M) {
        const plm_fp16_t h = plm_fp32_to_fp16((0.01f + rng_uniform()) * 0.05f);
        block_iq1_m *m = (block_iq1_m *)b;
        for (int k = 0; k < 4; k++)
            m->scales[2 * k + 1] = (uint8_t)((m->scales[2 * k + 1] & 0x0f) | (((h >> (4 * k)) & 15) << 4));
    }
}

/* A random row of n elements of type t into w (plm_row_size bytes). */
static void random_weights(plm_type t, int64_t n, void *w) {
    const plm_type_info *ti = plm_type_info_get(t);
    const size_t bytes = plm_row_size(t, n);
    if (ti->block_size == 1) {
        static float x[8192];
        REQUIRE_VOID(n <= 8192, "random_weights: row of %lld", (long long)n);
        for (int64_t i = 0; i < n; i++) x[i] = rng_sym();
        plm_get_quantize(t)(x, w, n);
        return;
    }
    uint8_t *p = w;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rng_u32();
    int off[3];
    scale_offsets(t, off);
    for (int64_t b = 0; b < n / ti->block_size; b++) {
        for (int j = 0; j < 3 && off[j] >= 0; j++) {
            const plm_fp16_t h = plm_fp32_to_fp16((0.01f + rng_uniform()) * 0.05f);
            memcpy(p + b * ti->type_size + off[j], &h, 2);
        }
        odd_scales(t, p + b * ti->type_size);
    }
}

/* Random activations: mostly uniform, some blocks scaled far down or up,
 * the odd exact zero block. */
static void random_floats(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = rng_sym();
    for (int64_t b = 0; b + 32 <= n; b += 32) {
        const uint32_t r = rng_u32() % 8;
        for (int j = 0; j < 32; j++) {
            if (r == 0) x[b + j] *= 1e-3f;
            else if (r == 1) x[b + j] *= 100.0f;
            else if (r == 2) x[b + j] = 0.0f;
            else if (r == 3) x[b + j] = (float)((int)(x[b + j] * 8)) * 0.5f; /* exact halves */
        }
    }
}

enum { RP_MAXK_ELEMS = 37 * 256 }; /* test_repacked's longest row (Q4_K) */

/* sum |w_j a_j| over dequantized rows. */
static double magnitude(plm_type wt, const void *w, plm_type at, const void *a, int64_t n) {
    static float fw[RP_MAXK_ELEMS], fa[RP_MAXK_ELEMS]; /* the longest row of any test here */
    plm_kernels_ref()->dequantize_row[wt](w, fw, n);
    plm_kernels_ref()->dequantize_row[at](a, fa, n);
    double m = 0;
    for (int64_t i = 0; i < n; i++) m += fabs((double)fw[i] * fa[i]);
    /* K-quants with mins: the reference's block terms are d*sum(sc*q*a) and
     * dmin*sum(m*a) separately; bound them by the same sum with |w| replaced
     * by |w| + 2*max block offset (generous). */
    if (wt == PLM_TYPE_Q2_K || wt == PLM_TYPE_Q4_K || wt == PLM_TYPE_Q5_K) {
        double off = 0;
        for (int64_t i = 0; i < n; i++) off += fabs((double)fa[i]);
        const plm_type_info *ti = plm_type_info_get(wt);
        const uint8_t *p = w;
        double dmax = 0;
        for (int64_t b = 0; b < n / QK_K; b++) {
            plm_fp16_t h;
            memcpy(&h, p + b * ti->type_size + (wt == PLM_TYPE_Q2_K ? 82 : 2), 2);
            dmax = fmax(dmax, fabs(plm_fp16_to_fp32(h)) * 63);
        }
        m += 2 * dmax * off;
    }
    return m;
}

static int close_enough(float got, float want, double mag) {
    return fabs((double)got - (double)want) <= 2e-5 * mag + 1e-30;
}

/* ---- quantize_row ----------------------------------------------------------- */

static void test_quantize(const plm_kernels *kt) {
    const plm_kernels *ref = plm_kernels_ref();
    const plm_type at[] = {PLM_TYPE_Q8_0, PLM_TYPE_Q8_1, PLM_TYPE_Q8_K, PLM_TYPE_F16};
    /* F16 (the cache's rows): around the rounding and range edges, NaN too */
    const float edges[] = {65504.0f, 65519.99f, 65520.0f, -1e9f, INFINITY, NAN, -0.0f, 6e-8f,
                           2.98e-8f, 2.9802322e-8f, 3e-5f, 6.1e-5f, 1.0009766f, 1.00146484f, -2.0004883f};
    static float x[4096];
    static uint8_t a[8192], b[8192];
    for (int i = 0; i < 4; i++) {
        const plm_type t = at[i];
        const int bs = t == PLM_TYPE_F16 ? 37 : (int)plm_type_info_get(t)->block_size; /* F16: odd tails */
        int bad = 0;
        for (int rep = 0; rep < 40; rep++) {
            const int64_t n = (int64_t)bs * (1 + rep % 9);
            random_floats(x, n);
            if (rep == 5) for (int64_t j = 0; j < n; j++) x[j] = 0.0f;
            if (rep == 6) for (int64_t j = 0; j < n; j++) x[j] = (float)(j % 7) - 3.0f; /* ties */
            if (rep == 7 && t == PLM_TYPE_F16)
                for (int64_t j = 0; j < n; j++) x[j] = edges[j % (int64_t)(sizeof edges / sizeof edges[0])];
            const size_t bytes = plm_row_size(t, n);
            memset(a, 0xa5, bytes + 16);
            memset(b, 0x5a, bytes + 16);
            ref->quantize_row[t](x, a, n);
            kt->quantize_row[t](x, b, n);
            if (memcmp(a, b, bytes) != 0 || b[bytes] != 0x5a) bad++;
        }
        CHECK(bad == 0, "%s quantize_row %s: %d of 40 rows differ from ref", kt->name,
              plm_type_name(t), bad);
    }
}

/* ---- vec_dot ------------------------------------------------------------------ */

static void test_vec_dot(const plm_kernels *kt, plm_type wt) {
    const plm_kernels *ref = plm_kernels_ref();
    const plm_type_info *ti = plm_type_info_get(wt);
    const plm_type at = ti->vec_dot_type;
    static uint8_t w[16384], a[16384];
    static float x[4096];
    int bad = 0, runs = 0;
    double worst = 0;
    for (int nb = 1; nb <= 9; nb++) {
        for (int rep = 0; rep < 6; rep++) {
            int64_t n = (int64_t)ti->block_size * nb;
            if (ti->block_size == 1) n = (int64_t[]){1, 7, 8, 9, 31, 33, 64, 100, 257}[nb - 1] + rep;
            random_weights(wt, n, w);
            random_floats(x, n);
            ref->quantize_row[at](x, a, n);
            float want = 0, got = 0;
            ref->vec_dot[wt](n, &want, w, a);
            kt->vec_dot[wt](n, &got, w, a);
            const double mag = magnitude(wt, w, at, a, n);
            runs++;
            if (mag > 0) worst = fmax(worst, fabs((double)got - want) / mag);
            if (!close_enough(got, want, mag)) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s vec_dot %s n=%lld: got %.9g want %.9g (mag %.3g)\n", kt->name,
                            ti->name, (long long)n, got, want, mag);
            }
        }
    }
    CHECK(bad == 0, "%s vec_dot %s: %d of %d mismatches (worst rel %.3g)", kt->name, ti->name, bad,
          runs, worst);
    printf("  %-6s vec_dot %-6s worst |err|/sum|w*a| = %.2g\n", kt->name, ti->name, worst);
}

/* ---- gemm / plm_matmul ---------------------------------------------------- */

enum { ROWS = 37, MAX_TOK = 17, OUT_STRIDE = ROWS + 3 };

static void test_gemm(const plm_kernels *kt, plm_type wt) {
    const plm_kernels *ref = plm_kernels_ref();
    const plm_type_info *ti = plm_type_info_get(wt);
    const plm_type at = ti->vec_dot_type;
    const int nbs[] = {1, 2, 3, 5, 9};
    static const int toks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 17}; /* 13: >= 2 token tiles + a tail */
    static uint8_t w[ROWS * 9 * 292], a[MAX_TOK * (9 * 292 + 8)];
    static float x[9 * 256], out[MAX_TOK * OUT_STRIDE], want[MAX_TOK * OUT_STRIDE];
    static double mag[MAX_TOK * OUT_STRIDE];
    int bad = 0, runs = 0;
    for (int ib = 0; ib < 5; ib++) {
        const int64_t k = (ti->block_size == 1 ? 33 : (int64_t)ti->block_size) * nbs[ib];
        const size_t wrow = plm_row_size(wt, k), arow = plm_row_size(at, k) + 8; /* padded, aligned stride */
        for (int r = 0; r < ROWS; r++) random_weights(wt, k, w + r * wrow);
        for (int t = 0; t < MAX_TOK; t++) {
            random_floats(x, k);
            ref->quantize_row[at](x, a + t * arow, k);
        }
        for (int t = 0; t < MAX_TOK; t++)
            for (int r = 0; r < ROWS; r++) {
                ref->vec_dot[wt](k, &want[t * OUT_STRIDE + r], w + r * wrow, a + t * arow);
                mag[t * OUT_STRIDE + r] = magnitude(wt, w + r * wrow, at, a + t * arow, k);
            }
        for (int it = 0; it < (int)(sizeof toks / sizeof toks[0]); it++) {
            const int nt = toks[it];
            /* three uneven row ranges, as a thread pool might hand out */
            const int64_t cut[4] = {0, 5, 22, ROWS};
            for (int i = 0; i < MAX_TOK * OUT_STRIDE; i++) out[i] = -12345.0f;
            for (int c = 0; c < 3; c++)
                plm_matmul(kt, wt, w, k, cut[c], cut[c + 1], a, arow, nt, out, OUT_STRIDE);
            for (int t = 0; t < MAX_TOK; t++)
                for (int r = 0; r < OUT_STRIDE; r++) {
                    const int i = t * OUT_STRIDE + r;
                    runs++;
                    int ok;
                    if (t < nt && r < ROWS) ok = close_enough(out[i], want[i], mag[i]);
                    else ok = out[i] == -12345.0f;
                    if (!ok && bad++ < 3)
                        fprintf(stderr, "  %s matmul %s k=%lld n_tok=%d: out[t=%d][r=%d] = %.9g want %.9g\n",
                                kt->name, ti->name, (long long)k, nt, t, r, out[i],
                                (t < nt && r < ROWS) ? want[i] : -12345.0f);
                }
            /* the gemm entry itself, on an odd sub-range */
            if (kt->gemm[wt]) {
                for (int i = 0; i < MAX_TOK * OUT_STRIDE; i++) out[i] = -12345.0f;
                kt->gemm[wt](k, w + 3 * wrow, wrow, ROWS - 4, a, arow, nt, out + 3, OUT_STRIDE);
                for (int t = 0; t < nt; t++)
                    for (int r = 3; r < ROWS - 1; r++) {
                        const int i = t * OUT_STRIDE + r;
                        runs++;
                        if (!close_enough(out[i], want[i], mag[i]) && bad++ < 3)
                            fprintf(stderr, "  %s gemm %s k=%lld n_tok=%d: [t=%d][r=%d] %.9g want %.9g\n",
                                    kt->name, ti->name, (long long)k, nt, t, r, out[i], want[i]);
                    }
                CHECK(out[2] == -12345.0f && out[ROWS - 1] == -12345.0f,
                      "%s gemm %s wrote outside its rows", kt->name, ti->name);
            }
        }
    }
    CHECK(bad == 0, "%s matmul/gemm %s: %d of %d outputs wrong", kt->name, ti->name, bad, runs);
}

/* gemm_exact and plm_matmul_exact: every output bit for bit the table's own
 * vec_dot of its row and token (not merely close: greedy speculative
 * verification relies on it), for rows of 1..9 blocks (groups of four
 * blocks and 0-3 block tails), 1..17 tokens (whole and partial token
 * tiles), an odd row sub-range; outputs outside it stay untouched.  Tables
 * without gemm_exact for a type check plm_matmul_exact's vec_dot loop. */
static void test_gemm_exact(const plm_kernels *kt, plm_type wt) {
    const plm_type_info *ti = plm_type_info_get(wt);
    const plm_type at = ti->vec_dot_type;
    const int nbs[] = {1, 3, 4, 5, 8, 9};
    static uint8_t w[ROWS * 9 * 292], a[MAX_TOK * (9 * 292 + 8)];
    static float x[9 * 256], out[MAX_TOK * OUT_STRIDE], want[MAX_TOK * OUT_STRIDE];
    int bad = 0, runs = 0;
    for (int ib = 0; ib < 6; ib++) {
        const int64_t k = (ti->block_size == 1 ? 33 : (int64_t)ti->block_size) * nbs[ib];
        const size_t wrow = plm_row_size(wt, k), arow = plm_row_size(at, k) + 8;
        for (int r = 0; r < ROWS; r++) random_weights(wt, k, w + r * wrow);
        for (int t = 0; t < MAX_TOK; t++) {
            random_floats(x, k);
            kt->quantize_row[at](x, a + t * arow, k);
        }
        for (int t = 0; t < MAX_TOK; t++)
            for (int r = 0; r < ROWS; r++) kt->vec_dot[wt](k, &want[t * OUT_STRIDE + r], w + r * wrow, a + t * arow);
        for (int nt = 1; nt <= MAX_TOK; nt++) {
            for (int i = 0; i < MAX_TOK * OUT_STRIDE; i++) out[i] = -12345.0f;
            plm_matmul_exact(kt, wt, w, k, 3, ROWS - 1, a, arow, nt, out, OUT_STRIDE);
            for (int t = 0; t < MAX_TOK; t++)
                for (int r = 0; r < OUT_STRIDE; r++) {
                    const int i = t * OUT_STRIDE + r;
                    const bool inside = t < nt && r >= 3 && r < ROWS - 1;
                    const float expect = inside ? want[i] : -12345.0f;
                    runs++;
                    if (memcmp(&out[i], &expect, sizeof expect) != 0 && bad++ < 3)
                        fprintf(stderr, "  %s matmul_exact %s k=%lld n_tok=%d: out[t=%d][r=%d] = %.9g want %.9g\n",
                                kt->name, ti->name, (long long)k, nt, t, r, out[i], expect);
                }
        }
    }
    CHECK(bad == 0, "%s matmul_exact %s (%s): %d of %d outputs not bit-identical to vec_dot", kt->name, ti->name,
          kt->gemm_exact[wt] ? "gemm_exact" : "vec_dot loop", bad, runs);
}

/* The decode matvec (a table's gemv, through plm_matmul with one token):
 * bit for bit the table's vec_dot on rows long enough for every path of
 * the AVX-512 kernels (the activation prepared on the stack up to 16384
 * columns, the row loop beyond; 0-3 block tails), and as short as the
 * attention heads whose keys it scores over a quantized cache (64, 96), an
 * odd row range, the outputs outside it untouched. */
enum { GEMV_ROWS = 6, GEMV_MAXK = 16384 + 256 };

static void test_gemv(const plm_kernels *kt, plm_type wt) {
    const plm_type_info *ti = plm_type_info_get(wt);
    const int64_t ks[] = {64, 96, 256, 1152, 1184, 16384, 16384 + 128, 16384 + 160, GEMV_MAXK};
    static uint8_t w[GEMV_ROWS * GEMV_MAXK * 2], a[GEMV_MAXK * 2];
    static float x[GEMV_MAXK];
    if (!kt->gemv[wt]) return;
    int bad = 0;
    for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ik++) {
        const int64_t k = ks[ik];
        if (k % ti->block_size != 0 || ti->block_size == 1) continue; /* float rows: random_weights' 8192 */
        const size_t wrow = plm_row_size(wt, k);
        for (int r = 0; r < GEMV_ROWS; r++) random_weights(wt, k, w + r * wrow);
        random_floats(x, k);
        kt->quantize_row[ti->vec_dot_type](x, a, k);
        float out[GEMV_ROWS], want[GEMV_ROWS];
        for (int r = 0; r < GEMV_ROWS; r++) {
            out[r] = -12345.0f;
            kt->vec_dot[wt](k, &want[r], w + r * wrow, a);
        }
        want[0] = want[GEMV_ROWS - 1] = -12345.0f;
        plm_matmul(kt, wt, w, k, 1, GEMV_ROWS - 1, a, 0, 1, out, 0);
        for (int r = 0; r < GEMV_ROWS; r++)
            if (memcmp(&out[r], &want[r], sizeof *out) != 0 && bad++ < 3)
                fprintf(stderr, "  %s gemv %s k=%lld: out[%d] = %.9g want %.9g\n", kt->name, ti->name, (long long)k,
                        r, out[r], want[r]);
    }
    CHECK(bad == 0, "%s gemv %s: %d outputs not bit-identical to vec_dot", kt->name, ti->name, bad);
}

/* Prefill-sized products: several k slices, token groups and row panels. */
enum { BIG_K = 4352, BIG_ROWS = 21, BIG_TOK = 137 };

static void test_gemm_large(const plm_kernels *kt, plm_type wt) {
    const plm_kernels *ref = plm_kernels_ref();
    const plm_type_info *ti = plm_type_info_get(wt);
    const plm_type at = ti->vec_dot_type;
    const size_t wrow = plm_row_size(wt, BIG_K), arow = plm_row_size(at, BIG_K);
    static uint8_t w[BIG_ROWS * BIG_K * 4], a[BIG_TOK * BIG_K * 4];
    static float x[BIG_K], out[BIG_TOK * BIG_ROWS];
    if (!kt->gemm[wt] || wrow == 0) return;
    for (int r = 0; r < BIG_ROWS; r++) random_weights(wt, BIG_K, w + r * wrow);
    for (int t = 0; t < BIG_TOK; t++) {
        random_floats(x, BIG_K);
        ref->quantize_row[at](x, a + t * arow, BIG_K);
    }
    plm_matmul(kt, wt, w, BIG_K, 0, BIG_ROWS, a, arow, BIG_TOK, out, BIG_ROWS);
    int bad = 0;
    for (int t = 0; t < BIG_TOK; t++)
        for (int r = 0; r < BIG_ROWS; r++) {
            float want;
            ref->vec_dot[wt](BIG_K, &want, w + r * wrow, a + t * arow);
            const double mag = magnitude(wt, w + r * wrow, at, a + t * arow, BIG_K);
            if (!close_enough(out[t * BIG_ROWS + r], want, mag) && bad++ < 3)
                fprintf(stderr, "  %s gemm %s k=%d: [t=%d][r=%d] %.9g want %.9g\n", kt->name, ti->name, BIG_K, t,
                        r, out[t * BIG_ROWS + r], want);
        }
    CHECK(bad == 0, "%s gemm %s at k=%d, %d tokens: %d outputs wrong", kt->name, ti->name, BIG_K, BIG_TOK, bad);
}

/* ---- row-interleaved weights ---------------------------------------------- */

enum { RP_ROWS = 48, RP_OUT = RP_ROWS + 5, RP_MAXK = RP_MAXK_ELEMS };

static void test_repacked(const plm_kernels *kt, plm_type wt) {
    const plm_kernels *ref = plm_kernels_ref();
    const plm_type_info *ti = plm_type_info_get(wt);
    const plm_type at = ti->vec_dot_type;
    const bool k_quant = ti->block_size == QK_K;
    /* forward.c gathers a repacked embedding row a block at a time into a buffer of this size */
    REQUIRE_VOID(ti->type_size <= PLM_REPACK_MAX_BLOCK_BYTES && ti->type_size <= sizeof(block_q6_K),
                 "repacked %s: a %u-byte block is larger than the gather buffers (PLM_REPACK_MAX_BLOCK_BYTES, "
                 "block_q6_K)", ti->name, ti->type_size);
    /* past the x86 k slices: 256 blocks of 32, 32 super-blocks */
    const int nbs[] = {1, 3, 9, k_quant ? 37 : 296}, toks[] = {1, 2, 3, 8, 9, 17};
    static uint8_t w[RP_ROWS * RP_MAXK * 34 / 32], wr[RP_ROWS * RP_MAXK * 34 / 32], a[MAX_TOK * RP_MAXK / 256 * 292]; /* Q8_K rows are the longest */
    static float x[RP_MAXK], out[MAX_TOK * RP_OUT], want[MAX_TOK * RP_OUT];
    static double mag[MAX_TOK * RP_OUT];
    int bad = 0, inexact = 0, runs = 0, gathered = 0;
    for (int ib = 0; ib < 4; ib++) {
        const int64_t k = (int64_t)ti->block_size * nbs[ib];
        const size_t wrow = plm_row_size(wt, k), arow = plm_row_size(at, k);
        for (int r = 0; r < RP_ROWS; r++) random_weights(wt, k, w + r * wrow);
        plm_repack_rows(wt, k, RP_ROWS, w, wr);
        for (int r = 0; r < RP_ROWS; r++) /* the layout gives every block back as it was */
            for (int b = 0; b < nbs[ib]; b++) {
                uint8_t back[sizeof(block_q6_K)];
                plm_repack_row_block(wt, wr, wrow, r, b, back);
                gathered += memcmp(back, w + r * wrow + (size_t)b * ti->type_size, ti->type_size) != 0;
            }
        for (int t = 0; t < MAX_TOK; t++) {
            random_floats(x, k);
            ref->quantize_row[at](x, a + t * arow, k);
            for (int r = 0; r < RP_ROWS; r++) {
                ref->vec_dot[wt](k, &want[t * RP_OUT + r], w + r * wrow, a + t * arow);
                mag[t * RP_OUT + r] = magnitude(wt, w + r * wrow, at, a + t * arow, k);
            }
        }
        for (int it = 0; it < 6; it++) {
            const int nt = toks[it];
            for (int pass = 0; pass < 2; pass++) { /* the reference, then this table */
                const plm_kernels *use = pass ? kt : ref;
                for (int i = 0; i < MAX_TOK * RP_OUT; i++) out[i] = -12345.0f;
                plm_matmul_repacked(use, wt, wr, k, 0, 16, a, arow, nt, out, RP_OUT);
                plm_matmul_repacked(use, wt, wr, k, 16, RP_ROWS, a, arow, nt, out, RP_OUT);
                for (int t = 0; t < MAX_TOK; t++)
                    for (int r = 0; r < RP_OUT; r++) {
                        const int i = t * RP_OUT + r;
                        const bool in = t < nt && r < RP_ROWS;
                        runs++;
                        if (pass == 0 && in && out[i] != want[i] && inexact++ < 3)
                            fprintf(stderr, "  ref repacked %s k=%lld: [t=%d][r=%d] %.9g want exactly %.9g\n",
                                    ti->name, (long long)k, t, r, out[i], want[i]);
                        const int ok = in ? close_enough(out[i], want[i], mag[i]) : out[i] == -12345.0f;
                        if (!ok && bad++ < 3)
                            fprintf(stderr, "  %s repacked %s k=%lld n_tok=%d: [t=%d][r=%d] %.9g want %.9g\n",
                                    use->name, ti->name, (long long)k, nt, t, r, out[i], in ? want[i] : -12345.0f);
                    }
            }
        }
    }
    CHECK(gathered == 0, "repacked %s: %d blocks not given back by plm_repack_row_block", ti->name, gathered);
    CHECK(inexact == 0, "ref repacked %s differs from the plain rows' vec_dot", ti->name);
    CHECK(bad == 0, "%s repacked %s: %d of %d outputs wrong", kt->name, ti->name, bad, runs);
}

static void test_select(const plm_kernels **list, int n) {
    CHECK(plm_kernels_select("ref") == plm_kernels_ref(), "select(ref)");
    CHECK(plm_kernels_select("no-such-kernels") == NULL, "unknown name must give NULL");
    CHECK(n >= 1 && list[n - 1] == plm_kernels_ref(), "ref must be listed last");
    for (int i = 0; i < n; i++) {
        CHECK(plm_kernels_select(list[i]->name) == list[i], "select(%s)", list[i]->name);
        /* complete tables: every supported weight type has a vec_dot,
         * every vec_dot type a quantizer and every type a dequantizer */
        for (int j = 0; j < N_WTYPES; j++) {
            const plm_type t = weight_types[j];
            const plm_type at = plm_type_info_get(t)->vec_dot_type;
            CHECK(list[i]->vec_dot[t] && list[i]->quantize_row[at] && list[i]->dequantize_row[t],
                  "%s: table incomplete for %s", list[i]->name, plm_type_name(t));
        }
    }
}

/* Attention over an f16 cache against a softmax written out here in double
 * (two passes, every score kept), not against the reference: every table,
 * the reference too, must agree with it.  In exact mode the weights are
 * rounded to f16 as llama.cpp rounds them (a weight computed in f32 may
 * round the other way: one f16 step of the largest weight is allowed).  Key
 * counts cross the online softmax's block edges; rising key norms make the
 * running max rise from block to block, so the rescaling is exercised; head
 * sizes are and are not multiples of the SIMD width. */
enum { AT_MAXD = 200, AT_MAXK = 300, AT_MAXQ = 8, AT_STRIDE = (AT_MAXD + 3) * 2 };

/* Output element i of one head; *tol gets the allowance for that element. */
static double softmax_attention(const uint16_t *q, const uint8_t *kc, const uint8_t *vc, int nk, int hd, float scale,
                                int i, bool flash, double *tol) {
    static double s[AT_MAXK];
    double max = -INFINITY, sum = 0, o = 0, mag = 0, wmax = 0, flips = 0;
    for (int j = 0; j < nk; j++) {
        const uint16_t *kj = (const uint16_t *)(const void *)(kc + j * AT_STRIDE);
        double d = 0;
        for (int e = 0; e < hd; e++) d += (double)plm_fp16_to_fp32(q[e]) * plm_fp16_to_fp32(kj[e]);
        s[j] = d * scale;
        if (s[j] > max) max = s[j];
    }
    for (int j = 0; j < nk; j++) sum += exp(s[j] - max);
    for (int j = 0; j < nk; j++) {
        const double v = plm_fp16_to_fp32(((const uint16_t *)(const void *)(vc + j * AT_STRIDE))[i]);
        double w = exp(s[j] - max) / sum;
        if (!flash) {
            /* A weight within the kernel's f32 error of an f16 rounding
             * boundary may round to the other side there: one f16 step of
             * it, for each such key. */
            const plm_fp16_t lo = plm_fp32_to_fp16((float)(w * (1 - 1e-5)));
            if (lo != plm_fp32_to_fp16((float)(w * (1 + 1e-5))))
                flips += (plm_fp16_to_fp32((plm_fp16_t)(lo + 1)) - plm_fp16_to_fp32(lo)) * fabs(v);
            w = plm_fp16_to_fp32(plm_fp32_to_fp16((float)w));
        }
        o += w * v;
        if (fabs(v) > mag) mag = fabs(v);
        if (w > wmax) wmax = w;
    }
    *tol = 1e-5 * (mag + 1) * (1 + hd / 16) + (flash ? 0 : wmax * mag / 2048 + flips);
    return o;
}

/* Random query heads, and nk keys (later ones scoring higher) and values. */
static void attention_inputs(uint16_t *q, uint8_t *kc, uint8_t *vc, int nq, int nk, int hd) {
    static float x[AT_MAXQ * AT_MAXD];
    for (int e = 0; e < nq * hd; e++) x[e] = rng_sym();
    plm_fp32_to_fp16_row(x, q, nq * hd);
    for (int j = 0; j < nk; j++) {
        const float grow = 1.0f + 3.0f * (float)j / (float)nk; /* later keys score higher */
        for (int e = 0; e < hd; e++) x[e] = rng_sym() * grow;
        plm_fp32_to_fp16_row(x, (uint16_t *)(void *)(kc + j * AT_STRIDE), hd);
        for (int e = 0; e < hd; e++) x[e] = rng_sym();
        plm_fp32_to_fp16_row(x, (uint16_t *)(void *)(vc + j * AT_STRIDE), hd);
    }
}

/* Outputs of the nq heads off the double-precision softmax; the first few
 * of the run's (*bad before) printed under `what`. */
static void count_off_softmax(const char *what, const float *o, const uint16_t *q, const uint8_t *kc, const uint8_t *vc,
                              int nq, int nk, int hd, float scale, bool flash, int *bad) {
    for (int h = 0; h < nq; h++)
        for (int i = 0; i < hd; i++) {
            double tol;
            const double want = softmax_attention(q + h * hd, kc, vc, nk, hd, scale, i, flash, &tol);
            if (fabs(o[h * hd + i] - want) <= tol) continue;
            if ((*bad)++ < 5)
                fprintf(stderr, "  %s %s hd=%d keys=%d heads=%d [%d][%d]: %.7g want %.7g\n", what,
                        flash ? "flash" : "exact", hd, nk, nq, h, i, o[h * hd + i], want);
        }
}

static void test_attention_f16(const plm_kernels *kt) {
    /* 48, 96: AVX-512's values in tiles of 2 + 1 and 4 + 2 vectors */
    const int dims[] = {1, 7, 8, 16, 31, 48, 64, 96, 128, 200};
    const int keys[] = {1, 3, 5, 33, 64, 65, 130, 300};
    const int nqs[] = {1, 3, 8};
    static uint8_t kc[AT_MAXK * AT_STRIDE], vc[AT_MAXK * AT_STRIDE];
    static float o[AT_MAXQ * AT_MAXD];
    static uint16_t q[AT_MAXQ * AT_MAXD];
    char what[64];
    snprintf(what, sizeof what, "%s attn_f16", kt->name);
    int bad = 0;
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (size_t kk = 0; kk < sizeof keys / sizeof keys[0]; kk++)
            for (size_t qq = 0; qq < sizeof nqs / sizeof nqs[0]; qq++)
                for (int flash = 0; flash < 2; flash++) {
                    const int hd = dims[d], nk = keys[kk], nq = nqs[qq];
                    const float scale = 1.0f / sqrtf((float)hd);
                    attention_inputs(q, kc, vc, nq, nk, hd);
                    kt->attn_f16(o, q, nq, kc, vc, AT_STRIDE, AT_STRIDE, nk, hd, scale, flash);
                    count_off_softmax(what, o, q, kc, vc, nq, nk, hd, scale, flash, &bad);
                }
    CHECK(bad == 0, "%s attn_f16: %d outputs off the double-precision softmax", kt->name, bad);
}

/* The split's stages in the order threads may take them: each head on its
 * own, stage 1 of its runs last first, the merges last head first, stage 2
 * in a shuffled run order, then the finish into o; the queries q_row bytes
 * apart, the cache rows `stride`, the kept scores (sp->scores, n_keys x
 * n_q floats) poisoned first. */
static void split_shuffled(const plm_attn_split *sp, const void *q, size_t q_row, int nq, const void *kc,
                           const void *vc, size_t stride, float *o) {
    plm_softmax_run merged[PLM_ATTN_MAX_Q];
    const int nr = sp->n_runs, hd = sp->hd;
    for (size_t e = 0; sp->scores && e < (size_t)sp->n_keys * nq; e++) sp->scores[e] = NAN;
    for (int h = 0; h < nq; h++)
        for (int r = nr - 1; r >= 0; r--)
            plm_attn_split_stage(sp, 1, r, h, 1, (const char *)q + h * q_row, kc, vc, stride, stride, NULL);
    for (int h = nq - 1; h >= 0; h--) plm_attn_split_merge(sp, h, &merged[h]);
    for (int r = 0; !sp->flash && r < nr; r++)
        for (int h = nq - 1; h >= 0; h--)
            plm_attn_split_stage(sp, 2, (r * 5) % nr, h, 1, (const char *)q + h * q_row, kc, vc, stride, stride,
                                 &merged[h]);
    for (int h = 0; h < nq; h++) plm_attn_split_finish(sp, h, &merged[h], o + h * hd);
}

/* One token's keys in runs (plm_attn_split, ops.h: how decode splits them
 * over threads) with each table's pass: against the double-precision
 * softmax; in one run bit for bit the table's attn_f16; with the parts in
 * turns in one buffer (part_stride 0) bit for bit with room for all; and the runs'
 * stages taken in another order and the heads one at a time (as the
 * threads may), with the exact mode's scores kept from stage 1 for stage 2
 * (as decode keeps them), bit for bit plm_attn_split_all's result without
 * them; so is plm_attn_split_all's with them. */
static void test_attention_split(const plm_kernels *kt) {
    const int dims[] = {8, 64, 200};
    const int keys[] = {37, 300};
    const int nqs[] = {1, 4};
    const int runs[] = {1, 2, 3, 7};
    static uint8_t kc[AT_MAXK * AT_STRIDE], vc[AT_MAXK * AT_STRIDE];
    static float o[AT_MAXQ * AT_MAXD], o2[AT_MAXQ * AT_MAXD];
    static float parts[7 * AT_MAXQ * AT_MAXD], scores[AT_MAXK * AT_MAXQ];
    static uint16_t q[AT_MAXQ * AT_MAXD];
    plm_softmax_run st[7 * AT_MAXQ];
    int bad = 0, unequal = 0, kept_unequal = 0, turns_unequal = 0;
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (size_t kk = 0; kk < sizeof keys / sizeof keys[0]; kk++)
            for (size_t qq = 0; qq < sizeof nqs / sizeof nqs[0]; qq++)
                for (size_t rr = 0; rr < sizeof runs / sizeof runs[0]; rr++)
                    for (int flash = 0; flash < 2; flash++) {
                        const int hd = dims[d], nk = keys[kk], nq = nqs[qq], nr = runs[rr];
                        const float scale = 1.0f / sqrtf((float)hd);
                        attention_inputs(q, kc, vc, nq, nk, hd);
                        const plm_attn_split sp = {.pass = kt->attn_f16_pass, .n_keys = nk, .n_runs = nr, .hd = hd,
                                                   .scale = scale, .flash = flash, .runs = st, .parts = parts,
                                                   .run_stride = (size_t)nq, .part_stride = (size_t)nq * hd};
                        plm_attn_split_all(&sp, o, q, nq, kc, vc, AT_STRIDE, AT_STRIDE);
                        plm_attn_split turns = sp; /* the runs' parts in turns in one buffer */
                        turns.part_stride = 0;
                        plm_attn_split_all(&turns, o2, q, nq, kc, vc, AT_STRIDE, AT_STRIDE);
                        if (memcmp(o, o2, sizeof(float) * (size_t)nq * hd) != 0) turns_unequal++;
                        char what[64];
                        snprintf(what, sizeof what, "%s attn split in %d runs", kt->name, nr);
                        count_off_softmax(what, o, q, kc, vc, nq, nk, hd, scale, flash, &bad);
                        plm_attn_split kept = sp;
                        kept.scores = scores;
                        for (size_t e = 0; e < sizeof scores / sizeof scores[0]; e++) scores[e] = NAN;
                        plm_attn_split_all(&kept, o2, q, nq, kc, vc, AT_STRIDE, AT_STRIDE);
                        if (memcmp(o, o2, sizeof(float) * (size_t)nq * hd) != 0 && kept_unequal++ < 5)
                            fprintf(stderr,
                                    "  %s attn split %s hd=%d keys=%d heads=%d runs=%d: kept scores changed the bits\n",
                                    kt->name, flash ? "flash" : "exact", hd, nk, nq, nr);
                        if (nr == 1) /* the whole as the kernel's own attention */
                            kt->attn_f16(o2, q, nq, kc, vc, AT_STRIDE, AT_STRIDE, nk, hd, scale, flash);
                        else
                            split_shuffled(&kept, q, (size_t)hd * 2, nq, kc, vc, AT_STRIDE, o2);
                        if (memcmp(o, o2, sizeof(float) * (size_t)nq * hd) != 0 && unequal++ < 5)
                            fprintf(stderr, "  %s attn split %s hd=%d keys=%d heads=%d runs=%d: not the same bits\n",
                                    kt->name, flash ? "flash" : "exact", hd, nk, nq, nr);
                    }
    CHECK(bad == 0, "%s attn split: %d outputs off the double-precision softmax", kt->name, bad);
    CHECK(unequal == 0, "%s attn split: %d cases where the runs' order or the heads' grouping changed the bits", kt->name,
          unequal);
    CHECK(kept_unequal == 0, "%s attn split: %d cases where keeping the scores changed the bits", kt->name,
          kept_unequal);
    CHECK(turns_unequal == 0, "%s attn split: %d cases where the parts in one buffer changed the bits", kt->name,
          turns_unequal);
}

/* The x86 tables' attention over an f16 cache, bit for bit: AVX-512 pairs
 * the keys in zmm lanes and converts each value row once for a group of
 * heads, but each lane does the 256-bit kernel's arithmetic (x86/attention.h),
 * so a model decodes the same tokens on either (and the tiles, written to
 * the 256-bit kernel's sums, stay its bits).  Head sizes reach every tile
 * shape of the values (1 to 16 vectors) and both kinds of key staging. */
static void test_attention_x86_agree(const plm_kernels **list, int n) {
    const plm_kernels *narrow = NULL, *wide = NULL;
    for (int i = 0; i < n; i++) {
        if (!strcmp(list[i]->name, "avx2")) narrow = list[i];
        if (!strcmp(list[i]->name, "avx512")) wide = list[i];
    }
    if (!narrow || !wide) return;
    const int dims[] = {16, 32, 48, 64, 96, 128, 160, 200};
    const int keys[] = {5, 37, 300};
    const int nqs[] = {1, 3, 8};
    static uint8_t kc[AT_MAXK * AT_STRIDE], vc[AT_MAXK * AT_STRIDE];
    static float o1[AT_MAXQ * AT_MAXD], o2[AT_MAXQ * AT_MAXD];
    static uint16_t q[AT_MAXQ * AT_MAXD];
    int unequal = 0, cases = 0;
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (size_t kk = 0; kk < sizeof keys / sizeof keys[0]; kk++)
            for (size_t qq = 0; qq < sizeof nqs / sizeof nqs[0]; qq++)
                for (int flash = 0; flash < 2; flash++, cases++) {
                    const int hd = dims[d], nk = keys[kk], nq = nqs[qq];
                    attention_inputs(q, kc, vc, nq, nk, hd);
                    narrow->attn_f16(o1, q, nq, kc, vc, AT_STRIDE, AT_STRIDE, nk, hd, 0.125f, flash);
                    wide->attn_f16(o2, q, nq, kc, vc, AT_STRIDE, AT_STRIDE, nk, hd, 0.125f, flash);
                    if (memcmp(o1, o2, sizeof(float) * (size_t)nq * hd) != 0 && unequal++ < 5)
                        fprintf(stderr, "  avx2 vs avx512 attn_f16 %s hd=%d keys=%d heads=%d: not the same bits\n",
                                flash ? "flash" : "exact", hd, nk, nq);
                }
    CHECK(unequal == 0, "avx2 and avx512 attn_f16 differ in %d of %d cases", unequal, cases);
}

/* Prefill attention by tiles (attn_tile, tables that have it) against
 * the same double-precision softmax, row by row over each token's own key
 * range, and in the exact mode where the ranges all begin at key 0 bit for
 * bit against the table's own attn_f16 of each token (kernels.h; flash is
 * not checked bit for bit: a -O0 sanitizer build differed from attn_f16 in
 * some avx2 flash cases, not yet explained): causal runs (token t sees
 * one key more than t - 1), with and without a window (ranges that start
 * at different keys), tiles of one token up to the most that fit, rows that
 * are and are not whole vectors, ranges that cross the key blocks (the
 * running max rises) and end anywhere in a group of 8 keys. */
static void test_attention_tile(const plm_kernels *kt) {
    if (!kt->attn_tile) return;
    const int dims[] = {8, 64, 128, 200};
    const int nqs[] = {1, 3, 8};
    const int lasts[] = {1, 40, 97, 131, 299};  /* the last token's last key */
    static uint8_t kc[AT_MAXK * AT_STRIDE], vc[AT_MAXK * AT_STRIDE];
    static float x[PLM_ATTN_TILE_ELEMS], o[16 * AT_MAXQ * AT_MAXD], own[AT_MAXQ * AT_MAXD];
    static uint16_t q[PLM_ATTN_TILE_ELEMS];
    int bad = 0, tiles = 0, unequal = 0;
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (size_t qq = 0; qq < sizeof nqs / sizeof nqs[0]; qq++)
            for (size_t l = 0; l < sizeof lasts / sizeof lasts[0]; l++)
                for (int window = 0; window < 2; window++)
                    for (int flash = 0; flash < 2; flash++) {
                        const int hd = dims[d], nq = nqs[qq], max_tok = plm_attn_tile_tokens(nq, hd);
                        const int n_tok = 1 + (int)(l + d + (size_t)flash) % max_tok, nk = lasts[l] + 1;
                        if (n_tok > nk) continue;
                        const float scale = 1.0f / sqrtf((float)hd);
                        int begin[16], end[16];
                        for (int t = 0; t < n_tok; t++) {
                            end[t] = nk - (n_tok - 1 - t);
                            begin[t] = window && end[t] > 37 ? end[t] - 37 : 0;
                        }
                        for (int e = 0; e < n_tok * nq * hd; e++) x[e] = rng_sym();
                        plm_fp32_to_fp16_row(x, q, n_tok * nq * hd);
                        for (int j = 0; j < nk; j++) {
                            const float grow = 1.0f + 3.0f * (float)j / (float)nk;
                            for (int e = 0; e < hd; e++) x[e] = rng_sym() * grow;
                            plm_fp32_to_fp16_row(x, (uint16_t *)(void *)(kc + j * AT_STRIDE), hd);
                            for (int e = 0; e < hd; e++) x[e] = rng_sym();
                            plm_fp32_to_fp16_row(x, (uint16_t *)(void *)(vc + j * AT_STRIDE), hd);
                        }
                        const size_t o_stride = (size_t)nq * hd + 5;  /* tokens' outputs need not touch */
                        const plm_attn_tile tile = {.o = o, .o_stride = o_stride, .q = q, .n_tok = n_tok, .n_q = nq,
                                                    .hd = hd, .key_begin = begin, .key_end = end, .k = kc, .v = vc,
                                                    .type_k = PLM_TYPE_F16, .type_v = PLM_TYPE_F16,
                                                    .k_stride = AT_STRIDE, .v_stride = AT_STRIDE, .scale = scale,
                                                    .flash = flash};
                        kt->attn_tile(&tile);
                        tiles++;
                        for (int t = 0; t < n_tok && !window && !flash; t++) {
                            kt->attn_f16(own, q + t * nq * hd, nq, kc, vc, AT_STRIDE, AT_STRIDE, end[t], hd, scale,
                                         flash);
                            if (memcmp(own, o + t * o_stride, sizeof(float) * (size_t)(nq * hd)) != 0 &&
                                unequal++ < 5)
                                fprintf(stderr, "  %s attn_tile %s hd=%d heads=%d tokens=%d keys %d: not attn_f16's\n",
                                        kt->name, flash ? "flash" : "exact", hd, nq, n_tok, end[t]);
                        }
                        for (int t = 0; t < n_tok; t++)
                            for (int h = 0; h < nq; h++)
                                for (int i = 0; i < hd; i++) {
                                    double tol;
                                    const double want = softmax_attention(
                                        q + (t * nq + h) * hd, kc + begin[t] * AT_STRIDE, vc + begin[t] * AT_STRIDE,
                                        end[t] - begin[t], hd, scale, i, flash, &tol);
                                    const float got = o[t * o_stride + (size_t)h * hd + i];
                                    if (fabs(got - want) <= tol) continue;
                                    if (bad++ < 5)
                                        fprintf(stderr,
                                                "  %s attn_tile %s hd=%d heads=%d tokens=%d keys [%d, %d) [%d][%d]: "
                                                "%.7g want %.7g\n",
                                                kt->name, flash ? "flash" : "exact", hd, nq, n_tok, begin[t], end[t],
                                                h, i, got, want);
                                }
                    }
    CHECK(tiles > 50, "%s attn_tile: only %d tiles tried", kt->name, tiles);
    CHECK(bad == 0, "%s attn_tile: %d outputs off the double-precision softmax", kt->name, bad);
    CHECK(unequal == 0, "%s attn_tile: %d tokens not bit for bit attn_f16's", kt->name, unequal);
}

/* Attention over a quantized cache (attn_quant) against a softmax written
 * out here in double: each key is the dequantized cache row, the query is
 * what the keys' vec_dot meets (the query rounded to Q8_0 for a Q8_0 or
 * Q4_0 cache, kept in f32 for an f16 one), the values the dequantized rows;
 * the same allowance as for the f16 cache.  Every table, the reference too,
 * and every table against the reference.  K and V quantized alike or
 * differently, or one of them f16; head sizes are whole 32-blocks.  (Head
 * counts are not crossed with everything else: qemu runs this too.) */
enum { AQ_MAXD = 256, AQ_MAXK = 300, AQ_MAXQ = 8, AQ_STRIDE = AQ_MAXD * 2 + 16 };

static void cache_row(plm_type t, const float *x, uint8_t *row, float *deq, int hd) {
    if (t == PLM_TYPE_F16) plm_fp32_to_fp16_row(x, (uint16_t *)(void *)row, hd);
    else if (t == PLM_TYPE_Q8_0) plm_quantize_row_q8_0(x, row, hd);
    else plm_quantize_row_q4_0(x, row, hd);
    plm_kernels_ref()->dequantize_row[t](row, deq, hd);
}

/* One head's output in double (o[hd]) and per-element allowances. */
static void softmax_attention_deq(const float *qd, const float *kd, const float *vd, int nk, int hd, float scale,
                                  bool flash, double *o, double *tol) {
    static double s[AQ_MAXK];
    double max = -INFINITY, sum = 0, wmax = 0;
    for (int j = 0; j < nk; j++) {
        double d = 0;
        for (int e = 0; e < hd; e++) d += (double)qd[e] * kd[(size_t)j * hd + e];
        s[j] = d * scale;
        if (s[j] > max) max = s[j];
    }
    for (int j = 0; j < nk; j++) sum += exp(s[j] - max);
    for (int i = 0; i < hd; i++) o[i] = 0, tol[i] = 0;
    for (int j = 0; j < nk; j++) {
        double w = exp(s[j] - max) / sum;
        if (!flash) w = plm_fp16_to_fp32(plm_fp32_to_fp16((float)w));
        if (w > wmax) wmax = w;
        for (int i = 0; i < hd; i++) {
            const double v = vd[(size_t)j * hd + i];
            o[i] += w * v;
            if (fabs(v) > tol[i]) tol[i] = fabs(v); /* the largest magnitude, for now */
        }
    }
    for (int i = 0; i < hd; i++) tol[i] = 1e-5 * (tol[i] + 1) * (1 + hd / 16) + (flash ? 0 : wmax * tol[i] / 2048);
}

/* nk rows of keys (later keys score higher) and values of types tk and tv
 * into kc and vc (AQ_STRIDE apart), and what they dequantize to into kd and
 * vd. */
static void quant_cache(plm_type tk, plm_type tv, int nk, int hd, uint8_t *kc, uint8_t *vc, float *kd, float *vd) {
    float x[AQ_MAXD];
    for (int j = 0; j < nk; j++) {
        const float grow = 1.0f + 3.0f * (float)j / (float)nk;
        for (int e = 0; e < hd; e++) x[e] = rng_sym() * grow;
        cache_row(tk, x, kc + j * AQ_STRIDE, kd + (size_t)j * hd, hd);
        for (int e = 0; e < hd; e++) x[e] = rng_sym();
        cache_row(tv, x, vc + j * AQ_STRIDE, vd + (size_t)j * hd, hd);
    }
}

/* A query as keys of type tk meet it: rounded to Q8_0 for a quantized
 * cache, as it is for an f16 one. */
static void query_as_met(plm_type tk, const float *q, float *qd, int hd) {
    uint8_t q8[AQ_MAXD * 2];
    if (tk == PLM_TYPE_F16) {
        memcpy(qd, q, sizeof(float) * (size_t)hd);
        return;
    }
    plm_quantize_row_q8_0(q, q8, hd);
    plm_dequantize_row_q8_0(q8, qd, hd);
}

static void test_attention_quant(const plm_kernels *kt) {
    static const plm_type kinds[][2] = {
        {PLM_TYPE_Q8_0, PLM_TYPE_Q8_0}, {PLM_TYPE_Q4_0, PLM_TYPE_Q4_0}, {PLM_TYPE_Q8_0, PLM_TYPE_Q4_0},
        {PLM_TYPE_F16, PLM_TYPE_Q8_0},  {PLM_TYPE_Q4_0, PLM_TYPE_F16},
    };
    const int dims[] = {32, 64, 96, 128, 256};
    const int keys[] = {1, 3, 33, 64, 65, 130, 300};
    const int nqs[] = {1, 3, 8};
    static uint8_t kc[AQ_MAXK * AQ_STRIDE], vc[AQ_MAXK * AQ_STRIDE];
    static float kd[AQ_MAXK * AQ_MAXD], vd[AQ_MAXK * AQ_MAXD], qd[AQ_MAXD];
    static float o[AQ_MAXQ * AQ_MAXD], oref[AQ_MAXQ * AQ_MAXD];
    static double want[AQ_MAXD], tol[AQ_MAXD];
    const plm_kernels *ref = plm_kernels_ref();
    int bad = 0, off_ref = 0;
    for (size_t c = 0; c < sizeof kinds / sizeof kinds[0]; c++)
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            for (size_t kk = 0; kk < sizeof keys / sizeof keys[0]; kk++)
                for (int flash = 0; flash < 2; flash++) {
                    const plm_type tk = kinds[c][0], tv = kinds[c][1];
                    /* head counts taken in turn: every one meets every size and key count */
                    const int hd = dims[d], nk = keys[kk], nq = nqs[(c + d + kk) % 3];
                    const float scale = 1.0f / sqrtf((float)hd);
                    float q[AQ_MAXQ * AQ_MAXD];
                    for (int e = 0; e < nq * hd; e++) q[e] = rng_sym();
                    quant_cache(tk, tv, nk, hd, kc, vc, kd, vd);
                    kt->attn_quant(kt, o, q, nq, tk, kc, AQ_STRIDE, tv, vc, AQ_STRIDE, nk, hd, scale, flash);
                    ref->attn_quant(ref, oref, q, nq, tk, kc, AQ_STRIDE, tv, vc, AQ_STRIDE, nk, hd, scale, flash);
                    for (int h = 0; h < nq; h++) {
                        query_as_met(tk, q + h * hd, qd, hd);
                        softmax_attention_deq(qd, kd, vd, nk, hd, scale, flash, want, tol);
                        for (int i = 0; i < hd; i++) {
                            const float got = o[h * hd + i];
                            if (fabs(got - oref[h * hd + i]) > tol[i]) off_ref++;
                            if (fabs(got - want[i]) <= tol[i]) continue;
                            if (bad++ < 5)
                                fprintf(stderr, "  %s attn_quant %s K %s V %s hd=%d keys=%d heads=%d [%d][%d]: %.7g want %.7g\n",
                                        kt->name, flash ? "flash" : "exact", plm_type_name(tk), plm_type_name(tv),
                                        hd, nk, nq, h, i, got, want[i]);
                        }
                    }
                }
    CHECK(bad == 0, "%s attn_quant: %d outputs off the double-precision softmax", kt->name, bad);
    CHECK(off_ref == 0, "%s attn_quant: %d outputs off the reference table's", kt->name, off_ref);
}

/* Prefill tiles over a quantized cache (attn_tile with Q8_0 / Q4_0 rows, on
 * tables that have it) against the double-precision softmax over the
 * dequantized rows and the query as the tile takes it, in f16 (not rounded
 * to Q8_0 as attn_quant's: kernels.h): causal runs with and without a
 * window, as test_attention_tile.  Where the rows' keys all begin at key 0,
 * each token's rows in the exact mode are also bit for bit a tile of that
 * token alone: a row's lanes never meet another row's. */
static void test_attention_tile_quant(const plm_kernels *kt) {
    if (!kt->attn_tile) return;
    static const plm_type kinds[][2] = {
        {PLM_TYPE_Q8_0, PLM_TYPE_Q8_0}, {PLM_TYPE_Q4_0, PLM_TYPE_Q4_0},
        {PLM_TYPE_F16, PLM_TYPE_Q8_0},  {PLM_TYPE_Q8_0, PLM_TYPE_F16}};
    const int dims[] = {64, 128, 256};
    const int nqs[] = {1, 3, 8};
    const int lasts[] = {1, 40, 131, 299}; /* the last token's last key */
    enum { O_STRIDE = AQ_MAXQ * AQ_MAXD + 5 }; /* tokens' outputs need not touch */
    static uint8_t kc[AQ_MAXK * AQ_STRIDE], vc[AQ_MAXK * AQ_STRIDE];
    static float kd[AQ_MAXK * AQ_MAXD], vd[AQ_MAXK * AQ_MAXD], x[PLM_ATTN_TILE_ELEMS], qd[AQ_MAXD];
    static float o[16 * O_STRIDE], alone[O_STRIDE];
    static uint16_t q[PLM_ATTN_TILE_ELEMS];
    static double want[AQ_MAXD], tol[AQ_MAXD];
    int bad = 0, tiles = 0, unequal = 0;
    for (size_t c = 0; c < sizeof kinds / sizeof kinds[0]; c++)
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            for (size_t l = 0; l < sizeof lasts / sizeof lasts[0]; l++)
                for (int window = 0; window < 2; window++)
                    for (int flash = 0; flash < 2; flash++) {
                        const plm_type tk = kinds[c][0], tv = kinds[c][1];
                        const int hd = dims[d], nq = nqs[(c + d + l) % 3], max_tok = plm_attn_tile_tokens(nq, hd);
                        const int n_tok = 1 + (int)(l + d + c + (size_t)flash) % max_tok, nk = lasts[l] + 1;
                        if (n_tok > nk) continue;
                        const float scale = 1.0f / sqrtf((float)hd);
                        int begin[16], end[16];
                        for (int t = 0; t < n_tok; t++) {
                            end[t] = nk - (n_tok - 1 - t);
                            begin[t] = window && end[t] > 37 ? end[t] - 37 : 0;
                        }
                        for (int e = 0; e < n_tok * nq * hd; e++) x[e] = rng_sym();
                        plm_fp32_to_fp16_row(x, q, n_tok * nq * hd);
                        quant_cache(tk, tv, nk, hd, kc, vc, kd, vd);
                        plm_attn_tile tile = {.o = o, .o_stride = O_STRIDE, .q = q, .n_tok = n_tok, .n_q = nq,
                                              .hd = hd, .key_begin = begin, .key_end = end, .k = kc, .v = vc,
                                              .type_k = tk, .type_v = tv, .k_stride = AQ_STRIDE,
                                              .v_stride = AQ_STRIDE, .scale = scale, .flash = flash};
                        kt->attn_tile(&tile);
                        tiles++;
                        for (int t = 0; t < n_tok && !window && !flash; t++) {
                            plm_attn_tile one = tile;
                            one.o = alone, one.q = q + t * nq * hd, one.n_tok = 1;
                            one.key_begin = begin + t, one.key_end = end + t;
                            kt->attn_tile(&one);
                            if (memcmp(alone, o + t * O_STRIDE, sizeof(float) * (size_t)(nq * hd)) != 0 &&
                                unequal++ < 5)
                                fprintf(stderr, "  %s attn_tile K %s V %s hd=%d heads=%d tokens=%d keys %d: "
                                        "not the token's own tile\n", kt->name, plm_type_name(tk), plm_type_name(tv),
                                        hd, nq, n_tok, end[t]);
                        }
                        for (int t = 0; t < n_tok; t++)
                            for (int h = 0; h < nq; h++) {
                                for (int e = 0; e < hd; e++) qd[e] = plm_fp16_to_fp32(q[(t * nq + h) * hd + e]);
                                softmax_attention_deq(qd, kd + (size_t)begin[t] * hd, vd + (size_t)begin[t] * hd,
                                                      end[t] - begin[t], hd, scale, flash, want, tol);
                                for (int i = 0; i < hd; i++) {
                                    const float got = o[t * O_STRIDE + h * hd + i];
                                    if (fabs(got - want[i]) <= tol[i]) continue;
                                    if (bad++ < 5)
                                        fprintf(stderr,
                                                "  %s attn_tile %s K %s V %s hd=%d heads=%d tokens=%d keys [%d, %d) "
                                                "[%d][%d]: %.7g want %.7g\n",
                                                kt->name, flash ? "flash" : "exact", plm_type_name(tk),
                                                plm_type_name(tv), hd, nq, n_tok, begin[t], end[t], h, i, got,
                                                want[i]);
                                }
                            }
                    }
    CHECK(tiles > 100, "%s attn_tile over a quantized cache: only %d tiles tried", kt->name, tiles);
    CHECK(bad == 0, "%s attn_tile over a quantized cache: %d outputs off the double-precision softmax", kt->name, bad);
    CHECK(unequal == 0, "%s attn_tile over a quantized cache: %d tokens not their own tile's bits", kt->name, unequal);
}

/* One token's keys in runs over a quantized cache (plm_attn_split with the
 * table's attn_quant_pass, as decode splits them): in one run bit for bit
 * the table's attn_quant; in several, against the double-precision
 * softmax; the parts in turns in one buffer as with room for all; keeping the exact mode's scores from stage 1 for stage 2, and
 * the runs' stages in another order with the heads one at a time (as the
 * threads may take them), bit for bit plm_attn_split_all's result without
 * them. */
static void test_attention_split_quant(const plm_kernels *kt) {
    static const plm_type kinds[][2] = {
        {PLM_TYPE_Q8_0, PLM_TYPE_Q8_0}, {PLM_TYPE_Q4_0, PLM_TYPE_Q4_0}, {PLM_TYPE_F16, PLM_TYPE_Q8_0}};
    const int dims[] = {64, 128};
    const int keys[] = {37, 300};
    const int nqs[] = {1, 4};
    const int runs[] = {1, 3, 7};
    static uint8_t kc[AQ_MAXK * AQ_STRIDE], vc[AQ_MAXK * AQ_STRIDE], qbuf[AQ_MAXQ * AQ_MAXD * 2];
    static float kd[AQ_MAXK * AQ_MAXD], vd[AQ_MAXK * AQ_MAXD], qd[AQ_MAXD], q[AQ_MAXQ * AQ_MAXD];
    static float o[AQ_MAXQ * AQ_MAXD], o2[AQ_MAXQ * AQ_MAXD], parts[7 * AQ_MAXQ * AQ_MAXD];
    static float scores[AQ_MAXK * AQ_MAXQ];
    static double want[AQ_MAXD], tol[AQ_MAXD];
    plm_softmax_run st[7 * AQ_MAXQ];
    int bad = 0, unequal = 0, kept_unequal = 0, turns_unequal = 0;
    for (size_t c = 0; c < sizeof kinds / sizeof kinds[0]; c++)
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
            for (size_t kk = 0; kk < sizeof keys / sizeof keys[0]; kk++)
                for (size_t qi = 0; qi < sizeof nqs / sizeof nqs[0]; qi++)
                    for (size_t rr = 0; rr < sizeof runs / sizeof runs[0]; rr++)
                        for (int flash = 0; flash < 2; flash++) {
                            const plm_type tk = kinds[c][0], tv = kinds[c][1];
                            const int hd = dims[d], nk = keys[kk], nq = nqs[qi], nr = runs[rr];
                            const float scale = 1.0f / sqrtf((float)hd);
                            for (int e = 0; e < nq * hd; e++) q[e] = rng_sym();
                            quant_cache(tk, tv, nk, hd, kc, vc, kd, vd);
                            plm_attn_quant_query(kt, tk, q, nq, hd, qbuf);
                            const size_t q_row = plm_attn_quant_query_row(tk, hd);
                            const plm_attn_split sp = {
                                .quant_pass = kt->attn_quant_pass, .kt = kt, .type_k = tk, .type_v = tv,
                                .n_keys = nk, .n_runs = nr, .hd = hd, .scale = scale, .flash = flash, .runs = st,
                                .parts = parts, .run_stride = (size_t)nq, .part_stride = (size_t)nq * hd};
                            plm_attn_split_all(&sp, o, qbuf, nq, kc, vc, AQ_STRIDE, AQ_STRIDE);
                            plm_attn_split turns = sp; /* the runs' parts in turns in one buffer */
                            turns.part_stride = 0;
                            plm_attn_split_all(&turns, o2, qbuf, nq, kc, vc, AQ_STRIDE, AQ_STRIDE);
                            if (memcmp(o, o2, sizeof(float) * (size_t)nq * hd) != 0) turns_unequal++;
                            for (int h = 0; h < nq; h++) {
                                query_as_met(tk, q + h * hd, qd, hd);
                                softmax_attention_deq(qd, kd, vd, nk, hd, scale, flash, want, tol);
                                for (int i = 0; i < hd; i++)
                                    if (fabs(o[h * hd + i] - want[i]) > tol[i] && bad++ < 5)
                                        fprintf(stderr,
                                                "  %s attn split %s K %s V %s hd=%d keys=%d runs=%d: %.7g want %.7g\n",
                                                kt->name, flash ? "flash" : "exact", plm_type_name(tk),
                                                plm_type_name(tv), hd, nk, nr, o[h * hd + i], want[i]);
                            }
                            plm_attn_split kept = sp;
                            kept.scores = scores;
                            for (size_t e = 0; e < sizeof scores / sizeof scores[0]; e++) scores[e] = NAN;
                            plm_attn_split_all(&kept, o2, qbuf, nq, kc, vc, AQ_STRIDE, AQ_STRIDE);
                            if (memcmp(o, o2, sizeof(float) * (size_t)nq * hd) != 0) kept_unequal++;
                            if (nr == 1) { /* the whole as the kernel's own attention */
                                kt->attn_quant(kt, o2, q, nq, tk, kc, AQ_STRIDE, tv, vc, AQ_STRIDE, nk, hd, scale,
                                               flash);
                            } else {
                                split_shuffled(&kept, qbuf, q_row, nq, kc, vc, AQ_STRIDE, o2);
                            }
                            if (memcmp(o, o2, sizeof(float) * (size_t)nq * hd) != 0 && unequal++ < 5)
                                fprintf(stderr,
                                        "  %s attn split %s K %s V %s hd=%d keys=%d heads=%d runs=%d: other bits\n",
                                        kt->name, flash ? "flash" : "exact", plm_type_name(tk), plm_type_name(tv), hd,
                                        nk, nq, nr);
                        }
    CHECK(bad == 0, "%s attn split, quantized cache: %d outputs off the double-precision softmax", kt->name, bad);
    CHECK(unequal == 0, "%s attn split, quantized cache: %d cases where one run, the runs' order or the heads' "
          "grouping changed the bits", kt->name, unequal);
    CHECK(kept_unequal == 0, "%s attn split, quantized cache: %d cases where keeping the scores changed the bits",
          kt->name, kept_unequal);
    CHECK(turns_unequal == 0, "%s attn split, quantized cache: %d cases where the parts in one buffer changed the bits",
          kt->name, turns_unequal);
}

/* silu(g) * u against the formula in double, over lengths around the SIMD
 * width and arguments far into both tails of the exponential (where values
 * under 1e-30 may flush to 0). */
static void test_swiglu(const plm_kernels *kt) {
    enum { N = 77 };
    float g[N], u[N], g0[N];
    int bad = 0;
    for (int rep = 0; rep < 20; rep++) {
        const int n = 1 + rep * 4 % N;
        for (int i = 0; i < n; i++) {
            g0[i] = g[i] = rng_sym() * (rep < 10 ? 8.0f : 120.0f);
            u[i] = rng_sym();
        }
        kt->swiglu(g, u, n);
        for (int i = 0; i < n; i++) {
            const double want = g0[i] / (1.0 + exp(-(double)g0[i])) * u[i];
            if (fabs(g[i] - want) <= 4e-7 * fabs(want) + 1e-30) continue;
            if (bad++ < 5) fprintf(stderr, "  %s swiglu(%.7g, %.7g) = %.9g want %.9g\n", kt->name, g0[i], u[i], g[i], want);
        }
    }
    CHECK(bad == 0, "%s swiglu: %d values off", kt->name, bad);
}

/* gelu(g) * u: the reference against ggml's definition (the tanh form in
 * double at x rounded to f16, the result rounded to f16; 0 at x <= -10, x
 * at x >= 10) to one f16 rounding, every table against the reference bit
 * for bit; lengths around the SIMD width, arguments over both clamps and
 * the odd NaN. */
static void test_geglu(const plm_kernels *kt) {
    enum { N = 77 };
    float g[N], u[N], g0[N], r[N];
    int bad = 0, off_ref = 0;
    for (int rep = 0; rep < 20; rep++) {
        const int n = 1 + rep * 4 % N;
        for (int i = 0; i < n; i++) {
            g0[i] = g[i] = r[i] = rng_sym() * (rep < 10 ? 4.0f : 14.0f);
            u[i] = rng_sym();
        }
        if (rep == 7) g0[3] = g[3] = r[3] = NAN;
        kt->geglu(g, u, n);
        plm_kernels_ref()->geglu(r, u, n);
        for (int i = 0; i < n; i++) {
            if (memcmp(&g[i], &r[i], sizeof *g) != 0 && off_ref++ < 5)
                fprintf(stderr, "  %s geglu(%.7g) = %.9g, reference %.9g\n", kt->name, g0[i], g[i], r[i]);
            if (isnan(g0[i])) {
                if (!isnan(g[i]) && bad++ < 5) fprintf(stderr, "  %s geglu(nan) = %.9g\n", kt->name, g[i]);
                continue;
            }
            const double h = plm_fp16_to_fp32(plm_fp32_to_fp16(g0[i]));
            const double y = 0.5 * h * (1.0 + tanh(0.7978845608028654 * h * (1.0 + 0.044715 * h * h)));
            const double want = (g0[i] <= -10.0f ? 0.0 : g0[i] >= 10.0f ? g0[i] : y) * u[i];
            if (fabs(g[i] - want) <= fabs(want) / 1024.0 + 1e-7) continue; /* one f16 rounding of y */
            if (bad++ < 5) fprintf(stderr, "  %s geglu(%.7g, %.7g) = %.9g want %.9g\n", kt->name, g0[i], u[i], g[i], want);
        }
    }
    CHECK(bad == 0, "%s geglu: %d values off ggml's definition", kt->name, bad);
    CHECK(off_ref == 0, "%s geglu: %d values off the reference's bits", kt->name, off_ref);
}

int main(void) {
    const plm_kernels *list[16];
    int n = plm_kernels_list(list, 16);
    /* PLM_TEST_TABLE=name: that table's tests alone (test_kernels_novbmi
     * runs the AVX-512 table once more without its VBMI entries). */
    const char *only = getenv("PLM_TEST_TABLE");
    if (only && *only) {
        list[0] = plm_kernels_select(only);
        CHECK(list[0] != NULL, "PLM_TEST_TABLE=%s: no such table on this CPU", only);
        if (!list[0]) return test_summary();
        n = 1;
    }
    printf("kernel tables:");
    for (int i = 0; i < n; i++) printf(" %s", list[i]->name);
    printf("\n");
    if (!only || !*only) test_select(list, n);
    for (int i = 0; i < n; i++) {
        test_quantize(list[i]);
        test_attention_f16(list[i]);
        test_attention_split(list[i]);
        test_attention_quant(list[i]);
        test_attention_split_quant(list[i]);
        test_attention_tile_quant(list[i]);
        test_swiglu(list[i]);
        test_geglu(list[i]);
        for (int j = 0; j < N_WTYPES; j++) {
            test_vec_dot(list[i], weight_types[j]);
            test_gemm(list[i], weight_types[j]);
            test_gemm_large(list[i], weight_types[j]);
            test_gemm_exact(list[i], weight_types[j]);
            test_gemv(list[i], weight_types[j]);
        }
        test_repacked(list[i], PLM_TYPE_Q4_0);
        test_repacked(list[i], PLM_TYPE_Q8_0);
        test_repacked(list[i], PLM_TYPE_Q4_K);
    }
    /* after the rest, so the tests above keep their random inputs */
    for (int i = 0; i < n; i++) {
        test_repacked(list[i], PLM_TYPE_IQ4_NL);
        test_repacked(list[i], PLM_TYPE_Q5_K);
        test_repacked(list[i], PLM_TYPE_Q6_K);
        test_repacked(list[i], PLM_TYPE_IQ4_XS);
        test_repacked(list[i], PLM_TYPE_Q5_0);
        test_attention_tile(list[i]);
    }
    if (!only || !*only) test_attention_x86_agree(list, n);
    return test_summary();
}
