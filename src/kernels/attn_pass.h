/*
 * The pass of a SIMD attention kernel (plm_attn_pass_fn in ops.h), written
 * once for x86/attention.h and arm/attention.c.  The including file defines
 * ATTN_TGT (a function attribute, or nothing), ATTN_STAGE (floats of one
 * staged block) and, for rows of hd floats:
 *
 *   stage_keys(dst, src, stride, n, hd)      n f16 key rows -> floats, in the
 *                                            layout block_scores reads
 *   stage_values(dst, src, stride, n, hd)    n f16 value rows -> floats (or
 *                                            nothing, if heads_values reads
 *                                            the rows themselves)
 *   block_scores(s, q, k, n, hd, scale)      s[j] = scale * q . k_j
 *   softmax_run_block(run, s, n, o, hd)      as plm_softmax_run_block
 *   block_weights(s, n, max, inv_sum)        the exact mode's f16 weights
 *   heads_values(o, w, n_q, vst, v, vs, n, hd)
 *                                            o_i += sum_j w_i[j] v_j for every
 *                                            head i (w_i: PLM_ATTN_BLOCK apart;
 *                                            vst: the staged rows, v: the f16
 *                                            rows vs bytes apart)
 *
 * Each head's scores have room for PLM_ATTN_BLOCK, a multiple of any SIMD
 * width, so the block functions may pad them to whole vectors.
 */

ATTN_TGT static void attn_pass(float *o, const uint16_t *q, int n_q, const char *k, const char *v, size_t ks,
                               size_t vs, int n_keys, int hd, float scale, plm_softmax_run *run, int pass,
                               float *kept) {
    _Alignas(64) float s[PLM_ATTN_MAX_Q][PLM_ATTN_BLOCK], kst[ATTN_STAGE], vst[ATTN_STAGE];
    const bool values = pass != 1;  /* pass 0: flash; 1, 2: exact (ops.h) */
    const bool keys = !(kept && pass == 2); /* the second pass of kept scores reads no keys */
    const int bk = ATTN_STAGE / hd < PLM_ATTN_BLOCK ? ATTN_STAGE / hd : PLM_ATTN_BLOCK;  /* >= 4: hd <= 1024 */
    for (int j0 = 0; j0 < n_keys; j0 += bk) {
        const int nb = n_keys - j0 < bk ? n_keys - j0 : bk;
        /* The next block's rows are asked for now, to arrive while this one
         * is computed: the cache sits in 4 KiB pages, at each of which the
         * hardware prefetcher stops, and a decoding token over 3000 keys
         * spent most of its attention waiting in stage_rows (perf). */
        const int nn = n_keys - j0 - nb < bk ? n_keys - j0 - nb : bk;
        if (keys) plm_attn_prefetch_rows(k + (size_t)(j0 + nb) * ks, ks, nn, 2 * (size_t)hd);
        if (values) plm_attn_prefetch_rows(v + (size_t)(j0 + nb) * vs, vs, nn, 2 * (size_t)hd);
        if (keys) stage_keys(kst, k + (size_t)j0 * ks, ks, nb, hd);
        if (values) stage_values(vst, v + (size_t)j0 * vs, vs, nb, hd);
        for (int i = 0; i < n_q; i++) {
            float *ki = kept ? kept + (size_t)i * n_keys + j0 : NULL;
            if (keys) block_scores(s[i], q + (size_t)i * hd, kst, nb, hd, scale);
            else memcpy(s[i], ki, sizeof(float) * (size_t)nb);
            if (ki && pass == 1) memcpy(ki, s[i], sizeof(float) * (size_t)nb);
            if (pass == 2) block_weights(s[i], nb, run[i].max, (float)(1.0 / run[i].sum));
            else softmax_run_block(&run[i], s[i], nb, o + (size_t)i * hd, pass == 0 ? hd : 0);
        }
        /* every head's values together: a value row is read (and on x86
         * converted) once for all of them */
        if (values) heads_values(o, s[0], n_q, vst, v + (size_t)j0 * vs, vs, nb, hd);
    }
}
