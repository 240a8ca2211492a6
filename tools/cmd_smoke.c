/*
 * pocketlm smoke: a quick release check of a candidate (another
 * quantization, another KV cache type, another kernel table, or a saved
 * base run from another machine) against its base on a fixed prompt set.
 * Per prompt: both greedy answers side by side, the first divergent token,
 * top-1 agreement and KL divergence over the base's answer (teacher-forced,
 * include/pocketlm_smoke.h); then a verdict against stated thresholds, as a
 * Markdown report and an exit code (0 pass, 2 fail, 1 error).
 *
 *   laptop:  pocketlm smoke -m base.gguf --save base.smoke
 *   phone:   pocketlm smoke -m base-q4.gguf --against base.smoke -o report.md
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "args.h"
#include "cli.h"
#include "fit.h"
#include "pocketlm.h"
#include "pocketlm_chat.h"
#include "pocketlm_smoke.h"
#include "smoke_file.h"

#define DEFAULT_SET "data/smoke.jsonl"
enum { EXIT_PASS = 0, EXIT_ERROR = 1, EXIT_FAIL = 2 };

typedef struct smoke_opts {
    const char *model, *candidate, *against, *save, *out, *set, *cache_type_k, *cache_type_v, *kernels;
    const char *chat_template, *mem_limit;
    int n_predict, n_threads;
    float max_kld, min_top1;
    bool raw, no_mmap;
} smoke_opts;

/* One side of the comparison: a model and a context on it. */
typedef struct side {
    plm_model *model;
    plm_context *ctx;
    bool owns_model;
} side;

static void side_free(side *s) {
    plm_context_free(s->ctx);
    if (s->owns_model) plm_model_free(s->model);
    memset(s, 0, sizeof *s);
}

static bool load_model(const smoke_opts *o, const char *path, plm_model **model) {
    plm_model_params mp = plm_model_default_params();
    mp.use_mmap = !o->no_mmap;
    plm_error err;
    if (plm_model_load(path, &mp, model, &err) == PLM_OK) return true;
    fprintf(stderr, "pocketlm smoke: %s\n", err.message);
    return false;
}

/* A context of n_ctx tokens with the given KV types and kernel table.  The
 * table is chosen where a context is made, from PLM_KERNELS: set for this
 * context only, then restored. */
static bool open_context(const smoke_opts *o, const char *path, plm_model *model, uint32_t n_ctx, const char *ctk,
                         const char *ctv, const char *kernels, plm_context **ctx) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = (uint32_t)o->n_threads;
    cp.type_k = (plm_kv_type)plm_kv_type_from_name(ctk);
    cp.type_v = (plm_kv_type)plm_kv_type_from_name(ctv);
    if (!fit_context("smoke", path, !o->no_mmap, o->mem_limit, &cp)) return false;
    char *saved = getenv("PLM_KERNELS") ? strdup(getenv("PLM_KERNELS")) : NULL;
    if (kernels) setenv("PLM_KERNELS", kernels, 1);
    plm_error err;
    plm_status st = plm_context_new(model, &cp, ctx, &err);
    if (kernels) saved ? setenv("PLM_KERNELS", saved, 1) : unsetenv("PLM_KERNELS");
    free(saved);
    if (st == PLM_OK) return true;
    if (kernels) fprintf(stderr, "pocketlm smoke: --kernels %s: no such kernel table on this CPU (ref, avx2, avxvnni, "
                                 "avx512, neon, dotprod, i8mm)\n", kernels);
    else fprintf(stderr, "pocketlm smoke: %s\n", err.message);
    return false;
}

/* ---- prompts: the chat template, or the raw text ------------------------------ */

typedef struct prompt_format {
    plm_chat_template *tmpl;
    char *bos, *eos;
} prompt_format;

static bool choose_format(const smoke_opts *o, smoke_run *run, prompt_format *pf) {
    memset(pf, 0, sizeof *pf);
    char *own = NULL;
    plm_error err;
    if (plm_chat_template_from_gguf(o->model, &own, &pf->bos, &pf->eos, &err)) {
        fprintf(stderr, "pocketlm smoke: %s\n", err.message);
        return false;
    }
    const char *text = own, *name = "the model's";
    if (o->chat_template && !(text = plm_chat_builtin(name = o->chat_template))) {
        fprintf(stderr, "pocketlm smoke: unknown chat template '%s'; built-ins:", o->chat_template);
        for (size_t i = 0; plm_chat_builtin_name(i); i++) fprintf(stderr, " %s", plm_chat_builtin_name(i));
        fprintf(stderr, "\n");
        free(own);
        return false;
    }
    if (o->raw || !text) {
        run->format = strdup(o->raw ? "raw prompt (--raw)" : "raw prompt (the model has no chat template)");
        free(own);
        return run->format != NULL;
    }
    plm_status st = plm_chat_compile(text, strlen(text), &pf->tmpl, &err);
    free(own);
    if (st) {
        fprintf(stderr, "pocketlm smoke: chat template: %s\n", err.message);
        return false;
    }
    char buf[96];
    snprintf(buf, sizeof buf, "chat template (%s)", name);
    return (run->format = strdup(buf)) != NULL;
}

static void format_free(prompt_format *pf) {
    plm_chat_free(pf->tmpl);
    free(pf->bos);
    free(pf->eos);
}

/* The prompt's tokens: one user message in the template with the generation
 * prompt (one BOS: the template's, or the vocabulary's when it writes none),
 * or the raw text with BOS as the vocabulary asks. */
static plm_token *prompt_tokens(const prompt_format *pf, plm_model *model, const char *text, int *n) {
    if (!pf->tmpl) return plm_tokenize_alloc(model, text, strlen(text), n, true, false);
    json_t *msgs = json_pack("[{ss ss}]", "role", "user", "content", text);
    char *mj = msgs ? json_dumps(msgs, JSON_COMPACT) : NULL;
    json_decref(msgs);
    if (!mj) return NULL;
    plm_chat_params cp = {.messages_json = mj, .add_generation_prompt = true, .bos_token = pf->bos,
                          .eos_token = pf->eos};
    char *rendered;
    size_t len;
    plm_error err;
    plm_status st = plm_chat_render(pf->tmpl, &cp, &rendered, &len, &err);
    free(mj);
    if (st) {
        fprintf(stderr, "pocketlm smoke: chat template: %s\n", err.message);
        return NULL;
    }
    const bool bos_written = pf->bos && *pf->bos && !strncmp(rendered, pf->bos, strlen(pf->bos));
    plm_token *t = plm_tokenize_alloc(model, rendered, len, n, !bos_written, true);
    free(rendered);
    return t;
}

/* ---- the base run ---------------------------------------------------------------- */

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static bool run_base(const smoke_opts *o, smoke_run *run, side *base) {
    prompt_format pf;
    if (!choose_format(o, run, &pf)) return false;
    plm_token **toks = calloc((size_t)run->n, sizeof *toks);
    int *n_toks = calloc((size_t)run->n, sizeof *n_toks), longest = 0;
    bool ok = toks && n_toks;
    for (int i = 0; ok && i < run->n; i++) {
        ok = (toks[i] = prompt_tokens(&pf, base->model, run->prompts[i].text, &n_toks[i])) && n_toks[i] > 0;
        if (!ok) fprintf(stderr, "pocketlm smoke: cannot tokenize prompt '%s'\n", run->prompts[i].id);
        else if (n_toks[i] > longest) longest = n_toks[i];
    }
    format_free(&pf);
    ok = ok && open_context(o, o->model, base->model, (uint32_t)(longest + o->n_predict), "f16", "f16", NULL,
                            &base->ctx);
    fprintf(stderr, "pocketlm smoke: base %s: %d prompts, %s, up to %d tokens each\n", o->model, run->n,
            run->format ? run->format : "?", o->n_predict);
    for (int i = 0; ok && i < run->n; i++) {
        plm_error err;
        if (plm_smoke_generate(base->ctx, toks[i], n_toks[i], o->n_predict, &run->prompts[i].base, &err)) {
            fprintf(stderr, "pocketlm smoke: base, prompt '%s': %s\n", run->prompts[i].id, err.message);
            ok = false;
        }
    }
    for (int i = 0; toks && i < run->n; i++) free(toks[i]);
    free(toks);
    free(n_toks);
    run->model = strdup(base_name(o->model));
    run->vocab_fingerprint = plm_smoke_vocab_fingerprint(base->model);
    run->n_vocab = plm_model_n_vocab(base->model);
    run->max_tokens = o->n_predict;
    return ok && run->model;
}

/* ---- the report ---------------------------------------------------------------------- */

typedef struct totals {
    int positions, same_top, identical, n;
    double kld_sum, kld_max;
    float *klds;  /* every position's, for the percentile */
} totals;

/* Text of tokens [from, to) for a Markdown table cell: | escaped, newlines
 * as <br>, < and & as entities. */
static void cell_text(FILE *f, const plm_model *m, const plm_token *t, int from, int to) {
    char piece[256];
    for (int i = from; i < to; i++) {
        int n = plm_token_to_piece(m, t[i], piece, sizeof piece, false);
        for (int j = 0; j < n; j++) {
            switch (piece[j]) {
            case '|': fputs("\\|", f); break;
            case '\n': fputs("<br>", f); break;
            case '\r': break;
            case '<': fputs("&lt;", f); break;
            case '&': fputs("&amp;", f); break;
            default: fputc(piece[j], f);
            }
        }
    }
}

/* An answer with ‖ at the first divergence (none when identical). */
static void answer_cell(FILE *f, const plm_model *m, const plm_token *t, int n, int div) {
    if (div < 0 || div > n) {
        cell_text(f, m, t, 0, n);
        return;
    }
    cell_text(f, m, t, 0, div);
    fputs(" **‖** ", f);
    cell_text(f, m, t, div, n);
}

static void token_text(const plm_model *m, plm_token t, char *out, size_t size) {
    char piece[64];
    int n = plm_token_to_piece(m, t, piece, sizeof piece - 1, true);
    piece[n > 0 ? n : 0] = '\0';
    json_t *s = json_stringn(piece, n > 0 ? (size_t)n : 0);
    char *q = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;  /* quoted, control characters escaped */
    snprintf(out, size, "%s", q ? q : "?");
    for (char *p = out; *p; p++)
        if (*p == '|') *p = '/';
    free(q);
    json_decref(s);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void write_report(FILE *f, const smoke_opts *o, const smoke_run *run, const plm_model *cand,
                         const plm_smoke_score *scores, totals *t, bool pass) {
    const double mean = t->positions ? t->kld_sum / t->positions : 0;
    const double top1 = t->positions ? (double)t->same_top / t->positions : 1;
    qsort(t->klds, (size_t)t->positions, sizeof *t->klds, cmp_float);
    const double p99 = t->positions ? t->klds[(int)floor(0.99 * (t->positions - 1))] : 0;
    fprintf(f, "# pocketlm smoke: %s\n\n", pass ? "PASS" : "FAIL");
    fprintf(f, "- base: `%s`%s, %s, up to %d tokens per answer\n", run->model,
            o->against ? " (saved run)" : ", KV cache f16/f16", run->format, run->max_tokens);
    fprintf(f, "- candidate: `%s`, KV cache %s/%s, kernels %s\n", base_name(o->candidate ? o->candidate : o->model),
            o->cache_type_k, o->cache_type_v, o->kernels ? o->kernels : "default");
    fprintf(f, "- thresholds: mean KLD <= %g, top-1 agreement >= %.1f%%\n\n", o->max_kld, 100.0 * o->min_top1);
    fprintf(f, "| | result | threshold |\n|---|---|---|\n");
    fprintf(f, "| mean KLD | %.6f | <= %g %s |\n", mean, o->max_kld, mean <= o->max_kld ? "✓" : "✗");
    fprintf(f, "| top-1 agreement | %.2f%% (%d of %d) | >= %.1f%% %s |\n", 100 * top1, t->same_top, t->positions,
            100.0 * o->min_top1, top1 >= o->min_top1 ? "✓" : "✗");
    fprintf(f, "| 99th percentile KLD | %.6f | |\n| max KLD | %.6f | |\n", p99, t->kld_max);
    fprintf(f, "| identical answers | %d of %d | |\n\n", t->identical, t->n);
    fprintf(f, "KLD is KL(base ‖ candidate) at every position of the base's greedy answer, the candidate "
               "teacher-forced through it (over the base's top %d tokens and the rest as one).\n\n",
            run->n ? run->prompts[0].base.top_k : 0);
    fprintf(f, "| prompt | kind | prompt tokens | answer tokens | first divergence | top-1 | mean KLD | max KLD |\n");
    fprintf(f, "|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < run->n; i++) {
        const plm_smoke_answer *b = &run->prompts[i].base;
        const plm_smoke_score *s = &scores[i];
        char div[160] = "none";
        if (s->first_divergence >= 0) {
            char bt[64], ct[64];
            token_text(cand, b->tokens[s->first_divergence], bt, sizeof bt);
            token_text(cand, s->answer[s->first_divergence], ct, sizeof ct);
            snprintf(div, sizeof div, "token %d: %s → %s", s->first_divergence, bt, ct);
        }
        fprintf(f, "| %s | %s | %d | %d / %d | %s | %.1f%% | %.6f | %.6f |\n", run->prompts[i].id,
                run->prompts[i].kind, b->n_prompt, b->n_tokens, s->n_answer, div,
                100.0 * s->n_same_top / (s->n_positions ? s->n_positions : 1),
                s->kld_sum / (s->n_positions ? s->n_positions : 1), s->kld_max);
    }
    fprintf(f, "\n## Answers side by side\n\n**‖** marks the first divergent token.\n\n| prompt | base | candidate |\n"
               "|---|---|---|\n");
    for (int i = 0; i < run->n; i++) {
        const plm_smoke_answer *b = &run->prompts[i].base;
        fprintf(f, "| %s | ", run->prompts[i].id);
        answer_cell(f, cand, b->tokens, b->n_tokens, scores[i].first_divergence);
        fputs(" | ", f);
        answer_cell(f, cand, scores[i].answer, scores[i].n_answer, scores[i].first_divergence);
        fputs(" |\n", f);
    }
}

/* ---- the comparison ---------------------------------------------------------------------- */

static bool score_all(const smoke_opts *o, const smoke_run *run, side *cand, plm_smoke_score *scores, totals *t) {
    int longest = 0;
    for (int i = 0; i < run->n; i++)
        if (run->prompts[i].base.n_prompt > longest) longest = run->prompts[i].base.n_prompt;
    if (!cand->ctx && !open_context(o, o->candidate ? o->candidate : o->model, cand->model,
                                    (uint32_t)(longest + run->max_tokens), o->cache_type_k, o->cache_type_v,
                                    o->kernels, &cand->ctx))
        return false;
    int cap = 0;
    for (int i = 0; i < run->n; i++) cap += run->prompts[i].base.n_tokens;
    if (!(t->klds = malloc(((size_t)cap + 1) * sizeof *t->klds))) return false;
    for (int i = 0; i < run->n; i++) {
        plm_error err;
        plm_smoke_score *s = &scores[i];
        if (plm_smoke_score_answer(cand->ctx, &run->prompts[i].base, run->max_tokens, s, &err)) {
            fprintf(stderr, "pocketlm smoke: candidate, prompt '%s': %s\n", run->prompts[i].id, err.message);
            return false;
        }
        memcpy(t->klds + t->positions, s->kld, (size_t)s->n_positions * sizeof *s->kld);
        t->positions += s->n_positions;
        t->same_top += s->n_same_top;
        t->kld_sum += s->kld_sum;
        if (s->kld_max > t->kld_max) t->kld_max = s->kld_max;
        t->identical += s->first_divergence < 0;
        t->n++;
    }
    return true;
}

static bool write_out(const smoke_opts *o, const smoke_run *run, const plm_model *cand, const plm_smoke_score *scores,
                      totals *t, bool pass) {
    if (!o->out) {
        write_report(stdout, o, run, cand, scores, t, pass);
        return true;
    }
    char *tmp = malloc(strlen(o->out) + 5);
    if (!tmp) return false;
    sprintf(tmp, "%s.tmp", o->out);
    FILE *f = fopen(tmp, "w");
    bool ok = f != NULL;
    if (f) {
        write_report(f, o, run, cand, scores, t, pass);
        ok = !ferror(f);
        ok = (fclose(f) == 0) && ok && rename(tmp, o->out) == 0;
    }
    if (!ok) {
        fprintf(stderr, "pocketlm smoke: cannot write %s: %s\n", o->out, strerror(errno));
        remove(tmp);
    }
    free(tmp);
    return ok;
}

/* Is the candidate something other than the base as run here? */
static bool candidate_differs(const smoke_opts *o) {
    return o->candidate || o->kernels || strcmp(o->cache_type_k, "f16") || strcmp(o->cache_type_v, "f16");
}

static int compare(const smoke_opts *o, const smoke_run *run, side *base) {
    side cand = {0};
    if (o->candidate && strcmp(o->candidate, o->model)) {
        if (!load_model(o, o->candidate, &cand.model)) return EXIT_ERROR;
        cand.owns_model = true;
    } else {
        cand.model = base->model;  /* the same weights: another context on them */
        if (!candidate_differs(o)) cand.ctx = base->ctx, base->ctx = NULL;
    }
    int rc = EXIT_ERROR;
    plm_smoke_score *scores = calloc((size_t)run->n, sizeof *scores);
    totals t = {0};
    if (plm_smoke_vocab_fingerprint(cand.model) != run->vocab_fingerprint ||
        plm_model_n_vocab(cand.model) != run->n_vocab) {
        fprintf(stderr, "pocketlm smoke: the candidate's vocabulary differs from the base's (%s): the answers "
                        "cannot be compared token by token\n", run->model);
    } else if (scores && score_all(o, run, &cand, scores, &t)) {
        const double mean = t.positions ? t.kld_sum / t.positions : 0;
        const double top1 = t.positions ? (double)t.same_top / t.positions : 1;
        const bool pass = mean <= o->max_kld && top1 >= o->min_top1;
        if (write_out(o, run, cand.model, scores, &t, pass)) {
            fprintf(stderr, "pocketlm smoke: %s: mean KLD %.6f (<= %g), top-1 agreement %.2f%% (>= %.1f%%), "
                            "%d of %d answers identical%s%s\n", pass ? "PASS" : "FAIL", mean, o->max_kld,
                    100 * top1, 100.0 * o->min_top1, t.identical, t.n, o->out ? "; report in " : "",
                    o->out ? o->out : "");
            rc = pass ? EXIT_PASS : EXIT_FAIL;
        }
    }
    for (int i = 0; scores && i < run->n; i++) plm_smoke_score_free(&scores[i]);
    free(scores);
    free(t.klds);
    side_free(&cand);
    return rc;
}

static bool check_opts(const smoke_opts *o) {
    const char *bad = plm_kv_type_from_name(o->cache_type_k) < 0 ? o->cache_type_k
                      : plm_kv_type_from_name(o->cache_type_v) < 0 ? o->cache_type_v : NULL;
    if (!o->model) fprintf(stderr, "pocketlm smoke: no model given: pass one with -m MODEL.gguf\n");
    else if (bad) fprintf(stderr, "pocketlm smoke: unknown cache type '%s': use f16, q8_0 or q4_0\n", bad);
    else if (o->n_predict < 1 || o->n_predict > 4096) fprintf(stderr, "pocketlm smoke: -n must be 1..4096\n");
    else if (o->n_threads < 0) fprintf(stderr, "pocketlm smoke: -t must be >= 0\n");
    else if (!(o->max_kld >= 0) || !(o->min_top1 >= 0 && o->min_top1 <= 1))
        fprintf(stderr, "pocketlm smoke: --max-kld must be >= 0 and --min-top1 between 0 and 1\n");
    else if (o->against && (o->candidate || o->save))
        fprintf(stderr, "pocketlm smoke: with --against the model to test is -m; --candidate and --save do not "
                        "apply\n");
    else return true;
    return false;
}

/* The default set is data/smoke.jsonl of the working directory, else the
 * one beside the binary's build tree (build/pocketlm -> data/). */
static const char *default_set(char *buf, size_t size) {
    FILE *f = fopen(DEFAULT_SET, "r");
    if (f) {
        fclose(f);
        return DEFAULT_SET;
    }
    ssize_t n = readlink("/proc/self/exe", buf, size - 32);
    if (n <= 0) return DEFAULT_SET;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash) return DEFAULT_SET;
    strcpy(slash, "/../" DEFAULT_SET);
    return (f = fopen(buf, "r")) ? (fclose(f), buf) : DEFAULT_SET;
}

int cmd_smoke(int argc, char **argv) {
    smoke_opts o = {.cache_type_k = "f16", .cache_type_v = "f16", .n_predict = 48,
                    .max_kld = 0.1f, .min_top1 = 0.9f};
    const arg_spec specs[] = {
        {"-m", "--model", ARG_STR, &o.model, "PATH", "the base model (with --against: the model to test)"},
        {NULL, "--candidate", ARG_STR, &o.candidate, "PATH", "the model to test against the base; default: -m"},
        {"-ctk", "--cache-type-k", ARG_STR, &o.cache_type_k, "TYPE", "the candidate's KV cache keys: f16, q8_0, q4_0"},
        {"-ctv", "--cache-type-v", ARG_STR, &o.cache_type_v, "TYPE", "the candidate's KV cache values"},
        {NULL, "--kernels", ARG_STR, &o.kernels, "NAME", "the candidate's kernel table (ref, avx2, avx512, neon...)"},
        {NULL, "--against", ARG_STR, &o.against, "FILE", "compare -m with a base run saved by --save"},
        {NULL, "--save", ARG_STR, &o.save, "FILE", "save the base run (answers and distributions) to FILE"},
        {"-o", "--output", ARG_STR, &o.out, "FILE", "write the Markdown report here instead of stdout"},
        {"-f", "--set", ARG_STR, &o.set, "FILE", "the prompts, one JSON object a line; default " DEFAULT_SET},
        {"-n", "--n-predict", ARG_INT, &o.n_predict, "N", "answer tokens per prompt"},
        {NULL, "--max-kld", ARG_FLOAT, &o.max_kld, "X", "pass only with mean KLD at most X"},
        {NULL, "--min-top1", ARG_FLOAT, &o.min_top1, "X", "pass only with top-1 agreement at least X (0..1)"},
        {NULL, "--chat-template", ARG_STR, &o.chat_template, "NAME", "a built-in template instead of the model's"},
        {NULL, "--raw", ARG_FLAG, &o.raw, NULL, "the prompts as they are, without a chat template"},
        {"-t", "--threads", ARG_INT, &o.n_threads, "N", "threads, 0 = the performance cores"},
        {NULL, "--mem-limit", ARG_STR, &o.mem_limit, "SIZE", "refuse to plan past this (e.g. 2G)"},
        {NULL, "--no-mmap", ARG_FLAG, &o.no_mmap, NULL, "read the weights into memory instead of mapping"},
    };
    const arg_parser parser = {"smoke",
                               "pocketlm smoke -m BASE.gguf [--candidate C.gguf | -ctk T -ctv T | --kernels K] "
                               "[-o report.md] [--save FILE]\n       pocketlm smoke -m CANDIDATE.gguf --against FILE",
                               specs, sizeof specs / sizeof specs[0], 0};
    char *pos[1];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) return rc == ARGS_HELP ? 0 : EXIT_ERROR;
    if (!check_opts(&o)) return EXIT_ERROR;
    char set_buf[4096];
    if (o.set == NULL) o.set = default_set(set_buf, sizeof set_buf);

    smoke_run run = {0};
    side base = {0};
    rc = EXIT_ERROR;
    if (o.against) {  /* the base is the saved run; -m is the candidate */
        if (smoke_run_load(o.against, &run) && load_model(&o, o.model, &base.model)) {
            base.owns_model = true;
            o.candidate = o.model;
            rc = compare(&o, &run, &base);
        }
    } else if (smoke_set_load(o.set, &run) && load_model(&o, o.model, &base.model)) {
        base.owns_model = true;
        if (run_base(&o, &run, &base) && (!o.save || smoke_run_save(o.save, &run))) {
            if (o.save) fprintf(stderr, "pocketlm smoke: saved the base run to %s\n", o.save);
            rc = o.save && !candidate_differs(&o) ? EXIT_PASS : compare(&o, &run, &base);
        }
    }
    side_free(&base);
    smoke_run_free(&run);
    return rc;
}
