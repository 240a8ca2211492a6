/*
 * pocketlm quantize against llama.cpp's quantizer: re-encoding the f16
 * fixtures must reproduce, byte for byte and type for type, every tensor of
 * the fixtures llama.cpp's llama-quantize wrote from the same source — with
 * --pure (fixture-*-pure-TYPE) and with its default K-quant mixtures
 * (fixture-*-Q4_K_M and the like) — and the same general.file_type, with
 * one thread or several.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pocketlm.h"
#include "pocketlm_tools.h"
#include "pocketlm_gguf.h"
#include "test.h"

#define FIXTURES PLM_SHARED_DIR "/models/fixtures/"

typedef struct quant_case {
    const char *source;    /* fixture-llama-f16 */
    const char *type;      /* what we ask for */
    bool pure;
    const char *expected;  /* llama.cpp's file from the same source */
} quant_case;

static void compare_tensors(const plm_gguf_file *a, const plm_gguf_file *b, const char *label) {
    CHECK(a->n_tensors == b->n_tensors, "%s: %llu vs %llu tensors", label, (unsigned long long)a->n_tensors,
          (unsigned long long)b->n_tensors);
    int same = 0;
    for (uint64_t i = 0; i < b->n_tensors; i++) {
        char name[256];
        plm_gguf_str_copy(b->tensors[i].name, name, sizeof name);
        const plm_gguf_tensor *x = plm_gguf_find_tensor(a, name), *y = &b->tensors[i];
        if (!x) {
            CHECK(0, "%s: tensor %s missing", label, name);
            continue;
        }
        const bool eq = x->type == y->type && x->nbytes == y->nbytes && !memcmp(x->data, y->data, y->nbytes);
        CHECK(eq, "%s: tensor %s differs from llama.cpp's (%s vs %s)", label, name, plm_gguf_tensor_type_name(x->type),
              plm_gguf_tensor_type_name(y->type));
        same += eq;
    }
    uint32_t fa = 0, fb = 1;
    CHECK(plm_gguf_get_u32(a, "general.file_type", &fa) && plm_gguf_get_u32(b, "general.file_type", &fb) && fa == fb,
          "%s: general.file_type %u, llama.cpp's %u", label, fa, fb);
    printf("%-28s %d/%llu tensors identical to llama.cpp's\n", label, same, (unsigned long long)b->n_tensors);
}

static void compare_with_llama_cpp(const char *dir, const quant_case *c, int n_threads) {
    char ours[512], src[512], theirs[512], label[96];
    snprintf(ours, sizeof ours, "%s/%s-%s.gguf", dir, c->source, c->type);
    snprintf(src, sizeof src, FIXTURES "%s.gguf", c->source);
    snprintf(theirs, sizeof theirs, FIXTURES "%s.gguf", c->expected);
    snprintf(label, sizeof label, "%s%s %s -t %d", c->pure ? "--pure " : "", c->source + 8, c->type, n_threads);
    plm_quantize_params p = plm_quantize_default_params();
    p.pure = c->pure;
    p.n_threads = n_threads;
    plm_error err;
    REQUIRE_VOID(plm_quantize_ex(src, ours, c->type, &p, &err) == PLM_OK, "%s: %s", label, err.message);
    plm_gguf_file *a = plm_gguf_open(ours, NULL, &err), *b = plm_gguf_open(theirs, NULL, &err);
    CHECK(a && b, "open: %s", err.message);
    if (a && b) compare_tensors(a, b, label);
    plm_gguf_close(a);
    plm_gguf_close(b);
    unlink(ours);
}

/* Rows that are not whole blocks of the chosen type (stories260K: n_embd
 * 64, n_ff 172) take llama.cpp's fallbacks, mixture or --pure: Q2_K/Q3_K ->
 * Q4_0, Q4_K -> Q5_0, Q6_K -> Q8_0, and F16 where even 32 does not divide
 * the row.  There is no llama.cpp file of stories260K among the fixtures:
 * these are the types llama.cpp's own llama_model_quantize writes
 * (node-llama-cpp's libllama), as bench/quantize-vs-llamacpp.sh shows. */
static void check_fallbacks(const char *dir) {
    static const struct {
        const char *type;
        bool pure;
        const char *name, *want;
    } cases[] = {
        {"Q4_K_M", false, "output.weight", "Q8_0"},          /* Q6_K for the output, then its fallback */
        {"Q4_K_M", false, "token_embd.weight", "Q5_0"},
        {"Q4_K_M", false, "blk.0.attn_q.weight", "Q5_0"},
        {"Q4_K_M", false, "blk.0.attn_v.weight", "Q5_0"},    /* use_more_bits(0, 5) is false */
        {"Q4_K_M", false, "blk.2.attn_v.weight", "Q8_0"},    /* Q6_K -> Q8_0 */
        {"Q4_K_M", false, "blk.4.attn_v.weight", "Q8_0"},
        {"Q4_K_M", false, "blk.1.ffn_down.weight", "F16"},   /* 172 columns */
        {"Q4_K_M", false, "blk.0.attn_norm.weight", "F32"},
        {"Q3_K_M", false, "blk.0.attn_v.weight", "Q5_1"},    /* Q5_K (first two attn_v) -> Q5_1 */
        {"Q3_K_M", false, "blk.3.attn_q.weight", "Q4_0"},    /* Q3_K -> Q4_0 */
        {"Q2_K", true, "output.weight", "Q4_0"},
        {"Q2_K", true, "blk.1.ffn_down.weight", "F16"},
        {"Q4_0", false, "blk.1.ffn_down.weight", "F16"},     /* the older types fall back too */
        {"Q4_0", false, "blk.1.ffn_up.weight", "Q4_0"},
    };
    char out[512];
    snprintf(out, sizeof out, "%s/stories.gguf", dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        plm_quantize_params p = plm_quantize_default_params();
        p.pure = cases[i].pure;
        plm_error err;
        REQUIRE_VOID(plm_quantize_ex(SHARED("models/stories260K.gguf"), out, cases[i].type, &p, &err) == PLM_OK,
                     "%s", err.message);
        plm_gguf_file *f = plm_gguf_open(out, NULL, &err);
        REQUIRE_VOID(f != NULL, "open: %s", err.message);
        const plm_gguf_tensor *t = plm_gguf_find_tensor(f, cases[i].name);
        CHECK(t && !strcmp(plm_gguf_tensor_type_name(t->type), cases[i].want), "stories260K %s%s: %s is %s, want %s",
              cases[i].pure ? "--pure " : "", cases[i].type, cases[i].name,
              t ? plm_gguf_tensor_type_name(t->type) : "missing", cases[i].want);
        plm_gguf_close(f);
    }
    unlink(out);
}

/* The command: --pure and -t reach the library; a bad type is refused with
 * the known ones listed. */
static void check_command(const char *dir) {
    char out[512], cmd[1536];
    snprintf(out, sizeof out, "%s/cli.gguf", dir);
    snprintf(cmd, sizeof cmd, "%s quantize --pure -t 3 %sfixture-llama-f16.gguf %s q4_k_s", PLM_BIN, FIXTURES, out);
    CHECK(system(cmd) == 0, "%s failed", cmd);
    plm_error err;
    plm_gguf_file *a = plm_gguf_open(out, NULL, &err), *b = plm_gguf_open(FIXTURES "fixture-llama-pure-Q4_K_S.gguf", NULL, &err);
    CHECK(a && b, "open: %s", err.message);
    if (a && b) compare_tensors(a, b, "pocketlm quantize --pure -t 3");
    plm_gguf_close(a);
    plm_gguf_close(b);
    unlink(out);
    snprintf(cmd, sizeof cmd, "%s quantize %sfixture-llama-f16.gguf %s Q9_K 2>&1", PLM_BIN, FIXTURES, out);
    FILE *p = popen(cmd, "r");
    char msg[1024] = "";
    const size_t len = p ? fread(msg, 1, sizeof msg - 1, p) : 0;
    msg[len] = '\0';
    CHECK(p && pclose(p) != 0 && strstr(msg, "Q9_K") && strstr(msg, "Q4_K_M"), "bad type: %s", msg);
    CHECK(access(out, F_OK) != 0, "no output file after a failure");
}

static void check_failures(const char *dir) {
    plm_error err;
    char out[512];
    snprintf(out, sizeof out, "%s/x.gguf", dir);
    CHECK(plm_quantize(FIXTURES "fixture-llama-f16.gguf", out, "Q2_K_S", &err) == PLM_ERR_UNSUPPORTED &&
              strstr(err.message, "Q2_K_S") && strstr(err.message, "Q4_K_M"),
          "unsupported target named, known ones listed: %s", err.message);
    CHECK(plm_quantize("/nonexistent.gguf", out, "Q4_K_M", &err) != PLM_OK && strstr(err.message, "/nonexistent.gguf"),
          "missing input named: %s", err.message);
    CHECK(access(out, F_OK) != 0, "no output file after a failure");
    /* an unwritable destination: nothing left behind, the path named */
    CHECK(plm_quantize(FIXTURES "fixture-llama-f16.gguf", "/nonexistent-dir/x.gguf", "Q4_K_M", &err) == PLM_ERR_IO &&
              strstr(err.message, "/nonexistent-dir/x.gguf"),
          "unwritable output named: %s", err.message);
}

int main(void) {
    char dir[] = "/tmp/plm-quantize-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    static const quant_case cases[] = {
        /* the older types, with --pure (their mixtures put output.weight in Q6_K) */
        {"fixture-llama-f16", "Q8_0", true, "fixture-llama-pure-Q8_0"},
        {"fixture-llama-f16", "Q4_0", true, "fixture-llama-pure-Q4_0"},
        {"fixture-llama-f16", "Q4_1", true, "fixture-llama-pure-Q4_1"},
        {"fixture-llama-f16", "Q5_0", true, "fixture-llama-pure-Q5_0"},
        {"fixture-llama-f16", "Q5_1", true, "fixture-llama-pure-Q5_1"},
        {"fixture-llama-f16", "IQ4_NL", true, "fixture-llama-pure-IQ4_NL"},
        {"fixture-llama-f16", "IQ4_XS", true, "fixture-llama-pure-IQ4_XS"},
        {"fixture-qwen2-f16", "Q8_0", true, "fixture-qwen2-pure-Q8_0"},
        /* llama-quantize --pure with the K-quant file types */
        {"fixture-llama-f16", "Q2_K", true, "fixture-llama-pure-Q2_K"},
        {"fixture-llama-f16", "Q3_K_S", true, "fixture-llama-pure-Q3_K_S"},
        {"fixture-llama-f16", "Q4_K_S", true, "fixture-llama-pure-Q4_K_S"},
        {"fixture-llama-f16", "Q5_K_S", true, "fixture-llama-pure-Q5_K_S"},
        {"fixture-llama-f16", "Q6_K", true, "fixture-llama-pure-Q6_K"},
        {"fixture-qwen2-f16", "Q6_K", true, "fixture-qwen2-pure-Q6_K"},
        /* llama-quantize's default mixtures */
        {"fixture-llama-f16", "Q4_K_M", false, "fixture-llama-Q4_K_M"},
        {"fixture-llama-f16", "Q3_K_M", false, "fixture-llama-Q3_K_M"},
        {"fixture-llama-f16", "Q5_K_M", false, "fixture-llama-Q5_K_M"},
        {"fixture-llama-f16", "Q2_K", false, "fixture-llama-Q2_K"},
        {"fixture-qwen2-f16", "Q4_K_M", false, "fixture-qwen2-Q4_K_M"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int n_threads = 1; n_threads <= 2; n_threads++) compare_with_llama_cpp(dir, &cases[i], n_threads);
    check_fallbacks(dir);
    check_command(dir);
    check_failures(dir);
    rmdir(dir);
    return test_summary();
}
