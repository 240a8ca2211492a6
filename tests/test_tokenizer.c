/*
 * Tokenizer tests.
 *
 * The main check uses llama.cpp's own tokenizer test vocabularies in
 * shared/vocab: for each ggml-vocab-X.gguf, X.gguf.inp holds texts, each
 * followed by "\n__ggml_vocab_test__\n", and X.gguf.out one line of ids per
 * text: llama.cpp's output with add_special=false, parse_special=false (see
 * llama.cpp's tests/test-tokenizer-0.cpp).  Every text must give exactly
 * those ids.
 *
 * Usage:
 *   test_tokenizer                          the whole suite
 *   test_tokenizer vectors V.gguf INP OUT [special]
 *       only the vectors of one vocabulary, in the same file format; with
 *       "special", tokenized with parse_special=true and no round trip; with
 *       "special-rt", parse_special=true and a round trip that renders
 *       special tokens.
 *       tests/oracle/tokenizer.test.mjs uses this for llama-bpe and qwen2
 *       and for texts it tokenized with llama.cpp itself.
 *   test_tokenizer dump V.gguf
 *       prints "n_tokens bos eos eot wants_bos", then one line per token:
 *       "eog piece piece_special" (pieces in hex, "-" when empty), which the
 *       oracle compares with llama.cpp's view of the same vocabulary.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pocketlm_gguf.h"
#include "test.h"
#include "tokenizer/vocab.h"

/* ---- helpers ---------------------------------------------------------------- */

static char *slurp(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, fp)) > 0) {
        n += got;
        if (n == cap) {
            char *b = realloc(buf, cap * 2 + 1);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    fclose(fp);
    if (buf) buf[n] = '\0';
    *len = n;
    return buf;
}

static plm_vocab *load_vocab(const char *path) {
    plm_error err = {0};
    plm_gguf_file *f = plm_gguf_open(path, NULL, &err);
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, err.message);
        return NULL;
    }
    plm_vocab *v = plm_vocab_load(f, &err);
    plm_gguf_close(f); /* the vocab must not keep pointers into the file */
    if (!v) fprintf(stderr, "%s: %s\n", path, err.message);
    return v;
}

/* Tokenizes into a malloc'd array; *n gets the count (or a negative code). */
static plm_token *tokenize(const plm_vocab *v, const char *text, size_t len, int *n, bool add_special,
                           bool parse_special) {
    int need = plm_vocab_tokenize(v, text, len, NULL, 0, add_special, parse_special);
    if (need >= 0) {
        *n = need;
        return malloc(1);
    }
    if (need == INT32_MIN) {
        *n = need;
        return NULL;
    }
    plm_token *ids = malloc((size_t)-need * sizeof *ids);
    *n = plm_vocab_tokenize(v, text, len, ids, -need, add_special, parse_special);
    return ids;
}

/* Concatenated pieces of ids (special tokens rendered only if `special`). */
static char *detokenize(const plm_vocab *v, const plm_token *ids, int n, bool special, size_t *len) {
    size_t cap = 64, used = 0;
    char *out = malloc(cap);
    for (int i = 0; i < n && out; i++) {
        int m = plm_vocab_token_to_piece(v, ids[i], out + used, (int)(cap - used), special);
        if (m < 0) {
            while (cap - used < (size_t)-m) cap *= 2;
            out = realloc(out, cap);
            if (!out) break;
            m = plm_vocab_token_to_piece(v, ids[i], out + used, (int)(cap - used), special);
        }
        used += (size_t)m;
    }
    *len = used;
    return out;
}

static void print_ids(const char *label, const plm_token *ids, int n) {
    fprintf(stderr, "  %s:", label);
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

/* ---- llama.cpp's test vectors ------------------------------------------------ */

typedef struct vectors {
    char *inp;            /* the .inp file, cut in place into texts */
    char **text;
    size_t *text_len;
    plm_token **ids;
    int *n_ids;
    int n;
} vectors;

static void vectors_free(vectors *t) {
    for (int i = 0; i < t->n; i++) free(t->ids[i]);
    free(t->ids);
    free(t->n_ids);
    free(t->text);
    free(t->text_len);
    free(t->inp);
}

static bool read_vectors(const char *inp_path, const char *out_path, vectors *t) {
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    memset(t, 0, sizeof *t);
    size_t inp_len, out_len;
    t->inp = slurp(inp_path, &inp_len);
    char *out = slurp(out_path, &out_len);
    if (!t->inp || !out) {
        free(out);
        return false;
    }
    /* each text takes at least the separator's bytes */
    size_t cap = inp_len / sep_len + 1;
    t->text = malloc(cap * sizeof *t->text);
    t->text_len = malloc(cap * sizeof *t->text_len);
    if (!t->text || !t->text_len) {
        free(out);
        return false;
    }
    for (size_t pos = 0; pos < inp_len;) { /* as test-tokenizer-0.cpp splits */
        char *next = NULL;
        for (size_t i = pos; i + sep_len <= inp_len; i++)
            if (memcmp(t->inp + i, sep, sep_len) == 0) {
                next = t->inp + i;
                break;
            }
        size_t end = next ? (size_t)(next - t->inp) : inp_len;
        t->text[t->n] = t->inp + pos;
        t->text_len[t->n++] = end - pos;
        pos = next ? end + sep_len : inp_len;
    }
    t->ids = calloc((size_t)t->n, sizeof *t->ids);
    t->n_ids = calloc((size_t)t->n, sizeof *t->n_ids);
    int line = 0;
    for (char *p = out; *p && line < t->n; line++) {
        char *eol = strchr(p, '\n');
        if (eol) *eol = '\0';
        t->ids[line] = malloc((strlen(p) / 2 + 1) * sizeof(plm_token));
        for (char *q = p, *e;; q = e) {
            long id = strtol(q, &e, 10);
            if (e == q) break;
            t->ids[line][t->n_ids[line]++] = (plm_token)id;
        }
        p = eol ? eol + 1 : p + strlen(p);
    }
    free(out);
    if (line != t->n) {
        fprintf(stderr, "%s: %d texts but %s has %d lines\n", inp_path, t->n, out_path, line);
        return false;
    }
    return true;
}

/* Checks every vector; returns the number that matched exactly. */
static int check_vectors(const plm_vocab *v, const vectors *t, const char *name, bool parse_special) {
    int good = 0;
    for (int i = 0; i < t->n; i++) {
        int n;
        plm_token *ids = tokenize(v, t->text[i], t->text_len[i], &n, false, parse_special);
        bool same = ids && n == t->n_ids[i] && memcmp(ids, t->ids[i], (size_t)n * sizeof *ids) == 0;
        CHECK(same, "%s: text %d '%.*s' tokenizes differently", name, i, (int)t->text_len[i], t->text[i]);
        if (!same) {
            print_ids("expected", t->ids[i], t->n_ids[i]);
            print_ids("got     ", ids, n);
        }
        good += same;
        free(ids);
    }
    return good;
}

/* detokenize(tokenize(x)) == x, with special tokens parsed and rendered
 * when `special`.  SPM with add_space_prefix adds one leading space, which
 * the caller strips (as llama.cpp's detokenizer does), and cannot give back a
 * U+2581 of the input (it reads as an escaped space): such texts are
 * skipped.  Returns the count that came back; *tried gets the count tried. */
static int check_round_trip(const plm_vocab *v, const vectors *t, const char *name, bool spm_prefix,
                            bool special, int *tried) {
    int good = 0;
    *tried = 0;
    for (int i = 0; i < t->n; i++) {
        if (spm_prefix && memmem(t->text[i], t->text_len[i], "\xE2\x96\x81", 3)) continue;
        int n;
        size_t len;
        plm_token *ids = tokenize(v, t->text[i], t->text_len[i], &n, false, special);
        char *back = detokenize(v, ids, n, special, &len);
        const char *b = back;
        if (spm_prefix && len > 0 && b[0] == ' ') b++, len--;
        bool same = len == t->text_len[i] && memcmp(b, t->text[i], len) == 0;
        CHECK(same, "%s: text %d '%.*s' comes back as '%.*s'", name, i, (int)t->text_len[i],
              t->text[i], (int)len, b);
        good += same;
        ++*tried;
        free(back);
        free(ids);
    }
    return good;
}

/* SentencePiece with the leading space added (tokenizer.ggml.add_space_prefix). */
static bool file_is_spm_prefixed(const char *path) {
    plm_error err;
    plm_gguf_file *f = plm_gguf_open(path, NULL, &err);
    plm_gguf_str s;
    bool prefix = true;
    bool spm = f && plm_gguf_get_str(f, "tokenizer.ggml.model", &s) && plm_gguf_str_eq(s, "llama");
    if (f) plm_gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &prefix);
    plm_gguf_close(f);
    return spm && prefix;
}

/* Checks one vocabulary's vectors (and, without parse_special or with
 * special_rt, round trips); returns false when it could not run. */
static bool run_vectors(const char *gguf, const char *inp, const char *out, bool parse_special,
                        bool special_rt) {
    plm_vocab *v = load_vocab(gguf);
    vectors t;
    bool ok = read_vectors(inp, out, &t);
    CHECK(v && ok, "%s: cannot load the vocabulary or its vectors", gguf);
    if (v && ok) {
        const char *name = strrchr(gguf, '/') ? strrchr(gguf, '/') + 1 : gguf;
        int good = check_vectors(v, &t, name, parse_special);
        printf("%-32s %2d/%d texts exact", name, good, t.n);
        if (!parse_special || special_rt) {
            int tried;
            int rt = check_round_trip(v, &t, name, file_is_spm_prefixed(gguf), parse_special, &tried);
            printf(", %2d/%d round-trip", rt, tried);
        }
        printf("\n");
    }
    vectors_free(&t);
    plm_vocab_free(v);
    return v && ok;
}

/* Every ggml-vocab-*.gguf in shared/vocab that has .inp/.out beside it. */
static void test_shared_vocab_vectors(void) {
    const char *dir = SHARED("vocab");
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d) return;
    int n_vocabs = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 5, ".gguf") != 0) continue;
        char gguf[1024], inp[1100], out[1100];
        snprintf(gguf, sizeof gguf, "%s/%s", dir, e->d_name);
        snprintf(inp, sizeof inp, "%s.inp", gguf);
        snprintf(out, sizeof out, "%s.out", gguf);
        if (access(inp, R_OK) || access(out, R_OK)) continue;
        n_vocabs += run_vectors(gguf, inp, out, false, false);
    }
    closedir(d);
    CHECK(n_vocabs >= 4, "only %d vocabularies with test vectors in %s", n_vocabs, dir);
}

/* ---- special tokens -------------------------------------------------------- */

static bool contains(const plm_token *ids, int n, plm_token t) {
    for (int i = 0; i < n; i++)
        if (ids[i] == t) return true;
    return false;
}

static bool same_ids(const plm_token *a, int na, const plm_token *b, int nb) {
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0);
}

static void test_special_ids(void) {
    plm_vocab *v = load_vocab(SHARED("vocab/ggml-vocab-gpt-2.gguf"));
    CHECK(v != NULL, "gpt-2 vocab");
    if (v) {
        CHECK(plm_vocab_n_tokens(v) == 50257, "n_tokens %d", plm_vocab_n_tokens(v));
        CHECK(plm_vocab_bos(v) == 50256 && plm_vocab_eos(v) == 50256, "bos %d eos %d", plm_vocab_bos(v),
              plm_vocab_eos(v));
        CHECK(plm_vocab_eot(v) == 50256, "<|endoftext|> is found as EOT by its text: %d", plm_vocab_eot(v));
        CHECK(!plm_vocab_wants_bos(v), "gpt-2 BPE adds no BOS");
        CHECK(plm_vocab_is_eog(v, 50256) && !plm_vocab_is_eog(v, 0) && !plm_vocab_is_eog(v, -1) &&
                  !plm_vocab_is_eog(v, 50257), "EOG set");
        plm_vocab_free(v);
    }
    v = load_vocab(SHARED("vocab/ggml-vocab-llama-spm.gguf"));
    CHECK(v != NULL, "llama-spm vocab");
    if (v) {
        CHECK(plm_vocab_bos(v) == 1 && plm_vocab_eos(v) == 2 && plm_vocab_eot(v) == -1, "bos %d eos %d eot %d",
              plm_vocab_bos(v), plm_vocab_eos(v), plm_vocab_eot(v));
        CHECK(plm_vocab_wants_bos(v), "SPM adds BOS");
        CHECK(plm_vocab_is_eog(v, 2) && !plm_vocab_is_eog(v, 1), "EOG is </s>");
        plm_vocab_free(v);
    }
    v = load_vocab(SHARED("vocab/ggml-vocab-phi-3.gguf"));
    CHECK(v != NULL, "phi-3 vocab");
    if (v) {
        CHECK(plm_vocab_eos(v) == 32000, "eos %d", plm_vocab_eos(v));
        CHECK(plm_vocab_eot(v) == 32007, "<|end|> is the EOT: %d", plm_vocab_eot(v));
        CHECK(plm_vocab_is_eog(v, 32000) && plm_vocab_is_eog(v, 32007) && plm_vocab_is_eog(v, 2) &&
                  !plm_vocab_is_eog(v, 32010), "EOG: <|endoftext|>, <|end|>, </s>, not <|user|>");
        plm_vocab_free(v);
    }
    v = load_vocab(SHARED("vocab/ggml-vocab-deepseek-coder.gguf"));
    CHECK(v != NULL, "deepseek-coder vocab");
    if (v) {
        CHECK(plm_vocab_bos(v) == 32013 && plm_vocab_eos(v) == 32014 && plm_vocab_eot(v) == 32014,
              "bos %d eos %d eot %d", plm_vocab_bos(v), plm_vocab_eos(v), plm_vocab_eot(v));
        CHECK(plm_vocab_wants_bos(v), "add_bos_token is true in the file");
        plm_vocab_free(v);
    }
}

static void test_add_and_parse_special(void) {
    int n1, n2, n3;
    plm_vocab *v = load_vocab(SHARED("vocab/ggml-vocab-llama-spm.gguf"));
    if (v) {
        plm_token *a = tokenize(v, "Hello", 5, &n1, false, false);
        plm_token *b = tokenize(v, "Hello", 5, &n2, true, false);
        CHECK(n2 == n1 + 1 && b[0] == 1 && same_ids(a, n1, b + 1, n2 - 1), "SPM add_special prepends BOS");
        free(b);
        /* after a special token the text gets the space prefix again */
        b = tokenize(v, "<s>Hello", 8, &n2, false, true);
        CHECK(n2 == n1 + 1 && b[0] == 1 && same_ids(a, n1, b + 1, n2 - 1), "<s> parsed, then ' Hello'");
        plm_token *c = tokenize(v, "<s>Hello", 8, &n3, false, false);
        CHECK(!contains(c, n3, 1), "without parse_special <s> is text");
        free(a);
        free(b);
        free(c);
        a = tokenize(v, "", 0, &n1, true, false);
        CHECK(n1 == 1 && a[0] == 1, "empty text with add_special is just BOS");
        free(a);
        a = tokenize(v, "", 0, &n1, false, false);
        CHECK(n1 == 0, "empty text gives no tokens");
        free(a);
        a = tokenize(v, "\xff", 1, &n1, false, false);
        CHECK(n1 == 2 && a[0] == 29871 && a[1] == 3 + 0xFF, "invalid UTF-8 falls back to <0xFF>");
        free(a);
        plm_vocab_free(v);
    }
    v = load_vocab(SHARED("vocab/ggml-vocab-gpt-2.gguf"));
    if (v) {
        const char *s = "a<|endoftext|>b";
        plm_token *a = tokenize(v, s, strlen(s), &n1, false, true);
        plm_token *b = tokenize(v, s, strlen(s), &n2, false, false);
        plm_token *c = tokenize(v, s, strlen(s), &n3, true, true);
        CHECK(n1 == 3 && a[1] == 50256, "control token parsed");
        CHECK(!contains(b, n2, 50256) && n2 > 3, "control token left as text");
        CHECK(same_ids(a, n1, c, n3), "gpt-2 adds no BOS/EOS");
        free(a);
        free(b);
        free(c);
        a = tokenize(v, "\xff\xfe abc \xc3", 8, &n1, false, false);
        CHECK(n1 > 0, "invalid UTF-8 still tokenizes");
        free(a);
        plm_vocab_free(v);
    }
    v = load_vocab(SHARED("vocab/ggml-vocab-phi-3.gguf"));
    if (v) {
        /* phi-3: special tokens strip the whitespace after them */
        plm_token *a = tokenize(v, "<|user|>\n  Hi", 13, &n1, false, true);
        plm_token *b = tokenize(v, "<|user|>Hi", 10, &n2, false, true);
        CHECK(n1 > 1 && a[0] == 32010 && same_ids(a, n1, b, n2), "rstrip after <|user|>");
        free(a);
        free(b);
        plm_vocab_free(v);
    }
    v = load_vocab(SHARED("vocab/ggml-vocab-deepseek-coder.gguf"));
    if (v) {
        plm_token *a = tokenize(v, "x", 1, &n1, true, false);
        CHECK(n1 == 2 && a[0] == 32013, "deepseek-coder adds BOS");
        free(a);
        /* user-defined tokens are split out even without parse_special */
        a = tokenize(v, "<|User|>", 8, &n1, false, false);
        CHECK(n1 == 1 && a[0] == 32019, "user-defined token matched: n=%d", n1);
        free(a);
        plm_vocab_free(v);
    }
}

static void test_buffer_sizes(void) {
    plm_vocab *v = load_vocab(SHARED("vocab/ggml-vocab-gpt-2.gguf"));
    if (!v) return;
    plm_token ids[64];
    int n = plm_vocab_tokenize(v, "Hello world, again", 18, ids, 64, false, false);
    CHECK(n == 4, "n = %d", n);
    CHECK(plm_vocab_tokenize(v, "Hello world, again", 18, ids, 2, false, false) == -4, "too small: -needed");
    char buf[32];
    CHECK(plm_vocab_token_to_piece(v, 50256, buf, sizeof buf, false) == 0, "control renders empty");
    CHECK(plm_vocab_token_to_piece(v, 50256, buf, sizeof buf, true) == 13 && memcmp(buf, "<|endoftext|>", 13) == 0,
          "control renders with special");
    CHECK(plm_vocab_token_to_piece(v, 50256, buf, 5, true) == -13, "too small: -needed");
    CHECK(plm_vocab_token_to_piece(v, 220, buf, sizeof buf, false) == 1 && buf[0] == ' ', "Ġ is a space");
    CHECK(plm_vocab_token_to_piece(v, 50257, buf, sizeof buf, true) == 0, "out of range renders empty");
    plm_vocab_free(v);

    v = load_vocab(SHARED("vocab/ggml-vocab-llama-spm.gguf"));
    if (!v) return;
    CHECK(plm_vocab_token_to_piece(v, 3 + '\n', buf, sizeof buf, false) == 1 && buf[0] == '\n', "<0x0A>");
    CHECK(plm_vocab_token_to_piece(v, 15043, buf, sizeof buf, false) == 6 && memcmp(buf, " Hello", 6) == 0,
          "U+2581 becomes a space");
    CHECK(plm_vocab_token_to_piece(v, 1, buf, sizeof buf, false) == 0, "<s> renders empty");
    CHECK(plm_vocab_token_to_piece(v, 0, buf, sizeof buf, true) == 5, "<unk> with special");
    plm_vocab_free(v);
}

/* The reference prompt of shared/models, tokenized with BOS by llama.cpp. */
static void test_model_prompt(void) {
    size_t plen, tlen;
    char *prompt = slurp(SHARED("models/expected/PROMPT.txt"), &plen);
    char *expect = slurp(SHARED("models/expected/stories260K.tokens"), &tlen);
    plm_vocab *v = load_vocab(SHARED("models/stories260K.gguf"));
    CHECK(prompt && expect && v, "stories260K files");
    if (prompt && expect && v) {
        plm_token want[4096];
        int nw = 0;
        for (char *p = expect, *e; nw < 4096; p = e) {
            long id = strtol(p, &e, 10);
            if (e == p) break;
            want[nw++] = (plm_token)id;
        }
        int n;
        plm_token *ids = tokenize(v, prompt, plen, &n, true, false);
        CHECK(same_ids(ids, n, want, nw), "stories260K prompt: %d tokens, want %d", n, nw);
        free(ids);
    }
    plm_vocab_free(v);
    free(prompt);
    free(expect);
}

/* ---- threads ---------------------------------------------------------------- */

typedef struct job {
    const plm_vocab *v;
    const vectors *t;
    int mismatches;
} job;

static void *tokenize_all(void *arg) {
    job *j = arg;
    for (int round = 0; round < 5; round++)
        for (int i = 0; i < j->t->n; i++) {
            int n;
            plm_token *ids = tokenize(j->v, j->t->text[i], j->t->text_len[i], &n, false, false);
            if (!ids || !same_ids(ids, n, j->t->ids[i], j->t->n_ids[i])) j->mismatches++;
            free(ids);
        }
    return NULL;
}

static void test_threads(void) {
    const char *names[] = {"deepseek-coder", "llama-spm"};
    for (int k = 0; k < 2; k++) {
        char gguf[512], inp[600], out[600];
        snprintf(gguf, sizeof gguf, "%s/ggml-vocab-%s.gguf", SHARED("vocab"), names[k]);
        snprintf(inp, sizeof inp, "%s.inp", gguf);
        snprintf(out, sizeof out, "%s.out", gguf);
        plm_vocab *v = load_vocab(gguf);
        vectors t;
        if (v && read_vectors(inp, out, &t)) {
            pthread_t th[4];
            job jobs[4];
            for (int i = 0; i < 4; i++) {
                jobs[i] = (job){v, &t, 0};
                pthread_create(&th[i], NULL, tokenize_all, &jobs[i]);
            }
            int bad = 0;
            for (int i = 0; i < 4; i++) {
                pthread_join(th[i], NULL);
                bad += jobs[i].mismatches;
            }
            CHECK(bad == 0, "%s: %d mismatches when tokenizing from 4 threads", names[k], bad);
            vectors_free(&t);
        }
        plm_vocab_free(v);
    }
}

/* ---- loading: bad files and speed ------------------------------------------ */

static char tmpdir[256];

static plm_vocab *load_written(plm_gguf_writer *w, const char *name, plm_error *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    plm_status st = plm_gguf_writer_write(w, path, NULL, NULL, err);
    plm_gguf_writer_free(w);
    if (st) return NULL;
    plm_gguf_file *f = plm_gguf_open(path, NULL, err);
    if (!f) return NULL;
    plm_vocab *v = plm_vocab_load(f, err);
    plm_gguf_close(f);
    unlink(path);
    return v;
}

static plm_gguf_writer *small_bpe(const char *pre) {
    plm_gguf_writer *w = plm_gguf_writer_new();
    plm_gguf_str toks[] = {{"a", 1}, {"b", 1}, {"ab", 2}, {"\xc4\xa0", 2}};
    plm_gguf_str merges[] = {{"a b", 3}};
    plm_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (pre) plm_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    plm_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 4);
    plm_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    return w;
}

static void test_bad_vocabs(void) {
    plm_error err;
    plm_vocab *v = load_written(small_bpe("qwen2"), "ok.gguf", &err);
    CHECK(v != NULL, "a minimal BPE vocab loads: %s", v ? "" : err.message);
    if (v) {
        int n;
        plm_token *ids = tokenize(v, "ab ab", 5, &n, false, false);
        CHECK(n == 3 && ids[0] == 2 && ids[1] == 3 && ids[2] == 2, "merges apply: n=%d", n);
        free(ids);
        plm_vocab_free(v);
    }
    v = load_written(small_bpe("no-such-pre"), "pre.gguf", &err);
    CHECK(!v && err.code == PLM_ERR_UNSUPPORTED && strstr(err.message, "no-such-pre"), "unknown pre: %s",
          err.message);

    plm_gguf_writer *w = plm_gguf_writer_new();
    plm_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    v = load_written(w, "notoks.gguf", &err);
    CHECK(!v && err.code == PLM_ERR_FORMAT && strstr(err.message, "tokens"), "no tokens: %s", err.message);

    w = small_bpe(NULL);
    int32_t types[2] = {1, 1};
    plm_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", PLM_GGUF_TYPE_INT32, types, 2);
    v = load_written(w, "types.gguf", &err);
    CHECK(!v && err.code == PLM_ERR_FORMAT && strstr(err.message, "token_type"), "short token_type: %s",
          err.message);

    w = plm_gguf_writer_new();
    plm_gguf_str toks[] = {{"a", 1}};
    plm_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    plm_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 1);
    v = load_written(w, "nomerges.gguf", &err);
    CHECK(!v && err.code == PLM_ERR_FORMAT && strstr(err.message, "merges"), "no merges: %s", err.message);

    w = small_bpe("gpt-2");
    plm_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    v = load_written(w, "bos.gguf", &err);
    CHECK(!v && err.code == PLM_ERR_FORMAT, "add_bos without a BOS token: %s", err.message);

    w = plm_gguf_writer_new();
    plm_gguf_writer_set_str(w, "tokenizer.ggml.model", "bert");
    plm_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 1);
    v = load_written(w, "bert.gguf", &err);
    CHECK(!v && err.code == PLM_ERR_UNSUPPORTED, "WPM is not supported: %s", err.message);
}

/* Every pre-tokenizer name llama.cpp accepts (node-llama-cpp 3.21.1) loads,
 * so all its regexes compile, and tokenizes awkward input (invalid UTF-8,
 * long blank runs, digits, Han, marks) without failing; under ASan this is
 * the memory check of every splitter.  Which ids come out is the oracle's
 * business (tests/oracle/pretokenizers.test.mjs). */
static void test_every_pre_name(void) {
    static const char *const names[] = {
        "default", "minicpm5", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
        "midm-2.0", "lfm2", "jina-v5-nano", "deepseek-llm", "deepseek-coder", "deepseek-v3", "youtu",
        "falcon", "mpt", "starcoder", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es",
        "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jais-2", "gemma4", "granite-embed-multi-311m",
        "sarvam-moe", "jina-v1-en", "jina-v2-code", "roberta-bpe", "whitespace", "refact", "command-r",
        "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "qwen35", "stablelm2", "olmo", "dbrx",
        "smaug-bpe", "poro-chat", "glm4", "chatglm-bpe", "viking", "jais", "tekken", "smollm",
        "codeshell", "bloom", "gpt3-finnish", "exaone", "exaone4", "exaone-moe", "chameleon",
        "minerva-7b", "megrez", "gpt-4o", "llama4", "kanana2", "talkie", "granite-embed-multi-97m",
        "tiny_aya", "cohere2moe", "superbpe", "trillion", "granite-docling", "bailingmoe", "bailingmoe2",
        "llada-moe", "seed-coder", "hunyuan", "hunyuan-dense", "joyai-llm", "kimi-k2", "grok-2", "afmoe",
        "laguna", "minimax-m2", "solar-open", "mellum2",
    };
    static const char text[] =
        "ab 12345678 x1y22 \xe4\xb8\xad\xe6\x96\x87 \xf0\xa0\x80\x80 e\xcc\x81 I'M we'll \xff\xc3 \xed\xa0\x80"
        "  \t\n\r\n   \xe3\x80\x80 <sentinel:7> IMGIMGABZ \xe2\x96\x81 \n\n\n ~!? \xd9\xa3\xd9\xa4 ab";
    int loaded = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char file[64];
        snprintf(file, sizeof file, "pre-%zu.gguf", i);
        plm_error err;
        plm_gguf_writer *w = small_bpe(names[i]);
        plm_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 0); /* llama3, tekken ... add BOS */
        plm_vocab *v = load_written(w, file, &err);
        CHECK(v != NULL, "pre '%s' loads: %s", names[i], v ? "" : err.message);
        if (!v) continue;
        loaded++;
        for (size_t len = 0; len <= sizeof text - 1; len += 7) { /* every prefix length, cut mid-character too */
            int n;
            plm_token *ids = tokenize(v, text, len, &n, true, true);
            CHECK(ids && n >= 0, "pre '%s' tokenizes %zu bytes: %d", names[i], len, n);
            free(ids);
        }
        plm_vocab_free(v);
    }
    printf("%d pre-tokenizer names load and tokenize\n", loaded);

    plm_gguf_writer *w = plm_gguf_writer_new(); /* kimi-k2 alone may have no merges */
    plm_gguf_str toks[] = {{"a", 1}};
    plm_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    plm_gguf_writer_set_str(w, "tokenizer.ggml.pre", "kimi-k2");
    plm_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 1);
    plm_error err;
    plm_vocab *v = load_written(w, "kimi.gguf", &err);
    CHECK(v != NULL, "kimi-k2 without merges loads: %s", v ? "" : err.message);
    plm_vocab_free(v);
}

#if defined(__SANITIZE_ADDRESS__)
#define SLOW_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLOW_BUILD 1
#endif
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A 152K-token BPE vocabulary with 151K merges loads well under a second. */
static void test_load_speed(void) {
    enum { N = 152064, M = 151387 };
    char *buf = malloc((size_t)N * 24 + (size_t)M * 48);
    plm_gguf_str *toks = malloc(N * sizeof *toks), *merges = malloc(M * sizeof *merges);
    if (!buf || !toks || !merges) return;
    char *p = buf;
    for (int i = 0; i < N; i++) {
        int n = sprintf(p, "t%x", i);
        toks[i] = (plm_gguf_str){p, (uint64_t)n};
        p += n;
    }
    for (int i = 0; i < M; i++) {
        int n = sprintf(p, "t%x t%x", i, (i * 7) % N);
        merges[i] = (plm_gguf_str){p, (uint64_t)n};
        p += n;
    }
    plm_gguf_writer *w = plm_gguf_writer_new();
    plm_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    plm_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2");
    plm_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, N);
    plm_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, M);
    char path[512];
    snprintf(path, sizeof path, "%s/big.gguf", tmpdir);
    plm_error err;
    plm_status st = plm_gguf_writer_write(w, path, NULL, NULL, &err);
    plm_gguf_writer_free(w);
    free(buf);
    free(toks);
    free(merges);
    CHECK(st == PLM_OK, "writing the big vocab: %s", err.message);
    plm_gguf_file *f = plm_gguf_open(path, NULL, &err);
    CHECK(f != NULL, "%s", err.message);
    if (!f) return;
    double t0 = now_s();
    plm_vocab *v = plm_vocab_load(f, &err);
    double dt = now_s() - t0;
    plm_gguf_close(f);
    unlink(path);
#ifdef SLOW_BUILD
    const double limit = 5.0;
#else
    const double limit = 1.0;
#endif
    CHECK(v && dt < limit, "152K-token vocab loads in %.3f s (limit %.1f)", dt, limit);
    printf("152K-token BPE vocab with 151K merges: loaded in %.0f ms\n", dt * 1000);
    plm_vocab_free(v);
}

static void put_hex(const plm_vocab *v, plm_token t, bool special) {
    char buf[1024];
    int n = plm_vocab_token_to_piece(v, t, buf, sizeof buf, special);
    if (n <= 0) fputs(n < 0 ? "?" : "-", stdout);
    for (int i = 0; i < n; i++) printf("%02x", (unsigned char)buf[i]);
}

static int dump_vocab(const char *gguf) {
    plm_vocab *v = load_vocab(gguf);
    if (!v) return 1;
    printf("%d %d %d %d %d\n", plm_vocab_n_tokens(v), plm_vocab_bos(v), plm_vocab_eos(v), plm_vocab_eot(v),
           plm_vocab_wants_bos(v));
    for (plm_token t = 0; t < plm_vocab_n_tokens(v); t++) {
        printf("%d ", plm_vocab_is_eog(v, t));
        put_hex(v, t, false);
        putchar(' ');
        put_hex(v, t, true);
        putchar('\n');
    }
    plm_vocab_free(v);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "dump") == 0) return dump_vocab(argv[2]);
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "vectors") == 0) {
        const char *mode = argc == 6 ? argv[5] : "";
        bool rt = strcmp(mode, "special-rt") == 0;
        run_vectors(argv[2], argv[3], argv[4], rt || strcmp(mode, "special") == 0, rt);
        return test_summary();
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/plm_tok_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_shared_vocab_vectors();
    test_special_ids();
    test_add_and_parse_special();
    test_buffer_sizes();
    test_model_prompt();
    test_threads();
    test_bad_vocabs();
    test_every_pre_name();
    test_load_speed();
    rmdir(tmpdir);
    return test_summary();
}
