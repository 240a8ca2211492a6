/* The public chat-template API: compile, render with JSON inputs, read a
 * GGUF file's template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/ast.h"
#include "chat/eval.h"
#include "chat/json.h"
#include "chat/lexer.h"
#include "core/error.h"
#include "pocketlm_chat.h"
#include "pocketlm_gguf.h"

enum { MAX_TEMPLATE_BYTES = 4 << 20 };

struct plm_chat_template {
    jarena *arena;
    char *source;
    size_t source_n;
    jlist program;
};

static plm_status fail_at(plm_error *err, plm_status code, const char *src, size_t n, size_t pos, const char *msg) {
    int line, col;
    jlex_line_col(src, n, pos, &line, &col);
    return plm_fail(err, code, "line %d, column %d: %s", line, col, msg);
}

plm_status plm_chat_compile(const char *source, size_t len, plm_chat_template **out, plm_error *err) {
    *out = NULL;
    if (!source) return plm_fail(err, PLM_ERR_INVALID_ARG, "no template text");
    if (len > MAX_TEMPLATE_BYTES) return plm_fail(err, PLM_ERR_INVALID_ARG, "template of %zu bytes is too large", len);
    plm_chat_template *t = calloc(1, sizeof *t);
    if (!t || !(t->arena = jarena_new((size_t)64 << 20)) || !(t->source = jarena_alloc(t->arena, len + 1))) {
        plm_chat_free(t);
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory compiling a template");
    }
    memcpy(t->source, source, len);
    t->source_n = len;
    jparse_error perr;
    if (!jparse(t->arena, t->source, len, &t->program, &perr)) {
        plm_status s = fail_at(err, PLM_ERR_FORMAT, t->source, len, perr.pos, perr.message);
        plm_chat_free(t);
        return s;
    }
    *out = t;
    return PLM_OK;
}

void plm_chat_free(plm_chat_template *t) {
    if (!t) return;
    jarena_free(t->arena);
    free(t);
}

static bool set_json_var(jeval *e, jenv *env, const char *name, const char *json, bool want_array, plm_error *err) {
    char msg[300];
    jv *v = jjson_parse(e->a, json, strlen(json), msg, sizeof msg);
    if (!v) return plm_fail(err, PLM_ERR_INVALID_ARG, "%s: %s", name, msg), false;
    if (want_array && v->type != JV_ARRAY) return plm_fail(err, PLM_ERR_INVALID_ARG, "%s must be a JSON array", name), false;
    if (!jenv_set(e, env, name, strlen(name), v)) return plm_fail(err, PLM_ERR_NOMEM, "out of memory"), false;
    return true;
}

static bool set_inputs(jeval *e, jenv *env, const plm_chat_params *p, plm_error *err) {
    jarena *a = e->a;
    if (!jglobals_install(e, env)) return plm_fail(err, PLM_ERR_NOMEM, "out of memory"), false;
    if (!p->messages_json) return plm_fail(err, PLM_ERR_INVALID_ARG, "no messages"), false;
    if (!set_json_var(e, env, "messages", p->messages_json, true, err)) return false;
    if (p->tools_json && !set_json_var(e, env, "tools", p->tools_json, true, err)) return false;
    if (!jenv_set(e, env, "add_generation_prompt", 21, jv_bool(p->add_generation_prompt)) ||
        !jenv_set(e, env, "bos_token", 9, jv_cstr(a, p->bos_token ? p->bos_token : "")) ||
        !jenv_set(e, env, "eos_token", 9, jv_cstr(a, p->eos_token ? p->eos_token : "")))
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory"), false;
    if (!p->vars_json) return true;
    char msg[300];
    jv *vars = jjson_parse(a, p->vars_json, strlen(p->vars_json), msg, sizeof msg);
    if (!vars) return plm_fail(err, PLM_ERR_INVALID_ARG, "variables: %s", msg), false;
    if (vars->type != JV_OBJECT) return plm_fail(err, PLM_ERR_INVALID_ARG, "variables must be a JSON object"), false;
    for (size_t i = 0; i < vars->u.obj->n; i++)
        if (!jenv_set(e, env, vars->u.obj->keys[i], vars->u.obj->key_lens[i], vars->u.obj->vals[i]))
            return plm_fail(err, PLM_ERR_NOMEM, "out of memory"), false;
    return true;
}

plm_status plm_chat_render(const plm_chat_template *t, const plm_chat_params *p, char **out, size_t *out_len,
                           plm_error *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || !p) return plm_fail(err, PLM_ERR_INVALID_ARG, "no template or parameters");
    jeval e = {.src = t->source, .src_n = t->source_n};
    e.limits.max_output = p->max_output ? p->max_output : (size_t)16 << 20;
    e.limits.max_steps = p->max_steps ? p->max_steps : 10 * 1000 * 1000;
    e.limits.max_depth = p->max_depth > 0 ? p->max_depth : 64;
    size_t mem = p->max_memory ? p->max_memory : (size_t)256 << 20;
    if (!(e.a = jarena_new(mem))) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    plm_status status = PLM_OK;
    jenv *env = jenv_new(&e, NULL);
    jbuf result;
    jbuf_init(&result, e.a, e.limits.max_output);
    if (!env) status = plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    else if (!set_inputs(&e, env, p, err)) status = err ? err->code : PLM_ERR_INVALID_ARG;
    else if (jeval_block(&e, &t->program, env, &result) < 0 || result.failed) {
        if (!e.failed) jeval_oom(&e, NULL);
        status = fail_at(err, e.limit ? PLM_ERR_NOMEM : PLM_ERR_FORMAT, t->source, t->source_n, e.err_pos, e.err);
    } else if (!(*out = malloc(result.n + 1))) {
        status = plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    } else {
        if (result.n) memcpy(*out, result.s, result.n);
        (*out)[result.n] = '\0';
        if (out_len) *out_len = result.n;
    }
    jarena_free(e.a);
    return status;
}

static char *dup_str(plm_gguf_str s) {
    char *c = malloc(s.len + 1);
    if (c) {
        memcpy(c, s.ptr, s.len);
        c[s.len] = '\0';
    }
    return c;
}

static char *token_text(const plm_gguf_file *f, const char *id_key) {
    uint32_t id;
    const plm_gguf_array *tokens = plm_gguf_get_arr(f, "tokenizer.ggml.tokens");
    if (!plm_gguf_get_u32(f, id_key, &id) || !tokens) return NULL;
    plm_gguf_str s = plm_gguf_arr_str(tokens, id);
    return s.ptr ? dup_str(s) : NULL;
}

plm_status plm_chat_template_from_gguf(const char *path, char **chat_template, char **bos_token,
                                       char **eos_token, plm_error *err) {
    if (chat_template) *chat_template = NULL;
    if (bos_token) *bos_token = NULL;
    if (eos_token) *eos_token = NULL;
    plm_gguf_open_params op = {.use_mmap = true};
    plm_gguf_file *f = plm_gguf_open(path, &op, err);
    if (!f) return err ? err->code : PLM_ERR_IO;
    plm_gguf_str s;
    if (chat_template && plm_gguf_get_str(f, "tokenizer.chat_template", &s)) *chat_template = dup_str(s);
    if (bos_token) *bos_token = token_text(f, "tokenizer.ggml.bos_token_id");
    if (eos_token) *eos_token = token_text(f, "tokenizer.ggml.eos_token_id");
    plm_gguf_close(f);
    return PLM_OK;
}
