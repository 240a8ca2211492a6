/*
 * Chat requests: the conversation -> prompt text through the chat template
 * (include/pocketlm_chat.h), and the generated text -> the reply's content,
 * reasoning and tool calls (tool_calls.c), as the stream grows.
 *
 * Messages are normalised the way OpenAI clients send them and templates
 * expect them: content null -> "", content as a list of text parts -> their
 * texts joined by newlines, a tool call's arguments as a JSON string -> the
 * object (templates write them with `tojson`).  The rendered text keeps its
 * special tokens as text; the caller tokenizes it with special tokens parsed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

#define MAX_TEMPLATE_FILE (1 << 20)

/* ---- start-up ------------------------------------------------------------ */

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(MAX_TEMPLATE_FILE + 1);
    size_t n = buf ? fread(buf, 1, MAX_TEMPLATE_FILE + 1, f) : 0;
    fclose(f);
    if (!buf || n > MAX_TEMPLATE_FILE) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* Picks the template's text: a file, a built-in, the model's, chatml. */
static bool choose_source(srv_chat *c, const char *name, const char *file, char *model_tmpl) {
    if (file) {
        c->source = read_file(file);
        if (!c->source) fprintf(stderr, "pocketlm serve: --chat-template-file %s: cannot read it (or over 1 MiB)\n", file);
        snprintf(c->origin, sizeof c->origin, "%s", file);
    } else if (name) {
        const char *b = plm_chat_builtin(name);
        if (!b) {
            fprintf(stderr, "pocketlm serve: --chat-template %s: no such built-in; these are:", name);
            for (size_t i = 0; plm_chat_builtin_name(i); i++) fprintf(stderr, " %s", plm_chat_builtin_name(i));
            fputc('\n', stderr);
            return false;
        }
        c->source = strdup(b);
        snprintf(c->origin, sizeof c->origin, "built-in %s", name);
    } else if (model_tmpl) {
        c->source = strdup(model_tmpl);
        snprintf(c->origin, sizeof c->origin, "the model's tokenizer.chat_template");
    } else {
        fprintf(stderr, "pocketlm serve: the model has no tokenizer.chat_template: chat uses chatml "
                        "(--chat-template NAME or --chat-template-file FILE choose another)\n");
        c->source = strdup(plm_chat_builtin("chatml"));
        snprintf(c->origin, sizeof c->origin, "built-in chatml (fallback)");
    }
    return c->source != NULL;
}

bool chat_setup(srv_server *srv, const char *name, const char *file) {
    srv_chat *c = &srv->chat;
    plm_error err;
    char *model_tmpl = NULL;
    if (plm_chat_template_from_gguf(srv->cfg.model_path, &model_tmpl, &c->bos, &c->eos, &err)) {
        fprintf(stderr, "pocketlm serve: %s\n", err.message);
        return false;
    }
    bool ok = choose_source(c, name, file, model_tmpl);
    free(model_tmpl);
    if (!ok) return false;
    if (plm_chat_compile(c->source, strlen(c->source), &c->tmpl, &err)) {
        fprintf(stderr, "pocketlm serve: chat template (%s): %s\n", c->origin, err.message);
        return false;
    }
    c->format = tc_format_of_template(c->source);
    return true;
}

void chat_teardown(srv_chat *c) {
    plm_chat_free(c->tmpl);
    free(c->source);
    free(c->bos);
    free(c->eos);
    memset(c, 0, sizeof *c);
}

/* ---- messages ------------------------------------------------------------ */

/* content: null -> "", [{type: text, text}] -> the texts joined by newlines. */
static json_t *normal_content(json_t *v, size_t i, srv_parse_error *e) {
    if (!v || json_is_null(v)) return json_string("");
    if (json_is_string(v)) return json_incref(v);
    if (!json_is_array(v)) {
        parse_error_set(e, 400, "messages", "messages[%zu].content must be a string, null or an array of parts", i);
        return NULL;
    }
    size_t n = 0, k;
    json_t *part;
    json_array_foreach(v, k, part) {
        json_t *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(json_object_get(part, "type")) ||
            strcmp(json_string_value(json_object_get(part, "type")), "text") || !json_is_string(text)) {
            parse_error_set(e, 400, "messages", "messages[%zu].content[%zu]: only {\"type\": \"text\", \"text\": ...} "
                                                "parts are supported (this model takes text only)", i, k);
            return NULL;
        }
        n += json_string_length(text) + 1;
    }
    char *buf = malloc(n + 1), *p = buf;
    if (!buf) return NULL;
    json_array_foreach(v, k, part) {
        json_t *text = json_object_get(part, "text");
        if (k) *p++ = '\n';
        memcpy(p, json_string_value(text), json_string_length(text));
        p += json_string_length(text);
    }
    json_t *s = json_stringn(buf, (size_t)(p - buf));
    free(buf);
    return s;
}

/* Tool calls of an assistant message: arguments given as a JSON string
 * become the object. */
static void normal_tool_calls(json_t *calls) {
    size_t k;
    json_t *call;
    json_array_foreach(calls, k, call) {
        json_t *fn = json_object_get(call, "function");
        json_t *args = json_object_get(fn, "arguments");
        if (!json_is_string(args)) continue;
        json_t *obj = json_loads(json_string_value(args), 0, NULL);
        if (json_is_object(obj)) json_object_set_new(fn, "arguments", obj);
        else json_decref(obj);
    }
}

static json_t *normal_messages(json_t *msgs, srv_parse_error *e) {
    json_t *out = json_deep_copy(msgs);
    size_t i;
    json_t *m;
    json_array_foreach(out, i, m) {
        if (!json_is_object(m) || !json_is_string(json_object_get(m, "role"))) {
            parse_error_set(e, 400, "messages", "messages[%zu] must be an object with a string 'role'", i);
            json_decref(out);
            return NULL;
        }
        json_t *images = json_object_get(m, "images");
        if (images && !json_is_null(images) && !(json_is_array(images) && !json_array_size(images))) {
            parse_error_set(e, 400, "messages", "messages[%zu].images: this model takes text only", i);
            json_decref(out);
            return NULL;
        }
        json_t *content = normal_content(json_object_get(m, "content"), i, e);
        if (!content) {
            json_decref(out);
            return NULL;
        }
        json_object_set_new(m, "content", content);
        if (json_is_array(json_object_get(m, "tool_calls"))) normal_tool_calls(json_object_get(m, "tool_calls"));
    }
    return out;
}

/* ---- tools --------------------------------------------------------------- */

typedef enum { CHOICE_AUTO, CHOICE_NONE, CHOICE_REQUIRED, CHOICE_NAMED } tool_choice;

static bool has_tool(json_t *tools, const char *name) {
    size_t k;
    json_t *t;
    json_array_foreach(tools, k, t) {
        const char *n = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        if (n && !strcmp(n, name)) return true;
    }
    return false;
}

static bool parse_tools(json_t *root, json_t **tools, tool_choice *choice, const char **name, srv_parse_error *e) {
    *tools = json_object_get(root, "tools");
    if (json_is_null(*tools)) *tools = NULL;
    if (*tools && !json_is_array(*tools)) {
        parse_error_set(e, 400, "tools", "'tools' must be an array of tool definitions");
        return false;
    }
    size_t k;
    json_t *t;
    json_array_foreach(*tools, k, t) {
        if (!json_is_string(json_object_get(json_object_get(t, "function"), "name"))) {
            parse_error_set(e, 400, "tools", "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
                            k);
            return false;
        }
    }
    if (*tools && !json_array_size(*tools)) *tools = NULL;
    json_t *c = json_object_get(root, "tool_choice");
    *choice = CHOICE_AUTO;
    const char *s = json_string_value(c);
    if (!c || json_is_null(c) || (s && !strcmp(s, "auto"))) *choice = CHOICE_AUTO;
    else if (s && !strcmp(s, "none")) *choice = CHOICE_NONE;
    else if (s && !strcmp(s, "required")) *choice = CHOICE_REQUIRED;
    else if (json_is_object(c) && json_is_string(json_object_get(json_object_get(c, "function"), "name"))) {
        *choice = CHOICE_NAMED;
        *name = json_string_value(json_object_get(json_object_get(c, "function"), "name"));
        if (!*tools || !has_tool(*tools, *name)) {
            parse_error_set(e, 400, "tool_choice", "tool_choice names '%s', which is not in 'tools'", *name);
            return false;
        }
    } else {
        parse_error_set(e, 400, "tool_choice",
                        "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                        "{\"type\": \"function\", \"function\": {\"name\": ...}}");
        return false;
    }
    if (*choice == CHOICE_REQUIRED && !*tools) {
        parse_error_set(e, 400, "tool_choice", "tool_choice \"required\" needs 'tools'");
        return false;
    }
    if (*choice == CHOICE_NONE) *tools = NULL;
    return true;
}

/* A forced call: the reply's start, written into the prompt so that the
 * model can only go on with the call (there is no grammar to force it).  A
 * prompt that opened <think> gets the block closed first: the call is the
 * answer, not a thought. */
static char *forced_call(tc_format fmt, tool_choice choice, const char *name, bool think_open) {
    json_t *jn = name ? json_string(name) : NULL;
    char *qname = jn ? json_dumps(jn, JSON_ENCODE_ANY) : NULL;
    json_decref(jn);
    char buf[512];
    const char *close = think_open ? "</think>\n\n" : "";
    if (choice == CHOICE_NAMED && qname && strlen(qname) < 400)
        snprintf(buf, sizeof buf,
                 fmt == TC_LLAMA3 ? "%s{\"name\": %s, \"parameters\": " : "%s<tool_call>\n{\"name\": %s, \"arguments\": ",
                 close, qname);
    else
        snprintf(buf, sizeof buf, "%s%s", close, fmt == TC_LLAMA3 ? "{\"name\": \"" : "<tool_call>\n{\"name\": \"");
    free(qname);
    return strdup(buf);
}

/* ---- rendering ----------------------------------------------------------- */

/* Template variables: chat_template_kwargs (llama-server's field), and
 * Ollama's "think" as enable_thinking. */
static bool template_vars(json_t *root, srv_api api, char **vars_json, srv_parse_error *e) {
    json_t *kw = json_object_get(root, "chat_template_kwargs");
    if (kw && !json_is_null(kw) && !json_is_object(kw)) {
        parse_error_set(e, 400, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
        return false;
    }
    json_t *vars = kw && json_is_object(kw) ? json_deep_copy(kw) : json_object();
    json_t *think = api == API_OLLAMA ? json_object_get(root, "think") : NULL;
    if (think && !json_is_null(think)) {
        if (!json_is_boolean(think)) {
            json_decref(vars);
            parse_error_set(e, 400, "think", "'think' must be true or false");
            return false;
        }
        json_object_set(vars, "enable_thinking", think);
    }
    *vars_json = json_object_size(vars) ? json_dumps(vars, JSON_COMPACT) : NULL;
    json_decref(vars);
    return true;
}

static bool ends_inside_think(const char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ')) n--;
    return n >= 7 && !memcmp(s + n - 7, "<think>", 7);
}

/* Appends the forced-call prefill; takes a template-written BOS off when
 * the tokenizer will add one (as llama.cpp does: one BOS, not two). */
static bool finish_prompt(const srv_server *srv, char *rendered, srv_chat_prompt *out) {
    const char *bos = srv->chat.bos;
    size_t skip = 0;
    if (plm_vocab_add_bos(srv->model) && bos && *bos && !strncmp(rendered, bos, strlen(bos))) skip = strlen(bos);
    size_t n = strlen(rendered + skip), np = out->prefill ? strlen(out->prefill) : 0;
    out->text = malloc(n + np + 1);
    if (!out->text) return false;
    memcpy(out->text, rendered + skip, n);
    memcpy(out->text + n, out->prefill ? out->prefill : "", np + 1);
    return true;
}

bool chat_render(const srv_server *srv, json_t *root, srv_api api, srv_chat_prompt *out, srv_parse_error *e) {
    memset(out, 0, sizeof *out);
    json_t *messages = json_object_get(root, "messages");
    if (!json_is_array(messages) || !json_array_size(messages)) {
        parse_error_set(e, 400, "messages", "'messages' must be a non-empty array");
        return false;
    }
    json_t *tools;
    tool_choice choice;
    const char *name = NULL;
    char *vars = NULL, *msgs_json = NULL, *tools_json = NULL, *rendered = NULL;
    if (!parse_tools(root, &tools, &choice, &name, e) || !template_vars(root, api, &vars, e)) return false;
    json_t *msgs = normal_messages(messages, e);
    if (!msgs) {
        free(vars);
        return false;
    }
    msgs_json = json_dumps(msgs, JSON_COMPACT);
    json_decref(msgs);
    tools_json = tools ? json_dumps(tools, JSON_COMPACT) : NULL;
    plm_chat_params p = {.messages_json = msgs_json, .tools_json = tools_json, .add_generation_prompt = true,
                         .bos_token = srv->chat.bos, .eos_token = srv->chat.eos, .vars_json = vars};
    plm_error err;
    size_t len;
    plm_status st = msgs_json ? plm_chat_render(srv->chat.tmpl, &p, &rendered, &len, &err) : PLM_ERR_NOMEM;
    bool ok = st == PLM_OK;
    if (!ok)
        parse_error_set(e, st == PLM_ERR_NOMEM ? 413 : 400, "messages", "the chat template (%s) failed: %s",
                        srv->chat.origin, st == PLM_ERR_NOMEM && !msgs_json ? "out of memory" : err.message);
    if (ok) {
        out->format = !tools ? TC_NONE : srv->chat.format != TC_NONE ? srv->chat.format : TC_HERMES;
        out->think_open = ends_inside_think(rendered);
        if (tools && (choice == CHOICE_REQUIRED || choice == CHOICE_NAMED))
            out->prefill = forced_call(out->format, choice, name, out->think_open);
        ok = finish_prompt(srv, rendered, out);
        if (!ok) parse_error_set(e, 500, NULL, "out of memory");
    }
    free(rendered);
    free(vars);
    free(msgs_json);
    free(tools_json);
    if (!ok) chat_prompt_free(out);
    return ok;
}

void chat_prompt_free(srv_chat_prompt *p) {
    free(p->text);
    free(p->prefill);
    memset(p, 0, sizeof *p);
}

/* ---- the reply ----------------------------------------------------------- */

bool chat_split_init(chat_split *cs, const srv_chat_prompt *p) {
    memset(cs, 0, sizeof *cs);
    cs->format = p->format;
    cs->think_open = p->think_open;
    size_t n = p->prefill ? strlen(p->prefill) : 0;
    cs->cap = n + 256;
    cs->text = malloc(cs->cap);
    if (!cs->text) return false;
    memcpy(cs->text, p->prefill ? p->prefill : "", n);
    cs->len = n;
    return true;
}

/* Length of the longest prefix of s that does not end inside a UTF-8
 * sequence: a stream sends whole characters. */
static size_t utf8_whole(const char *s, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xC0) == 0x80) continue;  /* a continuation byte */
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? n - back : n;
    }
    return n;
}

static char *new_part(const char *s, size_t *sent, bool final) {
    if (!s) return NULL;
    size_t n = strlen(s);
    if (!final) n = utf8_whole(s, n);
    if (n <= *sent) return NULL;
    char *out = strndup(s + *sent, n - *sent);
    *sent = n;
    return out;
}

bool chat_split_step(chat_split *cs, const char *text, size_t n, bool final, char **content, char **reasoning,
                     json_t **calls) {
    *content = *reasoning = NULL;
    if (calls) *calls = NULL;
    if (cs->len + n + 1 > cs->cap) {
        size_t c = cs->cap * 2;
        while (c < cs->len + n + 1) c *= 2;
        char *nb = realloc(cs->text, c);
        if (!nb) return false;
        cs->text = nb;
        cs->cap = c;
    }
    memcpy(cs->text + cs->len, text, n);
    cs->len += n;
    tc_result r;
    if (!tc_parse(cs->text, cs->len, cs->format, cs->think_open, !final, &r)) return false;
    *content = new_part(r.content, &cs->sent_content, final);
    *reasoning = new_part(r.reasoning, &cs->sent_reasoning, final);
    if (calls && final && r.calls) *calls = json_incref(r.calls);
    tc_result_free(&r);
    return true;
}

void chat_split_free(chat_split *cs) {
    free(cs->text);
    memset(cs, 0, sizeof *cs);
}
