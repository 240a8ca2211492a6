/*
 * The speculative-decoding options shared by run and bench (--draft-model,
 * --draft-max, --draft-min, --draft-p-min, --lookup, --lookup-cache): the
 * memory check with the draft counted, loading the draft and creating the
 * plm_spec, and the summary line.
 */
#ifndef PLM_TOOLS_SPEC_CLI_H
#define PLM_TOOLS_SPEC_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "args.h"
#include "pocketlm.h"

typedef struct spec_cli {
    const char *draft_model, *lookup_cache;
    int draft_max, draft_min, lookup;
    float draft_p_min;
    bool no_adapt;
    /* what spec_cli_open made */
    plm_model *draft;
    plm_context *dctx;
    plm_spec *spec;
} spec_cli;

#define SPEC_CLI_N_ARGS 7

spec_cli spec_cli_defaults(void);
/* Writes the SPEC_CLI_N_ARGS option specs into dst. */
void spec_cli_args(spec_cli *o, arg_spec *dst);
bool spec_cli_wanted(const spec_cli *o);
/* fit_context, or fit_context_draft with a draft model. */
bool spec_cli_fit(const char *cmd, const spec_cli *o, const char *model_path, bool use_mmap, const char *mem_limit,
                  plm_context_params *cp);
plm_spec_params spec_cli_params(const spec_cli *o);
/* Loads the draft (if any) with a context like cp and creates o->spec on ctx. */
bool spec_cli_open(const char *cmd, spec_cli *o, plm_context *ctx, const plm_context_params *cp, bool use_mmap);
/* "speculative: ..." on out: acceptance, tokens per verification, paused steps. */
void spec_cli_report(const spec_cli *o, FILE *out);
/* Saves the n-gram cache (when set) and frees what open made; false if saving failed. */
bool spec_cli_close(const char *cmd, spec_cli *o);

#endif
