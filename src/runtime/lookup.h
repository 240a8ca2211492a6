/*
 * Draft tokens without a draft model, for speculative decoding:
 *
 *  - prompt lookup: the text generated so far often repeats the prompt or
 *    itself (a retelling, a code edit, an answer quoting its context), so
 *    the tokens that followed an earlier occurrence of the last few tokens
 *    are a good guess at what follows now;
 *  - an n-gram cache: counts of which token followed each 1..4-token
 *    context, kept across runs in a file, so repeated phrasing is learned.
 *
 * Both only propose; the target model decides what is accepted.
 */
#ifndef PLM_RUNTIME_LOOKUP_H
#define PLM_RUNTIME_LOOKUP_H

#include <stdint.h>

#include "pocketlm.h"

/* Contexts of up to this many tokens are counted in the n-gram cache. */
#define PLM_NGRAM_MAX 4

/* Prompt lookup: finds the most recent earlier occurrence of the longest
 * suffix of hist[0..n_hist) of n_max down to n_min tokens and copies up to
 * k of the tokens that followed it into out.  Returns how many (0: none). */
int plm_lookup_propose(const plm_token *hist, int n_hist, int n_min, int n_max, plm_token *out, int k);

typedef struct plm_ngram_cache plm_ngram_cache;

/* An empty cache for a vocabulary of n_vocab tokens; NULL without memory. */
plm_ngram_cache *plm_ngram_cache_new(int n_vocab);
void plm_ngram_cache_free(plm_ngram_cache *c);
uint64_t plm_ngram_cache_size(const plm_ngram_cache *c);  /* contexts held */

/* Counts hist[n_hist - 1] as the successor of each context of 1..4 tokens
 * that ends just before it. */
void plm_ngram_cache_add(plm_ngram_cache *c, const plm_token *hist, int n_hist);

/* Drafts up to k tokens continuing hist: each step takes the longest
 * context with a clear favourite (a strict majority of its counts, seen at
 * least twice unless the context is 3+ tokens long).  Returns the count. */
int plm_ngram_cache_propose(const plm_ngram_cache *c, const plm_token *hist, int n_hist, plm_token *out, int k);

/* Merges a cache file into c.  A missing file is PLM_ERR_IO (a fresh
 * cache may start there); a corrupt, truncated or foreign one (another
 * vocabulary size, another format version) is PLM_ERR_FORMAT and leaves c
 * unchanged. */
plm_status plm_ngram_cache_load(plm_ngram_cache *c, const char *path, plm_error *err);

/* Writes path.tmp, flushes it to disk and renames it over path: a reader
 * sees the old file or the new one, never half of one. */
plm_status plm_ngram_cache_save(const plm_ngram_cache *c, const char *path, plm_error *err);

#endif
