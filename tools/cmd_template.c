/* pocketlm template: render a chat template and print exactly the prompt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "files.h"
#include "pocketlm.h"
#include "pocketlm_chat.h"

static bool is_identifier(const char *s, size_t n) {
    if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
}

/* --var NAME=JSON ... as one JSON object; the library checks the values. */
static char *vars_object(const arg_list *vars) {
    size_t cap = 3;
    for (int i = 0; i < vars->n; i++) cap += strlen(vars->items[i]) + 8;
    char *json = malloc(cap);
    if (!json) return NULL;
    size_t n = (size_t)snprintf(json, cap, "{");
    for (int i = 0; i < vars->n; i++) {
        const char *eq = strchr(vars->items[i], '=');
        size_t name_len = eq ? (size_t)(eq - vars->items[i]) : 0;
        if (!eq || !is_identifier(vars->items[i], name_len)) {
            fprintf(stderr, "pocketlm template: --var wants NAME=JSON with NAME a plain name, got '%s'\n", vars->items[i]);
            free(json);
            return NULL;
        }
        n += (size_t)snprintf(json + n, cap - n, "%s\"%.*s\":%s", i ? "," : "", (int)name_len, vars->items[i], eq + 1);
    }
    snprintf(json + n, cap - n, "}");
    return json;
}

static char *read_text(const char *what, const char *path) {
    size_t len;
    char *text = read_file(path, &len);
    if (!text) {
        fprintf(stderr, "pocketlm template: cannot read %s ", what);
        perror(path);
        return NULL;
    }
    if (strlen(text) != len) {
        fprintf(stderr, "pocketlm template: %s %s contains a NUL byte\n", what, path);
        free(text);
        return NULL;
    }
    return text;
}

/* The template text: --chat-template NAME, else --template FILE, else the
 * model's own, else the built-in chatml (as llama.cpp falls back).  Sets
 * *owned when the caller must free it. */
static const char *pick_template(const char *name, const char *file, char *from_model, char **owned) {
    *owned = NULL;
    if (name) {
        const char *t = plm_chat_builtin(name);
        if (!t) {
            fprintf(stderr, "pocketlm template: no built-in template '%s'; known:", name);
            for (size_t i = 0; plm_chat_builtin_name(i); i++) fprintf(stderr, " %s", plm_chat_builtin_name(i));
            fprintf(stderr, "\n");
        }
        return t;
    }
    if (file) return *owned = read_text("template", file);
    if (from_model) return from_model;
    fprintf(stderr, "pocketlm template: the model has no tokenizer.chat_template; using the built-in chatml "
                    "(--chat-template NAME picks another)\n");
    return plm_chat_builtin("chatml");
}

int cmd_template(int argc, char **argv) {
    const char *model_path = NULL, *template_file = NULL, *template_name = NULL, *messages_file = NULL;
    const char *tools_file = NULL, *bos = NULL, *eos = NULL;
    bool add_generation_prompt = false;
    arg_list vars = {0};
    const arg_spec specs[] = {
        {"-m", "--model", ARG_STR, &model_path, "PATH", "GGUF file: its tokenizer.chat_template and BOS/EOS texts"},
        {NULL, "--template", ARG_STR, &template_file, "FILE", "Jinja template file (overrides the model's)"},
        {NULL, "--chat-template-file", ARG_STR, &template_file, "FILE", "same as --template"},
        {NULL, "--chat-template", ARG_STR, &template_name, "NAME", "built-in template: chatml, llama3, qwen3, ..."},
        {NULL, "--messages", ARG_STR, &messages_file, "FILE", "JSON array of {\"role\", \"content\"} messages"},
        {NULL, "--tools", ARG_STR, &tools_file, "FILE", "JSON array of tool definitions"},
        {NULL, "--add-generation-prompt", ARG_FLAG, &add_generation_prompt, NULL, "end with the assistant's turn header"},
        {NULL, "--var", ARG_LIST, &vars, "NAME=JSON", "another template variable, e.g. enable_thinking=false"},
        {NULL, "--bos", ARG_STR, &bos, "TEXT", "bos_token (default: the model's, else empty)"},
        {NULL, "--eos", ARG_STR, &eos, "TEXT", "eos_token (default: the model's, else empty)"},
    };
    const arg_parser parser = {"template",
                               "pocketlm template (-m MODEL.gguf | --template FILE | --chat-template NAME) "
                               "--messages MSGS.json [options]",
                               specs, sizeof specs / sizeof specs[0], 0};
    int n_pos;
    int rc = args_parse(&parser, argc, argv, NULL, &n_pos);
    if (rc != ARGS_OK) return rc == ARGS_HELP ? 0 : 1;
    if (!messages_file || (!model_path && !template_file && !template_name)) {
        fprintf(stderr, "pocketlm template: give --messages FILE and -m MODEL, --template FILE or --chat-template NAME\n");
        args_free(&parser);
        return 1;
    }

    int status = 1;
    char *model_template = NULL, *model_bos = NULL, *model_eos = NULL, *owned = NULL;
    char *messages = NULL, *tools = NULL, *vars_json = NULL, *out = NULL;
    plm_chat_template *t = NULL;
    plm_error err;
    if (model_path && plm_chat_template_from_gguf(model_path, &model_template, &model_bos, &model_eos, &err)) {
        fprintf(stderr, "pocketlm template: %s: %s\n", model_path, err.message);
        goto done;
    }
    const char *source = pick_template(template_name, template_file, model_template, &owned);
    if (!source || !(messages = read_text("messages", messages_file))) goto done;
    if (tools_file && !(tools = read_text("tools", tools_file))) goto done;
    if (vars.n && !(vars_json = vars_object(&vars))) goto done;
    if (plm_chat_compile(source, strlen(source), &t, &err)) {
        fprintf(stderr, "pocketlm template: %s: %s\n", template_file ? template_file : template_name ? template_name : model_path, err.message);
        goto done;
    }
    plm_chat_params p = {
        .messages_json = messages,
        .tools_json = tools,
        .add_generation_prompt = add_generation_prompt,
        .bos_token = bos ? bos : model_bos,
        .eos_token = eos ? eos : model_eos,
        .vars_json = vars_json,
    };
    size_t len;
    if (plm_chat_render(t, &p, &out, &len, &err)) {
        fprintf(stderr, "pocketlm template: %s\n", err.message);
        goto done;
    }
    status = fwrite(out, 1, len, stdout) == len && fflush(stdout) == 0 ? 0 : 1;
done:
    free(out);
    plm_chat_free(t);
    free(vars_json);
    free(tools);
    free(messages);
    free(owned);
    free(model_template);
    free(model_bos);
    free(model_eos);
    args_free(&parser);
    return status;
}
