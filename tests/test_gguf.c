/*
 * GGUF reader/writer tests.
 *
 * Facts asserted about the shared models were read from the raw bytes by an
 * independent script (Python struct), not by this reader.  Hostile inputs
 * are parsed from malloc'd copies of exactly their length, so a sanitizer
 * build catches any read past the end.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pocketlm_gguf.h"
#include "quant/types.h"
#include "test.h"

/* ---- helpers -------------------------------------------------------------- */

static uint8_t *slurp(const char *path, uint64_t *size) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, fp) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(fp);
    *size = (uint64_t)n;
    return b;
}

/* Parses an exact-length heap copy of b[0..len); returns the error code (PLM_OK
 * if it parsed, after closing it).  Every failure must be a clean message. */
static plm_status parse_copy(const uint8_t *b, uint64_t len, plm_error *err) {
    uint8_t *copy = malloc(len ? (size_t)len : 1);
    if (len) memcpy(copy, b, (size_t)len);
    err->code = PLM_OK;
    err->message[0] = '\0';
    plm_gguf_file *f = plm_gguf_parse(copy, len, err);
    plm_status st = f ? PLM_OK : err->code;
    plm_gguf_close(f);
    free(copy);
    return st;
}

static bool clean_format_error(plm_status st, const plm_error *err) {
    return (st == PLM_ERR_FORMAT || st == PLM_ERR_UNSUPPORTED) && strstr(err->message, "at byte") != NULL;
}

static uint64_t peak_rss_kb(void) {
    FILE *fp = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kb = 0;
    while (fp && fgets(line, sizeof line, fp))
        if (!strncmp(line, "VmHWM:", 6)) kb = strtoull(line + 6, NULL, 10);
    if (fp) fclose(fp);
    return kb;
}

/* Touches every byte a parsed file points at (for the sanitizers). */
static uint64_t touch_value(const plm_gguf_value *v) {
    uint64_t sum = 0;
    if (v->type == PLM_GGUF_TYPE_STRING) {
        for (uint64_t i = 0; i < v->v.str.len; i++) sum += (uint8_t)v->v.str.ptr[i];
    } else if (v->type == PLM_GGUF_TYPE_ARRAY) {
        const plm_gguf_array *a = &v->v.arr;
        if (a->items) {
            for (uint64_t i = 0; i < a->n; i++) sum += touch_value(&a->items[i]);
        } else {
            for (uint64_t i = 0; i < a->n; i++) sum += (uint64_t)plm_gguf_arr_i64(a, i);
        }
    }
    return sum;
}

static uint64_t touch_file(const plm_gguf_file *f) {
    uint64_t sum = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        for (uint64_t j = 0; j < f->kv[i].key.len; j++) sum += (uint8_t)f->kv[i].key.ptr[j];
        sum += touch_value(&f->kv[i].value);
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const uint8_t *d = f->tensors[i].data;
        sum += d[0] + d[f->tensors[i].nbytes - 1];
    }
    return sum;
}

static bool values_equal(const plm_gguf_value *a, const plm_gguf_value *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case PLM_GGUF_TYPE_STRING:
        return a->v.str.len == b->v.str.len && !memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len);
    case PLM_GGUF_TYPE_ARRAY: {
        const plm_gguf_array *x = &a->v.arr, *y = &b->v.arr;
        if (x->type != y->type || x->n != y->n) return false;
        if (x->type == PLM_GGUF_TYPE_STRING || x->type == PLM_GGUF_TYPE_ARRAY) {
            for (uint64_t i = 0; i < x->n; i++)
                if (!values_equal(&x->items[i], &y->items[i])) return false;
            return true;
        }
        for (uint64_t i = 0; i < x->n; i++)
            if (plm_gguf_arr_f64(x, i) != plm_gguf_arr_f64(y, i) || plm_gguf_arr_i64(x, i) != plm_gguf_arr_i64(y, i)) return false;
        return true;
    }
    case PLM_GGUF_TYPE_FLOAT32: case PLM_GGUF_TYPE_FLOAT64:
        return memcmp(&a->v.f64, &b->v.f64, sizeof(double)) == 0;
    case PLM_GGUF_TYPE_BOOL:
        return a->v.b == b->v.b;
    default:
        return a->v.u64 == b->v.u64;
    }
}

static bool files_equal(const char *p, const char *q) {
    uint64_t n1, n2;
    uint8_t *a = slurp(p, &n1), *b = slurp(q, &n2);
    bool eq = a && b && n1 == n2 && !memcmp(a, b, (size_t)n1);
    free(a);
    free(b);
    return eq;
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* ---- a tiny GGUF builder, independent of the writer under test ------------ */

typedef struct {
    uint8_t b[8192];
    size_t n;
} gbuf;

static void gb_put(gbuf *g, const void *p, size_t n) { memcpy(g->b + g->n, p, n); g->n += n; }
static size_t gb_u32(gbuf *g, uint32_t v) { size_t at = g->n; gb_put(g, &v, 4); return at; }
static size_t gb_u64(gbuf *g, uint64_t v) { size_t at = g->n; gb_put(g, &v, 8); return at; }
static size_t gb_str(gbuf *g, const char *s) { size_t at = gb_u64(g, strlen(s)); gb_put(g, s, strlen(s)); return at; }

typedef struct {
    uint32_t version;
    int alignment;       /* 0: no general.alignment key; < 0: key of type str */
    bool dup_key, dup_tensor;
    uint64_t t1_offset;  /* 0: the right one */
    int nest;            /* > 0: add a key holding arrays nested this deep */
} mini_opts;

/* Byte offsets of the fields the mutation tests overwrite. */
typedef struct {
    size_t n_tensors, n_kv, key_len, str_len, value_type, elem_type, arr_count, inner_count;
    size_t t_name_len, n_dims, ne0, ne1, t_type, t1_offset;
    size_t size, data_offset;
} mini_layout;

/* Two tensors: w0 Q8_0 [32, 2] (68 bytes) and w1 F32 [4] (16 bytes). */
static mini_layout build_mini(gbuf *g, mini_opts o) {
    mini_layout L = {0};
    uint32_t align = o.alignment > 0 ? (uint32_t)o.alignment : 32;
    g->n = 0;
    gb_put(g, "GGUF", 4);
    gb_u32(g, o.version ? o.version : 3);
    L.n_tensors = gb_u64(g, 2);
    L.n_kv = gb_u64(g, 5 + (o.alignment != 0) + (o.nest > 0));
    L.key_len = gb_str(g, "general.architecture");
    gb_u32(g, PLM_GGUF_TYPE_STRING);
    L.str_len = gb_str(g, "llama");
    gb_str(g, o.dup_key ? "general.architecture" : "a.u32");
    L.value_type = gb_u32(g, PLM_GGUF_TYPE_UINT32);
    gb_u32(g, 7);
    gb_str(g, "a.strs");
    gb_u32(g, PLM_GGUF_TYPE_ARRAY);
    L.elem_type = gb_u32(g, PLM_GGUF_TYPE_STRING);
    L.arr_count = gb_u64(g, 3);
    gb_str(g, "x"), gb_str(g, "yy"), gb_str(g, "zzz");
    gb_str(g, "a.nested");
    gb_u32(g, PLM_GGUF_TYPE_ARRAY);
    gb_u32(g, PLM_GGUF_TYPE_ARRAY);
    gb_u64(g, 2);
    gb_u32(g, PLM_GGUF_TYPE_UINT32);
    L.inner_count = gb_u64(g, 3);
    gb_u32(g, 1), gb_u32(g, 2), gb_u32(g, 3);
    gb_u32(g, PLM_GGUF_TYPE_INT8);
    gb_u64(g, 2);
    int8_t i8s[2] = {-1, 5};
    gb_put(g, i8s, 2);
    gb_str(g, "a.f32s");
    gb_u32(g, PLM_GGUF_TYPE_ARRAY);
    gb_u32(g, PLM_GGUF_TYPE_FLOAT32);
    gb_u64(g, 2);
    float f32s[2] = {1.5f, -2.0f};
    gb_put(g, f32s, 8);
    if (o.alignment > 0) {
        gb_str(g, "general.alignment");
        gb_u32(g, PLM_GGUF_TYPE_UINT32);
        gb_u32(g, (uint32_t)o.alignment);
    } else if (o.alignment < 0) {
        gb_str(g, "general.alignment");
        gb_u32(g, PLM_GGUF_TYPE_STRING);
        gb_str(g, "32");
    }
    if (o.nest > 0) {
        gb_str(g, "a.deep");
        gb_u32(g, PLM_GGUF_TYPE_ARRAY);
        for (int d = 1; d < o.nest; d++) gb_u32(g, PLM_GGUF_TYPE_ARRAY), gb_u64(g, 1);
        gb_u32(g, PLM_GGUF_TYPE_UINT32), gb_u64(g, 1), gb_u32(g, 42);
    }
    L.t_name_len = gb_str(g, "w0");
    L.n_dims = gb_u32(g, 2);
    L.ne0 = gb_u64(g, 32);
    L.ne1 = gb_u64(g, 2);
    L.t_type = gb_u32(g, PLM_TYPE_Q8_0);
    gb_u64(g, 0);
    gb_str(g, o.dup_tensor ? "w0" : "w1");
    gb_u32(g, 1);
    gb_u64(g, 4);
    gb_u32(g, PLM_TYPE_F32);
    uint64_t off1 = (68 + align - 1) / align * align;
    L.t1_offset = gb_u64(g, o.t1_offset ? o.t1_offset : off1);
    while (g->n % align) g->b[g->n++] = 0;
    L.data_offset = g->n;
    for (int i = 0; i < 68; i++) g->b[g->n++] = (uint8_t)i;
    while ((g->n - L.data_offset) % align) g->b[g->n++] = 0;
    float w1[4] = {1, 2, 3, 4};
    gb_put(g, w1, 16);
    L.size = g->n;
    return L;
}

/* ---- real files --------------------------------------------------------------- */

static void test_stories(void) {
    plm_error err;
    plm_gguf_open_params p = {.use_mmap = true};
    plm_gguf_file *f = plm_gguf_open(SHARED("models/stories260K.gguf"), &p, &err);
    CHECK(f != NULL, "open stories260K: %s", err.message);
    if (!f) return;
    CHECK(f->version == 3 && f->n_kv == 19 && f->n_tensors == 48, "header %u %" PRIu64 " %" PRIu64,
          f->version, f->n_kv, f->n_tensors);
    CHECK(f->alignment == 32 && f->data_offset == 14176 && f->size == 1185376, "layout");
    CHECK(f->mapped && f->owns_image, "mapped");
    plm_gguf_str s;
    CHECK(plm_gguf_get_str(f, "general.architecture", &s) && plm_gguf_str_eq(s, "llama"), "arch");
    uint32_t u = 0;
    CHECK(plm_gguf_get_u32(f, "llama.embedding_length", &u) && u == 64, "n_embd %u", u);
    CHECK(plm_gguf_get_u32(f, "llama.block_count", &u) && u == 5, "block_count %u", u);
    CHECK(plm_gguf_get_u32(f, "llama.feed_forward_length", &u) && u == 172, "n_ff %u", u);
    CHECK(plm_gguf_get_u32(f, "llama.attention.head_count_kv", &u) && u == 4, "n_head_kv %u", u);
    CHECK(plm_gguf_get_u32(f, "tokenizer.ggml.seperator_token_id", &u) && u == 4294967295u, "sep %u", u);
    int64_t i64 = 0;
    CHECK(plm_gguf_get_i64(f, "llama.context_length", &i64) && i64 == 2048, "ctx %" PRId64, i64);
    float eps = 0;
    CHECK(plm_gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &eps) && eps == 9.99999974738e-06f, "eps %g", eps);
    CHECK(!plm_gguf_get_str(f, "llama.block_count", &s), "u32 is not a string");
    CHECK(!plm_gguf_get_u32(f, "no.such.key", &u), "absent key");
    CHECK(plm_gguf_find_kv(f, "general.name") == &f->kv[5], "kv order");

    const plm_gguf_array *tok = plm_gguf_get_arr(f, "tokenizer.ggml.tokens");
    CHECK(tok && tok->type == PLM_GGUF_TYPE_STRING && tok->n == 512, "tokens");
    if (tok) {
        CHECK(plm_gguf_str_eq(plm_gguf_arr_str(tok, 0), "<unk>") && plm_gguf_str_eq(plm_gguf_arr_str(tok, 2), "</s>"), "tok 0/2");
        CHECK(plm_gguf_str_eq(plm_gguf_arr_str(tok, 300), "\xe2\x96\x81ha"), "tok 300");
        CHECK(plm_gguf_str_eq(plm_gguf_arr_str(tok, 511), "\xe2\x80\x8a"), "tok 511");
        CHECK(plm_gguf_arr_str(tok, 512).ptr == NULL, "tok out of range");
    }
    const plm_gguf_array *sc = plm_gguf_get_arr(f, "tokenizer.ggml.scores");
    CHECK(sc && sc->type == PLM_GGUF_TYPE_FLOAT32 && sc->n == 512 && plm_gguf_arr_f64(sc, 300) == -41.0, "scores");
    const plm_gguf_array *tt = plm_gguf_get_arr(f, "tokenizer.ggml.token_type");
    CHECK(tt && tt->type == PLM_GGUF_TYPE_INT32 && plm_gguf_arr_i64(tt, 0) == 2 && plm_gguf_arr_i64(tt, 300) == 1, "token_type");

    const plm_gguf_tensor *t = plm_gguf_find_tensor(f, "token_embd.weight");
    CHECK(t && t->type == PLM_TYPE_F32 && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 512 && t->ne[2] == 1 &&
          t->offset == 0 && t->nbytes == 131072, "token_embd");
    if (t) {
        float x[2];
        memcpy(x, t->data, sizeof x);
        CHECK(x[0] == -0.29474878311157227f && x[1] == 0.5618956089019775f, "token_embd data %g %g", x[0], x[1]);
        CHECK((const uint8_t *)t->data == f->image + 14176, "data pointer");
    }
    CHECK(plm_gguf_find_tensor_index(f, "blk.4.ffn_norm.weight") == 47, "last tensor index");
    t = plm_gguf_find_tensor(f, "blk.4.ffn_norm.weight");
    CHECK(t && t->n_dims == 1 && t->ne[0] == 64 && t->offset == 1170944 &&
          f->data_offset + t->offset + t->nbytes == f->size, "last tensor");
    if (t) {
        float x;
        memcpy(&x, (const float *)t->data + 63, 4);
        CHECK(x == 1.234261155128479f, "last value %g", x);
    }
    CHECK(plm_gguf_find_tensor(f, "nope") == NULL && plm_gguf_find_tensor_index(f, "nope") == -1, "absent tensor");
    plm_gguf_close(f);

    /* The same without mmap, and with mlock (which may fail: never fatal). */
    p = (plm_gguf_open_params){.use_mmap = false, .use_mlock = true};
    f = plm_gguf_open(SHARED("models/stories260K.gguf"), &p, &err);
    CHECK(f && !f->mapped && f->owns_image && f->n_tensors == 48, "no-mmap open: %s", f ? "" : err.message);
    plm_gguf_close(f);
    f = plm_gguf_open(SHARED("models/stories260K.gguf"), NULL, &err);
    CHECK(f && f->mapped, "default params map");
    plm_gguf_close(f);
}

typedef struct {
    const char *file, *arch;
    uint64_t n_kv, n_tensors, data_offset;
    int embd_type, q_type, out_type; /* -1: no output.weight */
} fixture_fact;

static const fixture_fact fixtures[] = {
    {"fixture-llama-Q2_K.gguf", "llama", 22, 39, 13760, 10, 10, 14},
    {"fixture-llama-Q3_K_M.gguf", "llama", 22, 39, 13760, 11, 11, 14},
    {"fixture-llama-Q4_K_M.gguf", "llama", 22, 39, 13760, 12, 12, 14},
    {"fixture-llama-Q5_K_M.gguf", "llama", 22, 39, 13760, 13, 13, 14},
    {"fixture-llama-f16.gguf", "llama", 21, 39, 13728, 1, 1, 1},
    {"fixture-llama-pure-IQ4_NL.gguf", "llama", 22, 39, 13760, 20, 20, 20},
    {"fixture-llama-pure-IQ4_XS.gguf", "llama", 22, 39, 13760, 23, 23, 23},
    {"fixture-llama-pure-Q2_K.gguf", "llama", 22, 39, 13760, 10, 10, 10},
    {"fixture-llama-pure-Q3_K_S.gguf", "llama", 22, 39, 13760, 11, 11, 11},
    {"fixture-llama-pure-Q4_0.gguf", "llama", 22, 39, 13760, 2, 2, 2},
    {"fixture-llama-pure-Q4_1.gguf", "llama", 22, 39, 13760, 3, 3, 3},
    {"fixture-llama-pure-Q4_K_S.gguf", "llama", 22, 39, 13760, 12, 12, 12},
    {"fixture-llama-pure-Q5_0.gguf", "llama", 22, 39, 13760, 6, 6, 6},
    {"fixture-llama-pure-Q5_1.gguf", "llama", 22, 39, 13760, 7, 7, 7},
    {"fixture-llama-pure-Q5_K_S.gguf", "llama", 22, 39, 13760, 13, 13, 13},
    {"fixture-llama-pure-Q6_K.gguf", "llama", 22, 39, 13760, 14, 14, 14},
    {"fixture-llama-pure-Q8_0.gguf", "llama", 22, 39, 13760, 8, 8, 8},
    {"fixture-qwen2-Q4_K_M.gguf", "qwen2", 22, 50, 14304, 14, 12, -1},
    {"fixture-qwen2-f16.gguf", "qwen2", 21, 50, 14272, 1, 1, -1},
    {"fixture-qwen2-pure-Q6_K.gguf", "qwen2", 22, 50, 14304, 14, 14, -1},
    {"fixture-qwen2-pure-Q8_0.gguf", "qwen2", 22, 50, 14304, 8, 8, -1},
};

/* Generic facts: tensors inside the file and the last one ending at its end
 * (up to padding), names found by lookup, sizes as ggml computes them. */
static void check_tensors_sane(const plm_gguf_file *f, const char *name) {
    uint64_t max_end = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const plm_gguf_tensor *t = &f->tensors[i];
        const plm_type_info *ti = plm_type_info_get(t->type);
        uint64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        char nm[128];
        plm_gguf_str_copy(t->name, nm, sizeof nm);
        CHECK(ti && t->nbytes == n / ti->block_size * ti->type_size, "%s: %s size", name, nm);
        CHECK(plm_gguf_find_tensor(f, nm) == t, "%s: lookup %s", name, nm);
        CHECK(t->offset % f->alignment == 0, "%s: %s aligned", name, nm);
        uint64_t end = f->data_offset + t->offset + t->nbytes;
        CHECK(end <= f->size, "%s: %s inside", name, nm);
        if (end > max_end) max_end = end;
    }
    CHECK(f->n_tensors == 0 || f->size - max_end < f->alignment, "%s: data fills the file", name);
}

static void test_fixtures(void) {
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        const fixture_fact *fx = &fixtures[i];
        char path[512];
        snprintf(path, sizeof path, "%s/%s", SHARED("models/fixtures"), fx->file);
        plm_error err;
        plm_gguf_open_params p = {.use_mmap = i % 2 == 0};
        plm_gguf_file *f = plm_gguf_open(path, &p, &err);
        CHECK(f != NULL, "%s: %s", fx->file, err.message);
        if (!f) continue;
        plm_gguf_str s;
        uint32_t u = 0;
        CHECK(f->n_kv == fx->n_kv && f->n_tensors == fx->n_tensors && f->data_offset == fx->data_offset,
              "%s: counts", fx->file);
        CHECK(plm_gguf_get_str(f, "general.architecture", &s) && plm_gguf_str_eq(s, fx->arch), "%s: arch", fx->file);
        char key[64];
        snprintf(key, sizeof key, "%s.embedding_length", fx->arch);
        CHECK(plm_gguf_get_u32(f, key, &u) && u == 256, "%s: n_embd", fx->file);
        snprintf(key, sizeof key, "%s.block_count", fx->arch);
        CHECK(plm_gguf_get_u32(f, key, &u) && u == 4, "%s: n_layer", fx->file);
        const plm_gguf_array *tok = plm_gguf_get_arr(f, "tokenizer.ggml.tokens");
        CHECK(tok && tok->n == 512, "%s: vocab", fx->file);
        const plm_gguf_tensor *te = plm_gguf_find_tensor(f, "token_embd.weight");
        const plm_gguf_tensor *q = plm_gguf_find_tensor(f, "blk.0.attn_q.weight");
        const plm_gguf_tensor *out = plm_gguf_find_tensor(f, "output.weight");
        CHECK(te && te->ne[0] == 256 && te->ne[1] == 512 && (int)te->type == fx->embd_type, "%s: token_embd", fx->file);
        CHECK(q && q->ne[0] == 256 && q->ne[1] == 256 && (int)q->type == fx->q_type, "%s: attn_q", fx->file);
        CHECK(fx->out_type < 0 ? out == NULL : out && (int)out->type == fx->out_type, "%s: output", fx->file);
        check_tensors_sane(f, fx->file);
        plm_gguf_close(f);
    }
}

static void test_vocabs(void) {
    static const struct { const char *file, *model; uint64_t n_kv, n_tokens, n_merges; const char *tok100; } v[] = {
        {"ggml-vocab-deepseek-coder.gguf", "gpt2", 25, 32256, 31757, "\xc2\xa7"},
        {"ggml-vocab-gpt-2.gguf", "gpt2", 16, 50257, 50000, "\xc2\xa7"},
        {"ggml-vocab-llama-spm.gguf", "llama", 22, 32000, 0, "<0x61>"},
        {"ggml-vocab-phi-3.gguf", "llama", 26, 32064, 0, "<0x61>"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", SHARED("vocab"), v[i].file);
        plm_error err;
        plm_gguf_file *f = plm_gguf_open(path, NULL, &err);
        CHECK(f != NULL, "%s: %s", v[i].file, err.message);
        if (!f) continue;
        plm_gguf_str s;
        CHECK(f->n_tensors == 0 && f->n_kv == v[i].n_kv, "%s: counts", v[i].file);
        /* These files end right after their last key, without padding. */
        CHECK(f->data_offset <= f->size, "%s: data offset", v[i].file);
        CHECK(plm_gguf_get_str(f, "tokenizer.ggml.model", &s) && plm_gguf_str_eq(s, v[i].model), "%s: model", v[i].file);
        const plm_gguf_array *tok = plm_gguf_get_arr(f, "tokenizer.ggml.tokens");
        CHECK(tok && tok->n == v[i].n_tokens && plm_gguf_str_eq(plm_gguf_arr_str(tok, 100), v[i].tok100), "%s: tokens", v[i].file);
        const plm_gguf_array *m = plm_gguf_get_arr(f, "tokenizer.ggml.merges");
        CHECK(v[i].n_merges ? m && m->n == v[i].n_merges : m == NULL, "%s: merges", v[i].file);
        plm_gguf_close(f);
    }
    plm_error err;
    plm_gguf_file *f = plm_gguf_open(SHARED("vocab/ggml-vocab-gpt-2.gguf"), NULL, &err);
    const plm_gguf_array *m = f ? plm_gguf_get_arr(f, "tokenizer.ggml.merges") : NULL;
    CHECK(m && plm_gguf_str_eq(plm_gguf_arr_str(m, 0), "\xc4\xa0 t"), "gpt-2 merge 0");
    plm_gguf_close(f);
}

static void test_open_errors(void) {
    plm_error err;
    plm_gguf_file *f = plm_gguf_open("/nonexistent/x.gguf", NULL, &err);
    CHECK(!f && err.code == PLM_ERR_IO && strstr(err.message, "/nonexistent/x.gguf") &&
          strstr(err.message, strerror(ENOENT)), "missing file: %s", err.message);
    f = plm_gguf_open("/tmp", NULL, &err);
    CHECK(!f && err.code == PLM_ERR_IO, "directory: %s", err.message);
    f = plm_gguf_open(SHARED("models/README.md"), NULL, &err);
    CHECK(!f && err.code == PLM_ERR_FORMAT && strstr(err.message, "magic") && strstr(err.message, "README.md"),
          "not gguf: %s", err.message);
}

/* ---- hostile input -------------------------------------------------------------- */

static void test_truncation(void) {
    uint64_t size;
    uint8_t *b = slurp(SHARED("models/stories260K.gguf"), &size);
    CHECK(b != NULL, "read stories260K");
    if (!b) return;
    plm_error err;
    const uint64_t data_offset = 14176; /* end of tensor infos is 14152; padding follows */
    int bad = 0;
    for (uint64_t len = 0; len <= data_offset; len++) {
        plm_status st = parse_copy(b, len, &err);
        if (!clean_format_error(st, &err) && bad++ < 5) CHECK(false, "truncated at %" PRIu64 ": %d %s", len, st, err.message);
    }
    for (uint64_t len = data_offset + 1; len < size; len += 4093) {
        plm_status st = parse_copy(b, len, &err);
        if (!clean_format_error(st, &err) && bad++ < 10) CHECK(false, "truncated at %" PRIu64 ": %d %s", len, st, err.message);
    }
    CHECK(bad == 0, "%d truncations did not fail cleanly", bad);
    CHECK(clean_format_error(parse_copy(b, size - 1, &err), &err), "one byte short: %s", err.message);
    CHECK(parse_copy(b, size, &err) == PLM_OK, "whole file: %s", err.message);
    parse_copy(b, 5000, &err);
    CHECK(strstr(err.message, "kv ") != NULL, "truncation names the kv: %s", err.message);
    free(b);

    gbuf g;
    mini_layout L = build_mini(&g, (mini_opts){0});
    CHECK(parse_copy(g.b, L.size, &err) == PLM_OK, "mini parses: %s", err.message);
    bad = 0;
    for (uint64_t len = 0; len < L.size; len++)
        if (!clean_format_error(parse_copy(g.b, len, &err), &err)) bad++;
    CHECK(bad == 0, "%d mini truncations did not fail cleanly", bad);
}

static void test_mini_values(void) {
    gbuf g;
    mini_layout L = build_mini(&g, (mini_opts){0});
    plm_error err;
    plm_gguf_file *f = plm_gguf_parse(g.b, L.size, &err);
    CHECK(f != NULL, "mini: %s", err.message);
    if (!f) return;
    uint32_t u = 0;
    int64_t i = 0;
    float x = 0;
    CHECK(plm_gguf_get_u32(f, "a.u32", &u) && u == 7 && plm_gguf_get_i64(f, "a.u32", &i) && i == 7, "u32");
    CHECK(plm_gguf_get_f32(f, "a.u32", &x) && x == 7.0f, "u32 as f32");
    bool b;
    CHECK(!plm_gguf_get_bool(f, "a.u32", &b), "u32 is not bool");
    const plm_gguf_array *a = plm_gguf_get_arr(f, "a.strs");
    CHECK(a && a->n == 3 && plm_gguf_str_eq(plm_gguf_arr_str(a, 1), "yy") && plm_gguf_str_eq(plm_gguf_arr_str(a, 2), "zzz"), "strs");
    a = plm_gguf_get_arr(f, "a.nested");
    CHECK(a && a->type == PLM_GGUF_TYPE_ARRAY && a->n == 2 && a->items, "nested");
    if (a && a->items) {
        const plm_gguf_array *a0 = &a->items[0].v.arr, *a1 = &a->items[1].v.arr;
        CHECK(a->items[0].type == PLM_GGUF_TYPE_ARRAY && a0->type == PLM_GGUF_TYPE_UINT32 && a0->n == 3 &&
              plm_gguf_arr_i64(a0, 2) == 3, "nested[0]");
        CHECK(a1->type == PLM_GGUF_TYPE_INT8 && plm_gguf_arr_i64(a1, 0) == -1 && plm_gguf_arr_f64(a1, 1) == 5.0, "nested[1]");
        CHECK(plm_gguf_arr_i64(a0, 3) == 0, "out of range element");
    }
    a = plm_gguf_get_arr(f, "a.f32s");
    CHECK(a && plm_gguf_arr_f64(a, 0) == 1.5 && plm_gguf_arr_i64(a, 1) == -2, "f32s");
    CHECK(f->data_offset == L.data_offset && f->tensors[0].nbytes == 68 && f->tensors[1].offset == 96, "mini layout");
    float w1[4];
    memcpy(w1, f->tensors[1].data, 16);
    CHECK(w1[3] == 4.0f, "mini data");
    char buf[4];
    CHECK(!strcmp(plm_gguf_str_copy(f->kv[0].key, buf, sizeof buf), "gen"), "str_copy truncates");
    plm_gguf_close(f);

    /* Version 2 parses too; 1 and big-endian are cleanly unsupported. */
    L = build_mini(&g, (mini_opts){.version = 2});
    CHECK(parse_copy(g.b, L.size, &err) == PLM_OK, "v2: %s", err.message);
    L = build_mini(&g, (mini_opts){.version = 1});
    CHECK(parse_copy(g.b, L.size, &err) == PLM_ERR_UNSUPPORTED && strstr(err.message, "version 1"), "v1: %s", err.message);
    L = build_mini(&g, (mini_opts){.version = 0x03000000});
    CHECK(parse_copy(g.b, L.size, &err) == PLM_ERR_UNSUPPORTED && strstr(err.message, "big-endian"), "BE: %s", err.message);
    L = build_mini(&g, (mini_opts){0});
    g.b[0] = 'X';
    CHECK(parse_copy(g.b, L.size, &err) == PLM_ERR_FORMAT && strstr(err.message, "magic"), "magic: %s", err.message);

    /* Structural rules. */
    L = build_mini(&g, (mini_opts){.dup_key = true});
    CHECK(parse_copy(g.b, L.size, &err) == PLM_ERR_FORMAT && strstr(err.message, "duplicate key") &&
          strstr(err.message, "kv 1"), "dup key: %s", err.message);
    L = build_mini(&g, (mini_opts){.dup_tensor = true});
    CHECK(parse_copy(g.b, L.size, &err) == PLM_ERR_FORMAT && strstr(err.message, "duplicate tensor name"),
          "dup tensor: %s", err.message);
    L = build_mini(&g, (mini_opts){.alignment = 64});
    f = plm_gguf_parse(g.b, L.size, &err);
    CHECK(f && f->alignment == 64 && f->data_offset % 64 == 0 && f->tensors[1].offset == 128, "alignment 64");
    plm_gguf_close(f);
    int bad_align[] = {48, 3, -1};
    for (size_t k = 0; k < 3; k++) {
        L = build_mini(&g, (mini_opts){.alignment = bad_align[k]});
        CHECK(parse_copy(g.b, L.size, &err) == PLM_ERR_FORMAT && strstr(err.message, "general.alignment"),
              "alignment %d: %s", bad_align[k], err.message);
    }
    L = build_mini(&g, (mini_opts){.t1_offset = 80});
    CHECK(parse_copy(g.b, L.size, &err) == PLM_ERR_FORMAT && strstr(err.message, "alignment"), "misaligned: %s", err.message);
    L = build_mini(&g, (mini_opts){.t1_offset = 128});
    CHECK(parse_copy(g.b, L.size, &err) == PLM_ERR_FORMAT && strstr(err.message, "tensor 1 ('w1')") &&
          strstr(err.message, "past the end"), "data past end: %s", err.message);
    uint64_t ne0 = 48; /* Q8_0 rows come in blocks of 32 */
    L = build_mini(&g, (mini_opts){0});
    memcpy(g.b + L.ne0, &ne0, 8);
    CHECK(parse_copy(g.b, L.size, &err) == PLM_ERR_FORMAT && strstr(err.message, "block size"), "block: %s", err.message);

    /* Nesting: 8 levels parse, 9 do not (nor does an absurd depth). */
    L = build_mini(&g, (mini_opts){.nest = 8});
    f = plm_gguf_parse(g.b, L.size, &err);
    CHECK(f != NULL, "nest 8: %s", f ? "" : err.message);
    if (f) {
        const plm_gguf_array *d = plm_gguf_get_arr(f, "a.deep");
        for (int k = 1; d && k < 8; k++) d = d->type == PLM_GGUF_TYPE_ARRAY && d->n == 1 ? &d->items[0].v.arr : NULL;
        CHECK(d && d->type == PLM_GGUF_TYPE_UINT32 && plm_gguf_arr_i64(d, 0) == 42, "nest 8 value");
    }
    plm_gguf_close(f);
    L = build_mini(&g, (mini_opts){.nest = 9});
    CHECK(parse_copy(g.b, L.size, &err) == PLM_ERR_FORMAT && strstr(err.message, "nested"), "nest 9: %s", err.message);
    L = build_mini(&g, (mini_opts){.nest = 300});
    CHECK(parse_copy(g.b, L.size, &err) == PLM_ERR_FORMAT && strstr(err.message, "nested"), "nest 300: %s", err.message);
}

static void test_absurd_fields(void) {
    gbuf g;
    mini_layout L = build_mini(&g, (mini_opts){0});
    const struct { size_t at; int width; const char *where; } fields[] = {
        {L.n_tensors, 8, "header"}, {L.n_kv, 8, "header"},
        {L.key_len, 8, "kv 0: key length"}, {L.str_len, 8, "kv 0 ('general.architecture'): string length"},
        {L.value_type, 4, "kv 1 ('a.u32'): value type"}, {L.elem_type, 4, "kv 2 ('a.strs'): array element type"},
        {L.arr_count, 8, "kv 2 ('a.strs'): array count"}, {L.inner_count, 8, "kv 3 ('a.nested')[0]: array count"},
        {L.t_name_len, 8, "tensor 0: tensor name length"}, {L.n_dims, 4, "tensor 0 ('w0'): n_dims"},
        {L.ne0, 8, "tensor 0 ('w0')"}, {L.ne1, 8, "tensor 0 ('w0')"}, {L.t_type, 4, "tensor 0 ('w0')"},
        {L.t1_offset, 8, "tensor 1 ('w1')"},
    };
    const uint64_t values64[] = {UINT64_MAX, 1ull << 62, 0x7fffffff, 0x80000000, 0xffffffff, L.size + 1};
    const uint32_t values32[] = {0xffffffff, 0x7fffffff, 0x80000000, 13, 64, (uint32_t)L.size + 1};
    plm_error err;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        for (size_t j = 0; j < 6; j++) {
            gbuf m = g;
            uint64_t v = fields[i].width == 8 ? values64[j] : values32[j];
            if (fields[i].width == 8) memcpy(m.b + fields[i].at, &values64[j], 8);
            else memcpy(m.b + fields[i].at, &values32[j], 4);
            plm_status st = parse_copy(m.b, L.size, &err);
            CHECK(st == PLM_ERR_FORMAT && strstr(err.message, fields[i].where) && strstr(err.message, "at byte"),
                  "field at %zu = 0x%" PRIx64 ": %d %s", fields[i].at, v, st, err.message);
        }
    }
    /* Messages name the culprit. */
    gbuf m = g;
    uint32_t t = 0x7fffffff;
    memcpy(m.b + L.t_type, &t, 4);
    parse_copy(m.b, L.size, &err);
    CHECK(strstr(err.message, "unknown tensor type id 2147483647") != NULL, "%s", err.message);
    m = g;
    uint64_t zero = 0;
    memcpy(m.b + L.ne1, &zero, 8);
    parse_copy(m.b, L.size, &err);
    char want[64];
    snprintf(want, sizeof want, "dims ne[1]=0 invalid at byte %zu", L.ne1);
    CHECK(strstr(err.message, want) != NULL, "%s", err.message);
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static void fuzz_one(const uint8_t *src, uint64_t size, uint64_t lo, uint64_t hi, uint64_t *seed,
                     int *parsed, int *unclean) {
    uint8_t *m = malloc((size_t)size);
    memcpy(m, src, (size_t)size);
    int n = 1 + (int)(rng_next(seed) % 4);
    for (int k = 0; k < n; k++) {
        uint64_t at = lo + rng_next(seed) % (hi - lo);
        uint64_t r = rng_next(seed);
        if (r & 1) m[at] ^= (uint8_t)(1u << ((r >> 1) % 8));
        else m[at] = (uint8_t)(r >> 8);
    }
    plm_error err;
    plm_gguf_file *f = plm_gguf_parse(m, size, &err);
    if (f) {
        (*parsed)++;
        volatile uint64_t sum = touch_file(f);
        (void)sum;
        plm_gguf_close(f);
    } else if (!clean_format_error(err.code, &err)) {
        if ((*unclean)++ < 5) fprintf(stderr, "fuzz: unclean error %d: %s\n", err.code, err.message);
    }
    free(m);
}

static void test_fuzz(void) {
    gbuf g;
    mini_layout L = build_mini(&g, (mini_opts){.nest = 3});
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int parsed = 0, unclean = 0;
    for (int i = 0; i < 2000; i++) fuzz_one(g.b, L.size, 0, L.data_offset, &seed, &parsed, &unclean);
    CHECK(unclean == 0, "%d unclean fuzz failures", unclean);
    CHECK(parsed > 0 && parsed < 2000, "fuzz: %d of 2000 parsed", parsed);
}

static void test_fuzz_stories(void) {
    uint64_t seed = 0x2545f4914f6cdd1dull;
    int parsed = 0, unclean = 0;
    uint64_t size;
    uint8_t *b = slurp(SHARED("models/stories260K.gguf"), &size);
    if (!b) return;
    for (int i = 0; i < 300; i++) fuzz_one(b, size, 0, 14176, &seed, &parsed, &unclean);
    CHECK(unclean == 0, "%d unclean fuzz failures on stories260K", unclean);
    free(b);
}

/* ---- writer ------------------------------------------------------------------ */

static char tmpdir[64];

static void path_in_tmp(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", tmpdir, name);
}

static void compare_files(const plm_gguf_file *a, const plm_gguf_file *b, const char *what) {
    CHECK(a->n_kv == b->n_kv && a->n_tensors == b->n_tensors, "%s: counts", what);
    if (a->n_kv != b->n_kv || a->n_tensors != b->n_tensors) return;
    for (uint64_t i = 0; i < a->n_kv; i++) {
        CHECK(a->kv[i].key.len == b->kv[i].key.len && !memcmp(a->kv[i].key.ptr, b->kv[i].key.ptr, a->kv[i].key.len) &&
              values_equal(&a->kv[i].value, &b->kv[i].value), "%s: kv %" PRIu64, what, i);
    }
    for (uint64_t i = 0; i < a->n_tensors; i++) {
        const plm_gguf_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        CHECK(x->name.len == y->name.len &&
              !memcmp(x->name.ptr, y->name.ptr, x->name.len) && x->type == y->type && x->n_dims == y->n_dims &&
              !memcmp(x->ne, y->ne, sizeof x->ne) && x->nbytes == y->nbytes &&
              !memcmp(x->data, y->data, (size_t)x->nbytes), "%s: tensor %" PRIu64, what, i);
    }
}

typedef struct {
    const plm_gguf_file *src;
    int calls;
    int fail_at; /* -1: never */
} fill_ctx;

static plm_status fill_from(void *user, uint64_t index, void *dst, uint64_t nbytes, plm_error *err) {
    fill_ctx *c = user;
    c->calls++;
    if ((int)index == c->fail_at) {
        snprintf(err->message, sizeof err->message, "synthetic failure on tensor %" PRIu64, index);
        err->code = PLM_ERR_IO;
        return PLM_ERR_IO;
    }
    if (c->src) {
        memcpy(dst, c->src->tensors[index].data, (size_t)nbytes);
    } else {
        for (uint64_t i = 0; i < nbytes; i++) ((uint8_t *)dst)[i] = (uint8_t)(index * 31 + i);
    }
    return PLM_OK;
}

/* Copies src to out (data by pointer, or by callback) and checks the result. */
static void round_trip(const char *src_path, const char *out_name, bool use_fill, bool identical) {
    plm_error err;
    plm_gguf_file *src = plm_gguf_open(src_path, NULL, &err);
    CHECK(src != NULL, "%s: %s", src_path, err.message);
    if (!src) return;
    plm_gguf_writer *w = plm_gguf_writer_new();
    for (uint64_t i = 0; i < src->n_kv; i++) plm_gguf_writer_copy_kv(w, &src->kv[i]);
    for (uint64_t i = 0; i < src->n_tensors; i++) {
        const plm_gguf_tensor *t = &src->tensors[i];
        char name[128];
        plm_gguf_str_copy(t->name, name, sizeof name);
        plm_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, use_fill ? NULL : t->data);
    }
    char out[256], tmp[300];
    path_in_tmp(out, sizeof out, out_name);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    fill_ctx fc = {.src = src, .fail_at = -1};
    plm_status st = plm_gguf_writer_write(w, out, use_fill ? fill_from : NULL, &fc, &err);
    CHECK(st == PLM_OK, "write %s: %s", out, err.message);
    CHECK(!exists(tmp), "no tmp file left");
    CHECK(!use_fill || fc.calls == (int)src->n_tensors, "fill calls %d", fc.calls);
    plm_gguf_writer_free(w);
    plm_gguf_file *back = plm_gguf_open(out, NULL, &err);
    CHECK(back != NULL, "re-read %s: %s", out, back ? "" : err.message);
    if (back) compare_files(src, back, out_name);
    /* Same keys, tensors, order and alignment as the independent writer that
     * made the source: the files must match byte for byte.  (A file without
     * tensors gets the data-section padding llama.cpp writes; its source
     * lacks it.) */
    if (identical) {
        CHECK(files_equal(src_path, out), "%s is byte-identical to %s", out_name, src_path);
    } else {
        uint64_t n1, n2;
        uint8_t *a = slurp(src_path, &n1), *b = slurp(out, &n2);
        bool ok = a && b && n2 >= n1 && n2 - n1 < 32 && !memcmp(a, b, (size_t)n1) && n2 % 32 == 0;
        for (uint64_t i = n1; ok && i < n2; i++) ok = b[i] == 0;
        CHECK(ok, "%s is %s plus zero padding", out_name, src_path);
        free(a);
        free(b);
    }
    plm_gguf_close(back);
    plm_gguf_close(src);
}

static void test_writer_setters(void) {
    plm_gguf_writer *w = plm_gguf_writer_new();
    plm_gguf_writer_set_u32(w, "x.a", 1);
    plm_gguf_writer_set_str(w, "x.s", "hello");
    plm_gguf_writer_set_i32(w, "x.i", -5);
    plm_gguf_writer_set_u64(w, "x.u64", 1ull << 40);
    plm_gguf_writer_set_f32(w, "x.f", 0.25f);
    plm_gguf_writer_set_bool(w, "x.b", true);
    int32_t arr[3] = {-1, 0, 7};
    plm_gguf_writer_set_arr(w, "x.arr", PLM_GGUF_TYPE_INT32, arr, 3);
    plm_gguf_str strs[2] = {{"ab", 2}, {"c\0d", 3}};
    plm_gguf_writer_set_arr_str(w, "x.strs", strs, 2);
    plm_gguf_writer_set_u32(w, "x.a", 2); /* replaces, keeps position 0 */
    plm_gguf_writer_set_alignment(w, 64);
    uint64_t ne0[2] = {8, 3}, ne1[1] = {64};
    uint8_t q8[68];
    for (int i = 0; i < 68; i++) q8[i] = (uint8_t)(200 - i);
    plm_gguf_writer_add_tensor(w, "t.f32", PLM_TYPE_F32, 2, ne0, NULL);
    plm_gguf_writer_add_tensor(w, "t.q8", PLM_TYPE_Q8_0, 1, ne1, q8);
    char out[256];
    path_in_tmp(out, sizeof out, "setters.gguf");
    plm_error err;
    fill_ctx fc = {.fail_at = -1};
    CHECK(plm_gguf_writer_write(w, out, fill_from, &fc, &err) == PLM_OK, "write: %s", err.message);
    CHECK(fc.calls == 1, "fill called for the tensor without data only");
    plm_gguf_writer_free(w);

    plm_gguf_file *f = plm_gguf_open(out, NULL, &err);
    CHECK(f != NULL, "re-read: %s", f ? "" : err.message);
    if (!f) return;
    CHECK(f->n_kv == 9 && f->n_tensors == 2 && f->alignment == 64 && f->data_offset % 64 == 0, "layout");
    uint32_t u = 0;
    int64_t i = 0;
    float x = 0;
    bool b = false;
    plm_gguf_str s;
    CHECK(plm_gguf_str_eq(f->kv[0].key, "x.a") && plm_gguf_get_u32(f, "x.a", &u) && u == 2, "replaced key");
    CHECK(plm_gguf_get_str(f, "x.s", &s) && plm_gguf_str_eq(s, "hello"), "str");
    CHECK(plm_gguf_get_i64(f, "x.i", &i) && i == -5 && !plm_gguf_get_u32(f, "x.i", &u), "i32");
    CHECK(plm_gguf_get_i64(f, "x.u64", &i) && i == 1ll << 40, "u64");
    CHECK(plm_gguf_get_f32(f, "x.f", &x) && x == 0.25f, "f32");
    CHECK(plm_gguf_get_bool(f, "x.b", &b) && b, "bool");
    const plm_gguf_array *a = plm_gguf_get_arr(f, "x.arr");
    CHECK(a && a->type == PLM_GGUF_TYPE_INT32 && a->n == 3 && plm_gguf_arr_i64(a, 0) == -1 && plm_gguf_arr_i64(a, 2) == 7, "arr");
    a = plm_gguf_get_arr(f, "x.strs");
    CHECK(a && a->n == 2 && plm_gguf_arr_str(a, 1).len == 3 && !memcmp(plm_gguf_arr_str(a, 1).ptr, "c\0d", 3), "arr str");
    CHECK(plm_gguf_get_u32(f, "general.alignment", &u) && u == 64, "alignment key");
    const plm_gguf_tensor *t = plm_gguf_find_tensor(f, "t.f32");
    bool pattern = t && t->nbytes == 96 && t->offset == 0;
    for (uint64_t k = 0; pattern && k < 96; k++) pattern = ((const uint8_t *)t->data)[k] == (uint8_t)k;
    CHECK(pattern, "filled tensor");
    t = plm_gguf_find_tensor(f, "t.q8");
    CHECK(t && t->offset == 128 && t->nbytes == 68 && !memcmp(t->data, q8, 68), "copied tensor");
    plm_gguf_close(f);
}

static void test_writer_errors(void) {
    plm_error err;
    char out[256], tmp[300], missing[300];
    path_in_tmp(out, sizeof out, "keep.gguf");
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    uint64_t ne[1] = {32};
    float data[32] = {0};

    /* A directory that does not exist: clean error, nothing created. */
    snprintf(missing, sizeof missing, "%s/no/such/dir/x.gguf", tmpdir);
    plm_gguf_writer *w = plm_gguf_writer_new();
    plm_gguf_writer_set_str(w, "general.architecture", "llama");
    plm_gguf_writer_add_tensor(w, "a", PLM_TYPE_F32, 1, ne, data);
    plm_status st = plm_gguf_writer_write(w, missing, NULL, NULL, &err);
    CHECK(st == PLM_ERR_IO && strstr(err.message, missing) && strstr(err.message, strerror(ENOENT)),
          "missing dir: %s", err.message);
    CHECK(!exists(missing), "no file in a missing dir");

    /* An existing file survives a failed rewrite, and no tmp file remains. */
    CHECK(plm_gguf_writer_write(w, out, NULL, NULL, &err) == PLM_OK, "first write: %s", err.message);
    plm_gguf_writer_free(w);
    char copy[300];
    path_in_tmp(copy, sizeof copy, "keep.copy");
    CHECK(plm_gguf_writer_write(NULL, copy, NULL, NULL, &err) == PLM_ERR_NOMEM && !exists(copy), "NULL writer");
    uint64_t n1;
    uint8_t *before = slurp(out, &n1);

    w = plm_gguf_writer_new();
    plm_gguf_writer_set_str(w, "general.architecture", "qwen2");
    plm_gguf_writer_add_tensor(w, "a", PLM_TYPE_F32, 1, ne, NULL);
    plm_gguf_writer_add_tensor(w, "b", PLM_TYPE_F32, 1, ne, NULL);
    fill_ctx fc = {.fail_at = 1};
    st = plm_gguf_writer_write(w, out, fill_from, &fc, &err);
    CHECK(st == PLM_ERR_IO && strstr(err.message, "synthetic failure on tensor 1") && strstr(err.message, "'b'"),
          "fill failure: %s", err.message);
    CHECK(!exists(tmp), "tmp removed after a failure");
    uint64_t n2;
    uint8_t *after = slurp(out, &n2);
    CHECK(before && after && n1 == n2 && !memcmp(before, after, (size_t)n1), "old file untouched");
    free(after);
    CHECK(plm_gguf_writer_write(w, out, NULL, NULL, &err) == PLM_ERR_INVALID_ARG && strstr(err.message, "no fill"),
          "no data, no fill: %s", err.message);
    plm_gguf_writer_free(w);

    /* A full disk, simulated by a file size limit (write fails with EFBIG). */
    static float big[1 << 16];
    uint64_t ne_big[1] = {1 << 16};
    w = plm_gguf_writer_new();
    plm_gguf_writer_add_tensor(w, "big", PLM_TYPE_F32, 1, ne_big, big);
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit small = {64 * 1024, old.rlim_max};
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &small) == 0) {
        st = plm_gguf_writer_write(w, out, NULL, NULL, &err);
        setrlimit(RLIMIT_FSIZE, &old);
        CHECK(st == PLM_ERR_IO && strstr(err.message, out) && strstr(err.message, strerror(EFBIG)),
              "disk full: %d %s", st, err.message);
        CHECK(!exists(tmp), "tmp removed after a full disk");
        after = slurp(out, &n2);
        CHECK(before && after && n1 == n2 && !memcmp(before, after, (size_t)n1), "old file untouched after a full disk");
        free(after);
    } else {
        printf("full-disk test skipped: setrlimit: %s\n", strerror(errno));
    }
    signal(SIGXFSZ, old_handler);
    plm_gguf_writer_free(w);
    free(before);

    /* Bad input to setters is reported by write, which then writes nothing. */
    struct { const char *want; int kind; } cases[] = {
        {"unknown type id 99", 0}, {"added twice", 1}, {"power of two", 2}, {"block size", 3},
        {"longer than 63", 4}, {"ne[0]=0", 5}, {"general.alignment must be u32", 6},
    };
    char bad_path[300];
    path_in_tmp(bad_path, sizeof bad_path, "bad.gguf");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        w = plm_gguf_writer_new();
        uint64_t ne_bad[1] = {cases[i].kind == 3 ? 40 : cases[i].kind == 5 ? 0 : 32};
        char longname[80];
        memset(longname, 'n', 64);
        longname[64] = '\0';
        switch (cases[i].kind) {
        case 0: plm_gguf_writer_add_tensor(w, "a", 99, 1, ne, data); break;
        case 1: plm_gguf_writer_add_tensor(w, "a", PLM_TYPE_F32, 1, ne, data);
                plm_gguf_writer_add_tensor(w, "a", PLM_TYPE_F32, 1, ne, data); break;
        case 2: plm_gguf_writer_set_alignment(w, 3); break;
        case 3: plm_gguf_writer_add_tensor(w, "a", PLM_TYPE_Q4_0, 1, ne_bad, data); break;
        case 4: plm_gguf_writer_add_tensor(w, longname, PLM_TYPE_F32, 1, ne, data); break;
        case 5: plm_gguf_writer_add_tensor(w, "a", PLM_TYPE_F32, 1, ne_bad, data); break;
        case 6: plm_gguf_writer_set_str(w, "general.alignment", "64"); break;
        }
        st = plm_gguf_writer_write(w, bad_path, NULL, NULL, &err);
        CHECK(st == PLM_ERR_INVALID_ARG && strstr(err.message, cases[i].want) && strstr(err.message, bad_path),
              "case %zu: %d %s", i, st, err.message);
        CHECK(!exists(bad_path), "case %zu wrote a file", i);
        plm_gguf_writer_free(w);
    }
    plm_gguf_writer_free(NULL);
}

/* ---- the inspect command -------------------------------------------------------- */

static int run_cmd(const char *cmd, char *out, size_t size) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    while (fgetc(p) != EOF) {}
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_inspect(void) {
    if (access(PLM_BIN, X_OK) != 0) {
        printf("inspect: %s not built, skipped\n", PLM_BIN);
        return;
    }
    static char out[1 << 17];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s inspect %s 2>&1", PLM_BIN, SHARED("models/stories260K.gguf"));
    int rc = run_cmd(cmd, out, sizeof out);
    CHECK(rc == 0, "inspect exit %d", rc);
    const char *want[] = {"llama.embedding_length", "[arr str x 512]", "\"<unk>\"", "token_embd.weight",
                          "64 x 512", "131072", "1170944", "F32", "48 tensors"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(strstr(out, want[i]) != NULL, "inspect output lacks '%s'", want[i]);
    snprintf(cmd, sizeof cmd, "%s inspect --no-mmap %s/%s >/dev/null 2>&1", PLM_BIN, SHARED("models/fixtures"),
             "fixture-llama-Q4_K_M.gguf");
    CHECK(run_cmd(cmd, out, sizeof out) == 0, "inspect --no-mmap");
    snprintf(cmd, sizeof cmd, "%s inspect /nonexistent.gguf 2>&1", PLM_BIN);
    CHECK(run_cmd(cmd, out, sizeof out) == 1 && strstr(out, "/nonexistent.gguf"), "inspect missing file: %s", out);
    snprintf(cmd, sizeof cmd, "%s inspect --help", PLM_BIN);
    CHECK(run_cmd(cmd, out, sizeof out) == 0 && strstr(out, "--no-mmap"), "inspect --help");
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/plm-gguf-XXXXXX");
    REQUIRE(mkdtemp(tmpdir) != NULL, "mkdtemp: %s", strerror(errno));

    test_stories();
    test_fixtures();
    test_vocabs();
    test_open_errors();
    test_mini_values();

    /* Hostile counts must not be trusted for allocation sizes.  (Measured
     * over the small inputs only: a sanitizer's quarantine keeps the big
     * copies of the other tests resident.) */
    uint64_t rss_before = peak_rss_kb();
    test_absurd_fields();
    test_fuzz();
    uint64_t rss_after = peak_rss_kb();
    CHECK(rss_after < rss_before + 64 * 1024, "peak RSS grew %" PRIu64 " kB on hostile input", rss_after - rss_before);
    test_truncation();
    test_fuzz_stories();

    round_trip(SHARED("models/stories260K.gguf"), "stories.gguf", false, true);
    round_trip(SHARED("models/fixtures/fixture-llama-Q4_K_M.gguf"), "q4km.gguf", true, true);
    round_trip(SHARED("models/fixtures/fixture-qwen2-f16.gguf"), "qwen2.gguf", false, true);
    round_trip(SHARED("vocab/ggml-vocab-llama-spm.gguf"), "vocab.gguf", false, false);
    test_writer_setters();
    test_writer_errors();
    test_inspect();

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_summary();
}
