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
 *    members of X.  So \s is ASCII whitespace plus 0x0B, \p{Lu} means any
 *    letter, and '~' is not a symbol (llama.cpp's ASCII symbol set lacks it).
 *    The GPT-2 and LLaMA-3 regexes, which llama.cpp runs with hand-written
 *    code, give the same splits this way.
 *  - Any other regex runs on the codepoints themselves, with non-ASCII
 *    whitespace replaced by 0x0B (std::wregex's \s is ASCII-only).
 *
 * Categories come from utf8proc; whitespace is Unicode's White_Space
 * property, which is the Z categories plus U+0009..U+000D and U+0085.
 */
#include "tokenizer/internal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define MAX_REGEXES 6

/* ---- the regex lists (as in llama.cpp's llm_tokenizer_bpe) ---------- */

#define GPT2_REGEX \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define LLAMA3_REGEX                                                              \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
                 "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_REGEX                                                            \
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
                 "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PORO_REGEX " ?[^(\\s|.,!?…。，、।۔،)]+"
#define CJK_REGEX "[一-龥ࠀ-一가-퟿]+"

static const char *const regex_sets[RX_COUNT][MAX_REGEXES + 1] = {
    [RX_DEFAULT] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_REGEX, "\\p{N}+", "[0-9][0-9][0-9]", NULL},
    [RX_LLAMA3] = {LLAMA3_REGEX, NULL},
    [RX_DEEPSEEK_LLM] =
        {
            "[\r\n]",
            "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
            "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
            "\\s+$",
            CJK_REGEX,
            "\\p{N}+",
            NULL,
        },
    [RX_DEEPSEEK3_LLM] =
        {
            "\\p{N}{1,3}",
            "[一-龥぀-ゟ゠-ヿ]+",
            "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
            "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
            NULL,
        },
    [RX_DEEPSEEK_CODER] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK_REGEX, "\\p{N}", NULL},
    [RX_FALCON] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_REGEX, "[0-9][0-9][0-9]", NULL},
    [RX_STARCODER] = {"\\p{N}", GPT2_REGEX, NULL},
    [RX_GPT2] = {GPT2_REGEX, NULL},
    [RX_QWEN2] = {QWEN2_REGEX, NULL},
    [RX_PORO] = {PORO_REGEX, NULL},
    [RX_VIKING] = {PORO_REGEX, "\\p{N}", NULL},
    [RX_TEKKEN] =
        {
            "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
            "|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"
            "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            NULL,
        },
    [RX_GPT4O] =
        {
            "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" CONTRACTIONS "?"
            "|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" CONTRACTIONS "?"
            "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            NULL,
        },
    [RX_SEED_CODER] =
        {
            CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+"
                         "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
            NULL,
        },
};

/* ---- categories ------------------------------------------------------- */

static bool is_white_space(uint32_t cp) {
    if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85) return true;
    if (cp < 0xA0) return false;
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

enum { CAT_OTHER = 0xD0, CAT_NUMBER, CAT_LETTER, CAT_PUNCT, CAT_MARK, CAT_SYMBOL };

static unsigned char collapse_cpt(uint32_t cp) {
    if (cp < 128) return (unsigned char)cp;
    if (is_white_space(cp)) return 0x0B;
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
    default:
        return CAT_OTHER;
    }
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
    {"\\p{S}", CAT_SYMBOL, "\\$\\+<->^`\\|"},
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

struct pretok {
    int n;
    pcre2_code *code[MAX_REGEXES];
    bool collapsed[MAX_REGEXES]; /* runs on the collapsed text (else on UTF-8) */
};

void pretok_free(pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->code[i]);
    free(p);
}

static bool compile_one(pretok *p, const char *rx, plm_error *err) {
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
    for (int i = 0; regex_sets[regex_set][i]; i++) {
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
        if (p->collapsed[r] && !s.collapsed) ok = make_collapsed(&s);
        if (!p->collapsed[r] && !s.utf) ok = ok && make_utf(&s);
        next.n = 0;
        for (size_t k = 0; ok && k < cur.n; k++)
            ok = split_span(p->code[r], p->collapsed[r], &s, cur.v[k], md, &next);
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
