/* pocketlm smoke's files: the prompt set (JSON lines) and a saved base run
 * (JSON), so a base answered on one machine can judge a candidate on another. */
#ifndef PLM_TOOLS_SMOKE_FILE_H
#define PLM_TOOLS_SMOKE_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "pocketlm.h"
#include "pocketlm_smoke.h"

typedef struct smoke_prompt {
    char *id, *kind, *text;
    plm_smoke_answer base;     /* the base model's answer, once run or loaded */
} smoke_prompt;

typedef struct smoke_run {
    smoke_prompt *prompts;
    int n;
    char *model;               /* the base model's file name */
    char *format;              /* "chat template NAME" or "raw prompt" */
    uint64_t vocab_fingerprint;
    int n_vocab, max_tokens;
} smoke_run;

/* The set: one JSON object a line, {"id", "kind", "prompt"} (id and kind
 * optional); blank lines are skipped.  Errors name the line. */
bool smoke_set_load(const char *path, smoke_run *run);
/* Written to PATH.tmp, then renamed. */
bool smoke_run_save(const char *path, const smoke_run *run);
/* Checks every field's type and size. */
bool smoke_run_load(const char *path, smoke_run *run);
void smoke_run_free(smoke_run *run);

#endif
