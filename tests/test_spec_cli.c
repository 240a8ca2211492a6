/*
 * Speculative decoding from the command line: `run --lookup`,
 * `--lookup-cache` and `--draft-model` print exactly what plain greedy `run`
 * prints; a draft of another vocabulary and a corrupt cache file are refused
 * with a message naming the problem; the cache file appears whole (no .tmp
 * left behind); `bench --lookup` reports its measurements and finds the
 * output identical.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

#define STORIES SHARED("models/stories260K.gguf")
#define STORY "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. Once upon a"

static char *run(const char *cmd, int *status) { return test_capture(cmd, status); }

/* stdout of `run` greedy on the story prompt with extra options. */
static char *generate(const char *extra, int *st) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, PLM_BIN " run -m " STORIES " -p \"" STORY "\" -n 120 --temp 0 -c 512 %s 2>/dev/null",
             extra);
    return run(cmd, st);
}

int main(void) {
    char dir[] = "/tmp/plm_spec_cli_XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    char cache[256], opt[512], cmd[2048];
    snprintf(cache, sizeof cache, "%s/c.ngram", dir);

    int st;
    char *plain = generate("", &st);
    REQUIRE(st == 0 && plain && strlen(plain) > 200, "plain run");
    const char *variants[] = {"--lookup 3", "--lookup 2 --draft-max 4 --draft-fixed", "--draft-model " STORIES,
                              "--draft-model " STORIES " -b 1", "--lookup-cache CACHE", "--lookup-cache CACHE"};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        if (strstr(variants[i], "CACHE")) snprintf(opt, sizeof opt, "--lookup-cache %s", cache);
        else snprintf(opt, sizeof opt, "%s", variants[i]);
        char *out = generate(opt, &st);
        CHECK(st == 0 && out && !strcmp(out, plain), "run %s prints other text than plain run", opt);
        free(out);
    }
    snprintf(opt, sizeof opt, "%s.tmp", cache);
    CHECK(access(cache, R_OK) == 0 && access(opt, F_OK) != 0, "the cache file is written whole, no .tmp left");

    /* another vocabulary: refused, named */
    char foreign[300];
    snprintf(foreign, sizeof foreign, "%s/foreign.gguf", dir);
    snprintf(cmd, sizeof cmd, PLM_BIN " synth test-llama-tiny --vocab %s -o %s 2>&1",
             SHARED("vocab/ggml-vocab-llama-spm.gguf"), foreign);
    char *out = run(cmd, &st);
    free(out);
    snprintf(cmd, sizeof cmd, PLM_BIN " run -m " STORIES " -n 4 --draft-model %s 2>&1", foreign);
    out = run(cmd, &st);
    CHECK(st != 0 && out && strstr(out, "draft model") && strstr(out, "vocabulary"), "foreign draft: %s", out);
    free(out);

    /* a corrupt cache: refused, named, and left as it was */
    FILE *f = fopen(cache, "r+b");
    REQUIRE(f != NULL, "open cache");
    fseek(f, 40, SEEK_SET);
    fputc(0x7f, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, PLM_BIN " run -m " STORIES " -n 4 --lookup-cache %s 2>&1", cache);
    out = run(cmd, &st);
    CHECK(st != 0 && out && strstr(out, "corrupt"), "corrupt cache: %s", out);
    free(out);

    snprintf(cmd, sizeof cmd, PLM_BIN " run -m " STORIES " -n 4 --draft-max 0 --lookup 2 2>&1");
    out = run(cmd, &st);
    CHECK(st != 0 && out && strstr(out, "draft-max"), "bad draft length: %s", out);
    free(out);

    /* the memory fit counts the draft: 9 MiB holds stories260K at 2048 tokens
     * (7.1 MiB planned) but not two of it (11.6 MB), which fit at a shorter
     * context; the refusal names the budget, not the bill */
    out = run(PLM_BIN " run -m " STORIES " -n 4 -c 2048 --mem-limit 9M 2>&1", &st);
    CHECK(st == 0, "plain run within 9M: %s", out);
    free(out);
    out = run(PLM_BIN " run -m " STORIES " -n 4 -c 2048 --mem-limit 9M --draft-model " STORIES " 2>&1", &st);
    CHECK(st != 0 && out && strstr(out, "model and draft need") && strstr(out, "budget is 9.00 MB"), "pair over 9M: %s",
          out);
    free(out);
    out = run(PLM_BIN " run -m " STORIES " -n 4 --mem-limit 9M --draft-model " STORIES " 2>&1", &st);
    CHECK(st == 0 && out && strstr(out, "for the model and its draft"), "pair fitted to 9M: %s", out);
    free(out);

    snprintf(cmd, sizeof cmd, PLM_BIN " bench -m " STORIES " --lookup 3 -n 40 -r 2 -t 1 --spec-prompt \"" STORY "\" 2>&1");
    out = run(cmd, &st);
    CHECK(st == 0 && out && strstr(out, "speedup (median of 2 rounds)") && strstr(out, "identical to plain decoding") &&
              strstr(out, "tokens per verification"),
          "bench --lookup: %s", out);
    free(out);

    free(plain);
    unlink(foreign);
    unlink(cache);
    rmdir(dir);
    return test_summary();
}
