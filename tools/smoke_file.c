/*
 * pocketlm smoke's files.  A saved run is JSON:
 *
 *   {"format": "pocketlm-smoke", "version": 1, "model": "base.gguf",
 *    "prompt_format": "chat template (the model's)", "vocab_fingerprint": "16 hex digits",
 *    "n_vocab": N, "max_tokens": 48, "top_k": 64,
 *    "prompts": [{"id", "kind", "prompt", "prompt_tokens": [...], "answer": [...],
 *                 "top_ids": [[top_k ids] per answer token], "top_logprobs": [[ln p...]...]}]}
 *
 * Log-probabilities are written with 9 significant digits, which give back
 * the same float, so a comparison against a saved run gives the same numbers
 * as one against the base model in the same process.
 */
#include "smoke_file.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"

#define SMOKE_FORMAT "pocketlm-smoke"
#define SMOKE_VERSION 1

static char *dup_str(const char *s) { return s ? strdup(s) : NULL; }

static bool add_prompt(smoke_run *run, const char *id, const char *kind, const char *text) {
    smoke_prompt *p = realloc(run->prompts, (size_t)(run->n + 1) * sizeof *p);
    if (!p) return false;
    run->prompts = p;
    p += run->n++;
    memset(p, 0, sizeof *p);
    p->id = dup_str(id);
    p->kind = dup_str(kind);
    p->text = dup_str(text);
    return p->id && p->kind && p->text;
}

void smoke_run_free(smoke_run *run) {
    for (int i = 0; i < run->n; i++) {
        free(run->prompts[i].id);
        free(run->prompts[i].kind);
        free(run->prompts[i].text);
        plm_smoke_answer_free(&run->prompts[i].base);
    }
    free(run->prompts);
    free(run->model);
    free(run->format);
    memset(run, 0, sizeof *run);
}

/* ---- the set ---------------------------------------------------------------- */

static bool set_line(smoke_run *run, const char *path, int line_no, const char *line) {
    json_error_t je;
    json_t *o = json_loads(line, 0, &je);
    const char *id = NULL, *kind = "", *text = NULL;
    bool ok = false;
    char fallback_id[32];
    if (!o) {
        fprintf(stderr, "pocketlm smoke: %s line %d: not JSON: %s\n", path, line_no, je.text);
    } else if (json_unpack(o, "{s:s, s?s, s?s}", "prompt", &text, "id", &id, "kind", &kind) || !*text) {
        fprintf(stderr, "pocketlm smoke: %s line %d: needs {\"prompt\": \"non-empty text\"} (\"id\" and \"kind\" "
                        "strings optional)\n", path, line_no);
    } else {
        snprintf(fallback_id, sizeof fallback_id, "%d", run->n + 1);
        ok = add_prompt(run, id ? id : fallback_id, kind, text);
        if (!ok) fprintf(stderr, "pocketlm smoke: out of memory\n");
    }
    json_decref(o);
    return ok;
}

bool smoke_set_load(const char *path, smoke_run *run) {
    size_t len;
    char *text = read_file(path, &len);
    if (!text) {
        fprintf(stderr, "pocketlm smoke: cannot read %s: %s\n", path, strerror(errno));
        return false;
    }
    bool ok = true;
    int line_no = 0;
    for (char *line = text, *next; ok && line && *line; line = next) {
        line_no++;
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        const char *s = line;
        while (*s == ' ' || *s == '\t' || *s == '\r') s++;
        if (*s) ok = set_line(run, path, line_no, line);
    }
    free(text);
    if (ok && run->n == 0) {
        fprintf(stderr, "pocketlm smoke: %s has no prompts\n", path);
        ok = false;
    }
    return ok;
}

/* ---- saving ------------------------------------------------------------------ */

static json_t *token_array(const plm_token *t, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) json_array_append_new(a, json_integer(t[i]));
    return a;
}

static json_t *answer_json(const smoke_prompt *p) {
    const plm_smoke_answer *b = &p->base;
    json_t *ids = json_array(), *lps = json_array();
    for (int i = 0; i < b->n_tokens; i++) {
        json_array_append_new(ids, token_array(b->top_ids + (size_t)i * b->top_k, b->top_k));
        json_t *row = json_array();
        for (int j = 0; j < b->top_k; j++) json_array_append_new(row, json_real(b->top_lp[(size_t)i * b->top_k + j]));
        json_array_append_new(lps, row);
    }
    return json_pack("{ss ss ss so so so so}", "id", p->id, "kind", p->kind, "prompt", p->text, "prompt_tokens",
                     token_array(b->prompt, b->n_prompt), "answer", token_array(b->tokens, b->n_tokens), "top_ids",
                     ids, "top_logprobs", lps);
}

bool smoke_run_save(const char *path, const smoke_run *run) {
    char fp[17];
    snprintf(fp, sizeof fp, "%016" PRIx64, run->vocab_fingerprint);
    json_t *prompts = json_array();
    for (int i = 0; i < run->n; i++) json_array_append_new(prompts, answer_json(&run->prompts[i]));
    json_t *doc = json_pack("{ss si ss ss ss si si si so}", "format", SMOKE_FORMAT, "version", SMOKE_VERSION, "model",
                            run->model, "prompt_format", run->format, "vocab_fingerprint", fp, "n_vocab",
                            run->n_vocab, "max_tokens", run->max_tokens, "top_k",
                            run->n ? run->prompts[0].base.top_k : 0, "prompts", prompts);
    char *tmp = malloc(strlen(path) + 5);
    bool ok = doc && tmp;
    if (ok) {
        sprintf(tmp, "%s.tmp", path);
        ok = json_dump_file(doc, tmp, JSON_COMPACT | JSON_REAL_PRECISION(9)) == 0 && rename(tmp, path) == 0;
        if (!ok) {
            fprintf(stderr, "pocketlm smoke: cannot write %s: %s\n", path, strerror(errno));
            remove(tmp);
        }
    } else {
        fprintf(stderr, "pocketlm smoke: out of memory\n");
    }
    free(tmp);
    json_decref(doc);
    return ok;
}

/* ---- loading ------------------------------------------------------------------ */

static bool bad(const char *path, const char *what) {
    fprintf(stderr, "pocketlm smoke: %s is not a saved smoke run: %s\n", path, what);
    return false;
}

/* An array of integer token ids into a malloc'd array (*n of them). */
static bool tokens_from(const json_t *a, plm_token **out, int *n, int n_vocab) {
    if (!json_is_array(a) || json_array_size(a) > (1u << 24)) return false;
    *n = (int)json_array_size(a);
    *out = malloc(((size_t)*n + 1) * sizeof **out);
    if (!*out) return false;
    for (int i = 0; i < *n; i++) {
        const json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n_vocab) return false;
        (*out)[i] = (plm_token)json_integer_value(v);
    }
    return true;
}

/* The rows of top ids / log-probabilities: n rows of exactly k. */
static bool rows_from(const json_t *ids, const json_t *lps, plm_smoke_answer *b, int n_vocab) {
    const size_t n = (size_t)b->n_tokens, k = (size_t)b->top_k;
    if (!json_is_array(ids) || !json_is_array(lps) || json_array_size(ids) != n || json_array_size(lps) != n)
        return false;
    if (!(b->top_ids = malloc(n * k * sizeof *b->top_ids + 1)) || !(b->top_lp = malloc(n * k * sizeof *b->top_lp + 1)))
        return false;
    for (size_t i = 0; i < n; i++) {
        const json_t *ri = json_array_get(ids, i), *rl = json_array_get(lps, i);
        if (!json_is_array(ri) || !json_is_array(rl) || json_array_size(ri) != k || json_array_size(rl) != k)
            return false;
        for (size_t j = 0; j < k; j++) {
            const json_t *t = json_array_get(ri, j), *l = json_array_get(rl, j);
            if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= n_vocab) return false;
            if (!json_is_number(l) || !(json_number_value(l) <= 0) || !isfinite(json_number_value(l))) return false;
            b->top_ids[i * k + j] = (plm_token)json_integer_value(t);
            b->top_lp[i * k + j] = (float)json_number_value(l);
        }
    }
    return true;
}

static bool prompt_from(const json_t *o, smoke_run *run, int top_k) {
    const char *id, *kind, *text;
    json_t *pt, *ans, *ids, *lps;
    if (json_unpack((json_t *)o, "{s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "id", &id, "kind", &kind, "prompt", &text,
                    "prompt_tokens", &pt, "answer", &ans, "top_ids", &ids, "top_logprobs", &lps))
        return false;
    if (!add_prompt(run, id, kind, text)) return false;
    plm_smoke_answer *b = &run->prompts[run->n - 1].base;
    b->top_k = top_k;
    return tokens_from(pt, &b->prompt, &b->n_prompt, run->n_vocab) && b->n_prompt > 0 &&
           tokens_from(ans, &b->tokens, &b->n_tokens, run->n_vocab) && b->n_tokens > 0 &&
           b->n_tokens <= run->max_tokens && rows_from(ids, lps, b, run->n_vocab);
}

bool smoke_run_load(const char *path, smoke_run *run) {
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc) {
        if (je.line < 1) fprintf(stderr, "pocketlm smoke: cannot read %s: %s\n", path, je.text);
        else fprintf(stderr, "pocketlm smoke: %s line %d: not JSON: %s\n", path, je.line, je.text);
        return false;
    }
    const char *format, *model, *pformat, *fp;
    int version, top_k;
    json_t *prompts;
    bool ok = false;
    if (json_unpack(doc, "{s:s, s:i, s:s, s:s, s:s, s:i, s:i, s:i, s:o}", "format", &format, "version", &version,
                    "model", &model, "prompt_format", &pformat, "vocab_fingerprint", &fp, "n_vocab", &run->n_vocab,
                    "max_tokens", &run->max_tokens, "top_k", &top_k, "prompts", &prompts) ||
        strcmp(format, SMOKE_FORMAT)) {
        ok = bad(path, "the format, version, model, vocabulary or prompts field is missing");
    } else if (version != SMOKE_VERSION) {
        fprintf(stderr, "pocketlm smoke: %s is version %d of the smoke format; this pocketlm reads version %d\n", path,
                version, SMOKE_VERSION);
    } else if (run->n_vocab <= 0 || top_k <= 0 || top_k > run->n_vocab || top_k > PLM_SMOKE_TOP_K ||
               run->max_tokens <= 0 || strlen(fp) != 16 || !json_is_array(prompts) || !json_array_size(prompts)) {
        ok = bad(path, "n_vocab, top_k, max_tokens, vocab_fingerprint or prompts is out of range");
    } else {
        run->vocab_fingerprint = strtoull(fp, NULL, 16);
        run->model = dup_str(model);
        run->format = dup_str(pformat);
        ok = run->model && run->format;
        for (size_t i = 0; ok && i < json_array_size(prompts); i++) {
            ok = prompt_from(json_array_get(prompts, i), run, top_k);
            if (!ok) {
                char what[96];
                snprintf(what, sizeof what, "prompt %zu has a missing field, a token out of range or a wrong size", i + 1);
                bad(path, what);
            }
        }
    }
    json_decref(doc);
    return ok;
}
