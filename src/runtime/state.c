/*
 * Saving and restoring a context's KV cache (plm_context_state_save/load):
 * a conversation resumes after its process ended without evaluating its
 * history again.
 *
 * File layout, little-endian as the machine writes it (a file moves between
 * processes of one build, not between architectures):
 *   header: magic "PLM-KVS\0", version, the model's identity (vocabulary
 *           fingerprint, layers, kv_dim, parameters, weight bytes), the cache's
 *           storage types and row sizes, n_tokens
 *   tokens: n_tokens token ids (what the cache holds, as the caller fed it)
 *   rows:   per layer, the keys then the values of the cached positions
 *           (a sliding-window layer: only the positions it still holds)
 *   FNV-1a 64 of everything before it
 * It is written to PATH.tmp.PID and renamed, so PATH is whole or absent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "runtime/context.h"
#include "runtime/quality.h"

#define STATE_MAGIC "PLM-KVS"
#define STATE_VERSION 1u

typedef struct state_header {
    char magic[8];
    uint32_t version, n_layer, kv_dim, type_k, type_v, n_tokens;
    uint64_t vocab_hash, n_params, weight_bytes, k_row, v_row;
} state_header;

enum { SEQ = 0 };

static void fnv(uint64_t *h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) *h = (*h ^ p[i]) * 1099511628211ull;
}

static state_header header_of(const plm_context *ctx, uint32_t n_tokens) {
    const plm_kv_cache *kv = &ctx->fwd.kv;
    state_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, STATE_MAGIC, sizeof h.magic);
    h.version = STATE_VERSION;
    h.n_layer = (uint32_t)kv->n_layer;
    h.kv_dim = (uint32_t)kv->kv_dim;
    h.type_k = (uint32_t)kv->type_k;
    h.type_v = (uint32_t)kv->type_v;
    h.n_tokens = n_tokens;
    h.vocab_hash = plm_vocab_fingerprint(ctx->model);
    h.n_params = plm_model_n_params(ctx->model);
    h.weight_bytes = plm_model_weight_bytes(ctx->model);
    h.k_row = kv->k_row;
    h.v_row = kv->v_row;
    return h;
}

/* The positions layer il still holds of n: all, or a window's last cells. */
static uint32_t first_held(const plm_kv_cache *kv, int il, uint32_t n) {
    return kv->ring[il] && n > kv->ring[il] ? n - kv->ring[il] : 0;
}

/* Reads or writes, hashing as it goes: one walk for both directions. */
typedef struct state_io {
    FILE *f;
    bool writing, ok;
    uint64_t hash;
} state_io;

static void io(state_io *s, void *data, size_t n) {
    if (!s->ok || !n) return;
    s->ok = s->writing ? fwrite(data, 1, n, s->f) == n : fread(data, 1, n, s->f) == n;
    if (s->ok) fnv(&s->hash, data, n);
}

static void io_rows(state_io *s, plm_kv_cache *kv, uint32_t n) {
    for (int il = 0; il < kv->n_layer; il++) {
        for (uint32_t p = first_held(kv, il, n); p < n; p++) io(s, plm_kv_keys(kv, il, SEQ, p), kv->k_row);
        for (uint32_t p = first_held(kv, il, n); p < n; p++) io(s, plm_kv_values(kv, il, SEQ, p), kv->v_row);
    }
}

plm_status plm_context_state_save(const plm_context *ctx, const char *path, const plm_token *tokens, int n_tokens,
                                  plm_error *err) {
    if (!ctx || !path || n_tokens < 0 || (n_tokens && !tokens))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "state save: NULL argument or negative count");
    if ((uint32_t)n_tokens != plm_context_n_past(ctx))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "state save: %d tokens given but the cache holds %u", n_tokens,
                        plm_context_n_past(ctx));
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (!tmp) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    snprintf(tmp, tlen, "%s.tmp.%d", path, (int)getpid());
    state_io s = {.f = fopen(tmp, "wb"), .writing = true, .ok = true, .hash = 14695981039346656037ull};
    if (!s.f) {
        free(tmp);
        return plm_fail(err, PLM_ERR_IO, "cannot write %s", path);
    }
    state_header h = header_of(ctx, (uint32_t)n_tokens);
    io(&s, &h, sizeof h);
    io(&s, (void *)tokens, (size_t)n_tokens * sizeof *tokens);
    io_rows(&s, (plm_kv_cache *)&ctx->fwd.kv, (uint32_t)n_tokens);
    uint64_t sum = s.hash;
    s.ok = s.ok && fwrite(&sum, sizeof sum, 1, s.f) == 1;
    s.ok = (fclose(s.f) == 0) && s.ok && rename(tmp, path) == 0;
    if (!s.ok) unlink(tmp);
    free(tmp);
    return s.ok ? PLM_OK : plm_fail(err, PLM_ERR_IO, "cannot write %s", path);
}

static plm_status check_header(const plm_context *ctx, const state_header *h, const char *path, plm_error *err) {
    state_header want = header_of(ctx, h->n_tokens);
    if (memcmp(h->magic, STATE_MAGIC, sizeof h->magic))
        return plm_fail(err, PLM_ERR_FORMAT, "%s is not a pocketlm state file", path);
    if (h->version != STATE_VERSION)
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "%s: state version %u, this build reads %u", path, h->version,
                        STATE_VERSION);
    if (h->vocab_hash != want.vocab_hash || h->n_params != want.n_params ||
        h->weight_bytes != want.weight_bytes || h->n_layer != want.n_layer ||
        h->kv_dim != want.kv_dim)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "%s was saved with another model", path);
    if (h->type_k != want.type_k || h->type_v != want.type_v || h->k_row != want.k_row || h->v_row != want.v_row)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "%s was saved with other KV cache types", path);
    if (h->n_tokens >= plm_context_n_ctx(ctx))
        return plm_fail(err, PLM_ERR_CONTEXT_FULL, "%s holds %u tokens; the context holds %u", path, h->n_tokens,
                        plm_context_n_ctx(ctx));
    return PLM_OK;
}

plm_status plm_context_state_load(plm_context *ctx, const char *path, plm_token *tokens, int max_tokens,
                                  int *n_tokens, plm_error *err) {
    if (!ctx || !path || !n_tokens || max_tokens < 0 || (max_tokens && !tokens))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "state load: NULL argument or negative count");
    state_io s = {.f = fopen(path, "rb"), .writing = false, .ok = true, .hash = 14695981039346656037ull};
    if (!s.f) return plm_fail(err, PLM_ERR_IO, "cannot open %s", path);
    state_header h;
    io(&s, &h, sizeof h);
    plm_status st = s.ok ? check_header(ctx, &h, path, err)
                         : plm_fail(err, PLM_ERR_FORMAT, "%s is truncated", path);
    if (!st && h.n_tokens > (uint32_t)max_tokens)
        st = plm_fail(err, PLM_ERR_INVALID_ARG, "%s holds %u tokens; room for %d given", path, h.n_tokens,
                      max_tokens);
    if (st) {
        fclose(s.f);
        return st;
    }
    /* The rows go straight into the cache; a bad file leaves it empty. */
    plm_kv_truncate(ctx, 0);
    io(&s, tokens, (size_t)h.n_tokens * sizeof *tokens);
    io_rows(&s, &ctx->fwd.kv, h.n_tokens);
    uint64_t sum = 0, want = s.hash;
    bool whole = s.ok && fread(&sum, sizeof sum, 1, s.f) == 1 && fgetc(s.f) == EOF;
    fclose(s.f);
    if (!whole) return plm_fail(err, PLM_ERR_FORMAT, "%s is truncated or has trailing bytes", path);
    if (sum != want) return plm_fail(err, PLM_ERR_FORMAT, "%s: checksum mismatch (damaged file)", path);
    plm_kv_sync_mirrors(&ctx->fwd.kv);
    ctx->fwd.kv.len[SEQ] = h.n_tokens;
    ctx->n_logits = 0;  /* no logits until the next decode */
    *n_tokens = (int)h.n_tokens;
    return PLM_OK;
}
