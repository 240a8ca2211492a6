/*
 * pocketlm chat templates: render a conversation into the prompt text an
 * instruction-tuned model was trained on.
 *
 * Templates are Jinja, as in a model's `tokenizer.chat_template`, rendered
 * the way transformers does (trim_blocks and lstrip_blocks on) and
 * byte-identical to @huggingface/jinja, the implementation transformers.js
 * uses.  Messages, tools and extra variables come in as JSON text, so an
 * app or the HTTP server can pass OpenAI-style request fields straight in.
 *
 *   plm_chat_template *t;
 *   plm_chat_compile(src, strlen(src), &t, &err);
 *   plm_chat_params p = {.messages_json = "[{\"role\":\"user\",\"content\":\"Hi\"}]",
 *                        .add_generation_prompt = true};
 *   char *prompt; size_t len;
 *   plm_chat_render(t, &p, &prompt, &len, &err);   // free(prompt) when done
 *   plm_chat_free(t);
 *
 * A compiled template is immutable: several threads may render it at once.
 * Errors name the template's line and column ("line 3, column 14: ...").
 */
#ifndef POCKETLM_CHAT_H
#define POCKETLM_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "pocketlm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct plm_chat_template plm_chat_template;

/* Parses a template (need not be NUL-terminated).  PLM_ERR_FORMAT on a
 * syntax error; err->message starts with "line L, column C:". */
PLM_API plm_status plm_chat_compile(const char *source, size_t len, plm_chat_template **out, plm_error *err);
PLM_API void plm_chat_free(plm_chat_template *t);

typedef struct plm_chat_params {
    const char *messages_json;  /* required: JSON array [{"role":..., "content":...}, ...] */
    const char *tools_json;     /* NULL: `tools` is undefined; else a JSON array */
    bool add_generation_prompt;
    const char *bos_token;      /* NULL: "" */
    const char *eos_token;      /* NULL: "" */
    /* NULL or a JSON object of more variables, e.g. {"enable_thinking": false};
     * they may override the ones above */
    const char *vars_json;
    /* 0 = defaults: 16 MiB of output, 10 million steps, depth 64, 256 MiB memory */
    size_t max_output;
    size_t max_steps;
    int max_depth;
    size_t max_memory;
} plm_chat_params;

/* Renders the template.  On success *out is a malloc'd NUL-terminated
 * string (plm_free() it) of *out_len bytes.  PLM_ERR_INVALID_ARG for bad JSON
 * input, PLM_ERR_FORMAT for a template error (raise_exception included),
 * PLM_ERR_NOMEM when a limit was reached. */
PLM_API plm_status plm_chat_render(const plm_chat_template *t, const plm_chat_params *params, char **out,
                           size_t *out_len, plm_error *err);

/* A model file's own template and special tokens, from GGUF metadata
 * (tokenizer.chat_template, the bos/eos token texts).  Each out pointer may
 * be NULL; what is returned is malloc'd, or NULL when the file has none. */
PLM_API plm_status plm_chat_template_from_gguf(const char *path, char **chat_template, char **bos_token,
                                       char **eos_token, plm_error *err);

/* Built-in templates by family name (chatml, llama2, llama3, gemma, phi3,
 * mistral, qwen3, ...): the Jinja text, or NULL for an unknown name. */
PLM_API const char *plm_chat_builtin(const char *name);
/* The i-th built-in name, NULL past the end. */
PLM_API const char *plm_chat_builtin_name(size_t i);

#ifdef __cplusplus
}
#endif

#endif
