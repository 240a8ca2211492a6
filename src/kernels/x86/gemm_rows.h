/*
 * The prefill gemm entries of the quantized formats.  Part of an x86 table
 * (see x86.h); `type` is a constant at every call.
 *
 * Row by row: a tile is one weight row x X86_GEMM_T tokens, each weight
 * block decoded once for those tokens (tile_32, tile_32_min, tile_k,
 * tile_iq4_xs, tile_cb, tile_mxfp4).  Rows go in bands of X86_GEMM_RB so
 * a band of weights stays in L1/L2 while every token tile passes over it.
 * On the AVX-512 table, batches of PANEL_MIN_TOK tokens or more take the
 * panel gemm (gemm_panel.h) instead.  The codebook formats, whose decode
 * costs more than their multiply, decode a band of rows once per k slice
 * for all tokens from CBS_MIN_TOK tokens on AVX2 and AVX-VNNI
 * (gemm_cb_slices, codebooks.h).
 */

/* One weight row x nt tokens, by the format's tile. */
X86_INL void row_tile(plm_type type, int nt, int64_t nb, const void *x, const char *act, size_t as, float *out,
                      int64_t os) {
    if (type == PLM_TYPE_IQ4_XS) tile_iq4_xs(nt, nb, x, act, as, out, os);
    else if (type == PLM_TYPE_MXFP4) tile_mxfp4(nt, nb, x, act, as, out, os);
    else if (is_codebook(type)) tile_cb(type, nt, nb, x, act, as, out, os);
    else if (is_k_quant(type)) tile_k(type, nt, nb, x, act, as, out, os);
    else if (has_min32(type)) tile_32_min(type, nt, nb, x, act, as, out, os);
    else tile_32(type, nt, nb, x, act, as, out, os);
}

X86_INL void gemm_rows(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                       int nt, float *out, int64_t os) {
    const int64_t nb = k / (is_k_quant(type) || is_codebook(type) ? QK_K : 32);
    const char *wr = w, *ar = act;
    for (int64_t r0 = 0; r0 < nr; r0 += X86_GEMM_RB) {
        const int64_t r1 = r0 + X86_GEMM_RB < nr ? r0 + X86_GEMM_RB : nr;
        int t = 0;
        for (; t + X86_GEMM_T <= nt; t += X86_GEMM_T)
            for (int64_t r = r0; r < r1; r++)
                row_tile(type, X86_GEMM_T, nb, wr + r * ws, ar + t * as, as, out + t * os + r, os);
        if (t < nt)
            for (int64_t r = r0; r < r1; r++) row_tile(type, nt - t, nb, wr + r * ws, ar + t * as, as, out + t * os + r, os);
    }
}

X86_INL void gemm_quant(plm_type type, int64_t k, const void *w, size_t ws, int64_t nr, const void *act, size_t as,
                        int nt, float *out, int64_t os) {
#if X86_ZMM
    if (nt >= PANEL_MIN_TOK) {
        gemm_panel(type, k, w, ws, nr, act, as, nt, out, os);
        return;
    }
#endif
    /* Not on AVX-512: 8-token row tiles there, then the panel from 16; the
     * slices' code in the gemm entries measured a few % off the panel's
     * IQ3_S prefill.  TQ2_0's decode is a shift: no gain. */
    if (!X86_ZMM && is_codebook(type) && type != PLM_TYPE_TQ2_0 && nt >= CBS_MIN_TOK) {
        gemm_cb_slices(type, k, w, ws, nr, act, as, nt, out, os);
        return;
    }
    gemm_rows(type, k, w, ws, nr, act, as, nt, out, os);
}

/* ---- the gemm entries ------------------------------------------------------ */

X86_TARGET static void X86_FN(gemm_q4_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                         size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_Q4_0, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_q4_1)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                         size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_Q4_1, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_q5_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                         size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_Q5_0, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_q5_1)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                         size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_Q5_1, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_q8_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                         size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_Q8_0, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_iq4_nl)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                           size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_IQ4_NL, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_q2_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                         size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_Q2_K, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_q3_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                         size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_Q3_K, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_q4_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                         size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_Q4_K, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_q5_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                         size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_Q5_K, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_q6_K)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                         size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_Q6_K, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_iq4_xs)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                           size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_IQ4_XS, k, w, ws, nr, act, as, nt, out, os);
}

/* The codebook formats and MXFP4: row tiles, or on AVX-512 the panel gemm
 * from PANEL_MIN_TOK tokens (decoded to int8 once per panel and k slice). */

X86_TARGET static void X86_FN(gemm_iq2_xxs)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                            size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_IQ2_XXS, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_iq2_xs)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                           size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_IQ2_XS, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_iq2_s)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                          size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_IQ2_S, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_iq3_xxs)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                            size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_IQ3_XXS, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_iq3_s)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                          size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_IQ3_S, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_iq1_s)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                          size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_IQ1_S, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_iq1_m)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                          size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_IQ1_M, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_tq1_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                          size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_TQ1_0, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_tq2_0)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                          size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_TQ2_0, k, w, ws, nr, act, as, nt, out, os);
}

X86_TARGET static void X86_FN(gemm_mxfp4)(int64_t k, const void *w, size_t ws, int64_t nr, const void *act,
                                          size_t as, int nt, float *out, int64_t os) {
    gemm_quant(PLM_TYPE_MXFP4, k, w, ws, nr, act, as, nt, out, os);
}
