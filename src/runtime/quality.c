/*
 * Perplexity and KL divergence, as llama.cpp's llama-perplexity computes
 * them (tools/perplexity/perplexity.cpp: perplexity() and kl_divergence()),
 * so numbers from the two tools can be set side by side.
 *
 * Chunking: the tokens are cut into chunks of n_ctx; a chunk is evaluated in
 * a cleared KV cache with its first token replaced by BOS (when the
 * vocabulary adds BOS), in pieces of n_batch, with logits for every token.
 * Scored: positions first = n_ctx/2 .. n_ctx-2, each against the original
 * token that follows it (n_ctx - 1 - n_ctx/2 per chunk).
 *
 * The base file of `pocketlm perplexity --kld-save` (all little-endian):
 *
 *   offset  size  field
 *        0     8  magic "PLM-KLD\0"
 *        8     4  u32 version = 1
 *       12     4  u32 n_vocab
 *       16     4  u32 n_ctx
 *       20     4  u32 n_chunks
 *       24     4  u32 n_scored = n_ctx - 1 - n_ctx/2 (positions per chunk; a check)
 *       28     4  u32 reserved = 0
 *       32     8  u64 vocabulary fingerprint (plm_vocab_fingerprint)
 *       40        i32 tokens[n_chunks * n_ctx], as tokenized (before the BOS
 *                 replacement)
 *         then    n_chunks * n_scored rows of n_vocab f32: the base model's
 *                 ln p(token) at chunk positions n_ctx/2 .. n_ctx-2, chunk
 *                 after chunk; each row is (float)(logit - logsumexp) with
 *                 logsumexp in double.
 *
 * The size must be exactly 40 + 4 n_chunks n_ctx + 4 n_chunks n_scored n_vocab.
 * float32 keeps every log-probability to 7 significant digits (llama.cpp's
 * uint16 format rounds them to 1/65535 of the logit range and drops those
 * below max - 16); for a 32k vocabulary and n_ctx 512 that is 32 MiB a chunk.
 */
#include "runtime/quality.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "runtime/context.h"

/* ---- math --------------------------------------------------------------- */

double plm_logsumexp(const float *x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - (double)mx);
    return (double)mx + log(sum);
}

int plm_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

void plm_log_softmax(const float *x, int n, double lse, float *out) {
    for (int i = 0; i < n; i++) out[i] = (float)((double)x[i] - lse);
}

void plm_nll_add(plm_nll_acc *a, double nll) {
    a->sum += nll;
    a->sum2 += nll * nll;
    a->n++;
}

void plm_nll_result(const plm_nll_acc *a, int n_chunks, plm_ppl_result *out) {
    memset(out, 0, sizeof *out);
    out->n_chunks = n_chunks;
    out->n_scored = a->n;
    if (a->n == 0) return;
    const double n = (double)a->n, mean = a->sum / n, var = a->sum2 / n - mean * mean;
    out->nll = mean;
    out->ppl = exp(mean);
    out->ppl_err = var > 0 && a->n > 1 ? sqrt(var / (n - 1)) * out->ppl : 0;
}

/* llama.cpp's mean_and_uncertainty: the standard error only past 10 values. */
static void mean_err(double sum, double sum2, uint64_t count, double *mean, double *err) {
    *mean = *err = 0;
    if (count < 1) return;
    const double n = (double)count, f = sum / n, v = sum2 / n - f * f;
    *mean = f;
    *err = v > 0 && count > 10 ? sqrt(v / (n - 1)) : 0;
}

/* llama.cpp's covariance of the two means (0 under 10 values). */
static double covariance(double sa, double sb, double sab, uint64_t count) {
    if (count < 10) return 0;
    const double n = (double)count;
    return (sab / n - (sa / n) * (sb / n)) / (n - 1);
}

static double sqrt0(double x) { return x > 0 ? sqrt(x) : 0; }

bool plm_kld_acc_init(plm_kld_acc *a, uint64_t cap) {
    memset(a, 0, sizeof *a);
    if (cap == 0) cap = 1;
    if (cap > SIZE_MAX / sizeof(float)) return false;
    a->kld_values = malloc((size_t)cap * sizeof(float));
    a->dp_values = malloc((size_t)cap * sizeof(float));
    if (!a->kld_values || !a->dp_values) {
        plm_kld_acc_free(a);
        return false;
    }
    a->cap = cap;
    return true;
}

void plm_kld_acc_free(plm_kld_acc *a) {
    free(a->kld_values);
    free(a->dp_values);
    a->kld_values = a->dp_values = NULL;
    a->cap = 0;
}

bool plm_kld_acc_add(plm_kld_acc *a, const float *base_lp, const float *logits, int n_vocab, plm_token next) {
    if (a->n >= a->cap || next < 0 || next >= n_vocab) return false;
    const double lse = plm_logsumexp(logits, n_vocab);
    /* KL(base || this) = sum p_base (ln p_base - ln p), both at float precision. */
    double kld = 0;
    for (int i = 0; i < n_vocab; i++) {
        const double lb = base_lp[i], lq = (float)((double)logits[i] - lse);
        kld += exp(lb) * (lb - lq);
    }
    const double nll = -(double)(float)((double)logits[next] - lse), nll_base = -(double)base_lp[next];
    a->nll += nll;
    a->nll2 += nll * nll;
    a->nll_base += nll_base;
    a->nll_base2 += nll_base * nll_base;
    a->nll_nll_base += nll * nll_base;
    a->kld += kld;
    a->kld2 += kld * kld;
    const double dp = exp(-nll) - exp(-nll_base), dp2 = dp * dp;
    a->dp += dp;
    a->dp2 += dp2;
    a->dp4 += dp2 * dp2;
    if (plm_argmax(logits, n_vocab) == plm_argmax(base_lp, n_vocab)) a->same_top++;
    a->kld_values[a->n] = (float)kld;
    a->dp_values[a->n] = (float)dp;
    a->n++;
    return true;
}

double plm_quantile_sorted(const float *v, uint64_t n, double fraction) {
    if (n == 0) return 0;
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    const double p = fraction * (double)(n - 1);
    const uint64_t ip = (uint64_t)p;
    const double f = p - (double)ip;
    const uint64_t ip1 = ip + 1 < n ? ip + 1 : n - 1;
    return (1 - f) * v[ip] + f * v[ip1];
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void quantiles(float *v, uint64_t n, plm_quantiles *q) {
    qsort(v, (size_t)n, sizeof *v, cmp_float);
    q->min = plm_quantile_sorted(v, n, 0);
    q->p0_1 = plm_quantile_sorted(v, n, 0.001);
    q->p1 = plm_quantile_sorted(v, n, 0.01);
    q->p5 = plm_quantile_sorted(v, n, 0.05);
    q->p10 = plm_quantile_sorted(v, n, 0.10);
    q->p25 = plm_quantile_sorted(v, n, 0.25);
    q->median = plm_quantile_sorted(v, n, 0.5);  /* = the mean of the middle two for even n */
    q->p75 = plm_quantile_sorted(v, n, 0.75);
    q->p90 = plm_quantile_sorted(v, n, 0.90);
    q->p95 = plm_quantile_sorted(v, n, 0.95);
    q->p99 = plm_quantile_sorted(v, n, 0.99);
    q->p99_9 = plm_quantile_sorted(v, n, 0.999);
    q->max = plm_quantile_sorted(v, n, 1);
}

void plm_kld_acc_result(plm_kld_acc *a, bool want_quantiles, plm_kld_result *out) {
    memset(out, 0, sizeof *out);
    const uint64_t n = a->n;
    out->n_chunks = a->n_chunks;
    out->n_scored = n;
    if (n == 0) return;

    double lq, lq_err, lb, lb_err;
    mean_err(a->nll, a->nll2, n, &lq, &lq_err);
    mean_err(a->nll_base, a->nll_base2, n, &lb, &lb_err);
    out->ppl = (plm_ppl_result){a->n_chunks, n, lq, exp(lq), exp(lq) * lq_err};
    out->ppl_base = (plm_ppl_result){a->n_chunks, n, lb, exp(lb), exp(lb) * lb_err};
    const double cov = covariance(a->nll, a->nll_base, a->nll_nll_base, n);
    out->cor = lq_err > 0 && lb_err > 0 ? cov / (lq_err * lb_err) : 0;
    out->ln_ratio = lq - lb;
    out->ln_ratio_err = sqrt0(lq_err * lq_err + lb_err * lb_err - 2 * cov);
    out->ratio = exp(out->ln_ratio);
    out->ratio_err = out->ratio * out->ln_ratio_err;
    const double ppl_cov = out->ppl.ppl * out->ppl_base.ppl * cov;
    out->diff = out->ppl.ppl - out->ppl_base.ppl;
    out->diff_err = sqrt0(out->ppl.ppl_err * out->ppl.ppl_err + out->ppl_base.ppl_err * out->ppl_base.ppl_err -
                          2 * ppl_cov);

    mean_err(a->kld, a->kld2, n, &out->kld, &out->kld_err);
    mean_err(a->dp, a->dp2, n, &out->dp, &out->dp_err);
    double mse, mse_err;
    mean_err(a->dp2, a->dp4, n, &mse, &mse_err);
    out->dp_rms = sqrt0(mse);
    out->dp_rms_err = out->dp_rms > 0 ? 0.5 / out->dp_rms * mse_err : 0;
    out->same_top = (double)a->same_top / (double)n;
    out->same_top_err = n > 1 ? sqrt0(out->same_top * (1 - out->same_top) / (double)(n - 1)) : 0;

    if (want_quantiles) {
        quantiles(a->kld_values, n, &out->kld_q);
        quantiles(a->dp_values, n, &out->dp_q);
    }
}

/* ---- the base file ------------------------------------------------------- */

static bool host_le(void) {
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

/* 4-byte words in place to/from little-endian (a no-op on little-endian hosts). */
static void swap_words(void *data, size_t n) {
    if (host_le()) return;
    uint8_t *p = data;
    for (size_t i = 0; i < n; i++, p += 4) {
        uint8_t t = p[0];
        p[0] = p[3];
        p[3] = t;
        t = p[1];
        p[1] = p[2];
        p[2] = t;
    }
}

static void fnv(uint64_t *h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        *h ^= p[i];
        *h *= 0x100000001b3ull;
    }
}

uint64_t plm_vocab_fingerprint(const plm_model *model) {
    uint64_t h = 0xcbf29ce484222325ull;
    const int n = plm_model_n_vocab(model);
    char small[256];
    for (plm_token t = 0; t < n; t++) {
        char *buf = small;
        int len = plm_token_to_piece(model, t, small, sizeof small, true);
        if (len < 0) {
            buf = malloc((size_t)-len);
            len = buf ? plm_token_to_piece(model, t, buf, -len, true) : 0;
            if (len < 0) len = 0;
        }
        uint8_t lb[4];
        put_u32(lb, (uint32_t)len);
        fnv(&h, lb, 4);
        if (buf) fnv(&h, buf, (size_t)len);
        if (buf != small) free(buf);
    }
    return h;
}

/* Header bytes and the expected file size; false on overflow. */
static bool file_size_for(const plm_kld_info *in, uint64_t *size) {
    const uint64_t n_scored = plm_kld_n_scored(in->n_ctx);
    const uint64_t toks = (uint64_t)in->n_chunks * in->n_ctx;
    const uint64_t rows = (uint64_t)in->n_chunks * n_scored;
    if (rows != 0 && in->n_vocab > (UINT64_MAX / 8) / rows) return false;
    *size = PLM_KLD_HEADER_BYTES + 4 * toks + 4 * rows * in->n_vocab;
    return true;
}

static void encode_header(const plm_kld_header *h, uint8_t out[PLM_KLD_HEADER_BYTES]) {
    memset(out, 0, PLM_KLD_HEADER_BYTES);
    memcpy(out, PLM_KLD_MAGIC, 8);
    put_u32(out + 8, PLM_KLD_VERSION);
    put_u32(out + 12, h->info.n_vocab);
    put_u32(out + 16, h->info.n_ctx);
    put_u32(out + 20, h->info.n_chunks);
    put_u32(out + 24, plm_kld_n_scored(h->info.n_ctx));
    put_u32(out + 28, 0);
    put_u64(out + 32, h->vocab_hash);
}

struct plm_kld_writer {
    FILE *f;
    char *path, *tmp;
    uint32_t n_vocab;
    uint64_t rows_left;
    float *buf;
};

void plm_kld_writer_abort(plm_kld_writer *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    if (w->tmp) remove(w->tmp);
    free(w->path);
    free(w->tmp);
    free(w->buf);
    free(w);
}

plm_status plm_kld_writer_open(const char *path, const plm_kld_header *h, const plm_token *tokens,
                               plm_kld_writer **out, plm_error *err) {
    *out = NULL;
    plm_kld_writer *w = calloc(1, sizeof *w);
    const size_t plen = strlen(path);
    if (w) {
        w->path = strdup(path);
        w->tmp = malloc(plen + 5);
        w->buf = malloc((size_t)h->info.n_vocab * sizeof(float));
    }
    if (!w || !w->path || !w->tmp || !w->buf) {
        plm_kld_writer_abort(w);
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    }
    memcpy(w->tmp, path, plen);
    memcpy(w->tmp + plen, ".tmp", 5);
    w->n_vocab = h->info.n_vocab;
    w->rows_left = (uint64_t)h->info.n_chunks * plm_kld_n_scored(h->info.n_ctx);
    w->f = fopen(w->tmp, "wb");
    if (!w->f) {
        plm_status st = plm_fail(err, PLM_ERR_IO, "cannot create %s: %s", w->tmp, strerror(errno));
        free(w->tmp);
        w->tmp = NULL; /* nothing to remove */
        plm_kld_writer_abort(w);
        return st;
    }
    uint8_t hdr[PLM_KLD_HEADER_BYTES];
    encode_header(h, hdr);
    bool ok = fwrite(hdr, 1, sizeof hdr, w->f) == sizeof hdr;
    const size_t n_tok = (size_t)h->info.n_chunks * h->info.n_ctx;
    for (size_t i = 0; ok && i < n_tok; i++) {
        uint8_t b[4];
        put_u32(b, (uint32_t)tokens[i]);
        ok = fwrite(b, 1, 4, w->f) == 4;
    }
    if (!ok) {
        plm_status st = plm_fail(err, PLM_ERR_IO, "writing %s failed: %s", w->tmp, strerror(errno));
        plm_kld_writer_abort(w);
        return st;
    }
    *out = w;
    return PLM_OK;
}

plm_status plm_kld_writer_row(plm_kld_writer *w, const float *row, plm_error *err) {
    if (w->rows_left == 0) return plm_fail(err, PLM_ERR_INVALID_ARG, "%s: more rows than the header says", w->path);
    const float *src = row;
    if (!host_le()) {
        memcpy(w->buf, row, (size_t)w->n_vocab * sizeof(float));
        swap_words(w->buf, w->n_vocab);
        src = w->buf;
    }
    if (fwrite(src, sizeof(float), w->n_vocab, w->f) != w->n_vocab)
        return plm_fail(err, PLM_ERR_IO, "writing %s failed: %s", w->tmp, strerror(errno));
    w->rows_left--;
    return PLM_OK;
}

plm_status plm_kld_writer_close(plm_kld_writer *w, plm_error *err) {
    plm_status st = PLM_OK;
    if (w->rows_left != 0)
        st = plm_fail(err, PLM_ERR_INVALID_ARG, "%s: %llu rows missing", w->path, (unsigned long long)w->rows_left);
    if (!st && fflush(w->f) != 0) st = plm_fail(err, PLM_ERR_IO, "writing %s failed: %s", w->tmp, strerror(errno));
    if (!st) {
        const int rc = fclose(w->f);
        w->f = NULL;
        if (rc != 0) st = plm_fail(err, PLM_ERR_IO, "writing %s failed: %s", w->tmp, strerror(errno));
    }
    if (!st && rename(w->tmp, w->path) != 0)
        st = plm_fail(err, PLM_ERR_IO, "cannot rename %s to %s: %s", w->tmp, w->path, strerror(errno));
    if (!st) {
        free(w->tmp);
        w->tmp = NULL; /* renamed: keep it */
    }
    plm_kld_writer_abort(w);
    return st;
}

void plm_kld_reader_close(plm_kld_reader *r) {
    if (!r) return;
    if (r->f) fclose(r->f);
    free(r->tokens);
    free(r->path);
    free(r);
}

plm_status plm_kld_reader_open(const char *path, plm_kld_reader **out, plm_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return plm_fail(err, PLM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    plm_kld_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        fclose(f);
        plm_kld_reader_close(r);
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    }
    r->f = f;
    plm_status st = PLM_OK;
    struct stat sb;
    uint8_t hdr[PLM_KLD_HEADER_BYTES];
    if (fstat(fileno(f), &sb) != 0) {
        st = plm_fail(err, PLM_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
        goto fail;
    }
    const uint64_t fsize = (uint64_t)sb.st_size;
    if (fsize < 8 || fread(hdr, 1, 8, f) != 8 || memcmp(hdr, PLM_KLD_MAGIC, 8) != 0) {
        st = plm_fail(err, PLM_ERR_FORMAT, "%s is not a pocketlm KLD base file (write one with pocketlm perplexity --kld-save)",
                      path);
        goto fail;
    }
    if (fsize < PLM_KLD_HEADER_BYTES || fread(hdr + 8, 1, PLM_KLD_HEADER_BYTES - 8, f) != PLM_KLD_HEADER_BYTES - 8) {
        st = plm_fail(err, PLM_ERR_FORMAT, "%s is truncated: %llu bytes, shorter than the %u-byte header", path,
                      (unsigned long long)fsize, PLM_KLD_HEADER_BYTES);
        goto fail;
    }
    const uint32_t version = get_u32(hdr + 8);
    plm_kld_info *in = &r->h.info;
    in->n_vocab = get_u32(hdr + 12);
    in->n_ctx = get_u32(hdr + 16);
    in->n_chunks = get_u32(hdr + 20);
    const uint32_t n_scored = get_u32(hdr + 24), reserved = get_u32(hdr + 28);
    r->h.vocab_hash = get_u64(hdr + 32);
    if (version != PLM_KLD_VERSION) {
        st = plm_fail(err, PLM_ERR_FORMAT, "%s: KLD file version %u, this build reads version %u", path, version,
                      PLM_KLD_VERSION);
        goto fail;
    }
    if (in->n_vocab == 0 || in->n_vocab > (1u << 24) || in->n_ctx < 3 || in->n_ctx > (1u << 24) ||
        in->n_chunks == 0 || n_scored != plm_kld_n_scored(in->n_ctx) || reserved != 0) {
        st = plm_fail(err, PLM_ERR_FORMAT,
                      "%s: malformed header (n_vocab %u, n_ctx %u, n_chunks %u, %u positions per chunk)", path,
                      in->n_vocab, in->n_ctx, in->n_chunks, n_scored);
        goto fail;
    }
    uint64_t want;
    if (!file_size_for(in, &want)) {
        st = plm_fail(err, PLM_ERR_FORMAT, "%s: malformed header (sizes overflow)", path);
        goto fail;
    }
    if (fsize != want) {
        st = plm_fail(err, PLM_ERR_FORMAT, "%s is %s: %llu bytes, its header (%u chunks of %u tokens, %u-token "
                      "vocabulary) needs %llu", path, fsize < want ? "truncated" : "malformed (trailing bytes)",
                      (unsigned long long)fsize, in->n_chunks, in->n_ctx, in->n_vocab, (unsigned long long)want);
        goto fail;
    }
    const size_t n_tok = (size_t)in->n_chunks * in->n_ctx;
    r->tokens = malloc(n_tok * sizeof *r->tokens);
    if (!r->tokens) {
        st = plm_fail(err, PLM_ERR_NOMEM, "out of memory for %zu tokens", n_tok);
        goto fail;
    }
    if (fread(r->tokens, 4, n_tok, f) != n_tok) {
        st = plm_fail(err, PLM_ERR_IO, "reading %s failed", path);
        goto fail;
    }
    swap_words(r->tokens, n_tok);
    for (size_t i = 0; i < n_tok; i++)
        if (r->tokens[i] < 0 || (uint32_t)r->tokens[i] >= in->n_vocab) {
            st = plm_fail(err, PLM_ERR_FORMAT, "%s: malformed: token %d at %zu is outside its %u-token vocabulary",
                          path, r->tokens[i], i, in->n_vocab);
            goto fail;
        }
    *out = r;
    return PLM_OK;
fail:
    plm_kld_reader_close(r);
    return st;
}

plm_status plm_kld_reader_row(plm_kld_reader *r, float *row, plm_error *err) {
    const uint32_t nv = r->h.info.n_vocab;
    const uint64_t row_idx = r->rows_read;
    if (fread(row, sizeof(float), nv, r->f) != nv)
        return plm_fail(err, PLM_ERR_FORMAT, "%s: cannot read log-probability row %llu (file changed?)", r->path,
                        (unsigned long long)row_idx);
    swap_words(row, nv);
    r->rows_read++;
    /* A row must be a distribution: finite log-probabilities <= 0 whose
     * probabilities sum to 1 (float rounding allows a little). */
    double sum = 0;
    for (uint32_t i = 0; i < nv; i++) {
        if (!isfinite(row[i]) || row[i] > 1e-6f)
            return plm_fail(err, PLM_ERR_FORMAT, "%s: malformed: row %llu holds %g, not a log-probability", r->path,
                            (unsigned long long)row_idx, (double)row[i]);
        sum += exp((double)row[i]);
    }
    if (fabs(sum - 1) > 1e-3)
        return plm_fail(err, PLM_ERR_FORMAT, "%s: malformed: the probabilities of row %llu sum to %g, not 1", r->path,
                        (unsigned long long)row_idx, sum);
    return PLM_OK;
}

/* ---- evaluation ----------------------------------------------------------- */

plm_ppl_params plm_ppl_default_params(void) { return (plm_ppl_params){0}; }
plm_kld_params plm_kld_default_params(void) { return (plm_kld_params){0}; }

/* Called for every scored position with its logits and the token that follows. */
typedef plm_status (*score_fn)(void *user, const float *logits, plm_token next, plm_error *err);

static plm_status check_ctx(plm_context *ctx, uint32_t n_ctx, plm_error *err) {
    if (!ctx->params.logits_all)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "perplexity needs a context created with logits_all");
    if (n_ctx < 3) return plm_fail(err, PLM_ERR_INVALID_ARG, "a chunk of %u tokens scores nothing (at least 3)", n_ctx);
    if (n_ctx > plm_context_n_ctx(ctx))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "chunks of %u tokens do not fit a %u-token context", n_ctx,
                        plm_context_n_ctx(ctx));
    return PLM_OK;
}

/* Evaluates one chunk (see the top of the file) and scores its second half.
 * buf: scratch for n_ctx tokens. */
static plm_status eval_chunk(plm_context *ctx, const plm_token *chunk, uint32_t n_ctx, plm_token *buf, score_fn fn,
                             void *user, plm_error *err) {
    const plm_model *model = ctx->model;
    memcpy(buf, chunk, (size_t)n_ctx * sizeof *buf);
    const plm_token bos = plm_token_bos(model);
    if (plm_vocab_add_bos(model) && bos >= 0) buf[0] = bos;
    plm_kv_truncate(ctx, 0);
    const uint32_t B = ctx->params.n_batch, first = n_ctx / 2;
    for (uint32_t j = 0; j < n_ctx; j += B) {
        const uint32_t m = n_ctx - j < B ? n_ctx - j : B;
        plm_status st = plm_decode(ctx, buf + j, (int)m, err);
        if (st) return st;
        for (uint32_t i = j > first ? j : first; i < j + m && i + 1 < n_ctx; i++) {
            st = fn(user, plm_get_logits(ctx, (int)(i - j)), chunk[i + 1], err);
            if (st) return st;
        }
    }
    return PLM_OK;
}

typedef struct ppl_state {
    plm_nll_acc acc;
    int n_vocab;
    plm_kld_writer *w;
    float *row;
} ppl_state;

static plm_status ppl_score(void *user, const float *logits, plm_token next, plm_error *err) {
    ppl_state *s = user;
    const double lse = plm_logsumexp(logits, s->n_vocab);
    plm_nll_add(&s->acc, lse - (double)logits[next]);
    if (!s->w) return PLM_OK;
    plm_log_softmax(logits, s->n_vocab, lse, s->row);
    return plm_kld_writer_row(s->w, s->row, err);
}

static plm_status check_tokens(const plm_token *t, size_t n, int n_vocab, plm_error *err) {
    for (size_t i = 0; i < n; i++)
        if (t[i] < 0 || t[i] >= n_vocab)
            return plm_fail(err, PLM_ERR_INVALID_ARG, "token %d at index %zu is outside the vocabulary (0..%d)", t[i],
                            i, n_vocab - 1);
    return PLM_OK;
}

plm_status plm_perplexity(plm_context *ctx, const plm_token *tokens, int n_tokens, const plm_ppl_params *params,
                          plm_ppl_result *out, plm_error *err) {
    memset(out, 0, sizeof *out);
    const plm_ppl_params p = params ? *params : plm_ppl_default_params();
    const uint32_t n_ctx = p.n_ctx ? p.n_ctx : plm_context_n_ctx(ctx);
    plm_status st = check_ctx(ctx, n_ctx, err);
    if (st) return st;
    if (n_tokens < 0 || (uint32_t)n_tokens < n_ctx)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "one chunk of %u tokens needs at least %u tokens, got %d", n_ctx,
                        n_ctx, n_tokens);
    int n_chunks = (int)((uint32_t)n_tokens / n_ctx);
    if (p.n_chunks > 0 && p.n_chunks < n_chunks) n_chunks = p.n_chunks;
    const int n_vocab = plm_model_n_vocab(ctx->model);
    const size_t n_used = (size_t)n_chunks * n_ctx;
    if ((st = check_tokens(tokens, n_used, n_vocab, err))) return st;

    ppl_state s = {.n_vocab = n_vocab};
    plm_token *buf = malloc((size_t)n_ctx * sizeof *buf);
    if (p.kld_save) s.row = malloc((size_t)n_vocab * sizeof *s.row);
    if (!buf || (p.kld_save && !s.row)) {
        st = plm_fail(err, PLM_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (p.kld_save) {
        const plm_kld_header h = {{(uint32_t)n_vocab, n_ctx, (uint32_t)n_chunks}, plm_vocab_fingerprint(ctx->model)};
        if ((st = plm_kld_writer_open(p.kld_save, &h, tokens, &s.w, err))) goto done;
    }
    for (int c = 0; c < n_chunks; c++) {
        if ((st = eval_chunk(ctx, tokens + (size_t)c * n_ctx, n_ctx, buf, ppl_score, &s, err))) goto done;
        if (p.progress) {
            plm_ppl_result r;
            plm_nll_result(&s.acc, c + 1, &r);
            p.progress(p.user, &r, n_chunks);
        }
    }
    if (s.w) {
        st = plm_kld_writer_close(s.w, err);
        s.w = NULL;
        if (st) goto done;
    }
    plm_nll_result(&s.acc, n_chunks, out);
done:
    plm_kld_writer_abort(s.w);
    free(s.row);
    free(buf);
    return st;
}

plm_status plm_kld_file_info(const char *path, plm_kld_info *out, plm_error *err) {
    memset(out, 0, sizeof *out);
    plm_kld_reader *r;
    plm_status st = plm_kld_reader_open(path, &r, err);
    if (st) return st;
    *out = r->h.info;
    plm_kld_reader_close(r);
    return PLM_OK;
}

typedef struct kld_state {
    plm_kld_acc acc;
    plm_kld_reader *r;
    int n_vocab;
    float *row;
} kld_state;

static plm_status kld_score(void *user, const float *logits, plm_token next, plm_error *err) {
    kld_state *s = user;
    plm_status st = plm_kld_reader_row(s->r, s->row, err);
    if (st) return st;
    if (!plm_kld_acc_add(&s->acc, s->row, logits, s->n_vocab, next))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "more scored positions than the base file holds");
    return PLM_OK;
}

plm_status plm_kld(plm_context *ctx, const char *base_path, const plm_kld_params *params, plm_kld_result *out,
                   plm_error *err) {
    memset(out, 0, sizeof *out);
    const plm_kld_params p = params ? *params : plm_kld_default_params();
    kld_state s = {.n_vocab = plm_model_n_vocab(ctx->model)};
    plm_token *buf = NULL;
    plm_status st = plm_kld_reader_open(base_path, &s.r, err);
    if (st) return st;
    const plm_kld_info in = s.r->h.info;
    if (in.n_vocab != (uint32_t)s.n_vocab) {
        st = plm_fail(err, PLM_ERR_FORMAT, "%s was written for a %u-token vocabulary, this model has %d: "
                      "the base must be a model with the same tokenizer", base_path, in.n_vocab, s.n_vocab);
        goto done;
    }
    if (s.r->h.vocab_hash != plm_vocab_fingerprint(ctx->model)) {
        st = plm_fail(err, PLM_ERR_FORMAT, "%s was written for another vocabulary (same size, other tokens): "
                      "the base must be a model with the same tokenizer", base_path);
        goto done;
    }
    if ((st = check_ctx(ctx, in.n_ctx, err))) goto done;
    const int n_chunks = p.n_chunks > 0 && (uint32_t)p.n_chunks < in.n_chunks ? p.n_chunks : (int)in.n_chunks;
    buf = malloc((size_t)in.n_ctx * sizeof *buf);
    s.row = malloc((size_t)in.n_vocab * sizeof *s.row);
    if (!buf || !s.row || !plm_kld_acc_init(&s.acc, (uint64_t)n_chunks * plm_kld_n_scored(in.n_ctx))) {
        st = plm_fail(err, PLM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int c = 0; c < n_chunks; c++) {
        if ((st = eval_chunk(ctx, s.r->tokens + (size_t)c * in.n_ctx, in.n_ctx, buf, kld_score, &s, err))) goto done;
        s.acc.n_chunks = c + 1;
        if (p.progress) {
            plm_kld_result r;
            plm_kld_acc_result(&s.acc, false, &r);
            p.progress(p.user, &r, n_chunks);
        }
    }
    plm_kld_acc_result(&s.acc, true, out);
done:
    plm_kld_acc_free(&s.acc);
    plm_kld_reader_close(s.r);
    free(s.row);
    free(buf);
    return st;
}
