/*
 * Internals shared by the tokenizer sources: vocab.c (loading), special.c
 * (special ids, EOG, attributes), tokenize.c (special-token split, text ->
 * ids, id -> piece), spm.c, bpe.c, pretokenize.c (PCRE2 regex splits),
 * strtab.c (string hash table), heap.c (merge queue).  Not library API.
 *
 * plm_vocab_tokenize returns INT_MIN when it fails internally (out of
 * memory, or PCRE2 hit a match limit); otherwise it keeps vocab.h's contract.
 *
 * The algorithms reproduce llama.cpp's tokenizers (llama-vocab.cpp and
 * unicode.cpp) output for output, including their quirks; comments say where
 * a quirk is deliberate.
 */
#ifndef PLM_TOKENIZER_INTERNAL_H
#define PLM_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "tokenizer/vocab.h"

/* Token attributes: the same bit values as llama.cpp's llama_token_attr. */
enum {
    TOK_UNDEFINED = 0,
    TOK_UNKNOWN = 1 << 0,
    TOK_UNUSED = 1 << 1,
    TOK_NORMAL = 1 << 2,
    TOK_CONTROL = 1 << 3,
    TOK_USER_DEFINED = 1 << 4,
    TOK_BYTE = 1 << 5,
    TOK_LSTRIP = 1 << 7,
    TOK_RSTRIP = 1 << 8,
    TOK_EOG = 1 << 16, /* ours: ends generation */
};

/* ---- strtab.c: interned byte strings, id -> bytes and bytes -> id ---- */

typedef struct strtab {
    char *bytes;     /* every string back to back */
    uint32_t *off;   /* n + 1 offsets: string i is bytes[off[i] .. off[i+1]) */
    uint32_t n, cap; /* strings stored / room for */
    uint64_t size, bytes_cap;
    uint64_t *slots; /* hash table: (hash << 32) | (id + 1); 0 is empty */
    uint32_t mask;
} strtab;

/* Room for `n` strings totalling `bytes` bytes.  Returns false on OOM. */
bool strtab_init(strtab *t, uint32_t n, uint64_t bytes);
void strtab_free(strtab *t);
/* Appends string number t->n.  When an equal string is already indexed the
 * new one is stored but not indexed (lookups keep finding the first), and
 * *dup is set.  Returns false on OOM or when the reserved room is exceeded. */
bool strtab_push(strtab *t, const char *s, size_t len, bool *dup);
int32_t strtab_find(const strtab *t, const char *s, size_t len); /* -1 if absent */

static inline const char *strtab_str(const strtab *t, int32_t id, size_t *len) {
    *len = t->off[id + 1] - t->off[id];
    return t->bytes + t->off[id];
}

/* ---- heap.c: merge candidates, best first ------------------------------ */

typedef struct cand {
    double key;      /* lower is better: BPE merge rank, or minus the SPM score */
    int left, right; /* symbol indices; ties go to the lower left */
    size_t size;     /* bytes of left + right when queued (stale check) */
} cand;

typedef struct candheap {
    cand *v;
    size_t n, cap;
    bool oom;
} candheap;

void candheap_push(candheap *h, cand c);
cand candheap_pop(candheap *h); /* h->n must be > 0 */

/* ---- token output buffer --------------------------------------------- */

typedef struct tokvec {
    plm_token *v;
    size_t n, cap;
    bool oom;
} tokvec;

void tokvec_push(tokvec *tv, plm_token t);

/* ---- pretokenize.c: the regex splits of byte-level BPE ----------------- */

typedef struct pretok pretok;

/* Compiles one of the RX_* regex lists below. */
pretok *pretok_new(int regex_set, plm_error *err);
void pretok_free(pretok *p);

/* Regex sets, one per distinct list of regexes in llama.cpp. */
enum {
    RX_DEFAULT,
    RX_LLAMA3,
    RX_JAIS2,
    RX_DEEPSEEK_LLM,
    RX_DEEPSEEK3_LLM,
    RX_YOUTU,
    RX_DEEPSEEK_CODER,
    RX_FALCON,
    RX_STARCODER,
    RX_GPT2,
    RX_QWEN2,
    RX_QWEN35,
    RX_PORO,
    RX_VIKING,
    RX_TEKKEN,
    RX_CHAMELEON,
    RX_GPT4O,
    RX_GRANITE_EMB_MULTI,
    RX_TINY_AYA,
    RX_KIMI_K2,
    RX_SUPERBPE,
    RX_BAILINGMOE,
    RX_SEED_CODER,
    RX_AFMOE,
    RX_LAGUNA,
    RX_EXAONE_MOE,
    RX_NEWLINES, /* gemma4, sarvam-moe: lines and runs of newlines */
    RX_MINICPM5,
    RX_WHITESPACE,
    RX_COUNT
};

typedef struct piece {
    size_t off, len; /* bytes of the cleaned text (see pretok_split) */
} piece;

typedef struct pretok_out {
    char *text;     /* the input as valid UTF-8: invalid bytes became U+FFFD */
    size_t len;
    piece *pieces;  /* words, in order, covering text */
    size_t n;
} pretok_out;

/* Splits `len` bytes of text into words.  Returns false on failure (OOM,
 * regex engine error); `out` must then still be released. */
bool pretok_split(const pretok *p, const char *text, size_t len, pretok_out *out);
void pretok_out_free(pretok_out *out);

/* ---- bpe.c ------------------------------------------------------------- */

/* UTF-8 of GPT-2's printable stand-in for byte b (1 or 2 bytes); returns length. */
int bpe_byte_to_utf8(uint8_t b, char out[2]);
/* Inverse: the byte for codepoint cp, or -1 if cp stands for none. */
int bpe_cpt_to_byte(uint32_t cp);

/* Tokenizes `len` bytes of raw text (one fragment) with byte-level BPE. */
void bpe_tokenize(const plm_vocab *v, const char *text, size_t len, tokvec *out);

/* ---- spm.c ------------------------------------------------------------- */

/* Tokenizes one fragment with SentencePiece merges; `prefix_space` adds the
 * leading space llama.cpp adds before text that starts the input or follows
 * a special token. */
void spm_tokenize(const plm_vocab *v, const char *text, size_t len, bool prefix_space,
                  tokvec *out);

/* ---- utf8 helpers (vocab.c) ------------------------------------------ */

/* Length of the UTF-8 sequence by its first byte, as llama.cpp's
 * unicode_len_utf8: 1 for ASCII and stray continuation bytes. */
static inline size_t utf8_len_by_lead(unsigned char c) {
    static const unsigned char lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

/* Decodes one codepoint at s[*i] the way llama.cpp does (no overlong or
 * surrogate checks); an invalid sequence consumes one byte and yields
 * U+FFFD.  Codepoints above U+10FFFF also yield U+FFFD. */
uint32_t utf8_decode(const char *s, size_t len, size_t *i);
/* Encodes cp (<= 0x10FFFF) into out; returns the byte count (1..4). */
int utf8_encode(uint32_t cp, char out[4]);

/* ---- the vocabulary ---------------------------------------------------- */

enum { VOCAB_SPM = 1, VOCAB_BPE = 2 };

struct plm_vocab {
    int type;
    int n_tokens;
    strtab tokens;         /* token texts; lookups by text */
    float *scores;         /* per token */
    uint32_t *attr;        /* TOK_* per token */

    strtab merges;         /* BPE: "left right" strings, index = rank */
    pretok *pre;           /* BPE: the pre-tokenizer */
    bool ignore_merges;    /* BPE: a word that is a token stays whole */
    bool raw_bytes;        /* BPE: merge UTF-8 as is, not GPT-2's byte stand-ins;
                              unknown bytes become <0xNN> tokens (gemma4 style) */
    bool escape_spaces;    /* BPE: ' ' becomes U+2581 before pre-tokenizing */
    bool newline_words;    /* BPE: a word of newlines that is a token stays whole (gemma4) */

    bool add_space_prefix; /* SPM */
    bool add_bos, add_eos;
    bool force_bos;        /* add_bos even when the file says false (gemma4) */

    plm_token bos, eos, eot, eom, unk;

    plm_token *special;    /* control/user-defined/unknown tokens, longest first */
    int n_special;
};

static inline const char *vocab_text(const plm_vocab *v, plm_token id, size_t *len) {
    return strtab_str(&v->tokens, id, len);
}

static inline plm_token vocab_find(const plm_vocab *v, const char *s, size_t len) {
    return strtab_find(&v->tokens, s, len);
}

#endif
