/*
 * The importance-weighted quantizers against ggml's own: every format that
 * uses an importance matrix (K-quants, IQ4, the IQ1/IQ2/IQ3 codebooks; and
 * the reference ones of TQ1_0, TQ2_0, MXFP4 and IQ4_XS) quantizes rows of
 * varied data — smooth, heavy-tailed, with outliers, all-zero blocks, a
 * constant block and an all-zero row — with random importances (and
 * without, where ggml allows), and must give the bytes of
 * ggml_quantize_chunk from node-llama-cpp's prebuilt libggml-base (loaded
 * with dlopen; `cd tests/oracle && npm ci` installs it).  Without that
 * library the test reports itself skipped (exit 77).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/types.h"
#include "test.h"

/* x86-64 only: the prebuilt arm64 library may contract multiply-adds into
 * FMA (GCC does in GNU C mode wherever the target has FMA, as every arm64
 * does), which changes roundings; our quantizers follow llama-quantize on
 * x86-64, as the fixtures do. */
#define GGML_BASE PLM_SOURCE_DIR "/tests/oracle/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"

typedef size_t (*quantize_chunk_fn)(int type, const float *src, void *dst, int64_t start, int64_t nrows,
                                    int64_t n_per_row, const float *imatrix);

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float uniform(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) + 0.5) / (float)(1 << 24);
}

static float gauss(void) {
    return sqrtf(-2 * logf(uniform())) * cosf(6.2831853f * uniform());
}

/* Row r of the test data: each row its own character. */
static void fill_row(float *x, int n, int r) {
    for (int i = 0; i < n; i++) {
        switch (r % 7) {
        case 0: x[i] = 0.02f * gauss(); break;                          /* weights-like */
        case 1: x[i] = gauss() * gauss() * gauss(); break;              /* heavy tails */
        case 2: x[i] = uniform() < 0.01f ? 8 * gauss() : gauss(); break; /* outliers */
        case 3: x[i] = fabsf(gauss()) + 0.5f; break;                    /* all positive */
        case 4: x[i] = i < 64 ? 0.0f : gauss(); break;                  /* zero blocks */
        case 5: x[i] = i < 256 ? -0.75f : 1e-3f * gauss(); break;       /* constant block */
        default: x[i] = 0.0f; break;                                    /* all zero */
        }
    }
}

static void check_type(quantize_chunk_fn ggml_quantize, plm_type type, const float *x, int n_rows, int n,
                       const float *imatrix) {
    const size_t row = plm_row_size(type, n);
    char *ours = calloc((size_t)n_rows, row), *theirs = calloc((size_t)n_rows, row);
    REQUIRE_VOID(ours && theirs, "out of memory");
    plm_quantize_weighted_fn q = plm_get_quantize_weighted(type);
    REQUIRE_VOID(q != NULL, "%s: no weighted quantizer", plm_type_name(type));
    for (int r = 0; r < n_rows; r++) q(x + (size_t)r * n, ours + r * row, n, imatrix);
    const size_t got = ggml_quantize(type, x, theirs, 0, n_rows, n, imatrix);
    CHECK(got == row * n_rows, "%s: ggml wrote %zu bytes, expected %zu", plm_type_name(type), got, row * n_rows);
    int same_rows = 0;
    for (int r = 0; r < n_rows; r++) {
        const int same = !memcmp(ours + r * row, theirs + r * row, row);
        CHECK(same, "%s %s importances: row %d (kind %d) differs from ggml's", plm_type_name(type),
              imatrix ? "with" : "without", r, r % 7);
        same_rows += same;
    }
    printf("%-7s %s importances: %d/%d rows identical to ggml's\n", plm_type_name(type), imatrix ? "with   " : "without",
           same_rows, n_rows);
    free(ours);
    free(theirs);
}

/* A reference quantizer (whole rows at once) against ggml's, which takes
 * the importances given and must ignore them for these types. */
static void check_reference(quantize_chunk_fn ggml_quantize, plm_type type, const float *x, int n_rows, int n,
                            const float *imatrix) {
    const size_t row = plm_row_size(type, n);
    char *ours = calloc((size_t)n_rows, row), *theirs = calloc((size_t)n_rows, row);
    REQUIRE_VOID(ours && theirs, "out of memory");
    plm_quantize_fn q = plm_get_quantize(type);
    REQUIRE_VOID(q != NULL, "%s: no reference quantizer", plm_type_name(type));
    q(x, ours, (int64_t)n_rows * n);
    const size_t got = ggml_quantize(type, x, theirs, 0, n_rows, n, imatrix);
    CHECK(got == row * n_rows, "%s: ggml wrote %zu bytes, expected %zu", plm_type_name(type), got, row * n_rows);
    int same_rows = 0;
    for (int r = 0; r < n_rows; r++) {
        const int same = !memcmp(ours + r * row, theirs + r * row, row);
        CHECK(same, "%s reference (ggml given %s importances): row %d (kind %d) differs from ggml's",
              plm_type_name(type), imatrix ? "" : "no", r, r % 7);
        same_rows += same;
    }
    printf("%-7s reference, ggml %s importances: %d/%d rows identical\n", plm_type_name(type),
           imatrix ? "with   " : "without", same_rows, n_rows);
    free(ours);
    free(theirs);
}

int main(void) {
#if !defined(__x86_64__)
    printf("skipped: the oracle library is x86-64 only here\n");
    return 77;
#endif
    void *lib = dlopen(GGML_BASE, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("skipped: no %s (cd tests/oracle && npm ci)\n", GGML_BASE);
        return 77;
    }
    quantize_chunk_fn ggml_quantize = (quantize_chunk_fn)dlsym(lib, "ggml_quantize_chunk");
    REQUIRE(ggml_quantize != NULL, "ggml_quantize_chunk not in %s", GGML_BASE);

    enum { N = 768, ROWS = 24 };
    float *x = malloc(sizeof(float) * N * ROWS), *imatrix = malloc(sizeof(float) * N);
    REQUIRE(x && imatrix, "out of memory");
    for (int r = 0; r < ROWS; r++) fill_row(x + (size_t)r * N, N, r);
    /* importances as llama-imatrix gives them: positive, spread over decades,
     * a few columns never activated */
    for (int i = 0; i < N; i++) imatrix[i] = i % 97 == 5 ? 0.0f : expf(2 * gauss());

    const plm_type weighted[] = {PLM_TYPE_Q4_0, PLM_TYPE_Q4_1, PLM_TYPE_Q5_0, PLM_TYPE_Q5_1,
                                 PLM_TYPE_Q2_K, PLM_TYPE_Q3_K, PLM_TYPE_Q4_K, PLM_TYPE_Q5_K,
                                 PLM_TYPE_Q6_K, PLM_TYPE_IQ4_NL, PLM_TYPE_IQ4_XS};
    for (size_t t = 0; t < sizeof weighted / sizeof weighted[0]; t++) {
        check_type(ggml_quantize, weighted[t], x, ROWS, N, imatrix);
        check_type(ggml_quantize, weighted[t], x, ROWS, N, NULL);
    }
    /* the codebook formats; ggml refuses IQ2_XXS, IQ2_XS and IQ1_S without
     * importances (it aborts), so those are checked with them only */
    const plm_type codebook[] = {PLM_TYPE_IQ3_XXS, PLM_TYPE_IQ3_S, PLM_TYPE_IQ2_XXS, PLM_TYPE_IQ2_XS,
                                 PLM_TYPE_IQ2_S, PLM_TYPE_IQ1_S, PLM_TYPE_IQ1_M};
    for (size_t t = 0; t < sizeof codebook / sizeof codebook[0]; t++) {
        const plm_type type = codebook[t];
        check_type(ggml_quantize, type, x, ROWS, N, imatrix);
        if (type != PLM_TYPE_IQ2_XXS && type != PLM_TYPE_IQ2_XS && type != PLM_TYPE_IQ1_S)
            check_type(ggml_quantize, type, x, ROWS, N, NULL);
    }
    /* the quantizers without importances: ternary and MXFP4 (ggml ignores
     * any given), and the codebook formats ggml writes without them */
    const plm_type reference[] = {PLM_TYPE_TQ1_0, PLM_TYPE_TQ2_0, PLM_TYPE_MXFP4,
                                  PLM_TYPE_IQ3_XXS, PLM_TYPE_IQ3_S, PLM_TYPE_IQ2_S, PLM_TYPE_IQ1_M};
    for (size_t t = 0; t < sizeof reference / sizeof reference[0]; t++) {
        check_reference(ggml_quantize, reference[t], x, ROWS, N, NULL);
        if (plm_get_quantize_weighted(reference[t]) == NULL)  /* importances change nothing */
            check_reference(ggml_quantize, reference[t], x, ROWS, N, imatrix);
    }
    /* the type table's IQ4_XS quantizer is the unweighted one */
    CHECK(plm_get_quantize(PLM_TYPE_IQ4_XS) == plm_quantize_row_iq4_xs, "IQ4_XS has no reference quantizer");
    CHECK(plm_get_quantize_weighted(PLM_TYPE_Q8_0) == NULL, "Q8_0 takes no importances in ggml");
    free(x);
    free(imatrix);
    dlclose(lib);
    return test_summary();
}
