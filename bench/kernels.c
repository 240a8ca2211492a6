/*
 * bench_kernels: single-threaded kernel throughput, per weight format and
 * per kernel table (not a test: it asserts nothing).
 *
 *   decode   matvec (n_tok = 1) over a weight matrix of ~256 MiB (k = 4096),
 *            far beyond L2/L3, reported as weight GB/s next to the read
 *            bandwidth of a plain memory sweep of the same size: decode
 *            reads every weight once per token, so that sweep is the
 *            ceiling.
 *   dec L2   the same matvec on its first ~512 KiB of rows, repeated: the
 *            weights stay in L2, so this is the kernel's own speed (what
 *            the memory has to outrun), not the memory's.
 *   int8 peak  vpdpbusd throughput alone (x86 with AVX-512 VNNI): 16
 *            independent chains on 256- and 512-bit registers.  Prefill on
 *            int8 activations cannot beat it: it is the ceiling the gemm
 *            column is measured against.  Then the same with the panel
 *            gemm's float work per block added (its structural ceiling).
 *
 * Times are thread CPU time (best of a few runs), to be robust on a shared
 * machine.
 *
 *   prefill  plm_matmul with n_tok = 64 on the tinyllama ffn shape
 *            (5632 x 2048), reported as GMAC/s (k * rows * tokens / s).
 *   attention  one GQA group of the tinyllama shape (8 query heads of 64
 *            over one KV head) against 2048 cached keys, exact mode, per
 *            cache type: attn_f16 for f16, attn_quant for q8_0 and q4_0,
 *            and for those also the loop with the reference's scalar block
 *            functions on the same table's dots ("scalar blocks", about
 *            what model code did before attn_quant was a table entry);
 *            reported as microseconds a call.  Also "tile": the prefill
 *            tile (attn_tile) of AT_TILE tokens of that group over the same
 *            keys (the i-th token's last key 2048 - AT_TILE + i), as
 *            microseconds a token, against a call's microseconds.
 *
 *   repacked  the same decode (also from L2: rp L2) and prefill on the row-interleaved layout
 *            (quant/repack.h, `--repack`), for the formats the table has
 *            interleaved kernels for ("-" otherwise).
 *
 * usage: bench_kernels [table|all] [format ...]    e.g. bench_kernels avx512 Q4_0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/attn_quant.h"
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/quant.h"
#include "quant/repack.h"

/* Thread CPU time: on a shared machine, time slices lost to other processes
 * do not count (memory contention still does). */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* Random blocks.  Speed does not depend on the values, but NaN or denormal
 * scales could slow float math, so the f16 scale fields get 0.01. */
static void fill(plm_type t, void *p, size_t bytes) {
    uint32_t *u = p;
    for (size_t i = 0; i < bytes / 4; i++) u[i] = rnd();
    const plm_type_info *ti = plm_type_info_get(t);
    const plm_fp16_t h = plm_fp32_to_fp16(0.01f);
    if (ti->block_size == 1) {
        if (t == PLM_TYPE_F32)
            for (size_t i = 0; i < bytes / 4; i++) ((float *)p)[i] = (float)(u[i] & 0xffff) * 1e-5f;
        else
            for (size_t i = 0; i < bytes / 2; i++) ((uint16_t *)p)[i] = h;
        return;
    }
    size_t off = 0; /* d field; the K-quants with trailing d: */
    if (t == PLM_TYPE_Q2_K) off = 80;
    if (t == PLM_TYPE_Q3_K) off = 108;
    if (t == PLM_TYPE_Q6_K) off = 208;
    if (t == PLM_TYPE_TQ1_0) off = 52;
    if (t == PLM_TYPE_TQ2_0) off = 64;
    for (size_t b = 0; b + ti->type_size <= bytes; b += ti->type_size) {
        if (t == PLM_TYPE_MXFP4) { /* an E8M0 exponent: 2^0 */
            ((uint8_t *)p)[b] = 127;
            continue;
        }
        if (t == PLM_TYPE_IQ1_M) { /* its f16 in the top nibbles of four u16 */
            uint8_t *sc = (uint8_t *)p + b + 48;
            for (int k = 0; k < 4; k++) sc[2 * k + 1] = (uint8_t)((sc[2 * k + 1] & 0x0f) | ((h >> (4 * k)) & 15) << 4);
            continue;
        }
        memcpy((char *)p + b + off, &h, 2);
        if (t == PLM_TYPE_Q2_K || t == PLM_TYPE_Q4_K || t == PLM_TYPE_Q5_K || t == PLM_TYPE_Q4_1 ||
            t == PLM_TYPE_Q5_1)
            memcpy((char *)p + b + off + 2, &h, 2);
    }
}

/* Plain read sweep: the decode ceiling on this machine, one thread. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t sweep(const void *p, size_t bytes) {
    const __m256i *v = p;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 4 <= bytes / 32; i += 4) {
        a0 = _mm256_xor_si256(a0, _mm256_load_si256(v + i));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256(v + i + 1));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256(v + i + 2));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256(v + i + 3));
    }
    a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)_mm256_extract_epi64(a0, 0) ^ (uint64_t)_mm256_extract_epi64(a0, 2);
}

/* Multiply-adds per second of vpdpbusd alone (one instruction: 4 byte
 * products per int32 lane), W-bit registers; 0 when the CPU lacks VNNI. */
#define DPBUSD_CHAINS 16
static volatile int peak_sink; /* the chains' results, stored before the clock stops */
/* Sixteen named accumulators (an array of vectors can stay in memory with
 * gcc, which then measures loads and stores instead); asm, so no compiler
 * folds the chains' common u.s into one. */
#define REP16(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define PEAK_DECL(i) VEC_T a##i = SET1_T(i);
#define PEAK_STEP(i) __asm__ volatile("vpdpbusd %2, %1, %0" : "+v"(a##i) : "v"(u), "v"(s));
#define PEAK_SINK(i) sink ^= LOW_T(a##i);
#define DEF_PEAK(NAME, LANES)                                                                   \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), noinline)) static double NAME(long n) { \
        REP16(PEAK_DECL)                                                                        \
        const VEC_T u = SET1_T(0x03030303), s = SET1_T(0x05050505);                             \
        const double t0 = now();                                                                \
        for (long i = 0; i < n; i++) {                                                          \
            REP16(PEAK_STEP)                                                                    \
        }                                                                                       \
        int sink = 0;                                                                           \
        REP16(PEAK_SINK)                                                                        \
        peak_sink = sink;                                                                       \
        return (double)n * DPBUSD_CHAINS * LANES * 4 / (now() - t0);                            \
    }
#define VEC_T __m256i
#define SET1_T _mm256_set1_epi32
#define LOW_T(v) _mm_cvtsi128_si32(_mm256_castsi256_si128(v))
DEF_PEAK(peak_ymm, 8)
#undef VEC_T
#undef SET1_T
#undef LOW_T
#define VEC_T __m512i
#define SET1_T _mm512_set1_epi32
#define LOW_T(v) _mm_cvtsi128_si32(_mm512_castsi512_si128(v))
DEF_PEAK(peak_zmm, 16)

/* The panel gemm's ceiling (x86/gemm_panel.h): per 32-element block and
 * token it issues eight vpdpbusd and then the block's float work, an int ->
 * float conversion, the product of the two scales and one fmadd, which
 * share the vector pipes.  Eight independent chains, nothing else. */
#define TILE_STEP(i) PEAK_STEP(i)
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), noinline)) static double tile_zmm(long n) {
    __m512i a0 = _mm512_set1_epi32(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const __m512i u = _mm512_set1_epi32(0x03030303), s = _mm512_set1_epi32(0x05050505);
    __m512 acc = _mm512_setzero_ps(), t;
    const __m512 d = _mm512_set1_ps(1e-9f);
    const double t0 = now();
    for (long i = 0; i < n; i++) {
        TILE_STEP(0) TILE_STEP(1) TILE_STEP(2) TILE_STEP(3) TILE_STEP(4) TILE_STEP(5) TILE_STEP(6) TILE_STEP(7)
        __asm__ volatile("vcvtdq2ps %2, %1\n\tvmulps %3, %1, %1\n\tvfmadd231ps %1, %3, %0"
                         : "+v"(acc), "=&v"(t)
                         : "v"(a0), "v"(d));
    }
    const double dt = now() - t0;
    peak_sink = _mm_cvtsi128_si32(_mm512_castsi512_si128(_mm512_add_epi32(
                    _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                    _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7))))) ^
                (int)_mm512_reduce_add_ps(acc);
    return (double)n * 8 * 16 * 4 / dt;
}

static void int8_peak(void) {
    if (!__builtin_cpu_supports("avx512vnni")) return;
    printf("int8 peak: vpdpbusd %.1f GMAC/s on 256-bit, %.1f GMAC/s on 512-bit registers (1 thread)\n",
           peak_ymm(20000000) / 1e9, peak_zmm(20000000) / 1e9);
    printf("panel tile ceiling: %.1f GMAC/s (8 vpdpbusd + cvt, mul, fmadd a block, 512-bit)\n",
           tile_zmm(20000000) / 1e9);
}
#else
static void int8_peak(void) {}
static uint64_t sweep(const void *p, size_t bytes) {
    const uint64_t *v = p;
    uint64_t a = 0, b = 0;
    for (size_t i = 0; i + 2 <= bytes / 8; i += 2) {
        a ^= v[i];
        b ^= v[i + 1];
    }
    return a ^ b;
}
#endif

static const plm_type formats[] = {
    PLM_TYPE_Q4_0, PLM_TYPE_Q8_0, PLM_TYPE_Q4_K, PLM_TYPE_Q6_K, PLM_TYPE_Q5_K,
    PLM_TYPE_Q5_0, PLM_TYPE_Q3_K, PLM_TYPE_Q2_K, PLM_TYPE_IQ4_NL, PLM_TYPE_IQ4_XS,
    PLM_TYPE_Q4_1, PLM_TYPE_Q5_1, PLM_TYPE_F16, PLM_TYPE_BF16, PLM_TYPE_F32,
    PLM_TYPE_IQ2_XXS, PLM_TYPE_IQ2_XS, PLM_TYPE_IQ2_S, PLM_TYPE_IQ3_XXS, PLM_TYPE_IQ3_S,
    PLM_TYPE_IQ1_S, PLM_TYPE_IQ1_M, PLM_TYPE_TQ1_0, PLM_TYPE_TQ2_0, PLM_TYPE_MXFP4,
};

enum { K = 4096, PF_ROWS = 5632, PF_K = 2048, PF_TOK = 64 };
#define BIG ((size_t)256 << 20)

/* Best time of a few calls of one attention over the cache (see the top). */
enum { AT_HD = 64, AT_NQ = 8, AT_KEYS = 2048, AT_TILE = 8 };

/* Best seconds of one decode pass (one token, rows [0, rows) of w, K wide),
 * in the file layout or repacked: the best of `reps` runs of `passes`
 * passes each (passes > 1 keeps a small matrix in L2). */
static double time_decode(const plm_kernels *kt, plm_type t, const void *w, bool repacked, int64_t rows,
                          const void *act, float *out, int reps, int passes) {
    double best = 1e9;
    for (int rep = 0; rep < reps; rep++) {
        const double t0 = now();
        for (int pass = 0; pass < passes; pass++) {
            if (repacked) plm_matmul_repacked(kt, t, w, K, 0, rows, act, 0, 1, out, 0);
            else plm_matmul(kt, t, w, K, 0, rows, act, 0, 1, out, 0);
        }
        const double dt = (now() - t0) / passes;
        if (dt < best) best = dt;
    }
    return best;
}

static double time_attention(const plm_kernels *kt, plm_type type, bool scalar_blocks, const float *q, const void *k,
                             const void *v, size_t row, float *o) {
    static uint16_t qh[AT_NQ * AT_HD];
    plm_fp32_to_fp16_row(q, qh, AT_NQ * AT_HD);
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        const double t0 = now();
        if (type == PLM_TYPE_F16) kt->attn_f16(o, qh, AT_NQ, k, v, row, row, AT_KEYS, AT_HD, 0.125f, false);
        else if (scalar_blocks) plm_attn_quant(kt, o, q, AT_NQ, type, k, row, type, v, row, AT_KEYS, AT_HD, 0.125f, false);
        else kt->attn_quant(kt, o, q, AT_NQ, type, k, row, type, v, row, AT_KEYS, AT_HD, 0.125f, false);
        const double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

/* Best time of a few prefill tiles of AT_TILE tokens, per token. */
static double time_attention_tile(const plm_kernels *kt, plm_type type, const float *q, const void *k, const void *v,
                                  size_t row, float *o) {
    static uint16_t qh[AT_TILE * AT_NQ * AT_HD];
    static int begin[AT_TILE], end[AT_TILE];
    static float kept[PLM_ATTN_TILE_ROWS * (AT_KEYS + 16)];
    for (int t = 0; t < AT_TILE; t++) {
        plm_fp32_to_fp16_row(q, qh + t * AT_NQ * AT_HD, AT_NQ * AT_HD);
        begin[t] = 0, end[t] = AT_KEYS - AT_TILE + 1 + t;
    }
    const plm_attn_tile tile = {.o = o, .o_stride = AT_NQ * AT_HD, .q = qh, .n_tok = AT_TILE, .n_q = AT_NQ,
                                .hd = AT_HD, .key_begin = begin, .key_end = end, .k = k, .v = v, .type_k = type,
                                .type_v = type, .k_stride = row, .v_stride = row, .scale = 0.125f, .kept = kept,
                                .kept_floats = sizeof kept / sizeof kept[0]};
    double best = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        const double t0 = now();
        kt->attn_tile(&tile);
        const double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return best / AT_TILE;
}

static void bench_attention(const plm_kernels *const *list, int nk) {
    static const plm_type types[] = {PLM_TYPE_F16, PLM_TYPE_Q8_0, PLM_TYPE_Q4_0};
    static float x[AT_KEYS * AT_HD], q[AT_NQ * AT_HD], o[AT_TILE * AT_NQ * AT_HD];
    static uint8_t k[AT_KEYS * AT_HD * 2], v[AT_KEYS * AT_HD * 2];
    for (int i = 0; i < AT_NQ * AT_HD; i++) q[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    printf("%-7s %-7s %12s %15s %12s\n", "table", "cache", "attention", "scalar blocks", "tile");
    printf("%-7s %-7s %12s %15s %12s\n", "", "", "us/call", "us/call", "us/token");
    for (size_t c = 0; c < sizeof types / sizeof types[0]; c++) {
        const plm_type t = types[c];
        const size_t row = plm_row_size(t, AT_HD);
        for (int i = 0; i < AT_KEYS * AT_HD; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
        plm_kernels_ref()->quantize_row[t](x, k, AT_KEYS * AT_HD);
        plm_kernels_ref()->quantize_row[t](x, v, AT_KEYS * AT_HD);
        for (int i = 0; i < nk; i++) {
            const double us = 1e6 * time_attention(list[i], t, false, q, k, v, row, o);
            char sb[32] = "-";
            char tl[32] = "-";
            if (t != PLM_TYPE_F16) snprintf(sb, sizeof sb, "%.0f", 1e6 * time_attention(list[i], t, true, q, k, v, row, o));
            if (list[i]->attn_tile)
                snprintf(tl, sizeof tl, "%.0f", 1e6 * time_attention_tile(list[i], t, q, k, v, row, o));
            printf("%-7s %-7s %12.0f %15s %12s\n", list[i]->name, plm_type_name(t), us, sb, tl);
        }
    }
}

/* Exact verification (kernels.h: gemm_exact): n_tok tokens on the tinyllama
 * ffn shape, as greedy speculative verification computes them: the
 * per-token vec_dot loop over chunks of VF_CHUNK rows (what rowwise passes
 * did before gemm_exact), plm_matmul_exact, and the batched plm_matmul
 * (not bit-identical to decoding: the ceiling), in GMAC/s. */
enum { VF_CHUNK = 64 };
static const plm_type verify_formats[] = {PLM_TYPE_Q8_0, PLM_TYPE_Q4_0, PLM_TYPE_Q4_K, PLM_TYPE_Q6_K};

static double time_verify(const plm_kernels *kt, int how, plm_type t, const void *w, const void *act, size_t arow,
                          int nt, float *out) {
    const size_t prow = plm_row_size(t, PF_K);
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        const double t0 = now();
        if (how == 2) plm_matmul(kt, t, w, PF_K, 0, PF_ROWS, act, arow, nt, out, PF_ROWS);
        else if (how == 1) plm_matmul_exact(kt, t, w, PF_K, 0, PF_ROWS, act, arow, nt, out, PF_ROWS);
        else
            for (int64_t r0 = 0; r0 < PF_ROWS; r0 += VF_CHUNK)
                for (int tk = 0; tk < nt; tk++)
                    for (int64_t r = r0; r < r0 + VF_CHUNK && r < PF_ROWS; r++)
                        kt->vec_dot[t](PF_K, &out[tk * PF_ROWS + r], (const char *)w + r * prow,
                                       (const char *)act + tk * arow);
        const double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

static void bench_verify(const plm_kernels *const *list, int nk, void *w, const float *x, void *act) {
    printf("\nexact verification, %d x %d weights (GMAC/s): vec_dot loop, plm_matmul_exact, batched plm_matmul\n",
           PF_ROWS, PF_K);
    printf("%-7s %-7s %5s %10s %10s %10s %8s\n", "table", "format", "n_tok", "loop", "exact", "batched", "exact/loop");
    for (size_t f = 0; f < sizeof verify_formats / sizeof verify_formats[0]; f++) {
        const plm_type t = verify_formats[f], at = plm_type_info_get(t)->vec_dot_type;
        const size_t arow = plm_row_size(at, PF_K);
        fill(t, w, (size_t)PF_ROWS * plm_row_size(t, PF_K));
        for (int tk = 0; tk < 16; tk++) plm_kernels_ref()->quantize_row[at](x + (size_t)tk * PF_K, (char *)act + tk * arow, PF_K);
        for (int i = 0; i < nk; i++) {
            if (list[i] == plm_kernels_ref()) continue;
            static const int toks[] = {2, 5, 8, 16};
            for (int j = 0; j < 4; j++) {
                const int nt = toks[j];
                float *out = malloc(sizeof(float) * PF_ROWS * nt);
                if (!out) return;
                const double macs = (double)PF_K * PF_ROWS * nt, loop = time_verify(list[i], 0, t, w, act, arow, nt, out),
                             exact = time_verify(list[i], 1, t, w, act, arow, nt, out),
                             batched = time_verify(list[i], 2, t, w, act, arow, nt, out);
                printf("%-7s %-7s %5d %10.1f %10.1f %10.1f %7.2fx\n", list[i]->name, plm_type_name(t), nt,
                       macs / loop / 1e9, macs / exact / 1e9, macs / batched / 1e9, loop / exact);
                free(out);
            }
        }
    }
}

int main(int argc, char **argv) {
    const plm_kernels *list[16];
    int nk = plm_kernels_list(list, 16);
    if (argc > 1 && strcmp(argv[1], "all") != 0) {
        const plm_kernels *kt = plm_kernels_select(argv[1]);
        if (!kt) {
            fprintf(stderr, "unknown or unsupported table %s\n", argv[1]);
            return 1;
        }
        list[0] = kt;
        nk = 1;
    }
    char *big = aligned_alloc(64, BIG);
    if (!big) return 1;
    memset(big, 1, BIG);
    double best = 1e9;
    uint64_t sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        const double t0 = now();
        sink ^= sweep(big, BIG);
        const double dt = now() - t0;
        if (dt < best) best = dt;
    }
    const double sweep_gbs = BIG / best / 1e9;
    printf("memory sweep: %.1f GB/s (best of 5, %zu MiB, 1 thread)\n", sweep_gbs, BIG >> 20);
    int8_peak();
    printf("%-7s %-7s %9s %7s %8s %12s %12s %11s %8s %11s\n", "table", "format", "decode", "of mem", "dec L2",
           "prefill", "(no gemm)", "rp decode", "rp L2", "rp prefill");
    printf("%-7s %-7s %9s %7s %8s %12s %12s %11s %8s %11s\n", "", "", "GB/s", "", "GB/s", "GMAC/s", "GMAC/s", "GB/s",
           "GB/s", "GMAC/s");
    char *packed = aligned_alloc(64, BIG);
    if (!packed) return 1;

    float *x = malloc(sizeof(float) * K * PF_TOK);
    void *act = malloc(sizeof(float) * K * PF_TOK);
    float *out = malloc(sizeof(float) * PF_ROWS * PF_TOK);
    for (int i = 0; i < K * PF_TOK; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;

    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        const plm_type t = formats[f];
        int wanted = argc <= 2;
        for (int a = 2; a < argc; a++) wanted |= plm_type_from_name(argv[a]) == (int)t;
        if (!wanted) continue;
        const plm_type at = plm_type_info_get(t)->vec_dot_type;
        const size_t row = plm_row_size(t, K);
        const int64_t rows = (int64_t)(BIG / row);
        fill(t, big, (size_t)rows * row);
        for (int i = 0; i < nk; i++) {
            const plm_kernels *kt = list[i];
            /* decode */
            kt->quantize_row[at](x, act, K);
            const int reps = kt == plm_kernels_ref() ? 1 : 4;
            const double gbs = (double)rows * row / time_decode(kt, t, big, false, rows, act, out, reps, 1) / 1e9;
            /* decode from L2: the first ~512 KiB of rows, 50 passes a run */
            const int64_t l2_rows = (int64_t)((512u << 10) / row) > 0 ? (int64_t)((512u << 10) / row) : 1;
            const double l2_gbs = (double)l2_rows * row / time_decode(kt, t, big, false, l2_rows, act, out, reps, 50) / 1e9;
            /* prefill on the ffn shape (fits in L3: compute-bound) */
            const size_t arow = plm_row_size(at, PF_K);
            for (int tk = 0; tk < PF_TOK; tk++)
                kt->quantize_row[at](x + (size_t)tk * PF_K, (char *)act + tk * arow, PF_K);
            const size_t prow = plm_row_size(t, PF_K);
            double bp = 1e9, bn = 1e9;
            for (int rep = 0; rep < (kt == plm_kernels_ref() ? 1 : 3); rep++) {
                double t0 = now();
                plm_matmul(kt, t, big, PF_K, 0, PF_ROWS, act, arow, PF_TOK, out, PF_ROWS);
                double dt = now() - t0;
                if (dt < bp) bp = dt;
                if (!kt->gemm[t]) continue;
                /* the same product without gemm: vec_dot per row and token */
                t0 = now();
                for (int64_t r = 0; r < PF_ROWS; r++)
                    for (int tk = 0; tk < PF_TOK; tk++)
                        kt->vec_dot[t](PF_K, &out[tk * PF_ROWS + r], big + r * prow, (char *)act + tk * arow);
                dt = now() - t0;
                if (dt < bn) bn = dt;
            }
            const double macs = (double)PF_K * PF_ROWS * PF_TOK;
            char nog[32] = "-", rpd[32] = "-", rpl2[32] = "-", rpp[32] = "-";
            if (kt->gemm[t]) snprintf(nog, sizeof nog, "%.1f", macs / bn / 1e9);
            if (kt != plm_kernels_ref() && plm_kernels_repacks(kt, t)) {
                const int64_t rrows = rows / PLM_REPACK_ROWS * PLM_REPACK_ROWS;
                kt->quantize_row[at](x, act, K);
                plm_repack_rows(t, K, rrows, big, packed);
                const double brd = time_decode(kt, t, packed, true, rrows, act, out, 4, 1);
                snprintf(rpd, sizeof rpd, "%.1f", (double)rrows * row / brd / 1e9);
                /* and from L2, as dec L2 above: the kernel's own speed */
                const int64_t rl2 = l2_rows < PLM_REPACK_ROWS ? PLM_REPACK_ROWS : l2_rows / PLM_REPACK_ROWS * PLM_REPACK_ROWS;
                const double brl = time_decode(kt, t, packed, true, rl2, act, out, reps, 50);
                snprintf(rpl2, sizeof rpl2, "%.1f", (double)rl2 * row / brl / 1e9);
                double brp = 1e9;
                for (int tk = 0; tk < PF_TOK; tk++)
                    kt->quantize_row[at](x + (size_t)tk * PF_K, (char *)act + tk * arow, PF_K);
                plm_repack_rows(t, PF_K, PF_ROWS, big, packed);
                for (int rep = 0; rep < 3; rep++) {
                    const double t0 = now();
                    plm_matmul_repacked(kt, t, packed, PF_K, 0, PF_ROWS, act, arow, PF_TOK, out, PF_ROWS);
                    const double dt = now() - t0;
                    if (dt < brp) brp = dt;
                }
                snprintf(rpp, sizeof rpp, "%.1f", macs / brp / 1e9);
            }
            printf("%-7s %-7s %9.1f %6.0f%% %8.1f %12.1f %12s %11s %8s %11s\n", kt->name, plm_type_name(t), gbs,
                   100 * gbs / sweep_gbs, l2_gbs, macs / bp / 1e9, nog, rpd, rpl2, rpp);
            fflush(stdout);
        }
    }
    bench_attention(list, nk);
    bench_verify(list, nk, big, x, act);
    printf("(sink %llu)\n", (unsigned long long)(sink & 1));
    free(x);
    free(act);
    free(out);
    free(big);
    free(packed);
    return 0;
}
