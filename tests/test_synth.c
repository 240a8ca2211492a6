/* plm_synth: writes the tiny test shapes with the stories260K vocabulary and
 * reads them back with the GGUF reader: metadata, every tensor's name, shape
 * and type, weight statistics, determinism, and the error paths. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pocketlm_gguf.h"
#include "pocketlm_tools.h"
#include "quant/fp16.h"
#include "quant/types.h"
#include "test.h"

#define VOCAB SHARED("models/stories260K.gguf")

static char dir[] = "/tmp/plm_test_synth_XXXXXX";
static const plm_gguf_open_params open_params = {true, false};

static char *path_in(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

typedef struct expect {
    const char *arch;
    uint32_t n_layer, n_embd, n_head, n_head_kv, n_ff, n_ctx;
    float theta, eps;
    bool tied, bias;
} expect;

static double value(const plm_gguf_tensor *t, uint64_t i) {
    if (t->type == PLM_TYPE_F16) return plm_fp16_to_fp32(((const plm_fp16_t *)t->data)[i]);
    return ((const float *)t->data)[i];
}

typedef struct stats {
    double sum, sum2;
    uint64_t n;
} stats;

static void accumulate(stats *s, const plm_gguf_tensor *t) {
    uint64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    for (uint64_t i = 0; i < n; i++) {
        double v = value(t, i);
        s->sum += v;
        s->sum2 += v * v;
    }
    s->n += n;
}

static void check_stats(const stats *s, double want_sd, const char *what) {
    double mean = s->sum / (double)s->n;
    double sd = sqrt(s->sum2 / (double)s->n - mean * mean);
    /* Standard error of the std estimate is sd / sqrt(2n); allow ~6 of them
     * plus f16 rounding. */
    double tol = 6 * want_sd / sqrt(2.0 * (double)s->n) + 1e-4;
    CHECK(fabs(sd - want_sd) < tol, "%s: std %.5f, want %.3f +- %.5f (n=%llu)", what, sd, want_sd, tol,
          (unsigned long long)s->n);
    CHECK(fabs(mean) < 6 * want_sd / sqrt((double)s->n) + 1e-4, "%s: mean %.5f", what, mean);
}

static void check_tensor(const plm_gguf_file *f, const char *name, uint32_t type, uint64_t ne0, uint64_t ne1) {
    const plm_gguf_tensor *t = plm_gguf_find_tensor(f, name);
    CHECK(t != NULL, "tensor %s missing", name);
    if (!t) return;
    uint32_t nd = ne1 ? 2 : 1;
    CHECK(t->n_dims == nd && t->ne[0] == ne0 && t->ne[1] == (ne1 ? ne1 : 1), "%s: dims %u [%llu, %llu]",
          name, t->n_dims, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1]);
    CHECK(t->type == type, "%s: type %s, want %s", name, plm_type_name(t->type), plm_type_name(type));
}

static uint32_t get_u32(const plm_gguf_file *f, const char *key) {
    uint32_t v = 0xDEADBEEF;
    CHECK(plm_gguf_get_u32(f, key, &v), "key %s missing", key);
    return v;
}

static void check_model(const char *path, const expect *e, bool f32, const plm_gguf_file *vocab) {
    plm_error err;
    plm_gguf_file *f = plm_gguf_open(path, &open_params, &err);
    CHECK(f != NULL, "reopen %s: %s", path, f ? "" : err.message);
    if (!f) return;
    const char *a = e->arch;
    char key[128];
#define KEY(s) (snprintf(key, sizeof key, "%s.%s", a, s), key)
    plm_gguf_str s;
    CHECK(plm_gguf_get_str(f, "general.architecture", &s) && plm_gguf_str_eq(s, a), "architecture");
    CHECK(plm_gguf_get_str(f, "general.name", &s) && s.len > 0, "general.name");
    CHECK(get_u32(f, KEY("context_length")) == e->n_ctx, "context_length");
    CHECK(get_u32(f, KEY("embedding_length")) == e->n_embd, "embedding_length");
    CHECK(get_u32(f, KEY("block_count")) == e->n_layer, "block_count");
    CHECK(get_u32(f, KEY("feed_forward_length")) == e->n_ff, "feed_forward_length");
    CHECK(get_u32(f, KEY("attention.head_count")) == e->n_head, "head_count");
    CHECK(get_u32(f, KEY("attention.head_count_kv")) == e->n_head_kv, "head_count_kv");
    CHECK(get_u32(f, KEY("rope.dimension_count")) == e->n_embd / e->n_head, "rope.dimension_count");
    float v = 0;
    CHECK(plm_gguf_get_f32(f, KEY("attention.layer_norm_rms_epsilon"), &v) && v == e->eps, "rms eps %g", v);
    CHECK(plm_gguf_get_f32(f, KEY("rope.freq_base"), &v) && v == e->theta, "rope.freq_base %g", v);
    CHECK(get_u32(f, "general.file_type") == (f32 ? 0u : 1u), "file_type");
#undef KEY

    /* Every tokenizer.* key of the vocabulary, and nothing else of it. */
    int n_tok_keys = 0, n_src_keys = 0;
    for (uint64_t i = 0; i < vocab->n_kv; i++) {
        plm_gguf_str k = vocab->kv[i].key;
        if (k.len < 10 || memcmp(k.ptr, "tokenizer.", 10)) continue;
        n_src_keys++;
        char name[128];
        plm_gguf_str_copy(k, name, sizeof name);
        const plm_gguf_kv *kv = plm_gguf_find_kv(f, name);
        CHECK(kv && kv->value.type == vocab->kv[i].value.type, "vocab key %s", name);
    }
    for (uint64_t i = 0; i < f->n_kv; i++) {
        plm_gguf_str k = f->kv[i].key;
        if (k.len >= 10 && !memcmp(k.ptr, "tokenizer.", 10)) n_tok_keys++;
    }
    CHECK(n_src_keys > 0 && n_tok_keys == n_src_keys, "tokenizer keys: %d of %d", n_tok_keys, n_src_keys);
    const plm_gguf_array *ta = plm_gguf_get_arr(f, "tokenizer.ggml.tokens");
    const plm_gguf_array *tb = plm_gguf_get_arr(vocab, "tokenizer.ggml.tokens");
    uint64_t n_vocab = tb ? tb->n : 0;
    bool same = ta && tb && ta->n == tb->n;
    for (uint64_t i = 0; same && i < ta->n; i++) {
        plm_gguf_str x = plm_gguf_arr_str(ta, i), y = plm_gguf_arr_str(tb, i);
        same = x.len == y.len && !memcmp(x.ptr, y.ptr, x.len);
    }
    CHECK(same, "token strings copied");

    /* Tensors: names, shapes, types; nothing extra. */
    uint32_t wt = f32 ? PLM_TYPE_F32 : PLM_TYPE_F16;
    uint64_t E = e->n_embd, F = e->n_ff, KV = e->n_embd / e->n_head * e->n_head_kv;
    check_tensor(f, "token_embd.weight", wt, E, n_vocab);
    check_tensor(f, "output_norm.weight", PLM_TYPE_F32, E, 0);
    if (e->tied) CHECK(plm_gguf_find_tensor(f, "output.weight") == NULL, "tied: no output.weight");
    else check_tensor(f, "output.weight", wt, E, n_vocab);
    uint64_t want_tensors = 2 + !e->tied;
    stats sw = {0}, se = {0}, sb = {0};
    int not_one = 0;
    for (uint32_t l = 0; l < e->n_layer; l++) {
        char n[64];
#define T(suffix, type, ne0, ne1)                          \
    do {                                                   \
        snprintf(n, sizeof n, "blk.%u.%s", (unsigned)l, suffix); \
        check_tensor(f, n, type, ne0, ne1);                \
        want_tensors++;                                    \
    } while (0)
        T("attn_norm.weight", PLM_TYPE_F32, E, 0);
        T("attn_q.weight", wt, E, E);
        T("attn_k.weight", wt, E, KV);
        T("attn_v.weight", wt, E, KV);
        T("attn_output.weight", wt, E, E);
        T("ffn_norm.weight", PLM_TYPE_F32, E, 0);
        T("ffn_gate.weight", wt, E, F);
        T("ffn_up.weight", wt, E, F);
        T("ffn_down.weight", wt, F, E);
        if (e->bias) {
            T("attn_q.bias", PLM_TYPE_F32, E, 0);
            T("attn_k.bias", PLM_TYPE_F32, KV, 0);
            T("attn_v.bias", PLM_TYPE_F32, KV, 0);
        } else {
            snprintf(n, sizeof n, "blk.%u.attn_q.bias", (unsigned)l);
            CHECK(plm_gguf_find_tensor(f, n) == NULL, "llama has no %s", n);
        }
#undef T
    }
    CHECK(f->n_tensors == want_tensors, "%llu tensors, want %llu", (unsigned long long)f->n_tensors,
          (unsigned long long)want_tensors);

    /* Statistics. */
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const plm_gguf_tensor *t = &f->tensors[i];
        char n[128];
        plm_gguf_str_copy(t->name, n, sizeof n);
        if (strstr(n, "norm")) {
            for (uint64_t j = 0; j < t->ne[0]; j++) not_one += value(t, j) != 1.0;
        } else if (!strcmp(n, "token_embd.weight")) {
            accumulate(&se, t);
        } else if (strstr(n, ".bias")) {
            accumulate(&sb, t);
        } else {
            accumulate(&sw, t);
        }
    }
    CHECK(not_one == 0, "%d norm weights differ from 1", not_one);
    check_stats(&se, 0.1, "token_embd");
    check_stats(&sw, 0.02, "weights");
    if (e->bias) check_stats(&sb, 0.02, "biases");
    plm_gguf_close(f);
}

/* pocketlm itself loads the result and decodes a few tokens. */
static void check_decodes(const char *path) {
    plm_model_params mp = plm_model_default_params();
    plm_model *model = NULL;
    plm_error err;
    CHECK(plm_model_load(path, &mp, &model, &err) == PLM_OK, "plm_model_load %s: %s", path, err.message);
    if (!model) return;
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 64;
    plm_context *ctx = NULL;
    CHECK(plm_context_new(model, &cp, &ctx, &err) == PLM_OK, "context: %s", err.message);
    if (ctx) {
        plm_token toks[4] = {1, 100, 200, 300};
        CHECK(plm_decode(ctx, toks, 4, &err) == PLM_OK, "decode: %s", err.message);
        const float *logits = plm_get_logits(ctx, -1);
        int bad = !logits;
        for (int i = 0; logits && i < plm_model_n_vocab(model); i++) bad += !isfinite(logits[i]);
        CHECK(bad == 0, "%s: %d non-finite logits", path, bad);
        plm_context_free(ctx);
    }
    plm_model_free(model);
}

static bool same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int x = fgetc(fa), y = fgetc(fb);
        if (x != y) same = false;
        if (x == EOF || y == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* `sparse` has `dense`'s size, header and tensor table, zeros for data, and
 * holes where the data is. */
static void check_sparse(const char *dense, const char *sparse) {
    plm_error err;
    plm_gguf_file *d = plm_gguf_open(dense, &open_params, &err);
    plm_gguf_file *s = plm_gguf_open(sparse, &open_params, &err);
    struct stat st;
    CHECK(d && s && stat(sparse, &st) == 0, "open dense and sparse: %s", err.message);
    if (!d || !s || stat(sparse, &st) != 0) {
        plm_gguf_close(d);
        plm_gguf_close(s);
        return;
    }
    CHECK((uint64_t)st.st_size == d->size && s->size == d->size, "sparse size %llu, dense %llu",
          (unsigned long long)st.st_size, (unsigned long long)d->size);
    CHECK(s->data_offset == d->data_offset && !memcmp(s->image, d->image, (size_t)d->data_offset), "same header");
    const uint8_t *bytes = s->image + s->data_offset;
    uint64_t nonzero = 0;
    for (uint64_t i = 0; i < s->size - s->data_offset; i++) nonzero += bytes[i] != 0;
    CHECK(nonzero == 0, "sparse data reads as zeros (%llu bytes not)", (unsigned long long)nonzero);
    CHECK((uint64_t)st.st_blocks * 512 < d->data_offset + (d->size - d->data_offset) / 2,
          "sparse file takes %lld bytes of disk for %llu of data", (long long)st.st_blocks * 512,
          (unsigned long long)(d->size - d->data_offset));
    plm_gguf_close(d);
    plm_gguf_close(s);
}

static int run_cli(const char *args) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s synth %s >%s 2>&1", PLM_BIN, args, path_in("cli.txt"));
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static bool file_contains(const char *p, const char *needle) {
    static char buf[8192];
    FILE *f = fopen(p, "rb");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, needle) != NULL;
}

int main(void) {
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    plm_error err;
    plm_gguf_file *vocab = plm_gguf_open(VOCAB, &open_params, &err);
    REQUIRE(vocab != NULL, "open %s", VOCAB);

    /* The shape list. */
    const char *const *names = plm_synth_shapes();
    int n_names = 0;
    bool has7b = false, has_tiny = false;
    for (; names[n_names]; n_names++) {
        has7b |= !strcmp(names[n_names], "qwen2.5-7b");
        has_tiny |= !strcmp(names[n_names], "test-llama-tiny");
    }
    CHECK(n_names == 32 && has7b && has_tiny, "shape list (%d)", n_names);

    const expect llama = {"llama", 2, 64, 4, 2, 128, 256, 10000.0f, 1e-5f, false, false};
    const expect qwen2 = {"qwen2", 2, 64, 4, 2, 128, 256, 1000000.0f, 1e-6f, true, true};

    plm_synth_params p = {"test-llama-tiny", VOCAB, path_in("llama.gguf"), false, 1};
    CHECK(plm_synth(&p, &err) == PLM_OK, "synth llama: %s", err.message);
    check_model(p.out_path, &llama, false, vocab);
    check_decodes(p.out_path);
    CHECK(!exists(path_in("llama.gguf.tmp")), "no temporary left");

    p = (plm_synth_params){"test-qwen2-tiny", VOCAB, path_in("qwen2.gguf"), false, 1};
    CHECK(plm_synth(&p, &err) == PLM_OK, "synth qwen2: %s", err.message);
    check_model(p.out_path, &qwen2, false, vocab);
    check_decodes(p.out_path);

    p = (plm_synth_params){"test-qwen2-tiny", VOCAB, path_in("qwen2-f32.gguf"), true, 1};
    CHECK(plm_synth(&p, &err) == PLM_OK, "synth qwen2 f32: %s", err.message);
    check_model(p.out_path, &qwen2, true, vocab);
    check_decodes(p.out_path);

    /* Same seed, same bytes; another seed, other bytes. */
    p = (plm_synth_params){"test-llama-tiny", VOCAB, path_in("llama-again.gguf"), false, 1};
    CHECK(plm_synth(&p, &err) == PLM_OK, "synth again: %s", err.message);
    CHECK(same_file(path_in("llama.gguf"), path_in("llama-again.gguf")), "same seed, same file");
    p = (plm_synth_params){"test-llama-tiny", VOCAB, path_in("llama-seed2.gguf"), false, 2};
    CHECK(plm_synth(&p, &err) == PLM_OK, "synth seed 2: %s", err.message);
    CHECK(!same_file(path_in("llama.gguf"), path_in("llama-seed2.gguf")), "other seed, other file");

    /* Sparse: the same header, the same size, no weights (the data reads as
     * zeros and takes no disk blocks). */
    p = (plm_synth_params){"test-llama-tiny", VOCAB, path_in("sparse.gguf"), false, 1};
    CHECK(plm_synth_sparse(&p, &err) == PLM_OK, "synth sparse: %s", err.message);
    check_sparse(path_in("llama.gguf"), path_in("sparse.gguf"));

    /* Errors: clean messages, no file. */
    p = (plm_synth_params){"llama-9000b", VOCAB, path_in("bad.gguf"), false, 1};
    CHECK(plm_synth(&p, &err) == PLM_ERR_INVALID_ARG, "unknown shape refused");
    CHECK(strstr(err.message, "llama-9000b") && strstr(err.message, "qwen2.5-7b") &&
          strstr(err.message, "tinyllama-1.1b"), "message lists shapes: %s", err.message);
    CHECK(!exists(path_in("bad.gguf")), "no file for an unknown shape");
    p = (plm_synth_params){"test-llama-tiny", path_in("missing.gguf"), path_in("bad.gguf"), false, 1};
    CHECK(plm_synth(&p, &err) == PLM_ERR_IO, "missing vocab: %s", err.message);
    CHECK(strstr(err.message, "missing.gguf") != NULL, "message names the vocab: %s", err.message);
    CHECK(!exists(path_in("bad.gguf")), "no file for a missing vocab");
    /* A vocabulary that is not GGUF at all. */
    FILE *junk = fopen(path_in("junk.gguf"), "wb");
    if (junk) {
        fputs("this is not a gguf file, just some text long enough to read", junk);
        fclose(junk);
    }
    p = (plm_synth_params){"test-llama-tiny", path_in("junk.gguf"), path_in("bad.gguf"), false, 1};
    CHECK(plm_synth(&p, &err) == PLM_ERR_FORMAT, "junk vocab: %s", err.message);
    CHECK(!exists(path_in("bad.gguf")), "no file for a junk vocab");
    p = (plm_synth_params){"test-llama-tiny", VOCAB, path_in("no/such/dir/out.gguf"), false, 1};
    CHECK(plm_synth(&p, &err) == PLM_ERR_IO, "unwritable output: %s", err.message);
    CHECK(err.message[0] != 0, "unwritable output has a message");
    p = (plm_synth_params){NULL, VOCAB, path_in("bad.gguf"), false, 1};
    CHECK(plm_synth(&p, &err) == PLM_ERR_INVALID_ARG, "NULL shape");
    CHECK(plm_synth(NULL, &err) == PLM_ERR_INVALID_ARG, "NULL params");

    /* A GGUF that parses but has no tokenizer: write one with the writer. */
    plm_gguf_writer *w = plm_gguf_writer_new();
    plm_gguf_writer_set_str(w, "general.architecture", "llama");
    CHECK(plm_gguf_writer_write(w, path_in("notok.gguf"), NULL, NULL, &err) == PLM_OK, "write notok: %s",
          err.message);
    plm_gguf_writer_free(w);
    p = (plm_synth_params){"test-llama-tiny", path_in("notok.gguf"), path_in("bad.gguf"), false, 1};
    CHECK(plm_synth(&p, &err) == PLM_ERR_FORMAT, "vocab without tokens: %s", err.message);
    CHECK(strstr(err.message, "tokenizer.ggml.tokens") != NULL, "names the key: %s", err.message);
    CHECK(!exists(path_in("bad.gguf")), "no file for a vocab without tokens");

    /* The command. */
    CHECK(run_cli("--list") == 0 && file_contains(path_in("cli.txt"), "qwen2.5-0.5b"), "synth --list");
    CHECK(run_cli("--help") == 0 && file_contains(path_in("cli.txt"), "--seed") &&
          file_contains(path_in("cli.txt"), "default: 42"), "synth --help");
    char args[1024];
    snprintf(args, sizeof args, "test-llama-tiny --vocab %s -o %s --seed 1", VOCAB, path_in("cli.gguf"));
    CHECK(run_cli(args) == 0, "synth via the command");
    CHECK(same_file(path_in("llama.gguf"), path_in("cli.gguf")), "command output = library output");
    snprintf(args, sizeof args, "test-llama-tiny --sparse --vocab %s -o %s --seed 1", VOCAB, path_in("cli-sparse.gguf"));
    CHECK(run_cli(args) == 0, "synth --sparse via the command");
    CHECK(same_file(path_in("sparse.gguf"), path_in("cli-sparse.gguf")), "command --sparse = plm_synth_sparse");
    snprintf(args, sizeof args, "nope --vocab %s -o %s", VOCAB, path_in("bad.gguf"));
    CHECK(run_cli(args) == 1 && file_contains(path_in("cli.txt"), "unknown shape"), "command: unknown shape");
    CHECK(run_cli("test-llama-tiny") == 1, "command: missing options");

    plm_gguf_close(vocab);
    const char *files[] = {"llama.gguf", "qwen2.gguf", "qwen2-f32.gguf", "llama-again.gguf",
                           "llama-seed2.gguf", "junk.gguf", "notok.gguf", "cli.gguf", "cli.txt",
                           "sparse.gguf", "cli-sparse.gguf", "bad.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) remove(path_in(files[i]));
    rmdir(dir);
    return test_summary();
}
