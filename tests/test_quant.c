/*
 * ggml block formats, half-precision conversions and the reference kernels.
 *
 * Oracles independent of our own code:
 *  1. llama.cpp's files: every fixture-*-pure-TYPE.gguf (and the K-quant
 *     mixtures) was quantized by llama-quantize from fixture-*-f16.gguf, so
 *     dequantizing each 2-D tensor must land near the f16 source.  A wrong
 *     nibble order, plane order or scale unpacking gives an error near or
 *     above 100%, far outside the per-type bounds below.
 *  2. llama.cpp's bytes: quantizing the f16 source with our reference
 *     quantizers must reproduce the file byte for byte (Q8_0, Q4_0, Q4_1,
 *     Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: every tensor of
 *     those types in the pure files and in the K-quant mixtures).
 *  3. Half precision: exhaustive f16 decoding against ldexp, and f32->f16 /
 *     f32->bf16 against a nearest-value search done in double.
 * Self-consistency: vec_dot(w, a) == dot(dequant(w), dequant(a)) on random
 * rows of 1, 2 and 7 blocks, for every weight type.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "pocketlm_gguf.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/quant.h"
#include "test.h"

/* ---- deterministic random numbers ---------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static float rng_uniform(void) { return (rng_u32() >> 8) * (1.0f / 16777216.0f); }

static float rng_gauss(void) {
    const float u = rng_uniform() + 1e-7f, v = rng_uniform();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* ---- 3. half precision ---------------------------------------------------- */

/* The value of f16 bits h, computed in double from the definition. */
static double f16_value(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    const double mag = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -mag : mag;
}

/* Nearest f16 to f (not NaN), ties to even, by binary search over the
 * positive encodings, which are ordered like their values; 65536 stands in
 * for the value of 0x7c00 (inf) so that overflow rounds like IEEE says. */
static uint16_t f16_oracle(float f) {
    const double a = fabs((double)f);
    const uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (isinf(f)) return sign | 0x7c00;
    int lo = 0, hi = 0x7c00;  /* invariant: val(lo) <= a, answer in [lo, hi] */
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if ((mid == 0x7c00 ? 65536.0 : f16_value((uint16_t)mid)) <= a) lo = mid; else hi = mid;
    }
    const double vlo = f16_value((uint16_t)lo), vhi = hi == 0x7c00 ? 65536.0 : f16_value((uint16_t)hi);
    if (a >= 65536.0) return sign | 0x7c00;
    const double midv = (vlo + vhi) / 2;
    int r = a < midv ? lo : a > midv ? hi : ((lo & 1) ? hi : lo);
    if (vlo == a) r = lo;
    return (uint16_t)(sign | r);
}

/* Nearest bf16 to f (not NaN), ties to even, deciding in double. */
static uint16_t bf16_oracle(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    const uint16_t lo = (uint16_t)((u & 0x7fffffff) >> 16);
    const uint16_t hi = (uint16_t)(lo + 1);  /* 0x7f80 (inf) when lo is the max */
    const double a = fabs((double)f);
    const double vlo = plm_bf16_to_fp32(lo);
    const double vhi = hi == 0x7f80 ? ldexp(1.0, 128) : (double)plm_bf16_to_fp32(hi);
    if (lo >= 0x7f80) return sign | lo;  /* inf */
    const double midv = (vlo + vhi) / 2;
    const uint16_t r = a < midv ? lo : a > midv ? hi : ((lo & 1) ? hi : lo);
    return sign | r;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void check_f32_to_f16(float f, int *bad) {
    const uint16_t got = plm_fp32_to_fp16(f), want = f16_oracle(f);
    if (got != want && (*bad)++ < 10)
        CHECK(got == want, "f32 %a (0x%08x) -> f16 0x%04x, want 0x%04x", f, plm_f32_bits(f), got, want);
}

static void test_fp16(void) {
    int bad = 0, nan_bad = 0;
    /* every f16 decodes to its defined value and encodes back to itself */
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = plm_fp16_to_fp32((uint16_t)h);
        const bool is_nan = ((h >> 10) & 31) == 31 && (h & 1023);
        if (is_nan) {
            const uint16_t back = plm_fp32_to_fp16(f);
            nan_bad += !isnan(f) || ((back >> 10) & 31) != 31 || !(back & 1023) ||
                       (back & 0x8000) != (h & 0x8000);
            continue;
        }
        const double want = ((h >> 10) & 31) == 31 ? ((h & 0x8000) ? -INFINITY : INFINITY)
                                                   : f16_value((uint16_t)h);
        const bool ok = (double)f == want && !!signbit(f) == ((h & 0x8000) != 0) &&
                        plm_fp32_to_fp16(f) == h;
        if (!ok && bad++ < 10) CHECK(ok, "f16 0x%04x -> %a", h, f);
    }
    CHECK(bad == 0 && nan_bad == 0, "f16 exhaustive round trip: %d bad, %d bad NaNs", bad, nan_bad);

    /* f32 -> f16 rounding: the halves, the exact midpoints (ties) and their
     * float neighbours, then random bit patterns */
    bad = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        const double v = f16_value((uint16_t)h);
        const double next = h + 1 == 0x7c00 ? 65536.0 : f16_value((uint16_t)(h + 1));
        const float mid = (float)((v + next) / 2);  /* exact in f32 */
        const float probes[] = {(float)v, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
        for (int k = 0; k < 4; k++) {
            check_f32_to_f16(probes[k], &bad);
            check_f32_to_f16(-probes[k], &bad);
        }
    }
    for (int i = 0; i < 2000000; i++) {
        const float f = float_of(rng_u32());
        if (!isnan(f)) check_f32_to_f16(f, &bad);
    }
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, 65504.0f, 65519.99f, 65520.0f,
                              1e10f, 3.4028235e38f, 0x1p-24f, 0x1p-25f, 0x1.000002p-25f,
                              0x1.8p-24f, 0x1.4p-23f, 0x1p-14f, 0x1.ff8p-15f, 1e-45f, 1.0f / 3};
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) check_f32_to_f16(specials[k], &bad);
    CHECK(bad == 0, "f32 -> f16: %d wrong roundings", bad);
    /* spot values whose answers are known by hand */
    CHECK(plm_fp32_to_fp16(65520.0f) == 0x7c00, "65520 rounds to inf (tie to even)");
    CHECK(plm_fp32_to_fp16(65519.0f) == 0x7bff, "65519 rounds to 65504");
    CHECK(plm_fp32_to_fp16(0x1p-25f) == 0x0000, "2^-25 ties to 0");
    CHECK(plm_fp32_to_fp16(0x1.000002p-25f) == 0x0001, "just above 2^-25 -> smallest subnormal");
    CHECK(plm_fp32_to_fp16(0x1.8p-24f) == 0x0002, "1.5 * 2^-24 ties to even (2)");
    CHECK(plm_fp32_to_fp16(1.0f + 0x1p-11f) == 0x3c00, "1 + half ulp ties down to 1");
    CHECK(plm_fp32_to_fp16(1.0f + 0x1.8p-10f) == 0x3c02, "1 + 1.5 ulp ties up to even");
    CHECK(plm_fp32_to_fp16(-2.0f) == 0xc000, "-2");
    const uint16_t qnan = plm_fp32_to_fp16(float_of(0x7f800001u));
    CHECK((qnan & 0x7c00) == 0x7c00 && (qnan & 0x3ff), "signalling NaN with low payload stays NaN: 0x%04x", qnan);
    CHECK(plm_fp32_to_fp16(float_of(0xffc00000u)) & 0x8000, "NaN keeps its sign");
}

static void check_f32_to_bf16(float f, int *bad) {
    const uint16_t got = plm_fp32_to_bf16(f), want = bf16_oracle(f);
    if (got != want && (*bad)++ < 10)
        CHECK(got == want, "f32 %a (0x%08x) -> bf16 0x%04x, want 0x%04x", f, plm_f32_bits(f), got, want);
}

static void test_bf16(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = plm_bf16_to_fp32((uint16_t)h);
        bad += plm_f32_bits(f) != h << 16;
        if (!isnan(f)) bad += plm_fp32_to_bf16(f) != h;
    }
    CHECK(bad == 0, "bf16 exhaustive round trip: %d bad", bad);
    bad = 0;
    for (int i = 0; i < 2000000; i++) {
        const float f = float_of(rng_u32());
        if (!isnan(f)) check_f32_to_bf16(f, &bad);
    }
    /* ties both ways, subnormal ties, overflow into inf */
    const uint32_t edges[] = {0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x3f808001u, 0x00008000u,
                              0x00018000u, 0x80018000u, 0x7f7f8000u, 0x7f7f7fffu, 0xff7fffffu,
                              0x7f800000u, 0x00000001u};
    for (size_t k = 0; k < sizeof edges / sizeof edges[0]; k++) check_f32_to_bf16(float_of(edges[k]), &bad);
    CHECK(bad == 0, "f32 -> bf16: %d wrong roundings", bad);
    CHECK(plm_fp32_to_bf16(float_of(0x3f808000u)) == 0x3f80, "tie to even, down");
    CHECK(plm_fp32_to_bf16(float_of(0x3f818000u)) == 0x3f82, "tie to even, up");
    CHECK(plm_fp32_to_bf16(float_of(0x7f7f8000u)) == 0x7f80, "max rounds to inf");
    CHECK(plm_fp32_to_bf16(float_of(0x00018000u)) == 0x0002, "subnormals round, not flushed");
    CHECK(plm_fp32_to_bf16(float_of(0x7f800001u)) == 0x7fc0, "sNaN quieted like ggml: 0x%04x",
          plm_fp32_to_bf16(float_of(0x7f800001u)));
    CHECK(plm_fp32_to_bf16(float_of(0xff812345u)) == 0xffc1, "NaN keeps sign and payload top");
}

/* ---- block layout facts --------------------------------------------------- */

/* The type table holds every format's reference conversions, and the
 * tables take theirs from it: every supported format dequantizes, and
 * quantizes where llama-quantize writes it (all but IQ4_XS so far); every
 * kernel table can convert rows of every such format, and its activation
 * formats (the vec_dot partners) quantize in every table. */
static void test_type_table(void) {
    static const plm_type writable[] = {PLM_TYPE_F32,  PLM_TYPE_F16,  PLM_TYPE_BF16, PLM_TYPE_Q4_0, PLM_TYPE_Q4_1,
                                        PLM_TYPE_Q5_0, PLM_TYPE_Q5_1, PLM_TYPE_Q8_0, PLM_TYPE_Q2_K, PLM_TYPE_Q3_K,
                                        PLM_TYPE_Q4_K, PLM_TYPE_Q5_K, PLM_TYPE_Q6_K, PLM_TYPE_IQ4_NL};
    for (size_t i = 0; i < sizeof writable / sizeof writable[0]; i++)
        CHECK(plm_type_info_get(writable[i])->quantize_row != NULL, "%s has a reference quantizer",
              plm_type_name(writable[i]));
    const plm_kernels *list[16];
    const int n = plm_kernels_list(list, 16);
    for (int t = 0; t < PLM_TYPE_COUNT; t++) {
        const plm_type_info *ti = plm_type_info_get((uint32_t)t);
        if (!ti || !ti->supported) continue;
        CHECK(ti->dequantize_row != NULL, "%s has a reference dequantizer", ti->name);
        CHECK(plm_type_info_get(ti->vec_dot_type) != NULL, "%s's vec_dot partner is a type", ti->name);
        CHECK(plm_kernels_ref()->quantize_row[t] == ti->quantize_row &&
                  plm_kernels_ref()->dequantize_row[t] == ti->dequantize_row,
              "the reference table converts %s with the type table's functions", ti->name);
        for (int k = 0; k < n; k++) {
            CHECK(list[k]->dequantize_row[t] != NULL, "%s dequantizes %s", list[k]->name, ti->name);
            CHECK(!ti->quantize_row || list[k]->quantize_row[t], "%s quantizes %s", list[k]->name, ti->name);
            CHECK(list[k]->quantize_row[ti->vec_dot_type] != NULL, "%s quantizes %s's activations",
                  list[k]->name, ti->name);
            CHECK(list[k]->vec_dot[t] != NULL, "%s dots %s", list[k]->name, ti->name);
        }
    }
}

static void test_layout(void) {
    static const struct { plm_type t; size_t size; } sizes[] = {
        {PLM_TYPE_Q4_0, sizeof(block_q4_0)}, {PLM_TYPE_Q4_1, sizeof(block_q4_1)},
        {PLM_TYPE_Q5_0, sizeof(block_q5_0)}, {PLM_TYPE_Q5_1, sizeof(block_q5_1)},
        {PLM_TYPE_Q8_0, sizeof(block_q8_0)}, {PLM_TYPE_Q8_1, sizeof(block_q8_1)},
        {PLM_TYPE_Q2_K, sizeof(block_q2_K)}, {PLM_TYPE_Q3_K, sizeof(block_q3_K)},
        {PLM_TYPE_Q4_K, sizeof(block_q4_K)}, {PLM_TYPE_Q5_K, sizeof(block_q5_K)},
        {PLM_TYPE_Q6_K, sizeof(block_q6_K)}, {PLM_TYPE_Q8_K, sizeof(block_q8_K)},
        {PLM_TYPE_IQ4_NL, sizeof(block_iq4_nl)}, {PLM_TYPE_IQ4_XS, sizeof(block_iq4_xs)},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        CHECK(plm_type_info_get(sizes[i].t)->type_size == sizes[i].size, "%s block size",
              plm_type_name(sizes[i].t));
    /* hand-made Q4_0 block: d = 1, element j = j - 8 for j < 16, 7 - (j-16) after */
    block_q4_0 b = {.d = 0x3c00};
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | (15 - j) << 4);
    float y[32];
    plm_dequantize_row_q4_0(&b, y, 32);
    CHECK(y[0] == -8 && y[15] == 7 && y[16] == 7 && y[31] == -8, "Q4_0 nibble order: %g %g %g %g",
          y[0], y[15], y[16], y[31]);
    /* Q5_0: the fifth bit of element 17 is qh bit 17 */
    block_q5_0 b5 = {.d = 0x3c00, .qh = {0, 0, 2, 0}};
    plm_dequantize_row_q5_0(&b5, y, 32);
    CHECK(y[17] == 0 && y[16] == -16 && y[1] == -16, "Q5_0 high bits: %g %g", y[17], y[16]);
}

/* ---- self-consistency of vec_dot ------------------------------------------ */

/* Gives a block of random bytes sane scales (random bytes are valid quants
 * for every format, but a random f16 scale may be inf or NaN). */
static void fix_scales(plm_type t, uint8_t *blk) {
    const plm_fp16_t d = plm_fp32_to_fp16(0.001f + 0.01f * rng_uniform());
    const plm_fp16_t m = plm_fp32_to_fp16(0.001f + 0.01f * rng_uniform());
    switch (t) {
    case PLM_TYPE_Q4_0: ((block_q4_0 *)blk)->d = d; break;
    case PLM_TYPE_Q5_0: ((block_q5_0 *)blk)->d = d; break;
    case PLM_TYPE_Q8_0: ((block_q8_0 *)blk)->d = d; break;
    case PLM_TYPE_IQ4_NL: ((block_iq4_nl *)blk)->d = d; break;
    case PLM_TYPE_Q4_1: ((block_q4_1 *)blk)->d = d, ((block_q4_1 *)blk)->m = m; break;
    case PLM_TYPE_Q5_1: ((block_q5_1 *)blk)->d = d, ((block_q5_1 *)blk)->m = m; break;
    case PLM_TYPE_Q2_K: ((block_q2_K *)blk)->d = d, ((block_q2_K *)blk)->dmin = m; break;
    case PLM_TYPE_Q3_K: ((block_q3_K *)blk)->d = d; break;
    case PLM_TYPE_Q4_K: ((block_q4_K *)blk)->d = d, ((block_q4_K *)blk)->dmin = m; break;
    case PLM_TYPE_Q5_K: ((block_q5_K *)blk)->d = d, ((block_q5_K *)blk)->dmin = m; break;
    case PLM_TYPE_Q6_K: ((block_q6_K *)blk)->d = d; break;
    case PLM_TYPE_IQ4_XS: ((block_iq4_xs *)blk)->d = d; break;
    case PLM_TYPE_IQ2_XXS: ((block_iq2_xxs *)blk)->d = d; break;
    case PLM_TYPE_IQ2_XS: ((block_iq2_xs *)blk)->d = d; break;
    case PLM_TYPE_IQ2_S: ((block_iq2_s *)blk)->d = d; break;
    case PLM_TYPE_IQ3_XXS: ((block_iq3_xxs *)blk)->d = d; break;
    case PLM_TYPE_IQ3_S: ((block_iq3_s *)blk)->d = d; break;
    case PLM_TYPE_IQ1_S: ((block_iq1_s *)blk)->d = d; break;
    case PLM_TYPE_TQ1_0: ((block_tq1_0 *)blk)->d = d; break;
    case PLM_TYPE_TQ2_0: ((block_tq2_0 *)blk)->d = d; break;
    case PLM_TYPE_MXFP4: ((block_mxfp4 *)blk)->e = (uint8_t)(118 + rng_u32() % 8); break;
    case PLM_TYPE_IQ1_M: { /* its f16 d in the top nibbles of the four u16 scales */
        block_iq1_m *b = (block_iq1_m *)blk;
        for (int k = 0; k < 4; k++)
            b->scales[2 * k + 1] = (uint8_t)((b->scales[2 * k + 1] & 0x0f) | ((d >> (4 * k)) & 15) << 4);
        break;
    }
    default: break;
    }
}

/* Fills a weight row: random bytes (quantized types) or quantized Gaussians. */
static void make_weights(const plm_kernels *kt, plm_type t, int64_t n, uint8_t *w, float *tmp,
                         bool random_bytes) {
    const plm_type_info *ti = plm_type_info_get(t);
    if (random_bytes && ti->block_size > 1) {
        const size_t bytes = plm_row_size(t, n);
        for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rng_u32();
        for (int64_t b = 0; b < n / ti->block_size; b++) fix_scales(t, w + b * ti->type_size);
        return;
    }
    for (int64_t i = 0; i < n; i++) tmp[i] = 0.02f * rng_gauss();
    kt->quantize_row[t](tmp, w, n);
}

/* Q4_1/Q5_1 x Q8_1 dots take the min term m * sum(a) from the activation's
 * stored s = f16(d * sum(q)), which is rounded; the exact dot of the
 * dequantized rows differs by m * (s - sum(dequant a)) per block. */
static double q8_1_min_correction(const uint8_t *w, const plm_type_info *ti, const uint8_t *a,
                                  const float *af, int64_t n) {
    double corr = 0;
    for (int64_t b = 0; b < n / 32; b++) {
        plm_fp16_t m;  /* .m follows .d at byte 2 in both block_q4_1 and block_q5_1 */
        memcpy(&m, w + b * ti->type_size + 2, sizeof m);
        const block_q8_1 *y = (const block_q8_1 *)a + b;
        double sum = 0;
        for (int j = 0; j < 32; j++) sum += af[32 * b + j];
        corr += plm_fp16_to_fp32(m) * (plm_fp16_to_fp32(y->s) - sum);
    }
    return corr;
}

static void test_vec_dot_type(const plm_kernels *kt, plm_type t) {
    const plm_type_info *ti = plm_type_info_get(t);
    const plm_type vt = ti->vec_dot_type;
    const int bs = ti->block_size == 1 ? 32 : (int)ti->block_size;
    static const int n_blocks[] = {1, 2, 7};
    for (int trial = 0; trial < 2; trial++) {
        const bool random_bytes = trial == 0;
        if (!random_bytes && !kt->quantize_row[t]) continue;
        for (int nb = 0; nb < 3; nb++) {
            const int64_t n = (int64_t)n_blocks[nb] * bs * (ti->block_size == 1 ? 8 : 1);
            uint8_t *w = malloc(plm_row_size(t, n)), *a = malloc(plm_row_size(vt, n));
            float *x = malloc(n * sizeof *x), *wf = malloc(n * sizeof *wf), *af = malloc(n * sizeof *af);
            make_weights(kt, t, n, w, x, random_bytes);
            for (int64_t i = 0; i < n; i++) x[i] = rng_gauss() * (i % 7 == 0 ? 3.0f : 1.0f);
            kt->quantize_row[vt](x, a, n);
            kt->dequantize_row[t](w, wf, n);
            kt->dequantize_row[vt](a, af, n);
            double want = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                want += (double)wf[i] * af[i];
                mag += fabs((double)wf[i] * af[i]);
            }
            if (vt == PLM_TYPE_Q8_1) want += q8_1_min_correction(w, ti, a, af, n);
            float got = NAN;
            kt->vec_dot[t](n, &got, w, a);
            CHECK(fabs(got - want) <= 1e-5 * mag + 1e-30, "%s vec_dot n=%lld (%s): got %.9g want %.9g",
                  ti->name, (long long)n, random_bytes ? "random blocks" : "quantized", got, want);
            free(w), free(a), free(x), free(wf), free(af);
        }
    }
}

static void test_vec_dot(void) {
    const plm_kernels *kt = plm_kernels_ref();
    int n_types = 0;
    for (int t = 0; t < PLM_TYPE_COUNT; t++) {
        const plm_type_info *ti = plm_type_info_get((uint32_t)t);
        if (!ti || !ti->supported) continue;
        n_types++;
        CHECK(kt->vec_dot[t] && kt->dequantize_row[t], "%s: supported but no kernel", ti->name);
        CHECK(kt->quantize_row[ti->vec_dot_type] && kt->dequantize_row[ti->vec_dot_type],
              "%s: no quantizer for its activation type", ti->name);
        if (kt->vec_dot[t]) test_vec_dot_type(kt, (plm_type)t);
    }
    CHECK(n_types == 25, "25 supported weight types, got %d", n_types);
}

/* Our quantizers round-trip Gaussians with the error their bit width allows,
 * and Q8_K's bsums are the sums of its quants. */
static void test_quantizers(void) {
    const plm_kernels *kt = plm_kernels_ref();
    static const struct { plm_type t; double bound; } q[] = {
        {PLM_TYPE_F32, 0}, {PLM_TYPE_F16, 1e-3}, {PLM_TYPE_BF16, 4e-3},
        {PLM_TYPE_Q8_0, 0.01}, {PLM_TYPE_Q8_1, 0.01}, {PLM_TYPE_Q8_K, 0.01},
        {PLM_TYPE_Q4_0, 0.15}, {PLM_TYPE_Q4_1, 0.12}, {PLM_TYPE_Q5_0, 0.07},
        {PLM_TYPE_Q5_1, 0.06}, {PLM_TYPE_IQ4_NL, 0.12},
    };
    enum { N = 4096 };
    static float x[N], y[N];
    static uint8_t buf[N * 4];
    for (int i = 0; i < N; i++) x[i] = rng_gauss();
    for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) {
        kt->quantize_row[q[k].t](x, buf, N);
        kt->dequantize_row[q[k].t](buf, y, N);
        double e = 0, s = 0;
        for (int i = 0; i < N; i++) e += (double)(y[i] - x[i]) * (y[i] - x[i]), s += (double)x[i] * x[i];
        CHECK(sqrt(e / s) <= q[k].bound, "%s round trip rel. RMS %.4f > %.4f", plm_type_name(q[k].t),
              sqrt(e / s), q[k].bound);
    }
    plm_quantize_row_q8_K(x, buf, N);
    int bad = 0;
    for (int b = 0; b < N / QK_K; b++) {
        const block_q8_K *blk = (const block_q8_K *)buf + b;
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += blk->qs[16 * j + l];
            bad += s != blk->bsums[j];
        }
    }
    CHECK(bad == 0, "Q8_K bsums: %d wrong", bad);
    /* an all-zero block quantizes to zeros, not NaNs */
    memset(x, 0, sizeof x);
    for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) {
        kt->quantize_row[q[k].t](x, buf, QK_K);
        kt->dequantize_row[q[k].t](buf, y, QK_K);
        bool zero = true;
        for (int i = 0; i < QK_K; i++) zero &= y[i] == 0;
        CHECK(zero, "%s: zeros do not round-trip", plm_type_name(q[k].t));
    }
    /* garbage in (NaN, inf, huge) is garbage out, never undefined behaviour
     * (the sanitizer builds would trap a bad float->int conversion) */
    for (int i = 0; i < QK_K; i++) x[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -3e38f;
    for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) kt->quantize_row[q[k].t](x, buf, QK_K);
    CHECK(1, "non-finite input");
}

static void test_select_and_matmul(void) {
    const plm_kernels *ref = plm_kernels_ref();
    CHECK(ref && strcmp(ref->name, "ref") == 0, "ref table");
    CHECK(plm_kernels_select("ref") == ref, "force ref");
    CHECK(plm_kernels_select("no-such-kernels") == NULL, "unknown forced name");
    setenv("PLM_KERNELS", "bogus", 1);
    CHECK(plm_kernels_select(NULL) == NULL, "unknown PLM_KERNELS");
    CHECK(plm_kernels_select("ref") == ref, "force beats the environment");
    setenv("PLM_KERNELS", "ref", 1);
    CHECK(plm_kernels_select(NULL) == ref, "PLM_KERNELS=ref");
    unsetenv("PLM_KERNELS");
    CHECK(plm_kernels_select(NULL) != NULL, "default table");

    /* rows [1, 4) of a 5 x 64 Q4_0 matrix times 3 Q8_0 tokens */
    enum { K = 64, ROWS = 5, TOK = 3, OUT_STRIDE = 7 };
    float wf[ROWS * K], xf[TOK * K], out[TOK * OUT_STRIDE];
    block_q4_0 w[ROWS * K / QK4_0];
    block_q8_0 a[TOK * K / QK8_0];
    for (int i = 0; i < ROWS * K; i++) wf[i] = rng_gauss();
    for (int i = 0; i < TOK * K; i++) xf[i] = rng_gauss();
    plm_quantize_row_q4_0(wf, w, ROWS * K);
    plm_quantize_row_q8_0(xf, a, TOK * K);
    for (int i = 0; i < TOK * OUT_STRIDE; i++) out[i] = -12345.0f;
    const size_t act_stride = plm_row_size(PLM_TYPE_Q8_0, K);
    plm_matmul(ref, PLM_TYPE_Q4_0, w, K, 1, 4, a, act_stride, TOK, out, OUT_STRIDE);
    int bad = 0;
    for (int t = 0; t < TOK; t++)
        for (int r = 0; r < OUT_STRIDE; r++) {
            float want = -12345.0f;
            if (r >= 1 && r < 4)
                ref->vec_dot[PLM_TYPE_Q4_0](K, &want, (const char *)w + r * plm_row_size(PLM_TYPE_Q4_0, K),
                                            (const char *)a + t * act_stride);
            bad += out[t * OUT_STRIDE + r] != want;
        }
    CHECK(bad == 0, "plm_matmul: %d outputs differ from vec_dot (or written out of range)", bad);
}

/* ---- 1 & 2: llama.cpp's quantized fixtures --------------------------------- */

/* Bound on the relative RMS error (||deq - src|| / ||src||) of each type on the
 * fixtures' Gaussian weights.  Theory for a b-bit absmax grid: step ~ 2*2.5
 * sigma / 2^b, error ~ step/sqrt(12): ~9% at 4 bits, ~4.5% at 5, ~0.5% at 8;
 * scale-fitting formats (K-quants, IQ4) do a little better.  llama.cpp's files
 * measure (worst tensor): Q8_0 .0055, Q6_K .018, Q5_K .036, Q5_1 .038,
 * Q5_0 .043, Q4_K .073, IQ4_NL .077, IQ4_XS .077, Q4_1 .079, Q4_0 .087,
 * Q3_K .152, Q2_K .299.  The bounds are ~1.25x those; a layout mistake (nibble
 * or plane order, scale unpacking) lands near 100% or more. */
static double type_bound(plm_type t) {
    switch (t) {
    case PLM_TYPE_Q8_0: return 0.007;
    case PLM_TYPE_Q6_K: return 0.023;
    case PLM_TYPE_Q5_K: return 0.045;
    case PLM_TYPE_Q5_1: return 0.048;
    case PLM_TYPE_Q5_0: return 0.054;
    case PLM_TYPE_Q4_K: return 0.091;
    case PLM_TYPE_IQ4_NL: return 0.096;
    case PLM_TYPE_IQ4_XS: return 0.096;
    case PLM_TYPE_Q4_1: return 0.099;
    case PLM_TYPE_Q4_0: return 0.109;
    case PLM_TYPE_Q3_K: return 0.19;
    case PLM_TYPE_Q2_K: return 0.375;
    case PLM_TYPE_F16: return 1e-7;
    case PLM_TYPE_F32: return 1e-7;
    default: return 0.0;
    }
}

static bool has_exact_quantizer(plm_type t) {
    return t == PLM_TYPE_Q8_0 || t == PLM_TYPE_Q4_0 || t == PLM_TYPE_Q4_1 || t == PLM_TYPE_Q5_0 ||
           t == PLM_TYPE_Q5_1 || t == PLM_TYPE_IQ4_NL || t == PLM_TYPE_Q2_K || t == PLM_TYPE_Q3_K ||
           t == PLM_TYPE_Q4_K || t == PLM_TYPE_Q5_K || t == PLM_TYPE_Q6_K;
}

typedef struct {
    double worst_err[PLM_TYPE_COUNT];
    int n_tensors[PLM_TYPE_COUNT], n_exact[PLM_TYPE_COUNT];
} fixture_stats;

/* Compares one quantized tensor with its f16 source: the dequantization error
 * (oracle 1) and, where we have ggml's quantizer, the exact bytes (oracle 2). */
static void check_tensor(const plm_gguf_tensor *q, const plm_gguf_tensor *src, const char *file, fixture_stats *st) {
    const int64_t k = (int64_t)q->ne[0], rows = (int64_t)q->ne[1];
    const plm_type t = (plm_type)q->type;
    float *a = malloc(k * sizeof *a), *b = malloc(k * sizeof *b);
    uint8_t *requant = malloc(plm_row_size(t, k) + 1);
    const size_t qrow = plm_row_size(t, k), srow = plm_row_size((plm_type)src->type, k);
    double err = 0, ref = 0;
    int64_t diff_rows = 0;
    for (int64_t r = 0; r < rows; r++) {
        plm_get_dequantize((plm_type)src->type)((const char *)src->data + r * srow, a, k);
        plm_get_dequantize(t)((const char *)q->data + r * qrow, b, k);
        for (int64_t i = 0; i < k; i++) err += (double)(b[i] - a[i]) * (b[i] - a[i]), ref += (double)a[i] * a[i];
        if (has_exact_quantizer(t)) {
            plm_get_quantize(t)(a, requant, k);
            diff_rows += memcmp(requant, (const char *)q->data + r * qrow, qrow) != 0;
        }
    }
    const double rel = sqrt(err / ref);
    char name[96];
    plm_gguf_str_copy(q->name, name, sizeof name);
    CHECK(rel <= type_bound(t), "%s: %s (%s) relative RMS error %.4f > %.4f", file, name, plm_type_name(t),
          rel, type_bound(t));
    if (rel > st->worst_err[t]) st->worst_err[t] = rel;
    st->n_tensors[t]++;
    if (has_exact_quantizer(t)) {
        CHECK(diff_rows == 0, "%s: %s (%s): %lld of %lld rows differ from llama.cpp's bytes", file, name,
              plm_type_name(t), (long long)diff_rows, (long long)rows);
        st->n_exact[t] += diff_rows == 0;
    }
    free(a), free(b), free(requant);
}

static plm_gguf_file *open_fixture(const char *path) {
    plm_error err;
    plm_gguf_open_params p = {.use_mmap = true, .use_mlock = false};
    plm_gguf_file *f = plm_gguf_open(path, &p, &err);
    CHECK(f != NULL, "cannot open %s: %s", path, f ? "" : err.message);
    return f;
}

/* Returns the number of tensors of type `expect` checked in the file. */
static int check_file(const plm_gguf_file *src, const char *path, plm_type expect, fixture_stats *st) {
    plm_gguf_file *f = open_fixture(path);
    if (!f) return 0;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    int n_expect = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const plm_gguf_tensor *q = &f->tensors[i];
        if (q->n_dims != 2) continue;
        char name[96];
        plm_gguf_str_copy(q->name, name, sizeof name);
        const plm_gguf_tensor *s = plm_gguf_find_tensor(src, name);
        CHECK(s && s->ne[0] == q->ne[0] && s->ne[1] == q->ne[1], "%s: %s has no matching source", base, name);
        if (!s) continue;
        const plm_type_info *ti = plm_type_info_get(q->type);
        CHECK(ti && ti->supported && type_bound((plm_type)q->type) > 0, "%s: %s has unexpected type %s",
              base, name, plm_type_name(q->type));
        if (!ti || !ti->supported || type_bound((plm_type)q->type) == 0) continue;
        check_tensor(q, s, base, st);
        n_expect += q->type == (uint32_t)expect;
    }
    plm_gguf_close(f);
    return n_expect;
}

static void test_fixtures(void) {
    static const struct { const char *file; plm_type type; } files[] = {
        {"fixture-llama-pure-Q8_0.gguf", PLM_TYPE_Q8_0},
        {"fixture-llama-pure-Q4_0.gguf", PLM_TYPE_Q4_0},
        {"fixture-llama-pure-Q4_1.gguf", PLM_TYPE_Q4_1},
        {"fixture-llama-pure-Q5_0.gguf", PLM_TYPE_Q5_0},
        {"fixture-llama-pure-Q5_1.gguf", PLM_TYPE_Q5_1},
        {"fixture-llama-pure-IQ4_NL.gguf", PLM_TYPE_IQ4_NL},
        {"fixture-llama-pure-IQ4_XS.gguf", PLM_TYPE_IQ4_XS},
        {"fixture-llama-pure-Q2_K.gguf", PLM_TYPE_Q2_K},
        {"fixture-llama-pure-Q3_K_S.gguf", PLM_TYPE_Q3_K},
        {"fixture-llama-pure-Q4_K_S.gguf", PLM_TYPE_Q4_K},
        {"fixture-llama-pure-Q5_K_S.gguf", PLM_TYPE_Q5_K},
        {"fixture-llama-pure-Q6_K.gguf", PLM_TYPE_Q6_K},
        {"fixture-llama-Q2_K.gguf", PLM_TYPE_Q2_K},
        {"fixture-llama-Q3_K_M.gguf", PLM_TYPE_Q3_K},
        {"fixture-llama-Q4_K_M.gguf", PLM_TYPE_Q4_K},
        {"fixture-llama-Q5_K_M.gguf", PLM_TYPE_Q5_K},
        {"fixture-qwen2-pure-Q8_0.gguf", PLM_TYPE_Q8_0},
        {"fixture-qwen2-pure-Q6_K.gguf", PLM_TYPE_Q6_K},
        {"fixture-qwen2-Q4_K_M.gguf", PLM_TYPE_Q4_K},
    };
    plm_gguf_file *llama = open_fixture(SHARED("models/fixtures/fixture-llama-f16.gguf"));
    plm_gguf_file *qwen = open_fixture(SHARED("models/fixtures/fixture-qwen2-f16.gguf"));
    if (!llama || !qwen) {
        plm_gguf_close(llama), plm_gguf_close(qwen);
        return;
    }
    fixture_stats st = {0};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/models/fixtures/%s", PLM_SHARED_DIR, files[i].file);
        const plm_gguf_file *src = strstr(files[i].file, "qwen2") ? qwen : llama;
        const int n = check_file(src, path, files[i].type, &st);
        CHECK(n > 0, "%s: no %s tensors found", files[i].file, plm_type_name(files[i].type));
    }
    for (int t = 0; t < PLM_TYPE_COUNT; t++) {
        if (!st.n_tensors[t]) continue;
        printf("  %-7s %4d tensors, worst relative RMS error %.5f (bound %.5f)", plm_type_name((uint32_t)t),
               st.n_tensors[t], st.worst_err[t], type_bound((plm_type)t));
        if (has_exact_quantizer((plm_type)t)) printf(", %d byte-identical to llama.cpp", st.n_exact[t]);
        printf("\n");
    }
    plm_gguf_close(llama);
    plm_gguf_close(qwen);
}

int main(void) {
    test_fp16();
    test_bf16();
    test_layout();
    test_type_table();
    test_quantizers();
    test_vec_dot();
    test_select_and_matmul();
    test_fixtures();
    return test_summary();
}
