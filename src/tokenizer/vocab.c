/*
 * Loading a vocabulary from GGUF metadata (tokenizer.ggml.*), with
 * llama.cpp's defaults: which tokenizer, which pre-tokenizer, the token
 * texts, scores and types, and the BPE merges.  Special token ids and
 * attributes are settled in special.c; tokenizing lives in tokenize.c.
 */
#include "tokenizer/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fills in special ids, EOG and attributes (special.c). */
plm_status vocab_setup_special(plm_vocab *v, const plm_gguf_file *f, plm_error *err);

/* ---- small shared helpers -------------------------------------------- */

void tokvec_push(tokvec *tv, plm_token t) {
    if (tv->oom) return;
    if (tv->n == tv->cap) {
        size_t cap = tv->cap ? tv->cap * 2 : 256;
        plm_token *v = realloc(tv->v, cap * sizeof *v);
        if (!v) {
            tv->oom = true;
            return;
        }
        tv->v = v;
        tv->cap = cap;
    }
    tv->v[tv->n++] = t;
}

static bool is_cont(const char *s, size_t i) { return ((unsigned char)s[i] & 0xC0) == 0x80; }

uint32_t utf8_decode(const char *s, size_t len, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    size_t k = *i;
    uint32_t c = u[k];
    if (c < 0x80) {
        *i = k + 1;
        return c;
    }
    if ((c & 0xE0) == 0xC0 && k + 1 < len && is_cont(s, k + 1)) {
        *i = k + 2;
        return ((c & 0x1F) << 6) | (u[k + 1] & 0x3F);
    }
    if ((c & 0xF0) == 0xE0 && k + 2 < len && is_cont(s, k + 1) && is_cont(s, k + 2)) {
        *i = k + 3;
        return ((c & 0x0F) << 12) | ((uint32_t)(u[k + 1] & 0x3F) << 6) | (u[k + 2] & 0x3F);
    }
    if ((c & 0xF8) == 0xF0 && k + 3 < len && is_cont(s, k + 1) && is_cont(s, k + 2) &&
        is_cont(s, k + 3)) {
        uint32_t cp = ((c & 0x07) << 18) | ((uint32_t)(u[k + 1] & 0x3F) << 12) |
                      ((uint32_t)(u[k + 2] & 0x3F) << 6) | (u[k + 3] & 0x3F);
        if (cp <= 0x10FFFF) {
            *i = k + 4;
            return cp;
        }
    }
    *i = k + 1; /* invalid: llama.cpp skips one byte and yields U+FFFD */
    return 0xFFFD;
}

int utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- pre-tokenizer names (tokenizer.ggml.pre), as llama.cpp maps them -- */

enum {
    PRE_IGNORE_MERGES = 1 << 0, /* a word that is a token is not merged */
    PRE_ADD_BOS = 1 << 1,       /* default add_bos_token = true */
    PRE_NO_BOS = 1 << 2,        /* no default BOS id */
    PRE_RAW_BYTES = 1 << 3,     /* BPE on raw UTF-8, <0xNN> byte tokens */
    PRE_ESCAPE_SPACES = 1 << 4, /* ' ' -> U+2581 first */
    PRE_GEMMA4 = 1 << 5,        /* newline words stay whole; BOS always added */
    PRE_NO_MERGES_OK = 1 << 6,  /* tokenizer.ggml.merges may be absent */
};

typedef struct pre_type {
    const char *names; /* '|'-separated */
    int regex_set;
    unsigned flags;
} pre_type;

/* Every name llama.cpp accepts, grouped by what it does with it. */
static const pre_type pre_types[] = {
    {"default", RX_DEFAULT, 0},
    {"minicpm5", RX_MINICPM5, PRE_IGNORE_MERGES},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano", RX_LLAMA3,
     PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"dbrx|smaug-bpe", RX_LLAMA3, 0},
    {"glm4|chatglm-bpe", RX_LLAMA3, PRE_NO_BOS},
    {"jais-2", RX_JAIS2, 0},
    {"deepseek-llm", RX_DEEPSEEK_LLM, 0},
    {"deepseek-coder", RX_DEEPSEEK_CODER, 0},
    {"deepseek-v3|hunyuan-dense|joyai-llm", RX_DEEPSEEK3_LLM, 0},
    {"youtu", RX_YOUTU, PRE_IGNORE_MERGES},
    {"falcon", RX_FALCON, 0},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|"
     "jina-v1-en|jina-v2-code|roberta-bpe|exaone4|mpt|olmo|jais|trillion|granite-docling",
     RX_GPT2, 0},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b|mellum2", RX_STARCODER, 0},
    {"qwen2|deepseek-r1-qwen|kormo|f2llmv2|megrez|stablelm2|hunyuan|solar-open|grok-2", RX_QWEN2, 0},
    {"qwen35", RX_QWEN35, 0},
    {"poro-chat|bloom|gpt3-finnish", RX_PORO, 0},
    {"viking", RX_VIKING, 0},
    {"tekken", RX_TEKKEN, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"chameleon", RX_CHAMELEON, PRE_ADD_BOS},
    {"gpt-4o|llama4|kanana2|talkie|minimax-m2", RX_GPT4O, 0},
    {"granite-embed-multi-97m", RX_GRANITE_EMB_MULTI, PRE_IGNORE_MERGES},
    {"tiny_aya|cohere2moe", RX_TINY_AYA, 0},
    {"kimi-k2", RX_KIMI_K2, PRE_NO_MERGES_OK},
    {"superbpe", RX_SUPERBPE, 0},
    {"bailingmoe|bailingmoe2|llada-moe", RX_BAILINGMOE, 0},
    {"seed-coder", RX_SEED_CODER, 0},
    {"afmoe", RX_AFMOE, 0},
    {"laguna", RX_LAGUNA, 0},
    {"exaone-moe", RX_EXAONE_MOE, 0},
    {"gemma4|granite-embed-multi-311m", RX_NEWLINES, PRE_RAW_BYTES | PRE_ESCAPE_SPACES | PRE_GEMMA4},
    {"sarvam-moe", RX_NEWLINES, PRE_RAW_BYTES | PRE_ESCAPE_SPACES},
    {"whitespace", RX_WHITESPACE, PRE_RAW_BYTES},
};

static bool name_in_list(const char *list, const char *name, size_t len) {
    for (const char *p = list;;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && memcmp(p, name, len) == 0) return true;
        if (!bar) return false;
        p = bar + 1;
    }
}

static const pre_type *find_pre_type(plm_gguf_str pre) {
    for (size_t i = 0; i < sizeof pre_types / sizeof pre_types[0]; i++)
        if (name_in_list(pre_types[i].names, pre.ptr, (size_t)pre.len)) return &pre_types[i];
    return NULL;
}

/* ---- loading ------------------------------------------------------------ */

static plm_status load_tokens(plm_vocab *v, const plm_gguf_file *f, plm_error *err) {
    const plm_gguf_array *toks = plm_gguf_get_arr(f, "tokenizer.ggml.tokens");
    if (!toks || toks->type != PLM_GGUF_TYPE_STRING)
        return plm_fail(err, PLM_ERR_FORMAT, "tokenizer.ggml.tokens is missing or not a string array");
    if (toks->n == 0 || toks->n > INT32_MAX / 2)
        return plm_fail(err, PLM_ERR_FORMAT, "tokenizer.ggml.tokens has %llu entries",
                        (unsigned long long)toks->n);
    uint32_t n = (uint32_t)toks->n;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < n; i++) bytes += plm_gguf_arr_str(toks, i).len + 24; /* room for [EMPTY_i] */
    if (!strtab_init(&v->tokens, n, bytes))
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory for %u tokens", n);
    for (uint32_t i = 0; i < n; i++) {
        plm_gguf_str s = plm_gguf_arr_str(toks, i);
        char empty[24];
        if (s.len == 0) { /* llama.cpp renames empty tokens */
            s.len = (uint64_t)snprintf(empty, sizeof empty, "[EMPTY_%u]", i);
            s.ptr = empty;
        }
        bool dup;
        if (!strtab_push(&v->tokens, s.ptr, (size_t)s.len, &dup))
            return plm_fail(err, PLM_ERR_NOMEM, "out of memory storing token %u", i);
        /* a duplicate keeps its id, but lookups by text find the first */
    }
    v->n_tokens = (int)n;
    return PLM_OK;
}

static uint32_t attr_of_type(int64_t type) {
    switch (type) {
    case 1: return TOK_NORMAL;
    case 2: return TOK_UNKNOWN;
    case 3: return TOK_CONTROL;
    case 4: return TOK_USER_DEFINED;
    case 5: return TOK_UNUSED;
    case 6: return TOK_BYTE;
    default: return TOK_UNDEFINED;
    }
}

static bool is_numeric(plm_gguf_type t) { /* not bool, string or array */
    return t <= PLM_GGUF_TYPE_FLOAT32 || t == PLM_GGUF_TYPE_UINT64 || t == PLM_GGUF_TYPE_INT64 ||
           t == PLM_GGUF_TYPE_FLOAT64;
}

static plm_status load_scores_and_types(plm_vocab *v, const plm_gguf_file *f, plm_error *err) {
    size_t n = (size_t)v->n_tokens;
    v->scores = calloc(n, sizeof *v->scores);
    v->attr = malloc(n * sizeof *v->attr);
    if (!v->scores || !v->attr) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for token data");

    const plm_gguf_array *sc = plm_gguf_get_arr(f, "tokenizer.ggml.scores");
    if (sc) {
        if (!is_numeric(sc->type) || sc->n < n)
            return plm_fail(err, PLM_ERR_FORMAT, "tokenizer.ggml.scores: %llu entries of %s for %zu tokens",
                            (unsigned long long)sc->n, plm_gguf_type_name(sc->type), n);
        for (size_t i = 0; i < n; i++) v->scores[i] = (float)plm_gguf_arr_f64(sc, i);
    }
    const plm_gguf_array *ty = plm_gguf_get_arr(f, "tokenizer.ggml.token_type");
    if (ty && (!is_numeric(ty->type) || ty->n < n))
        return plm_fail(err, PLM_ERR_FORMAT, "tokenizer.ggml.token_type: %llu entries of %s for %zu tokens",
                        (unsigned long long)ty->n, plm_gguf_type_name(ty->type), n);
    for (size_t i = 0; i < n; i++) v->attr[i] = ty ? attr_of_type(plm_gguf_arr_i64(ty, i)) : TOK_NORMAL;
    return PLM_OK;
}

static plm_status load_merges(plm_vocab *v, const plm_gguf_file *f, bool optional, plm_error *err) {
    const plm_gguf_array *m = plm_gguf_get_arr(f, "tokenizer.ggml.merges");
    if (!m && optional) /* kimi-k2 */
        return strtab_init(&v->merges, 0, 0) ? PLM_OK : plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    if (!m || m->type != PLM_GGUF_TYPE_STRING)
        return plm_fail(err, PLM_ERR_FORMAT, "tokenizer.ggml.merges is missing or not a string array");
    if (m->n > INT32_MAX / 2)
        return plm_fail(err, PLM_ERR_FORMAT, "tokenizer.ggml.merges has %llu entries",
                        (unsigned long long)m->n);
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < m->n; i++) bytes += plm_gguf_arr_str(m, i).len;
    if (!strtab_init(&v->merges, (uint32_t)m->n, bytes))
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory for %llu merges", (unsigned long long)m->n);
    for (uint64_t i = 0; i < m->n; i++) {
        /* "left right", split at the first space after the first byte: the
         * lookup key "left" + ' ' + "right" is the merge string itself. */
        plm_gguf_str s = plm_gguf_arr_str(m, i);
        bool dup;
        if (!strtab_push(&v->merges, s.ptr, (size_t)s.len, &dup))
            return plm_fail(err, PLM_ERR_NOMEM, "out of memory storing merge %llu", (unsigned long long)i);
    }
    return PLM_OK;
}

static bool get_bool_default(const plm_gguf_file *f, const char *key, bool def) {
    bool b;
    return plm_gguf_get_bool(f, key, &b) ? b : def;
}

/* Sets up byte-level BPE for the pre-tokenizer named `pre`. */
static plm_status setup_bpe(plm_vocab *v, plm_gguf_str pre, bool *merges_optional, plm_error *err) {
    v->type = VOCAB_BPE;
    v->bos = 11; /* sic: llama.cpp's defaults for BPE */
    v->eos = 11;
    const pre_type *pt = pre.len ? find_pre_type(pre) : &pre_types[0];
    if (!pt) {
        char name[64];
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "unknown pre-tokenizer type '%s'",
                        plm_gguf_str_copy(pre, name, sizeof name));
    }
    v->ignore_merges = pt->flags & PRE_IGNORE_MERGES;
    v->add_bos = pt->flags & PRE_ADD_BOS;
    if (pt->flags & PRE_NO_BOS) v->bos = -1;
    v->raw_bytes = pt->flags & PRE_RAW_BYTES;
    v->escape_spaces = pt->flags & PRE_ESCAPE_SPACES;
    v->newline_words = v->force_bos = pt->flags & PRE_GEMMA4;
    *merges_optional = pt->flags & PRE_NO_MERGES_OK;
    v->pre = pretok_new(pt->regex_set, err);
    return v->pre ? PLM_OK : err ? err->code : PLM_ERR_UNSUPPORTED;
}

/* Chooses the tokenizer and its defaults from tokenizer.ggml.model/pre. */
static plm_status setup_model(plm_vocab *v, const plm_gguf_file *f, bool *merges_optional, plm_error *err) {
    plm_gguf_str model, pre = {"", 0};
    if (!plm_gguf_get_str(f, "tokenizer.ggml.model", &model))
        return plm_fail(err, PLM_ERR_FORMAT, "tokenizer.ggml.model is missing");
    plm_gguf_get_str(f, "tokenizer.ggml.pre", &pre);
    v->unk = -1;
    plm_status st = PLM_OK;
    if (plm_gguf_str_eq(model, "llama")) {
        v->type = VOCAB_SPM;
        v->bos = 1;
        v->eos = 2;
        v->unk = 0;
        v->add_space_prefix = true;
        v->add_bos = true;
    } else if (plm_gguf_str_eq(model, "gpt2")) {
        st = setup_bpe(v, pre, merges_optional, err);
    } else if (plm_gguf_str_eq(model, "gemma4")) { /* BPE whatever the pre name says */
        st = setup_bpe(v, (plm_gguf_str){"gemma4", 6}, merges_optional, err);
        v->bos = v->eos = -1;
    } else {
        char name[64];
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "unsupported tokenizer '%s'",
                        plm_gguf_str_copy(model, name, sizeof name));
    }
    if (st) return st;
    v->add_space_prefix = get_bool_default(f, "tokenizer.ggml.add_space_prefix", v->add_space_prefix);
    return PLM_OK;
}

plm_vocab *plm_vocab_load(const plm_gguf_file *f, plm_error *err) {
    plm_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        plm_fail(err, PLM_ERR_NOMEM, "out of memory for the vocabulary");
        return NULL;
    }
    v->eot = v->eom = -1;
    bool merges_optional = false;
    plm_status st = setup_model(v, f, &merges_optional, err);
    if (!st) st = load_tokens(v, f, err);
    if (!st) st = load_scores_and_types(v, f, err);
    if (!st && v->type == VOCAB_BPE) st = load_merges(v, f, merges_optional, err);
    if (!st) st = vocab_setup_special(v, f, err);
    if (st) {
        plm_vocab_free(v);
        return NULL;
    }
    return v;
}

void plm_vocab_free(plm_vocab *v) {
    if (!v) return;
    strtab_free(&v->tokens);
    strtab_free(&v->merges);
    pretok_free(v->pre);
    free(v->scores);
    free(v->attr);
    free(v->special);
    free(v);
}

/* ---- accessors ---------------------------------------------------------- */

int plm_vocab_n_tokens(const plm_vocab *v) { return v->n_tokens; }
plm_token plm_vocab_bos(const plm_vocab *v) { return v->bos; }
plm_token plm_vocab_eos(const plm_vocab *v) { return v->eos; }
plm_token plm_vocab_eot(const plm_vocab *v) { return v->eot; }
bool plm_vocab_wants_bos(const plm_vocab *v) { return v->add_bos; }

bool plm_vocab_is_eog(const plm_vocab *v, plm_token t) {
    return t >= 0 && t < v->n_tokens && (v->attr[t] & TOK_EOG);
}
