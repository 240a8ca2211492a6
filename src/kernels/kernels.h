/*
 * The kernel dispatch table.  Model code calls kernels only through a
 * plm_kernels table, so SIMD versions (x86, arm) slot in beside the scalar
 * reference without touching the model.  The scalar table is the oracle the
 * SIMD tables are tested against, forever.
 *
 * Conventions follow ggml: a weight row of type T is dotted with an
 * activation row already converted to plm_type_info_get(T)->vec_dot_type
 * (Q8_0, Q8_1, Q8_K or F32).
 */
#ifndef PLM_KERNELS_H
#define PLM_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "quant/types.h"

/* *s = dot(weight row w, activation row a), both n elements long. */
typedef void (*plm_vec_dot_fn)(int64_t n, float *s, const void *w, const void *a);
/* Convert n floats to a row of blocks (n a multiple of the block size). */
typedef void (*plm_quantize_row_fn)(const float *x, void *y, int64_t n);
/* Convert a row of n elements to floats. */
typedef void (*plm_dequantize_row_fn)(const void *x, float *y, int64_t n);

/*
 * Optional tiled product for prefill: out[t * out_stride + r] for rows
 * r in [0, n_rows) of w (w_stride bytes apart) and tokens t in [0, n_tok),
 * reading each weight block once for several activation rows.  Same
 * numbers as vec_dot up to float summation order.
 */
typedef void (*plm_gemm_fn)(int64_t k, const void *w, size_t w_stride, int64_t n_rows,
                            const void *act, size_t act_stride, int n_tok,
                            float *out, int64_t out_stride);

/* One token against n_rows rows of w (w_stride bytes apart): out[r] bit for
 * bit vec_dot(k, &out[r], row r, act). */
typedef void (*plm_gemv_fn)(int64_t k, const void *w, size_t w_stride, int64_t n_rows, const void *act, float *out);

/* Attention of n_q query heads sharing one KV head over an f16 cache, with
 * an online softmax, exact or flash (plm_attn_f16 in ops.h is the arithmetic). */
typedef void (*plm_attn_f16_fn)(float *o, const uint16_t *q, int n_q, const void *k, const void *v,
                                size_t k_stride, size_t v_stride, int n_keys, int hd, float scale, bool flash);
/* A tile of prefill attention: n_tok tokens' n_q query heads, all on one
 * KV head, over a run of cached keys and values.  Row (t, h) is query
 * q[(t * n_q + h) * hd ...] and attends to the keys [key_begin[t],
 * key_end[t]) of k / v (k_stride / v_stride bytes apart; a non-empty
 * range); its output goes to o + t * o_stride + h * hd.  The cache rows are
 * of type_k / type_v: F16, or Q8_0 / Q4_0, whose rows meet the f16 query
 * dequantized (not attn_quant's query rounded to Q8_0: a prefill's rows
 * need not be decoding's bits, see forward.c).  Over an f16 cache, when
 * every row's range begins at the same key, each row's output is bit for
 * bit the same table's attn_f16 of that query over its range (x86: the same
 * blocks, sums and orders; test_kernels checks the exact mode), otherwise
 * the same online softmax up to float summation order.  Sizes:
 * PLM_ATTN_TILE_ROWS rows at most, rows rounded up to PLM_ATTN_TILE_ROUND
 * (the widest row vector) times hd at most PLM_ATTN_TILE_ELEMS, hd a multiple of 8 and at most PLM_ATTN_TILE_MAX_HD
 * (plm_attn_tile_tokens picks n_tok). */
typedef struct plm_attn_tile {
    float *o;
    size_t o_stride;               /* floats from one token's output to the next */
    const uint16_t *q;             /* [n_tok][n_q][hd] f16 */
    int n_tok, n_q, hd;
    const int *key_begin, *key_end; /* [n_tok], key indices from k / v */
    const void *k, *v;
    plm_type type_k, type_v;
    size_t k_stride, v_stride;
    float scale;
    bool flash;
    /* Optional scratch (NULL: none) where the exact mode keeps its first
     * pass's scores for the second; PLM_ATTN_TILE_ROWS x (span + 16) floats
     * suffice, span = max key_end - min key_begin. */
    float *kept;
    size_t kept_floats;
} plm_attn_tile;
enum { PLM_ATTN_TILE_ROWS = 64, PLM_ATTN_TILE_ROUND = 16, PLM_ATTN_TILE_ELEMS = 8192, PLM_ATTN_TILE_MAX_HD = 512 };
typedef void (*plm_attn_tile_fn)(const plm_attn_tile *t);

/* Tokens a tile of n_q heads of hd values can hold (0: such heads do not fit
 * a tile at all). */
static inline int plm_attn_tile_tokens(int n_q, int hd) {
    if (hd % 8 != 0 || hd > PLM_ATTN_TILE_MAX_HD) return 0;
    int n = 0;
    while (n < 16) {
        const int rows = ((n + 1) * n_q + PLM_ATTN_TILE_ROUND - 1) / PLM_ATTN_TILE_ROUND * PLM_ATTN_TILE_ROUND;
        if (rows > PLM_ATTN_TILE_ROWS || rows * hd > PLM_ATTN_TILE_ELEMS) break;
        n++;
    }
    return n;
}

/* g[i] = act(g[i]) * u[i]: SiLU (swiglu) or GELU (geglu, ops.h) */
typedef void (*plm_swiglu_fn)(float *g, const float *u, int n);

struct plm_kernels;
/* Attention of n_q query heads (q: n_q rows of hd floats) sharing one KV
 * head over a cache whose K rows are of type_k and V rows of type_v, at
 * least one of them quantized (Q8_0, Q4_0, ...; the other may be F16).
 * Each key meets the query in its vec_dot format, as weights do (llama.cpp's
 * arithmetic for a quantized cache), through kt's vec_dot, quantize_row and
 * dequantize_row entries; the same two modes as attn_f16.
 * n_q * hd <= PLM_ATTN_QUANT_MAX (attn_quant.h). */
typedef void (*plm_attn_quant_fn)(const struct plm_kernels *kt, float *o, const float *q, int n_q, plm_type type_k,
                                  const void *k, size_t k_stride, plm_type type_v, const void *v, size_t v_stride,
                                  int n_keys, int hd, float scale, bool flash);

typedef struct plm_kernels {
    const char *name;                                  /* "ref", "avx2", ... */
    plm_attn_f16_fn attn_f16;
    plm_attn_pass_fn attn_f16_pass;                    /* attn_f16 is plm_attn_f16_passes of it; what
                                                          splits one token's keys over threads (ops.h) */
    plm_attn_quant_fn attn_quant;
    plm_attn_quant_pass_fn attn_quant_pass;            /* attn_quant's passes, for the split */
    plm_swiglu_fn swiglu;
    plm_swiglu_fn geglu;                               /* bit for bit plm_geglu */
    plm_vec_dot_fn vec_dot[PLM_TYPE_COUNT];            /* by weight type */
    plm_gemm_fn gemm[PLM_TYPE_COUNT];                  /* by weight type; NULL: loop vec_dot */
    /* By weight type, for the row-interleaved layout (quant/repack.h): w
     * is the first row of a group, n_rows and the rows' start multiples of
     * PLM_REPACK_ROWS, w_stride the bytes of one (plain) row; any n_tok
     * >= 1 (decode too).  Every table has one for each repackable type. */
    plm_gemm_fn gemm_repacked[PLM_TYPE_COUNT];
    plm_quantize_row_fn quantize_row[PLM_TYPE_COUNT];  /* by target type */
    plm_dequantize_row_fn dequantize_row[PLM_TYPE_COUNT];
    /* By weight type (K-quants, IQ4_XS; plain row layout, Q8_K activations):
     * the coarse int8 prefill product (kernels/coarse.h): NOT the format's
     * own arithmetic, the weights requantized to int8 with one scale per
     * row and 256 elements.  Used only through plm_matmul_coarse. */
    plm_gemm_fn gemm_coarse[PLM_TYPE_COUNT];
    /* By weight type, optional: a gemm whose every output is bit for bit
     * this table's vec_dot of that row and token (whatever n_tok), for
     * passes that must match single-token decoding exactly (greedy
     * speculative verification, batch-invariant serving) while reading a
     * weight block once for several tokens.  Never filled from another
     * table: another table's vec_dot rounds differently.  NULL: the
     * caller loops vec_dot (plm_matmul_exact). */
    plm_gemm_fn gemm_exact[PLM_TYPE_COUNT];
    /* By weight type, optional: the decode matvec, for kernels that
     * prepare the activation once for every row; bit for bit this table's
     * vec_dot, so never filled from another table.  NULL: the caller loops
     * vec_dot. */
    plm_gemv_fn gemv[PLM_TYPE_COUNT];
    /* Optional: prefill attention by tiles of tokens (plm_attn_tile): the
     * table's attn_f16 arithmetic, reading each block of keys and values
     * once for several tokens, over an f16 or a quantized cache.  Never
     * filled from another table (another table's attn_f16 rounds
     * differently); NULL: token by token. */
    plm_attn_tile_fn attn_tile;
} plm_kernels;

/* Points every entry t has no function for at base's: a SIMD table lists
 * what it has code for and takes the rest from the reference. */
void plm_kernels_fill_from(plm_kernels *t, const plm_kernels *base);

/* The scalar reference table. */
const plm_kernels *plm_kernels_ref(void);

/* SIMD tables: each returns NULL when this build or this CPU cannot run it
 * (features are checked at run time: cpuid on x86, getauxval on arm), so one
 * binary serves every CPU of an architecture.  Every table is complete:
 * entries without a SIMD version point at the reference functions. */
const plm_kernels *plm_kernels_avx2(void);     /* AVX2 + FMA + F16C */
const plm_kernels *plm_kernels_avx512(void);   /* AVX-512 F/BW/VL(+VNNI) */
const plm_kernels *plm_kernels_avxvnni(void);  /* AVX2 + AVX-VNNI */
const plm_kernels *plm_kernels_neon(void);     /* ARMv8 NEON */
const plm_kernels *plm_kernels_dotprod(void);  /* NEON + sdot */
const plm_kernels *plm_kernels_i8mm(void);     /* NEON + sdot + smmla */

/* Fills `out` with every table this CPU can run, best first; returns the count. */
int plm_kernels_list(const plm_kernels **out, int max);

/* The table to use: `force` ("ref", "avx2", ...) if non-NULL, else the
 * PLM_KERNELS environment variable if set, else the best the CPU supports.
 * NULL if a forced name is unknown or unsupported on this CPU. */
const plm_kernels *plm_kernels_select(const char *force);

/*
 * out[t * out_stride + r] = dot(W row r, activation row t)
 * for rows r in [r0, r1) and tokens t in [0, n_tok).  W rows are
 * plm_row_size(wtype, k) bytes apart; activation rows (already in the
 * vec_dot type) are act_stride bytes apart.
 */
void plm_matmul(const plm_kernels *kt, plm_type wtype, const void *w, int64_t k,
                int64_t r0, int64_t r1, const void *act, size_t act_stride,
                int n_tok, float *out, int64_t out_stride);

/* plm_matmul with every output bit for bit kt->vec_dot[wtype] of its row
 * and token alone, whatever n_tok: by kt->gemm_exact when the table has one
 * for the type, else one vec_dot per row and token (the rows [r0, r1) stay
 * in cache across tokens). */
void plm_matmul_exact(const plm_kernels *kt, plm_type wtype, const void *w, int64_t k, int64_t r0, int64_t r1,
                      const void *act, size_t act_stride, int n_tok, float *out, int64_t out_stride);

/* Whether matrices of `type` are worth repacking for kt: kt has its own
 * gemm_repacked for the type (not the reference's, which is only an oracle),
 * or kt is the reference table itself. */
bool plm_kernels_repacks(const plm_kernels *kt, plm_type type);

/* plm_matmul for a row-interleaved weight (quant/repack.h): r0 and r1
 * multiples of PLM_REPACK_ROWS (or r1 the last row). */
void plm_matmul_repacked(const plm_kernels *kt, plm_type wtype, const void *w, int64_t k, int64_t r0, int64_t r1,
                         const void *act, size_t act_stride, int n_tok, float *out, int64_t out_stride);

/* Whether plm_matmul_coarse would multiply this product in coarse int8:
 * kt has its own gemm_coarse for wtype (not the reference's, an oracle
 * only) and the batch has at least PLM_COARSE_MIN_TOK tokens. */
bool plm_coarse_applies(const plm_kernels *kt, plm_type wtype, int n_tok);

/* plm_matmul through kt->gemm_coarse[wtype] (plm_coarse_applies must hold). */
void plm_matmul_coarse(const plm_kernels *kt, plm_type wtype, const void *w, int64_t k, int64_t r0, int64_t r1,
                       const void *act, size_t act_stride, int n_tok, float *out, int64_t out_stride);

#endif
