/*
 * Never be the process the OS kills: before run/chat/serve allocate
 * anything, plan the model against a memory budget (the smallest of this
 * machine's available memory, the process's cgroup and rlimits, and
 * --mem-limit) and choose or check the context length.
 */
#ifndef PLM_TOOLS_FIT_H
#define PLM_TOOLS_FIT_H

#include <stdbool.h>

#include "pocketlm.h"
#include "pocketlm_plan.h"

/* What the plan said, for the run's telemetry to quote when decode pages. */
typedef struct fit_info {
    uint64_t budget_bytes;
    char budget_source[48];   /* "cgroup memory.limit_in_bytes", "--mem-limit", ... */
    uint64_t peak_rss;        /* the bill at the chosen context */
    uint64_t anon_bytes;      /* its part that cannot be paged back to the file */
    uint64_t weights_bytes;   /* resident weights (mmap: file-backed) */
    plm_fit fit;
    double paged_tps;         /* PLM_FITS_MMAP: the plan's paging estimate */
    char smaller_quant[16];   /* a quant that fits at this context; "" none */
} fit_info;

/* With cp->n_ctx == 0: picks the largest context that fits the budget after
 * weights and buffers (capped at the trained context, a multiple of 256) and
 * says so on stderr, naming the limit that bound it; when the mapped weights
 * alone are over the budget, the largest context whose anonymous memory
 * leaves a quarter of the budget for weight pages, with a warning that
 * decode will page.  With a given n_ctx: refuses (false, with the bill and a
 * suggestion) when the anonymous memory exceeds the budget; warns when it
 * runs only by paging.  mem_limit: "2G" or NULL.  info may be NULL. */
bool fit_context_info(const char *cmd, const char *model_path, bool use_mmap, const char *mem_limit,
                      plm_context_params *cp, fit_info *info);
bool fit_context(const char *cmd, const char *model_path, bool use_mmap, const char *mem_limit,
                 plm_context_params *cp);

/* Whether to repack (plm_model_params.repack) at cp's (already chosen)
 * context.  forced (--repack): when the plan with the interleaved copies in
 * anonymous memory fits in RAM (not only by paging); otherwise says so on
 * stderr.  Not forced (the default, unless --no-repack): only with mmap'd
 * weights (whose copied pages are released), a Q4_0 file (the format
 * measured no slower at decode), when this CPU's kernels repack some of the
 * file's matrices and the bill with the
 * copies leaves half the budget to spare, since anonymous weights cannot be
 * dropped and re-read under memory pressure as mapped ones can. */
bool fit_repack(const char *cmd, const char *model_path, bool use_mmap, const char *mem_limit,
                const plm_context_params *cp, bool forced);

/* The budget device: this machine with its process limits, tightened by
 * mem_limit ("2G", or NULL).  False with a message when mem_limit is not a
 * size or /proc cannot be read. */
bool fit_budget_device(const char *cmd, const char *mem_limit, plm_device *dev);

/* fit_context for a model and a speculative draft model sharing the
 * process: both weights, both KV caches at the same length, the target's
 * logits for draft_max + 1 verified tokens. */
bool fit_context_draft(const char *cmd, const char *model_path, const char *draft_path, bool use_mmap,
                       const char *mem_limit, int draft_max, plm_context_params *cp);

#endif
