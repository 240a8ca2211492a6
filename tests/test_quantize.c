/*
 * pocketlm quantize against llama.cpp's quantizer: re-encoding the f16
 * fixture must reproduce, byte for byte, every tensor of the fixtures that
 * llama.cpp's `quantize --pure` wrote from the same source.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pocketlm.h"
#include "pocketlm_gguf.h"
#include "test.h"

static void compare_with_llama_cpp(const char *dir, const char *type) {
    char ours[512], theirs[512];
    snprintf(ours, sizeof ours, "%s/fixture-%s.gguf", dir, type);
    snprintf(theirs, sizeof theirs, "%s/models/fixtures/fixture-llama-pure-%s.gguf", PLM_SHARED_DIR, type);
    plm_error err;
    REQUIRE_VOID(plm_quantize(SHARED("models/fixtures/fixture-llama-f16.gguf"), ours, type, &err) == PLM_OK,
                 "%s: %s", type, err.message);
    gguf_file *a = gguf_open(ours, NULL, &err), *b = gguf_open(theirs, NULL, &err);
    REQUIRE_VOID(a && b, "open: %s", err.message);
    CHECK(a->n_tensors == b->n_tensors, "%s: %llu vs %llu tensors", type, (unsigned long long)a->n_tensors,
          (unsigned long long)b->n_tensors);
    int same = 0;
    for (uint64_t i = 0; i < b->n_tensors; i++) {
        char name[256];
        gguf_str_copy(b->tensors[i].name, name, sizeof name);
        const gguf_tensor *x = gguf_find_tensor(a, name), *y = &b->tensors[i];
        if (!x) {
            CHECK(0, "%s: tensor %s missing", type, name);
            continue;
        }
        bool eq = x->type == y->type && x->nbytes == y->nbytes && !memcmp(x->data, y->data, y->nbytes);
        CHECK(eq, "%s: tensor %s differs from llama.cpp's (%s vs %s)", type, name, gguf_tensor_type_name(x->type),
              gguf_tensor_type_name(y->type));
        same += eq;
    }
    uint32_t ft = 0;
    CHECK(gguf_get_u32(a, "general.file_type", &ft) && gguf_get_u32(b, "general.file_type", &ft), "file_type");
    printf("%-7s %d/%llu tensors identical to llama.cpp's\n", type, same, (unsigned long long)b->n_tensors);
    gguf_close(a);
    gguf_close(b);
    unlink(ours);
}

int main(void) {
    char dir[] = "/tmp/plm-quantize-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    const char *types[] = {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) compare_with_llama_cpp(dir, types[i]);

    plm_error err;
    char out[512];
    snprintf(out, sizeof out, "%s/x.gguf", dir);
    CHECK(plm_quantize(SHARED("models/fixtures/fixture-llama-f16.gguf"), out, "Q3_K", &err) == PLM_ERR_UNSUPPORTED &&
              strstr(err.message, "Q3_K"),
          "unsupported target named: %s", err.message);
    CHECK(plm_quantize("/nonexistent.gguf", out, "Q8_0", &err) != PLM_OK && strstr(err.message, "/nonexistent.gguf"),
          "missing input named: %s", err.message);
    CHECK(access(out, F_OK) != 0, "no output file after a failure");
    rmdir(dir);
    return test_summary();
}
