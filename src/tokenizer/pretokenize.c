/*
 * Pre-tokenization for byte-level BPE: the text is cut into words by a list
 * of regexes, applied one after another; each regex re-splits every piece
 * left by the previous one into matches and the gaps between them (HF's
 * "Isolated" split).  The lists are llama.cpp's, chosen by tokenizer.ggml.pre.
 *
 * llama.cpp runs its regexes with std::regex in one of two ways, and we do
 * the same with PCRE2 so the output matches theirs exactly:
 *
 *  - A regex that uses \p{L}, \p{N}, \p{P}, \p{M}, \p{S} (or \p{Lu}...) runs
 *    on a "collapsed" text: one byte per codepoint, ASCII kept, every other
 *    codepoint replaced by a byte naming its category (0xD1 number, 0xD2
 *    letter, 0xD3 punctuation, 0xD4 mark, 0xD5 symbol, 0xD0 other; 0x0B for
 *    whitespace).  Each \p{X} becomes a class of that byte plus the ASCII
 *    members of X.  So \s is ASCII whitespace plus 0x0B, and \p{Lu} means
 *    any letter.  The GPT-2, LLaMA-3, Qwen2 and Qwen3.5 regexes, which
 *    llama.cpp runs with hand-written code, give the same splits this way.
 *  - Any other regex runs on the codepoints themselves (PCRE2's UTF mode,
 *    no UCP: \s and \d stay ASCII like std::wregex's), with non-ASCII
 *    whitespace replaced by 0x0B.  Their non-ASCII characters are written
 *    as \x{...} so that no editor's Unicode normalization can change them.
 *  - Two lists start with hand-written splitters that follow no regex
 *    (kimi-k2, and the digit groups of afmoe and tiny_aya): see below.
 *
 * Categories come from utf8proc, patched to llama.cpp's Unicode 15.1;
 * whitespace is Unicode's White_Space property, which is the Z categories
 * plus U+0009..U+000D and U+0085.
 */
#include "tokenizer/internal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define MAX_REGEXES 6

/* ---- the regex lists (as in llama.cpp's llm_tokenizer_bpe) ----------
 * A list entry starting with '@' names one of llama.cpp's hand-written
 * splitters that follows no regex exactly (see "custom splitters" below). */

#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define GPT2_REGEX \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define LLAMA3_REGEX                                                              \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
                 "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_REGEX                                                            \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
                 "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN35_REGEX                                                                         \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*" \
                 "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define JAIS2_REGEX                                                                        \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"       \
                 "|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)" \
                 "|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"
#define MINICPM5_REGEX                                                          \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
                 "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define BAILING_REGEX                                                                        \
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"           \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"
#define EXAONE_MOE_REGEX                                                                  \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}"          \
                 "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"
/* Upper-then-lower word shapes, written with lookaheads because llama.cpp's
 * collapsed text cannot tell cases apart (gpt-4o, tekken, ...). */
#define CASED_WORDS(L, TAIL)                                                          \
    "[^\\r\\n\\p{L}\\p{N}]?((?=[" L "])([^a-z]))*((?=[" L "])([^A-Z]))+" TAIL            \
    "|[^\\r\\n\\p{L}\\p{N}]?((?=[" L "])([^a-z]))+((?=[" L "])([^A-Z]))*" TAIL
/* The same shapes as tokenizer.json writes them (tiny_aya, youtu). */
#define CLASS_WORDS                                                                            \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" \
    CONTRACTIONS "?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"              \
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" CONTRACTIONS "?"
#define PUNCT_WS_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define DS3_WORDS                                                                             \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+" \
    "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PORO_REGEX " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"
#define CJK_REGEX "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
/* deepseek-llm's letters (codepoints, not characters: an editor's Unicode
 * normalization would silently change some of them). */
#define LETTERS_DEEPSEEK \
    "\\s?[A-Za-z\\x{00B5}\\x{00C0}-\\x{00D6}\\x{00D8}-\\x{00F6}\\x{00F8}-\\x{01BA}\\x{01BC}-" \
    "\\x{01BF}\\x{01C4}-\\x{0293}\\x{0295}-\\x{02AF}\\x{0370}-\\x{0373}\\x{0376}\\x{0377}" \
    "\\x{037B}-\\x{037D}\\x{037F}\\x{0386}\\x{0388}-\\x{038A}\\x{038C}\\x{038E}-\\x{03A1}" \
    "\\x{03A3}-\\x{03F5}\\x{03F7}-\\x{0481}\\x{048A}-\\x{052F}\\x{0531}-\\x{0556}\\x{10A0}-" \
    "\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}" \
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-" \
    "\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}" \
    "\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-" \
    "\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}" \
    "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}" \
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}" \
    "\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-" \
    "\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}" \
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-" \
    "\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}" \
    "\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}" \
    "\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+"
#define NEWLINE_RUNS "[^\\n]+|[\\n]+"

static const char *const regex_sets[RX_COUNT][MAX_REGEXES + 1] = {
    [RX_DEFAULT] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_REGEX, "\\p{N}+", "[0-9][0-9][0-9]", NULL},
    [RX_LLAMA3] = {LLAMA3_REGEX, NULL},
    [RX_JAIS2] = {JAIS2_REGEX, NULL},
    [RX_DEEPSEEK_LLM] =
        {
            "[\r\n]",
            LETTERS_DEEPSEEK,
            "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
            "\\s+$",
            CJK_REGEX,
            "\\p{N}+",
            NULL,
        },
    [RX_DEEPSEEK3_LLM] = {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+", DS3_WORDS, NULL},
    [RX_YOUTU] =
        {
            "[\\x{AC00}-\\x{D7A3}\\x{3131}-\\x{318E}]+"
            "|[\\x{FF01}\\x{2026}\\x{201C}\\x{201D}\\x{2018}\\x{2019}\\x{2014}\\x{FF1A}\\x{FF1B}"
            "\\x{FF0C}\\x{3001}-\\x{303F}\\x{FE30}-\\x{FE4F}]+"
            "|[\\x{3105}-\\x{312F}]+|[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
            CLASS_WORDS "|\\p{N}" PUNCT_WS_TAIL,
            NULL,
        },
    [RX_DEEPSEEK_CODER] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK_REGEX, "\\p{N}", NULL},
    [RX_FALCON] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_REGEX, "[0-9][0-9][0-9]", NULL},
    [RX_STARCODER] = {"\\p{N}", GPT2_REGEX, NULL},
    [RX_GPT2] = {GPT2_REGEX, NULL},
    [RX_QWEN2] = {QWEN2_REGEX, NULL},
    [RX_QWEN35] = {QWEN35_REGEX, NULL},
    [RX_PORO] = {PORO_REGEX, NULL},
    [RX_VIKING] = {PORO_REGEX, "\\p{N}", NULL},
    [RX_TEKKEN] = {CASED_WORDS("\\p{L}", "") "|\\p{N}" PUNCT_WS_TAIL, NULL},
    [RX_CHAMELEON] =
        {
            "<sentinel:[0-9]+>",
            "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
            "([\\t\\n]|    |  )",
            "\\p{N}",
            "[\\p{P}!-/:-@\\[-`{-~]",
            GPT2_REGEX,
        },
    [RX_GPT4O] = {CASED_WORDS("\\p{L}", CONTRACTIONS "?") "|\\p{N}{1,3}" PUNCT_WS_TAIL, NULL},
    [RX_GRANITE_EMB_MULTI] =
        {CASED_WORDS("\\p{L}\\p{M}", CONTRACTIONS "?") "|\\p{N}{1,3}" PUNCT_WS_TAIL, NULL},
    [RX_TINY_AYA] = {"@digit-groups", CLASS_WORDS "|\\p{N}{1,3}" PUNCT_WS_TAIL, NULL},
    [RX_KIMI_K2] = {"@kimi-k2", NULL},
    [RX_SUPERBPE] = {"\\p{N}+", "(?=(\\d{3})+(?!\\d))", NULL},
    [RX_BAILINGMOE] = {BAILING_REGEX, NULL},
    [RX_SEED_CODER] =
        {
            CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+"
                         "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            NULL,
        },
    [RX_AFMOE] =
        {
            "@digit-groups",
            "[\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{8C48}-\\x{FAFF}\\x{3040}-\\x{309F}"
            "\\x{30A0}-\\x{30FF}\\x{FF65}-\\x{FF9F}\\x{2F00}-\\x{2FDF}\\x{0E40}-\\x{0E7F}"
            "\\x{0E80}-\\x{0EFF}\\x{1780}-\\x{17FF}\\x{1000}-\\x{109F}\\x{AA60}-\\x{AA7F}"
            "\\x{A9E0}-\\x{A9FF}\\x{AC00}-\\x{D7AF}\\x{1100}-\\x{11FF}]+",
            DS3_WORDS,
            NULL,
        },
    [RX_LAGUNA] = {NEWLINE_RUNS, QWEN2_REGEX, NULL},
    [RX_EXAONE_MOE] = {EXAONE_MOE_REGEX, NULL},
    [RX_NEWLINES] = {NEWLINE_RUNS, NULL},
    [RX_MINICPM5] = {"\\p{N}{1,3}", MINICPM5_REGEX, NULL},
    [RX_WHITESPACE] = {"\\S+", NULL},
};

/* ---- categories ------------------------------------------------------- */

static bool is_white_space(uint32_t cp) {
    if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85) return true;
    if (cp < 0xA0) return false;
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

enum { CAT_OTHER = 0xD0, CAT_NUMBER, CAT_LETTER, CAT_PUNCT, CAT_MARK, CAT_SYMBOL };

/* llama.cpp's tables are Unicode 15.1; utf8proc 2.8 (Debian 12) knows 15.0.
 * These are the 15.1 additions, which 15.0 leaves unassigned. */
static int unicode_15_1_category(uint32_t cp) {
    if ((cp >= 0x2FFC && cp <= 0x2FFF) || cp == 0x31EF) return CAT_SYMBOL; /* ideographic description */
    if (cp >= 0x2EBF0 && cp <= 0x2EE5D) return CAT_LETTER;                  /* CJK extension I */
    return CAT_OTHER;
}

/* The category byte of a codepoint (whitespace is not looked at here). */
static unsigned char cpt_category(uint32_t cp) {
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return CAT_LETTER;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return CAT_NUMBER;
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return CAT_PUNCT;
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
        return CAT_MARK;
    case UTF8PROC_CATEGORY_SM: case UTF8PROC_CATEGORY_SC: case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO:
        return CAT_SYMBOL;
    case UTF8PROC_CATEGORY_CN:
        return (unsigned char)unicode_15_1_category(cp);
    default:
        return CAT_OTHER;
    }
}

static unsigned char collapse_cpt(uint32_t cp) {
    if (cp < 128) return (unsigned char)cp;
    if (is_white_space(cp)) return 0x0B;
    return cpt_category(cp);
}

/* ---- regex rewriting and compiling ----------------------------------- */

static const struct {
    const char *name;    /* as written in the regex */
    unsigned char cat;   /* its collapsed byte */
    const char *ascii;   /* its ASCII members, as class text */
} ucats[] = {
    {"\\p{N}", CAT_NUMBER, "0-9"},
    {"\\p{L}", CAT_LETTER, "A-Za-z"},
    {"\\p{P}", CAT_PUNCT, "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"},
    {"\\p{M}", CAT_MARK, ""},
    {"\\p{S}", CAT_SYMBOL, "\\$\\+<->^`\\|\\~"},
    {"\\p{Lu}", CAT_LETTER, "A-Za-z"},
    {"\\p{Ll}", CAT_LETTER, "A-Za-z"},
    {"\\p{Lt}", CAT_LETTER, "A-Za-z"},
    {"\\p{Lm}", CAT_LETTER, "A-Za-z"},
    {"\\p{Lo}", CAT_LETTER, "A-Za-z"},
};
#define N_UCATS (sizeof ucats / sizeof ucats[0])

static int find_ucat(const char *s, size_t len) {
    for (size_t k = 0; k < N_UCATS; k++)
        if (strlen(ucats[k].name) == len && memcmp(ucats[k].name, s, len) == 0) return (int)k;
    return -1;
}

static bool uses_categories(const char *rx) {
    for (size_t k = 0; k < N_UCATS; k++)
        if (strstr(rx, ucats[k].name)) return true;
    return false;
}

/* Rewrites each \p{X} into the collapsed class; the result is at most
 * (strlen(rx) * 8 + 1) bytes. */
static void collapse_regex(const char *rx, char *out) {
    size_t n = strlen(rx), o = 0;
    bool inside = false;
    for (size_t i = 0; i < n; i++) {
        char c = rx[i];
        if (c == '[' && (i == 0 || rx[i - 1] != '\\')) {
            out[o++] = '[';
            inside = true;
            continue;
        }
        if (inside && c == ']' && rx[i - 1] != '\\') {
            out[o++] = ']';
            inside = false;
            continue;
        }
        if (c == '\\' && i + 3 < n && rx[i + 1] == 'p' && rx[i + 2] == '{') {
            const char *close = strchr(rx + i + 3, '}');
            int k = close && (size_t)(close - rx) <= i + 10 ? find_ucat(rx + i, (size_t)(close - rx) - i + 1) : -1;
            if (k >= 0) {
                if (!inside) out[o++] = '[';
                out[o++] = (char)ucats[k].cat;
                size_t alen = strlen(ucats[k].ascii);
                memcpy(out + o, ucats[k].ascii, alen);
                o += alen;
                if (!inside) out[o++] = ']';
                i = (size_t)(close - rx);
                continue;
            }
        }
        out[o++] = c;
    }
    out[o] = '\0';
}

/* One step of a pre-tokenizer: a compiled regex, or a hand-written splitter. */
typedef enum { STEP_REGEX, STEP_KIMI_K2, STEP_DIGIT_GROUPS } step_kind;

struct pretok {
    int n;
    step_kind kind[MAX_REGEXES];
    pcre2_code *code[MAX_REGEXES];
    bool collapsed[MAX_REGEXES]; /* runs on the collapsed text (else on UTF-8) */
};

void pretok_free(pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->code[i]);
    free(p);
}

static bool add_custom(pretok *p, const char *name, plm_error *err) {
    step_kind k;
    if (strcmp(name, "@kimi-k2") == 0) k = STEP_KIMI_K2;
    else if (strcmp(name, "@digit-groups") == 0) k = STEP_DIGIT_GROUPS;
    else {
        plm_fail(err, PLM_ERR_INVALID_ARG, "unknown splitter %s", name);
        return false;
    }
    p->kind[p->n] = k;
    p->code[p->n] = NULL;
    p->collapsed[p->n] = false;
    p->n++;
    return true;
}

static bool compile_one(pretok *p, const char *rx, plm_error *err) {
    if (rx[0] == '@') return add_custom(p, rx, err);
    bool collapsed = uses_categories(rx);
    char *pattern = NULL;
    const char *src = rx;
    if (collapsed) {
        for (const char *s = rx; *s; s++)
            if ((unsigned char)*s >= 128) {
                plm_fail(err, PLM_ERR_UNSUPPORTED, "regex mixes categories and non-ASCII: %s", rx);
                return false;
            }
        pattern = malloc(strlen(rx) * 8 + 1);
        if (!pattern) {
            plm_fail(err, PLM_ERR_NOMEM, "out of memory compiling the pre-tokenizer");
            return false;
        }
        collapse_regex(rx, pattern);
        src = pattern;
    }
    uint32_t opts = PCRE2_DOLLAR_ENDONLY | (collapsed ? 0 : PCRE2_UTF);
    int code;
    PCRE2_SIZE where;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)src, PCRE2_ZERO_TERMINATED, opts, &code, &where, NULL);
    free(pattern);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        plm_fail(err, PLM_ERR_UNSUPPORTED, "pre-tokenizer regex does not compile at %zu: %s",
                 (size_t)where, (const char *)msg);
        return false;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
    p->kind[p->n] = STEP_REGEX;
    p->code[p->n] = re;
    p->collapsed[p->n] = collapsed;
    p->n++;
    return true;
}

pretok *pretok_new(int regex_set, plm_error *err) {
    if (regex_set < 0 || regex_set >= RX_COUNT) {
        plm_fail(err, PLM_ERR_INVALID_ARG, "unknown regex set %d", regex_set);
        return NULL;
    }
    pretok *p = calloc(1, sizeof *p);
    if (!p) {
        plm_fail(err, PLM_ERR_NOMEM, "out of memory creating the pre-tokenizer");
        return NULL;
    }
    for (int i = 0; i < MAX_REGEXES && regex_sets[regex_set][i]; i++) {
        if (!compile_one(p, regex_sets[regex_set][i], err)) {
            pretok_free(p);
            return NULL;
        }
    }
    return p;
}

/* ---- splitting -------------------------------------------------------- */

typedef struct span { size_t a, b; } span; /* codepoint index range [a, b) */

typedef struct spanvec {
    span *v;
    size_t n, cap;
    bool oom;
} spanvec;

static void spans_push(spanvec *sv, size_t a, size_t b) {
    if (sv->oom) return;
    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 64;
        span *v = realloc(sv->v, cap * sizeof *v);
        if (!v) {
            sv->oom = true;
            return;
        }
        sv->v = v;
        sv->cap = cap;
    }
    sv->v[sv->n++] = (span){a, b};
}

/* The text as codepoints, plus the strings the regexes run on. */
typedef struct subject {
    uint32_t *cps;
    size_t n;
    size_t *coff;        /* n + 1 byte offsets of each codepoint in the clean text */
    char *collapsed;     /* n bytes, or NULL until needed */
    char *utf;           /* UTF-8 for non-collapsed regexes, or NULL until needed */
    size_t *uoff;        /* n + 1 byte offsets into utf */
} subject;

static bool make_collapsed(subject *s) {
    s->collapsed = malloc(s->n ? s->n : 1);
    if (!s->collapsed) return false;
    for (size_t i = 0; i < s->n; i++) s->collapsed[i] = (char)collapse_cpt(s->cps[i]);
    return true;
}

static bool make_utf(subject *s) {
    s->uoff = malloc((s->n + 1) * sizeof *s->uoff);
    s->utf = malloc(s->n * 4 + 1);
    if (!s->uoff || !s->utf) return false;
    size_t o = 0;
    for (size_t i = 0; i < s->n; i++) {
        uint32_t cp = s->cps[i];
        if (cp > 0x7F && is_white_space(cp)) cp = 0x0B;
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD; /* PCRE2 wants valid UTF-8 */
        s->uoff[i] = o;
        o += (size_t)utf8_encode(cp, s->utf + o);
    }
    s->uoff[s->n] = o;
    return true;
}

/* The codepoint index whose UTF-8 starts at byte `off` of s->utf, searched
 * in [lo, hi]. */
static size_t utf_cp_at(const subject *s, size_t off, size_t lo, size_t hi) {
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->uoff[mid] < off) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Splits codepoints [sp.a, sp.b) by one regex into matches and gaps. */
static bool split_span(const pcre2_code *re, bool collapsed, const subject *s, span sp,
                       pcre2_match_data *md, spanvec *out) {
    const char *base;
    size_t len;
    if (collapsed) {
        base = s->collapsed + sp.a;
        len = sp.b - sp.a;
    } else {
        base = s->utf + s->uoff[sp.a];
        len = s->uoff[sp.b] - s->uoff[sp.a];
    }
    /* byte offset within this span -> codepoint index */
#define CP_AT(off) (collapsed ? sp.a + (off) : utf_cp_at(s, s->uoff[sp.a] + (off), sp.a, sp.b))

    size_t pos = 0, last = 0;
    uint32_t opts = collapsed ? 0 : PCRE2_NO_UTF_CHECK;
    uint32_t retry = 0; /* after an empty match: try a non-empty one at the same place */
    while (pos <= len) {
        int rc = pcre2_match(re, (PCRE2_SPTR)base, len, pos, opts | retry, md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(re, (PCRE2_SPTR)base, len, pos, opts | retry | PCRE2_NO_JIT, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (!retry) break;
            retry = 0;
            pos++;
            if (!collapsed)
                while (pos < len && ((unsigned char)base[pos] & 0xC0) == 0x80) pos++;
            continue;
        }
        if (rc < 0) return false;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (ms > last) spans_push(out, CP_AT(last), CP_AT(ms));
        if (me > ms) spans_push(out, CP_AT(ms), CP_AT(me));
        last = me;
        pos = me;
        retry = me == ms ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
    }
    if (last < len) spans_push(out, CP_AT(last), CP_AT(len));
#undef CP_AT
    return !out->oom;
}

/* ---- llama.cpp's hand-written splitters --------------------------------
 * Two of llama.cpp's pre-tokenizers run code instead of a regex (kimi-k2's
 * words, and the digit groups of afmoe and tiny_aya).  The code follows no
 * regex exactly, so these reproduce its decisions step by step, quirks
 * included: the digit splitter glues the text before a number to the number's
 * first group. */

/* What llama.cpp's unicode_cpt_flags say of a codepoint; all false outside
 * the span, where `any` (llama.cpp's "flags != 0") is false too. */
typedef struct cflags {
    bool letter, number, space, any;
} cflags;

typedef struct cursor {
    const uint32_t *cps;
    size_t a, b;     /* the span being split */
    size_t prev_end; /* where the next word starts */
    spanvec *out;
} cursor;

#define NO_CPT 0xFFFFFFFFu

static uint32_t cur_cpt(const cursor *c, size_t pos) {
    return pos >= c->a && pos < c->b ? c->cps[pos] : NO_CPT;
}

static cflags cur_flags(const cursor *c, size_t pos) {
    if (pos < c->a || pos >= c->b) return (cflags){false, false, false, false};
    uint32_t cp = c->cps[pos];
    unsigned char cat = cpt_category(cp);
    return (cflags){cat == CAT_LETTER, cat == CAT_NUMBER, is_white_space(cp), true};
}

static void cur_emit(cursor *c, size_t end) {
    if (end > c->prev_end) spans_push(c->out, c->prev_end, end);
    c->prev_end = end;
}

/* llama.cpp's unicode_cpt_is_han: the CJK ideograph blocks. */
static bool is_han(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2EBEF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static bool is_word_letter(const cursor *c, size_t pos) {
    return cur_flags(c, pos).letter && !is_han(cur_cpt(c, pos));
}

static uint32_t ascii_lower(uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp; }

/* Past an optional 's 't 'm 'd 're 've 'll (any case) at pos. */
static size_t skip_contraction(const cursor *c, size_t pos) {
    if (cur_cpt(c, pos) != '\'' || pos + 1 >= c->b) return pos;
    uint32_t n1 = ascii_lower(cur_cpt(c, pos + 1));
    if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return pos + 2;
    if (pos + 2 >= c->b) return pos;
    uint32_t n2 = ascii_lower(cur_cpt(c, pos + 2));
    if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return pos + 3;
    return pos;
}

/* Whitespace as the LLaMA-3 regex's tail takes it: a run ending in a
 * newline up to that newline, else all but the last blank before a
 * non-blank, else the whole run.  Returns false when pos is not blank. */
static bool take_whitespace(cursor *c, size_t *pos) {
    size_t n = 0, last_nl = 0;
    while (cur_flags(c, *pos + n).space) {
        uint32_t cp = cur_cpt(c, *pos + n);
        if (cp == '\r' || cp == '\n') last_nl = *pos + n + 1;
        n++;
    }
    if (last_nl > 0) *pos = last_nl;
    else if (n > 1 && cur_cpt(c, *pos + n) != NO_CPT) *pos += n - 1;
    else if (n > 0) *pos += n;
    else return false;
    cur_emit(c, *pos);
    return true;
}

/* Kimi-K2: Han runs; words of non-Han letters after one optional other
 * character, with a contraction; 1-3 digits; punctuation runs with their
 * newlines; whitespace. */
static void split_kimi_k2(const uint32_t *cps, span sp, spanvec *out) {
    cursor c = {cps, sp.a, sp.b, sp.a, out};
    for (size_t pos = sp.a; pos < sp.b;) {
        uint32_t cp = cur_cpt(&c, pos);
        cflags f = cur_flags(&c, pos);
        if (is_han(cp)) {
            while (is_han(cur_cpt(&c, pos))) pos++;
            cur_emit(&c, pos);
            continue;
        }
        bool lead = !(cp == '\r' || cp == '\n' || f.letter || f.number);
        if (f.letter || (lead && is_word_letter(&c, pos + 1))) {
            if (lead) pos++;
            while (is_word_letter(&c, pos)) pos++;
            pos = skip_contraction(&c, pos);
            cur_emit(&c, pos);
            continue;
        }
        if (f.number) {
            size_t ini = pos;
            while (cur_flags(&c, pos).number)
                if (++pos - ini >= 3) {
                    cur_emit(&c, pos);
                    ini = pos;
                }
            cur_emit(&c, pos);
            continue;
        }
        cflags f2 = cp == ' ' ? cur_flags(&c, pos + 1) : f;
        if (!(f2.space || f2.letter || f2.number) && f2.any) {
            pos += cp == ' ';
            while (!(f2.space || f2.letter || f2.number) && f2.any) f2 = cur_flags(&c, ++pos);
            while (cur_cpt(&c, pos) == '\r' || cur_cpt(&c, pos) == '\n') pos++;
            cur_emit(&c, pos);
            continue;
        }
        if (take_whitespace(&c, &pos)) continue;
        cur_emit(&c, ++pos);
    }
}

/* afmoe and tiny_aya: each number becomes groups of three digits counted
 * from its end; whatever precedes a number joins its first group. */
static void split_digit_groups(const uint32_t *cps, span sp, spanvec *out) {
    cursor c = {cps, sp.a, sp.b, sp.a, out};
    for (size_t pos = sp.a; pos < sp.b;) {
        if (!cur_flags(&c, pos).number) {
            pos++;
            continue;
        }
        size_t start = pos;
        while (cur_flags(&c, pos).number) pos++;
        size_t cut = start + (pos - start) % 3;
        if (cut > start) cur_emit(&c, cut);
        for (; cut < pos; cut += 3) cur_emit(&c, cut + 3);
    }
    if (c.prev_end < sp.b) cur_emit(&c, sp.b);
}

static void subject_free(subject *s) {
    free(s->cps);
    free(s->coff);
    free(s->collapsed);
    free(s->utf);
    free(s->uoff);
}

/* Decodes the input and writes the clean UTF-8 text into out. */
static bool decode_input(const char *text, size_t len, subject *s, pretok_out *out) {
    s->cps = malloc((len + 1) * sizeof *s->cps);
    s->coff = malloc((len + 1) * sizeof *s->coff);
    out->text = malloc(len * 3 + 1); /* an invalid byte grows to 3 */
    if (!s->cps || !s->coff || !out->text) return false;
    size_t i = 0, o = 0;
    while (i < len) {
        uint32_t cp = utf8_decode(text, len, &i);
        s->coff[s->n] = o;
        s->cps[s->n++] = cp;
        o += (size_t)utf8_encode(cp, out->text + o);
    }
    s->coff[s->n] = o;
    out->len = o;
    return true;
}

bool pretok_split(const pretok *p, const char *text, size_t len, pretok_out *out) {
    memset(out, 0, sizeof *out);
    subject s = {0};
    spanvec cur = {0}, next = {0};
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    bool ok = md && decode_input(text, len, &s, out);
    if (ok && s.n > 0) spans_push(&cur, 0, s.n);

    for (int r = 0; ok && r < p->n && cur.n > 0; r++) {
        bool regex = p->kind[r] == STEP_REGEX;
        if (regex && p->collapsed[r] && !s.collapsed) ok = make_collapsed(&s);
        if (regex && !p->collapsed[r] && !s.utf) ok = ok && make_utf(&s);
        next.n = 0;
        for (size_t k = 0; ok && k < cur.n; k++) {
            if (p->kind[r] == STEP_KIMI_K2) split_kimi_k2(s.cps, cur.v[k], &next);
            else if (p->kind[r] == STEP_DIGIT_GROUPS) split_digit_groups(s.cps, cur.v[k], &next);
            else ok = split_span(p->code[r], p->collapsed[r], &s, cur.v[k], md, &next);
        }
        ok = ok && !next.oom;
        spanvec t = cur;
        cur = next;
        next = t;
    }
    ok = ok && !cur.oom;
    if (ok && cur.n > 0) {
        out->pieces = malloc(cur.n * sizeof *out->pieces);
        ok = out->pieces != NULL;
        for (size_t k = 0; ok && k < cur.n; k++)
            out->pieces[k] = (piece){s.coff[cur.v[k].a], s.coff[cur.v[k].b] - s.coff[cur.v[k].a]};
        if (ok) out->n = cur.n;
    }
    free(cur.v);
    free(next.v);
    subject_free(&s);
    pcre2_match_data_free(md);
    return ok;
}

void pretok_out_free(pretok_out *out) {
    free(out->text);
    free(out->pieces);
    memset(out, 0, sizeof *out);
}
