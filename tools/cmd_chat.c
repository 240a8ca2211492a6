/* pocketlm chat: talk to an instruction-tuned model in its chat template,
 * from a terminal (line editing and history), a pipe (one turn per line) or
 * once (-p).  Each turn evaluates only what the cache does not hold yet. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dlfcn.h>

#include "args.h"
#include "chat_session.h"
#include "chat_think.h"
#include "cli.h"
#include "files.h"
#include "pocketlm.h"
#include "pocketlm_chat.h"
#include "spec_cli.h"

#define DEMO_MODEL "../shared/models/stories260K.gguf"

typedef struct chat_opts {
    const char *model, *prompt, *system, *template_name, *template_file, *reasoning;
    const char *cache_type_k, *cache_type_v;
    int n_predict, n_ctx, n_batch, n_threads;
    bool verbose, ignore_eos;
    plm_sampler_params sp;
    uint64_t seed;
    arg_list stops, vars;
    spec_cli spec;  /* speculative decoding: one decoder for the whole conversation */
} chat_opts;

/* ---- Ctrl-C: stops an answer; twice at the prompt leaves ---------------- */

static volatile sig_atomic_t interrupts;

static void on_sigint(int sig) {
    (void)sig;
    interrupts++;
}

static bool interrupted(void *user) {
    (void)user;
    return interrupts > 0;
}

/* At the prompt a Ctrl-C must end the blocked read (no SA_RESTART); while
 * answering it must not fail a write to a full pipe or a slow terminal. */
static void catch_sigint(bool restart) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

/* ---- the template ---------------------------------------------------- */

typedef struct chat_template_src {
    char *owned, *bos, *eos;
    const char *text;
} chat_template_src;

static bool choose_template(const chat_opts *o, chat_template_src *t) {
    plm_error err;
    memset(t, 0, sizeof *t);
    char *model_template = NULL;
    if (plm_chat_template_from_gguf(o->model, &model_template, &t->bos, &t->eos, &err)) {
        fprintf(stderr, "pocketlm chat: %s\n", err.message);
        return false;
    }
    if (o->template_file) {
        size_t len;
        free(model_template);
        t->owned = read_file(o->template_file, &len);
        t->text = t->owned;
        if (!t->owned) {
            fprintf(stderr, "pocketlm chat: cannot read %s: %s\n", o->template_file, strerror(errno));
            return false;
        }
        return true;
    }
    if (o->template_name) {
        free(model_template);
        if (!(t->text = plm_chat_builtin(o->template_name))) {
            fprintf(stderr, "pocketlm chat: unknown template '%s'; built-ins:", o->template_name);
            for (size_t i = 0; plm_chat_builtin_name(i); i++) fprintf(stderr, " %s", plm_chat_builtin_name(i));
            fprintf(stderr, "\n");
            return false;
        }
        return true;
    }
    if (model_template) {
        t->owned = model_template;
        t->text = model_template;
        return true;
    }
    fprintf(stderr, "pocketlm chat: note: the model has no chat template; using chatml\n");
    t->text = plm_chat_builtin("chatml");
    return true;
}

/* Stop strings: the user's, or the end-of-turn markers the template writes
 * (a model without them as control tokens may still produce their text). */
static int default_stops(const char *tmpl, const char **out) {
    static const char *const markers[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>"};
    int n = 0;
    for (size_t i = 0; i < sizeof markers / sizeof markers[0]; i++)
        if (strstr(tmpl, markers[i])) out[n++] = markers[i];
    return n;
}

/* ---- one turn ----------------------------------------------------------- */

typedef struct chat_app {
    const chat_opts *o;
    chat_session s;
    plm_sampler *smp;
    think_filter think;
    const char *stops[8];
    int n_stops;
    int turn;
    bool failed;  /* an answer could not be made: -p exits 1 */
} chat_app;

static bool show_piece(void *user, const char *text, size_t len) {
    think_feed(user, text, len);
    return true;
}

static void answer(chat_app *a, const char *text) {
    plm_generate_params gp = plm_generate_default_params();
    gp.max_tokens = a->o->n_predict;
    gp.stops = a->o->stops.n ? (const char *const *)a->o->stops.items : a->stops;
    gp.n_stops = a->o->stops.n ? a->o->stops.n : a->n_stops;
    gp.abort = interrupted;
    gp.user = &a->think;
    think_init(&a->think, stdout, !strcmp(a->o->reasoning, "hide"), isatty(STDOUT_FILENO));
    gp.ignore_eos = a->o->ignore_eos;
    gp.spec = a->o->spec.spec;
    interrupts = 0;
    catch_sigint(true);
    plm_generate_result r;
    chat_turn_stats ts;
    plm_error err;
    bool ok = chat_session_turn(&a->s, text, a->smp, gp, show_piece, &r, &ts, &err);
    think_flush(&a->think);
    catch_sigint(false);
    a->turn++;
    if (ts.n_dropped)
        fprintf(stderr, "pocketlm chat: context full: dropped the %d oldest messages (the system prompt stays)\n",
                ts.n_dropped);
    if (!ok) {
        fprintf(stderr, "pocketlm chat: %s\n", err.message);
        a->failed = true;
        return;
    }
    printf("\n");
    fflush(stdout);
    if (r.finish == PLM_FINISH_ABORT) fprintf(stderr, "pocketlm chat: answer stopped\n");
    if (r.finish == PLM_FINISH_CONTEXT)
        fprintf(stderr, "pocketlm chat: context full: answer cut; the oldest turns go next turn\n");
    if (a->o->verbose)
        fprintf(stderr, "chat turn %d: prompt %d tok, reused %d, evaluated %d, generated %d, finish %s\n", a->turn,
                ts.n_prompt, ts.n_reused, ts.n_evaluated, r.n_generated, plm_finish_reason_name(r.finish));
}

/* After /clear and /load the cache holds another conversation: the
 * speculative decoder follows it from the start again. */
static void resync_spec(chat_app *a) {
    plm_error err;
    if (a->o->spec.spec && plm_spec_begin(a->o->spec.spec, a->s.cached, (int)plm_context_n_past(a->s.ctx), &err))
        fprintf(stderr, "pocketlm chat: %s\n", err.message);
}

/* Lines starting with '/' are commands; false for an unknown one. */
static bool command(chat_app *a, const char *line) {
    plm_error err;
    if (!strcmp(line, "/clear")) {
        chat_session_clear(&a->s);
        resync_spec(a);
        fprintf(stderr, "pocketlm chat: conversation cleared\n");
    } else if (!strncmp(line, "/save ", 6)) {
        if (chat_session_save(&a->s, line + 6, &err)) fprintf(stderr, "pocketlm chat: saved %s\n", line + 6);
        else fprintf(stderr, "pocketlm chat: %s\n", err.message);
    } else if (!strncmp(line, "/load ", 6)) {
        if (!chat_session_load(&a->s, line + 6, &err)) fprintf(stderr, "pocketlm chat: %s\n", err.message);
        else if (chat_session_load_kv(&a->s, line + 6, &err))
            fprintf(stderr, "pocketlm chat: loaded %s with its KV cache (%u tokens)\n", line + 6,
                    plm_context_n_past(a->s.ctx));
        else
            fprintf(stderr, "pocketlm chat: loaded %s; its KV cache was not restored (%s): the next turn "
                            "evaluates the history\n", line + 6, err.message);
        resync_spec(a);
    } else if (!strcmp(line, "/help")) {
        fprintf(stderr, "/clear  forget the conversation\n/save FILE  save it\n/load FILE  resume one\n"
                        "/exit  leave (also Ctrl-D, or Ctrl-C twice)\n");
    } else {
        fprintf(stderr, "pocketlm chat: unknown command %s (try /help)\n", line);
        return false;
    }
    return true;
}

/* Returns false when the line asks to leave. */
static bool handle_line(chat_app *a, char *line) {
    size_t len = strlen(line);
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
    if (!len) return true;
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) return false;
    if (line[0] == '/') command(a, line);
    else answer(a, line);
    return true;
}

static void read_pipe(chat_app *a) {
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) >= 0 && handle_line(a, line)) {}
    free(line);
}

/* Line editing and history come from libedit, opened only when a terminal
 * chat starts: every other command (and its memory plan) stays without it.
 * Without libedit the prompt reads plain lines. */
typedef struct line_editor {
    char *(*readline)(const char *prompt);
    int (*add_history)(const char *line);
} line_editor;

static line_editor open_editor(void) {
    line_editor ed = {0};
    void *lib = dlopen("libedit.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return ed;
    *(void **)&ed.readline = dlsym(lib, "readline");
    *(void **)&ed.add_history = dlsym(lib, "add_history");
    if (!ed.readline || !ed.add_history) ed = (line_editor){0};
    return ed;
}

static char *read_line(const line_editor *ed, const char *prompt) {
    if (ed->readline) return ed->readline(prompt);
    fputs(prompt, stdout);
    fflush(stdout);
    char *line = NULL;
    size_t cap = 0;
    if (getline(&line, &cap, stdin) >= 0) return line;
    free(line);
    return NULL;
}

static void read_terminal(chat_app *a) {
    line_editor ed = open_editor();
    fprintf(stderr, "pocketlm chat: /help for commands; Ctrl-C stops an answer, Ctrl-D leaves%s\n",
            ed.readline ? "" : " (no libedit: no line editing)");
    for (;;) {
        interrupts = 0;
        char *line = read_line(&ed, "> ");
        if (!line && interrupts) {  /* Ctrl-C at the prompt: a second one leaves */
            fprintf(stderr, "\n(Ctrl-C again to leave)\n");
            clearerr(stdin);
            line = read_line(&ed, "> ");
            if (!line || interrupts > 1) {
                free(line);
                break;
            }
        }
        if (!line) break;
        if (*line && ed.add_history) ed.add_history(line);
        bool go_on = handle_line(a, line);
        free(line);
        if (!go_on) break;
    }
    fprintf(stderr, "\n");
}

/* ---- setup -------------------------------------------------------------- */

/* --var NAME=JSON ... as one JSON object (malloc'd), or NULL with a message. */
static char *vars_object(const arg_list *vars) {
    json_t *obj = json_object();
    for (int i = 0; obj && i < vars->n; i++) {
        const char *eq = strchr(vars->items[i], '=');
        json_error_t je;
        json_t *v = eq && eq != vars->items[i] ? json_loads(eq + 1, JSON_DECODE_ANY, &je) : NULL;
        char name[128];
        if (!v || (size_t)(eq - vars->items[i]) >= sizeof name) {
            fprintf(stderr, "pocketlm chat: --var wants NAME=JSON, got '%s'\n", vars->items[i]);
            json_decref(v);
            json_decref(obj);
            return NULL;
        }
        snprintf(name, sizeof name, "%.*s", (int)(eq - vars->items[i]), vars->items[i]);
        json_object_set_new(obj, name, v);
    }
    char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    return text;
}

static int chat(chat_opts *o, plm_model *model, const chat_template_src *src) {
    plm_error err;
    plm_chat_template *tmpl;
    char *vars = NULL;
    if (o->vars.n && !(vars = vars_object(&o->vars))) return 1;
    if (plm_chat_compile(src->text, strlen(src->text), &tmpl, &err)) {
        fprintf(stderr, "pocketlm chat: template: %s\n", err.message);
        free(vars);
        return 1;
    }
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = (uint32_t)o->n_ctx;
    if (o->n_batch) cp.n_batch = (uint32_t)o->n_batch;
    cp.n_threads = (uint32_t)o->n_threads;
    cp.type_k = (plm_kv_type)plm_kv_type_from_name(o->cache_type_k);
    cp.type_v = (plm_kv_type)plm_kv_type_from_name(o->cache_type_v);
    plm_context *ctx = NULL;
    bool spec_ok = !o->spec.draft_model || spec_cli_fit("chat", &o->spec, o->model, true, NULL, &cp);
    if (!spec_ok || plm_context_new(model, &cp, &ctx, &err) ||
        (spec_cli_wanted(&o->spec) && !spec_cli_open("chat", &o->spec, ctx, &cp, true))) {
        if (spec_ok && !ctx) fprintf(stderr, "pocketlm chat: %s\n", err.message);
        spec_cli_close("chat", &o->spec);
        plm_context_free(ctx);
        plm_chat_free(tmpl);
        free(vars);
        return 1;
    }
    plm_sampler_params sp = o->sp;
    sp.seed = o->seed;
    chat_app a = {.o = o};
    if (plm_sampler_create(model, &sp, &a.smp, &err)) {
        fprintf(stderr, "pocketlm chat: %s\n", err.message);
        spec_cli_close("chat", &o->spec);
        plm_context_free(ctx);
        plm_chat_free(tmpl);
        free(vars);
        return 1;
    }
    chat_session_init(&a.s, model, ctx, tmpl, o->system);
    a.s.bos = src->bos;
    a.s.eos = src->eos;
    a.s.vars_json = vars;
    a.s.verbose = o->verbose;
    uint32_t n_ctx = plm_context_n_ctx(ctx);
    a.s.reserve = o->n_predict > 0 && (uint32_t)o->n_predict < n_ctx / 2 ? o->n_predict : (int)(n_ctx / 4);
    a.n_stops = default_stops(src->text, a.stops);
    catch_sigint(false);
    if (o->prompt) {
        char *line = strdup(o->prompt);
        if (line) handle_line(&a, line);
        free(line);
    } else if (isatty(STDIN_FILENO)) {
        read_terminal(&a);
    } else {
        read_pipe(&a);
    }
    spec_cli_report(&o->spec, stderr);
    /* the n-gram cache is saved here; the draft goes before the context */
    bool saved = spec_cli_close("chat", &o->spec);
    chat_session_free(&a.s);
    free(vars);
    plm_sampler_free(a.smp);
    plm_context_free(ctx);
    plm_chat_free(tmpl);
    return (o->prompt && a.failed) || !saved ? 1 : 0;
}

static bool check_options(const chat_opts *o) {
    plm_error err;
    if (plm_kv_type_from_name(o->cache_type_k) < 0 || plm_kv_type_from_name(o->cache_type_v) < 0) {
        fprintf(stderr, "pocketlm chat: cache types are f16, q8_0 or q4_0\n");
        return false;
    }
    if (o->n_ctx < 0 || o->n_batch < 0 || o->n_threads < 0) {
        fprintf(stderr, "pocketlm chat: -c, -b and -t must be >= 0\n");
        return false;
    }
    if (strcmp(o->reasoning, "show") && strcmp(o->reasoning, "hide")) {
        fprintf(stderr, "pocketlm chat: --reasoning is show or hide\n");
        return false;
    }
    if (o->template_name && o->template_file) {
        fprintf(stderr, "pocketlm chat: give --chat-template or --chat-template-file, not both\n");
        return false;
    }
    if (plm_sampler_params_check(&o->sp, &err)) {
        fprintf(stderr, "pocketlm chat: %s\n", err.message);
        return false;
    }
    return true;
}

int cmd_chat(int argc, char **argv) {
    chat_opts o = {.n_predict = -1, .cache_type_k = "f16", .cache_type_v = "f16", .reasoning = "show",
                   .sp = plm_sampler_default_params(), .spec = spec_cli_defaults()};
    o.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    arg_spec specs[48] = {
        {"-m", "--model", ARG_STR, &o.model, "PATH", "GGUF model (default: " DEMO_MODEL " if present)"},
        {"-p", "--prompt", ARG_STR, &o.prompt, "TEXT", "answer this one message and exit"},
        {"-sys", "--system-prompt", ARG_STR, &o.system, "TEXT", "system prompt"},
        {NULL, "--chat-template", ARG_STR, &o.template_name, "NAME", "built-in template (default: the model's)"},
        {NULL, "--chat-template-file", ARG_STR, &o.template_file, "FILE", "Jinja template file"},
        {NULL, "--var", ARG_LIST, &o.vars, "NAME=JSON", "a template variable, e.g. enable_thinking=false"},
        {NULL, "--reasoning", ARG_STR, &o.reasoning, "MODE", "<think> text: show (dimmed on a terminal) or hide"},
        {"-n", "--n-predict", ARG_INT, &o.n_predict, "N", "tokens per answer at most, -1 = until end of turn"},
        {"-c", "--ctx-size", ARG_INT, &o.n_ctx, "N", "context length, 0 = min(trained, 4096)"},
        {"-b", "--batch-size", ARG_INT, &o.n_batch, "N", "prompt tokens per forward pass, 0 = 512"},
        {"-t", "--threads", ARG_INT, &o.n_threads, "N", "threads, 0 = the performance cores"},
        {"-ctk", "--cache-type-k", ARG_STR, &o.cache_type_k, "TYPE", "KV cache keys: f16, q8_0, q4_0"},
        {"-ctv", "--cache-type-v", ARG_STR, &o.cache_type_v, "TYPE", "KV cache values: f16, q8_0, q4_0"},
        {NULL, "--temp", ARG_FLOAT, &o.sp.temperature, "T", "temperature, 0 = greedy"},
        {NULL, "--top-k", ARG_INT, &o.sp.top_k, "K", "keep the K most likely tokens, 0 = off"},
        {NULL, "--top-p", ARG_FLOAT, &o.sp.top_p, "P", "nucleus sampling, 1 = off"},
        {NULL, "--min-p", ARG_FLOAT, &o.sp.min_p, "P", "drop tokens below P x the best, 0 = off"},
        {NULL, "--repeat-penalty", ARG_FLOAT, &o.sp.repeat_penalty, "X", "penalise recent tokens, 1 = off"},
        {"-s", "--seed", ARG_U64, &o.seed, "N", "random seed (default: from the clock)"},
        {NULL, "--stop", ARG_LIST, &o.stops, "TEXT", "end an answer at this text (default: the template's end-of-turn)"},
        {NULL, "--ignore-eos", ARG_FLAG, &o.ignore_eos, NULL, "keep generating past end-of-turn tokens"},
        {"-v", "--verbose", ARG_FLAG, &o.verbose, NULL, "log each turn's prompt tokens (reused, evaluated) on stderr"},
    };
    int n_specs = 0;
    while (specs[n_specs].long_name) n_specs++;
    spec_cli_args(&o.spec, specs + n_specs);
    n_specs += SPEC_CLI_N_ARGS;
    const arg_parser parser = {"chat", "pocketlm chat [-m MODEL.gguf] [-p MESSAGE] [-sys TEXT] [options]", specs,
                               n_specs, 0};
    char *pos[1];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) {
        args_free(&parser);
        return rc == ARGS_HELP ? 0 : 1;
    }
    if (!o.model && access(DEMO_MODEL, R_OK) == 0) o.model = DEMO_MODEL;
    if (!o.model) fprintf(stderr, "pocketlm chat: no model given: pass one with -m MODEL.gguf\n");
    chat_template_src src = {0};
    plm_model *model = NULL;
    plm_error err;
    rc = 1;
    if (!o.model || !check_options(&o) || !choose_template(&o, &src)) goto done;
    plm_model_params mp = plm_model_default_params();
    if (plm_model_load(o.model, &mp, &model, &err)) {
        fprintf(stderr, "pocketlm chat: %s\n", err.message);
        goto done;
    }
    rc = chat(&o, model, &src);
done:
    plm_model_free(model);
    free(src.owned);
    free(src.bos);
    free(src.eos);
    args_free(&parser);
    return rc;
}
