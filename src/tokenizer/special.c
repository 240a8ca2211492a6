/*
 * Special tokens, as llama.cpp settles them after loading the token list:
 * ids from tokenizer.ggml.*_token_id (defaults when absent or out of range),
 * the add_bos/add_eos flags, detection of EOT/EOM/FIM tokens by their text
 * when no id is given, the set of end-of-generation tokens, the list of
 * special texts that tokenize() splits out, and per-model attributes.
 *
 * Where llama.cpp picks among several matching texts by hash-map iteration
 * order, we pick the highest id: that is what llama.cpp reports for the
 * common cases (<|eot_id|> over <|end_of_text|>, <|im_end|> over
 * <|endoftext|>).
 */
#include "tokenizer/internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static plm_token find_text(const plm_vocab *v, const char *s) {
    return vocab_find(v, s, strlen(s));
}

/* Reads an id key; an absent or out-of-range value leaves *id alone. */
static void read_id(const plm_vocab *v, const plm_gguf_file *f, const char *key, plm_token *id) {
    uint32_t u;
    if (plm_gguf_get_u32(f, key, &u) && u < (uint32_t)v->n_tokens) *id = (plm_token)u;
}

/* The highest id whose text is in the NULL-terminated list, or -1. */
static plm_token find_any(const plm_vocab *v, const char *const *texts) {
    plm_token best = -1;
    for (int i = 0; texts[i]; i++) {
        plm_token t = find_text(v, texts[i]);
        if (t > best) best = t;
    }
    return best;
}

/* When `*id` is unset, detects it by text and makes that token a control. */
static void detect(plm_vocab *v, plm_token *id, const char *const *texts) {
    if (*id >= 0) return;
    *id = find_any(v, texts);
    if (*id >= 0) v->attr[*id] |= TOK_CONTROL;
}

static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<end_of_utterance>", NULL};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_pre_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const fim_suf_texts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const fim_mid_texts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL};
static const char *const fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                            "<reponame>", NULL};
static const char *const fim_sep_texts[] = {"<|file_sep|>", NULL};
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[", NULL};

static void mark_eog(plm_vocab *v, plm_token t) {
    if (t >= 0) v->attr[t] |= TOK_EOG;
}

static bool eog_has(const plm_vocab *v, const char *text, plm_token *id) {
    plm_token t = find_text(v, text);
    if (t >= 0 && (v->attr[t] & TOK_EOG)) {
        if (id) *id = t;
        return true;
    }
    return false;
}

static void setup_eog(plm_vocab *v, plm_token fim_pad, plm_token fim_rep, plm_token fim_sep) {
    mark_eog(v, fim_pad);
    mark_eog(v, fim_rep);
    mark_eog(v, fim_sep);
    for (int i = 0; eog_texts[i]; i++) {
        plm_token t = find_text(v, eog_texts[i]);
        if (t >= 0) v->attr[t] |= TOK_EOG | TOK_CONTROL;
    }
    /* gpt-oss: these render even when not asked for specials */
    static const char *const shown[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
    for (int i = 0; shown[i]; i++) {
        plm_token t = find_text(v, shown[i]);
        if (t >= 0) v->attr[t] = TOK_USER_DEFINED | (v->attr[t] & TOK_EOG);
    }
    mark_eog(v, v->eos);
    mark_eog(v, v->eot);
    mark_eog(v, v->eom);

    /* o200k_harmony / solar-open: <|end|> does not end generation there */
    plm_token end;
    bool ret = eog_has(v, "<|return|>", NULL), flush = eog_has(v, "<|flush|>", NULL);
    bool call = eog_has(v, "<|call|>", NULL) || eog_has(v, "<|calls|>", NULL);
    if (eog_has(v, "<|end|>", &end) && call && (ret || flush)) v->attr[end] = TOK_USER_DEFINED;
    /* gemma4 / paddleocr: </s> is an ordinary token there */
    plm_token s;
    if (eog_has(v, "<|tool_response>", NULL) && eog_has(v, "</s>", &s)) v->attr[s] = TOK_NORMAL;
}

/* Control tokens whose text says "unused" are unused. */
static void mark_unused(plm_vocab *v) {
    for (int t = 0; t < v->n_tokens; t++) {
        if (!(v->attr[t] & TOK_CONTROL)) continue;
        size_t len;
        const char *s = vocab_text(v, t, &len);
        for (size_t i = 0; i + 6 <= len; i++)
            if (memcmp(s + i, "unused", 6) == 0) {
                v->attr[t] |= TOK_UNUSED;
                break;
            }
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Control, user-defined and unknown tokens, longest text first (then by id):
 * the order in which tokenize() looks for them in the input. */
static plm_status build_special_list(plm_vocab *v, plm_error *err) {
    size_t n = 0;
    for (int t = 0; t < v->n_tokens; t++)
        if (v->attr[t] & (TOK_CONTROL | TOK_USER_DEFINED | TOK_UNKNOWN)) n++;
    uint64_t *keys = malloc((n ? n : 1) * sizeof *keys);
    v->special = malloc((n ? n : 1) * sizeof *v->special);
    if (!keys || !v->special) {
        free(keys);
        return plm_fail(err, PLM_ERR_NOMEM, "out of memory for special tokens");
    }
    n = 0;
    for (int t = 0; t < v->n_tokens; t++) {
        if (!(v->attr[t] & (TOK_CONTROL | TOK_USER_DEFINED | TOK_UNKNOWN))) continue;
        size_t len;
        vocab_text(v, t, &len);
        keys[n++] = ((uint64_t)(UINT32_MAX - (uint32_t)len) << 32) | (uint32_t)t;
    }
    qsort(keys, n, sizeof *keys, cmp_u64);
    for (size_t i = 0; i < n; i++) v->special[i] = (plm_token)(uint32_t)keys[i];
    v->n_special = (int)n;
    free(keys);
    return PLM_OK;
}

static void lowercase(char *s) {
    for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

static void set_attr(plm_vocab *v, const char *text, uint32_t bit, bool on) {
    plm_token t = find_text(v, text);
    if (t < 0) return;
    v->attr[t] = on ? (v->attr[t] | bit) : (v->attr[t] & ~bit);
}

/* llama.cpp's per-model strip attributes, chosen by name. */
static void model_attributes(plm_vocab *v, const plm_gguf_file *f) {
    char name[256] = "", pre[64] = "", arch[64] = "";
    plm_gguf_str s;
    if (plm_gguf_get_str(f, "general.name", &s)) plm_gguf_str_copy(s, name, sizeof name);
    if (plm_gguf_get_str(f, "tokenizer.ggml.pre", &s)) plm_gguf_str_copy(s, pre, sizeof pre);
    if (plm_gguf_get_str(f, "general.architecture", &s)) plm_gguf_str_copy(s, arch, sizeof arch);
    lowercase(name);
    if (strstr(pre, "jina-v2-de") || strstr(pre, "jina-v2-es") || strstr(pre, "jina-v2-code") ||
        strstr(arch, "nomic-bert-moe") || strstr(arch, "jina-bert-v3")) {
        set_attr(v, "<mask>", TOK_LSTRIP, true);
    } else if (strstr(name, "phi-3") || strstr(name, "phi3")) {
        for (int i = 0; i < v->n_special; i++) v->attr[v->special[i]] |= TOK_RSTRIP;
        set_attr(v, "</s>", TOK_RSTRIP, true);
        set_attr(v, "<unk>", TOK_RSTRIP, false);
        set_attr(v, "<s>", TOK_RSTRIP, false);
        set_attr(v, "<|endoftext|>", TOK_RSTRIP, false);
    } else if (strstr(name, "modern-bert")) {
        set_attr(v, "[MASK]", TOK_LSTRIP, true);
    }
}

plm_status vocab_setup_special(plm_vocab *v, const plm_gguf_file *f, plm_error *err) {
    plm_token *defaults[] = {&v->bos, &v->eos, &v->unk};
    for (int i = 0; i < 3; i++)
        if (*defaults[i] >= v->n_tokens) *defaults[i] = -1;

    plm_token fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
    read_id(v, f, "tokenizer.ggml.bos_token_id", &v->bos);
    read_id(v, f, "tokenizer.ggml.eos_token_id", &v->eos);
    read_id(v, f, "tokenizer.ggml.eot_token_id", &v->eot);
    read_id(v, f, "tokenizer.ggml.eom_token_id", &v->eom);
    read_id(v, f, "tokenizer.ggml.unknown_token_id", &v->unk);
    read_id(v, f, "tokenizer.ggml.fim_pre_token_id", &fim_pre);
    read_id(v, f, "tokenizer.ggml.fim_suf_token_id", &fim_suf);
    read_id(v, f, "tokenizer.ggml.fim_mid_token_id", &fim_mid);
    read_id(v, f, "tokenizer.ggml.fim_pad_token_id", &fim_pad);
    read_id(v, f, "tokenizer.ggml.fim_rep_token_id", &fim_rep);
    read_id(v, f, "tokenizer.ggml.fim_sep_token_id", &fim_sep);
    read_id(v, f, "tokenizer.ggml.prefix_token_id", &fim_pre); /* deprecated names */
    read_id(v, f, "tokenizer.ggml.suffix_token_id", &fim_suf);
    read_id(v, f, "tokenizer.ggml.middle_token_id", &fim_mid);

    bool b;
    if (plm_gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b)) v->add_bos = b;
    if (v->force_bos) v->add_bos = true; /* llama.cpp overrides the file for gemma4 */
    if (plm_gguf_get_bool(f, "tokenizer.ggml.add_eos_token", &b)) v->add_eos = b;
    if (v->add_bos && v->bos < 0)
        return plm_fail(err, PLM_ERR_FORMAT, "tokenizer.ggml.add_bos_token is true, but there is no BOS token");
    if (v->add_eos && v->eos < 0)
        return plm_fail(err, PLM_ERR_FORMAT, "tokenizer.ggml.add_eos_token is true, but there is no EOS token");

    detect(v, &v->eot, eot_texts);
    detect(v, &v->eom, eom_texts);
    detect(v, &fim_pre, fim_pre_texts);
    detect(v, &fim_suf, fim_suf_texts);
    detect(v, &fim_mid, fim_mid_texts);
    detect(v, &fim_pad, fim_pad_texts);
    detect(v, &fim_rep, fim_rep_texts);
    detect(v, &fim_sep, fim_sep_texts);
    mark_unused(v);
    setup_eog(v, fim_pad, fim_rep, fim_sep);

    plm_status st = build_special_list(v, err);
    if (st) return st;
    model_attributes(v, f);
    return PLM_OK;
}
