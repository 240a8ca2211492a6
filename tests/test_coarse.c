/*
 * Coarse int8 prefill (kernels/coarse.h), on random K-quant rows and Q8_K
 * activations:
 *
 *  - the reference against the exact product (the reference vec_dot): each
 *    weight moves by at most half its super-block's step D, so
 *      |coarse - exact| <= sum_b D_b / 2 * d_a * sum |a_i|   (+ float rounding)
 *    a bound any wrong code, scale or offset breaks by orders of magnitude;
 *    and the coarse product must differ from the exact one somewhere (it is
 *    an approximation, not the exact path under another name);
 *  - every table with a gemm_coarse of its own against the reference: the
 *    same integer sums, other float order (2e-5 of sum |w * a|), for 1..17
 *    and 533 tokens (past a 512-token group), k of 1 and 5 super-blocks
 *    (past a 4-super-block slice), a ragged 16-row panel; outputs outside
 *    the rows and tokens asked for stay untouched;
 *  - plm_coarse_applies: never the reference table, never below
 *    PLM_COARSE_MIN_TOK tokens, never a format without a coarse form.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/coarse.h"
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/quant.h"
#include "test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static float rng_sym(void) { return 2.0f * (float)(rng_u32() >> 8) / 16777216.0f - 1.0f; }

static const plm_type types[] = {PLM_TYPE_Q4_K, PLM_TYPE_Q6_K, PLM_TYPE_Q5_K,
                                 PLM_TYPE_Q3_K, PLM_TYPE_Q2_K, PLM_TYPE_IQ4_XS};
enum { N_TYPES = (int)(sizeof types / sizeof types[0]) };

enum { ROWS = 37, OUT = ROWS + 3, MAX_SB = 5, MAX_TOK = 533 };

/* Random bytes with sane f16 scales where the format keeps d (and dmin). */
static void random_row(plm_type t, int64_t k, uint8_t *w) {
    const plm_type_info *ti = plm_type_info_get(t);
    for (size_t i = 0; i < plm_row_size(t, k); i++) w[i] = (uint8_t)rng_u32();
    for (int64_t b = 0; b < k / QK_K; b++) {
        uint8_t *p = w + b * ti->type_size;
        int off[2] = {-1, -1};
        switch (t) {
        case PLM_TYPE_Q2_K: off[0] = offsetof(block_q2_K, d), off[1] = offsetof(block_q2_K, dmin); break;
        case PLM_TYPE_Q3_K: off[0] = offsetof(block_q3_K, d); break;
        case PLM_TYPE_Q4_K: off[0] = offsetof(block_q4_K, d), off[1] = offsetof(block_q4_K, dmin); break;
        case PLM_TYPE_Q5_K: off[0] = offsetof(block_q5_K, d), off[1] = offsetof(block_q5_K, dmin); break;
        case PLM_TYPE_Q6_K: off[0] = offsetof(block_q6_K, d); break;
        default: off[0] = offsetof(block_iq4_xs, d); break;
        }
        for (int j = 0; j < 2 && off[j] >= 0; j++) {
            const plm_fp16_t h = plm_fp32_to_fp16(0.0005f + 0.05f * (float)(rng_u32() >> 8) / 16777216.0f);
            memcpy(p + off[j], &h, 2);
        }
    }
}

static uint8_t w[ROWS * MAX_SB * 256];
static uint8_t a[MAX_TOK * MAX_SB * sizeof(block_q8_K)];
static float out[MAX_TOK * OUT], want[MAX_TOK * OUT];
static double mag[MAX_TOK * OUT], bound[MAX_TOK * OUT];

/* sum |w * a| and the coarse bound for row r, token t. */
static void measure(plm_type t, int64_t k, const uint8_t *row, const block_q8_K *y, double *m, double *bnd) {
    const plm_type_info *ti = plm_type_info_get(t);
    *m = *bnd = 0;
    for (int64_t b = 0; b < k / QK_K; b++) {
        float x[QK_K];
        int8_t q[QK_K];
        ti->dequantize_row(row + b * ti->type_size, x, QK_K);
        const float d = plm_coarse_quantize_256(x, q);
        double sa = 0;
        for (int i = 0; i < QK_K; i++) {
            sa += abs(y[b].qs[i]);
            *m += fabs((double)x[i] * y[b].qs[i] * y[b].d);
        }
        *bnd += 0.5 * d * fabs(y[b].d) * sa; /* Q8_K keeps the sign of the extreme value in d */
    }
}

static void fill(plm_type t, int64_t k, size_t wrow, size_t arow) {
    const plm_kernels *ref = plm_kernels_ref();
    float x[MAX_SB * QK_K];
    for (int r = 0; r < ROWS; r++) random_row(t, k, w + r * wrow);
    for (int c = 0; c < MAX_TOK; c++) {
        for (int64_t i = 0; i < k; i++) x[i] = rng_sym() * (c % 5 == 0 ? 30.0f : 1.0f);
        ref->quantize_row[PLM_TYPE_Q8_K](x, a + c * arow, k);
    }
}

/* The reference against the exact product, within the bound. */
static void test_reference(plm_type t) {
    const plm_kernels *ref = plm_kernels_ref();
    const plm_type_info *ti = plm_type_info_get(t);
    int bad = 0, differs = 0;
    for (int nsb = 1; nsb <= MAX_SB; nsb += 4) {
        const int64_t k = (int64_t)nsb * QK_K;
        const size_t wrow = plm_row_size(t, k), arow = plm_row_size(PLM_TYPE_Q8_K, k);
        enum { NT = 17 };
        fill(t, k, wrow, arow);
        plm_gemm_coarse_ref(t, k, w, wrow, ROWS, a, arow, NT, out, OUT);
        for (int c = 0; c < NT; c++)
            for (int r = 0; r < ROWS; r++) {
                float exact;
                double m, bnd;
                ref->vec_dot[t](k, &exact, w + r * wrow, a + c * arow);
                measure(t, k, w + r * wrow, (const block_q8_K *)(const void *)(a + c * arow), &m, &bnd);
                const double err = fabs((double)out[c * OUT + r] - exact);
                if (out[c * OUT + r] != exact) differs++;
                if (!(err <= bnd + 1e-5 * m + 1e-30) && bad++ < 3)
                    fprintf(stderr, "  ref coarse %s k=%lld [t=%d][r=%d]: %.9g, exact %.9g, |err| %.3g > bound %.3g\n",
                            ti->name, (long long)k, c, r, out[c * OUT + r], exact, err, bnd);
            }
    }
    CHECK(bad == 0, "ref coarse %s: %d products outside the requantization bound", ti->name, bad);
    CHECK(differs > 0, "ref coarse %s: identical to the exact product everywhere", ti->name);
}

/* A table's own gemm_coarse against the reference. */
static void test_table(const plm_kernels *kt, plm_type t) {
    const plm_type_info *ti = plm_type_info_get(t);
    static const int toks[] = {1, 2, 3, 7, 8, 9, 17, MAX_TOK};
    int bad = 0, runs = 0;
    for (int nsb = 1; nsb <= MAX_SB; nsb += 4) {
        const int64_t k = (int64_t)nsb * QK_K;
        const size_t wrow = plm_row_size(t, k), arow = plm_row_size(PLM_TYPE_Q8_K, k);
        fill(t, k, wrow, arow);
        plm_gemm_coarse_ref(t, k, w, wrow, ROWS, a, arow, MAX_TOK, want, OUT);
        for (int c = 0; c < MAX_TOK; c++)
            for (int r = 0; r < ROWS; r++) {
                double bnd;
                measure(t, k, w + r * wrow, (const block_q8_K *)(const void *)(a + c * arow), &mag[c * OUT + r], &bnd);
                bound[c * OUT + r] = bnd;
            }
        for (size_t it = 0; it < sizeof toks / sizeof toks[0]; it++) {
            const int nt = toks[it];
            for (int i = 0; i < MAX_TOK * OUT; i++) out[i] = -12345.0f;
            /* rows 3..35: a whole panel and a ragged one, as a thread's chunk */
            kt->gemm_coarse[t](k, w + 3 * wrow, wrow, ROWS - 4, a, arow, nt, out + 3, OUT);
            for (int c = 0; c < MAX_TOK; c++)
                for (int r = 0; r < OUT; r++) {
                    const int i = c * OUT + r;
                    const bool in = c < nt && r >= 3 && r < ROWS - 1;
                    runs++;
                    const bool ok = in ? fabs((double)out[i] - want[i]) <= 2e-5 * mag[i] + 1e-30 : out[i] == -12345.0f;
                    if (!ok && bad++ < 3)
                        fprintf(stderr, "  %s coarse %s k=%lld n_tok=%d: [t=%d][r=%d] %.9g want %.9g\n", kt->name,
                                ti->name, (long long)k, nt, c, r, out[i], in ? want[i] : -12345.0f);
                }
        }
    }
    CHECK(bad == 0, "%s coarse %s: %d of %d outputs wrong", kt->name, ti->name, bad, runs);
    printf("  %-6s coarse %-6s: %d outputs checked\n", kt->name, ti->name, runs);
}

static void test_applies(const plm_kernels **list, int n) {
    const plm_kernels *ref = plm_kernels_ref();
    CHECK(!plm_coarse_applies(ref, PLM_TYPE_Q4_K, 512), "the reference table multiplies in coarse int8");
    for (int i = 0; i < n; i++) {
        const plm_kernels *kt = list[i];
        const bool own = kt->gemm_coarse[PLM_TYPE_Q4_K] != ref->gemm_coarse[PLM_TYPE_Q4_K];
        CHECK(!plm_coarse_applies(kt, PLM_TYPE_Q4_K, PLM_COARSE_MIN_TOK - 1), "%s: coarse below the batch threshold",
              kt->name);
        CHECK(plm_coarse_applies(kt, PLM_TYPE_Q4_K, PLM_COARSE_MIN_TOK) == own, "%s: coarse at the threshold: %d",
              kt->name, own);
        CHECK(!plm_coarse_applies(kt, PLM_TYPE_Q4_0, 512) && !plm_coarse_applies(kt, PLM_TYPE_F16, 512),
              "%s: coarse for a format without a coarse form", kt->name);
    }
}

int main(void) {
    const plm_kernels *list[16];
    const int n = plm_kernels_list(list, 16);
    const plm_kernels *ref = plm_kernels_ref();
    for (int i = 0; i < N_TYPES; i++) {
        CHECK(plm_coarse_type(types[i]) && ref->gemm_coarse[types[i]], "no coarse reference for %s",
              plm_type_info_get(types[i])->name);
        test_reference(types[i]);
    }
    test_applies(list, n);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < N_TYPES; i++)
            if (list[j] != ref && list[j]->gemm_coarse[types[i]] != ref->gemm_coarse[types[i]])
                test_table(list[j], types[i]);
    return test_summary();
}
