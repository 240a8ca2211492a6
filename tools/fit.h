/*
 * Never be the process the OS kills: before run/chat/serve allocate
 * anything, plan the model against a memory budget (--mem-limit, else what
 * this machine has available) and choose or check the context length.
 */
#ifndef PLM_TOOLS_FIT_H
#define PLM_TOOLS_FIT_H

#include <stdbool.h>

#include "pocketlm.h"

/* With cp->n_ctx == 0: picks the largest context that fits the budget after
 * weights and buffers (capped at the trained context, a multiple of 256) and
 * says so on stderr.  With a given n_ctx: refuses (false, with the bill and
 * a suggestion) when the plan exceeds the budget.  mem_limit: "2G" or NULL. */
bool fit_context(const char *cmd, const char *model_path, bool use_mmap, const char *mem_limit,
                 plm_context_params *cp);

/* fit_context for a model and a speculative draft model sharing the
 * process: both weights, both KV caches at the same length, the target's
 * logits for draft_max + 1 verified tokens. */
bool fit_context_draft(const char *cmd, const char *model_path, const char *draft_path, bool use_mmap,
                       const char *mem_limit, int draft_max, plm_context_params *cp);

#endif
