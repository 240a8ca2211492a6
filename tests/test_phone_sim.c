/*
 * A phone in a box (scripts/phone-sim.sh): the memory planner against the
 * kernel's own enforcement.  Inside memory cgroups of 192 MB to 2 GB, with
 * a 0.5B-parameter model (pocketlm synth, F16 774 MB and quantized Q4_0
 * 218 MB, in a temp dir), mmap'd and read into memory:
 *   - the box really kills (a control allocation over the limit: exit 137);
 *   - `pocketlm run` is never killed: where the plan says "does not fit" it
 *     refuses (exit 1) before loading anything, where it says "fits in RAM"
 *     or "runs only by paging" it runs to the end with a whole prompt batch
 *     evaluated and the context filled;
 *   - auto-fit (no -c) picks a context below the trained one that, filled to
 *     the end, is not killed;
 *   - a model larger than the limit runs by paging, and the paging warning
 *     appears at once, quoting the bill and the cgroup limit.
 * Skips (exit 0, saying why) when not root or no memory cgroup exists, and
 * in sanitizer builds (shadow memory is not in the plan).
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#if defined(__SANITIZE_ADDRESS__)
#define PLM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PLM_ASAN 1
#endif
#endif
#ifndef PLM_ASAN
#define PLM_ASAN 0
#endif

#define SIM PLM_SOURCE_DIR "/scripts/phone-sim.sh"
#define VOCAB SHARED("vocab/ggml-vocab-llama-spm.gguf")

static char dir[] = "/tmp/plm-phone-XXXXXX";
static char q4[600], f16[600], prompt[600], prompt_short[600];

/* Runs a shell command; returns its output (stdout + stderr) and status. */
static char *sh(int *status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *sh(int *status, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return test_capture(cmd, status);
}

/* A prompt of n words from a small list: one token each with this vocab. */
static void write_prompt(const char *path, int n) {
    static const char *words[] = {"the", "a", "cat", "dog", "ran", "sat", "on", "mat", "big", "small",
                                  "red", "blue", "house", "tree", "sun", "moon"};
    FILE *f = fopen(path, "w");
    uint32_t x = 12345;
    for (int i = 0; f && i < n; i++) {
        x = x * 1103515245u + 12345u;
        fprintf(f, "%s%s", i ? " " : "", words[(x >> 16) % 16]);
    }
    if (f) fclose(f);
}

/* The plan's verdict inside a box of `mem`: "fits", "paging" or "no_fit". */
static const char *verdict_in_box(const char *mem, const char *model, int n_ctx, bool mmap) {
    int st;
    char *out = sh(&st, "%s --mem %s -- %s plan -m %s -c %d -b %d -t 2 --bandwidth 10 %s -o json 2>&1", SIM, mem,
                   PLM_BIN, model, n_ctx, n_ctx, mmap ? "" : "--no-mmap");
    const char *v = "?";
    if (st == 0 && out) {
        if (strstr(out, "\"fit\": \"fits\"")) v = "fits";
        else if (strstr(out, "\"fit\": \"paging\"")) v = "paging";
        else if (strstr(out, "\"fit\": \"no_fit\"")) v = "no_fit";
    }
    if (!strcmp(v, "?")) fprintf(stderr, "plan in a %s box: status %d: %s\n", mem, st, out ? out : "");
    free(out);
    return v;
}

/* 774 MB of weights in a small box: the warning comes with the first token
 * and names the bill and the cgroup limit. */
static void paging_warning(const char *mem, const char *out) {
    CHECK(strstr(out, "warning: decode is paging") && strstr(out, "against a budget of") &&
              strstr(out, "cgroup memory"),
          "%s: the paging warning names the bill and the cgroup limit: %s", mem, out);
    const char *w = strstr(out, "major page faults in ");
    int tokens = 0;
    if (w) sscanf(w, "major page faults in %d", &tokens);
    CHECK(tokens == 1, "%s: the warning comes with the first generated token (%d): %s", mem, tokens, out);
}

/* One cell of the matrix: plan, then run with a prompt of one whole batch
 * that (with -n 4) fills the context: n_ctx = n_batch = 512 tokens for the
 * Q4_0 model, 128 for the slower F16. */
static void cell(const char *mem, const char *model, const char *name, bool mmap) {
    const int n_ctx = strstr(name, "F16") ? 128 : 512;
    const char *v = verdict_in_box(mem, model, n_ctx, mmap);
    const bool paging = !strcmp(v, "paging");
    int st;
    /* A paging run reads the whole file per token: a short prompt, 2 tokens. */
    char *out = sh(&st, "XDG_CONFIG_HOME=%s %s --mem %s --evict %s -- %s run -m %s -c %d -b %d -t 2 %s %s "
                        "--no-display-prompt --ignore-eos -s 1 %s %s 2>&1",
                   dir, SIM, mem, model, PLM_BIN, model, n_ctx, n_ctx, paging ? "-p 'Once upon a time'" : "-f",
                   paging ? "" : n_ctx == 512 ? prompt : prompt_short, paging ? "-n 2" : "-n 4",
                   mmap ? "" : "--no-mmap");
    printf("  %-5s %-4s %-8s plan: %-7s run: exit %d\n", mem, name, mmap ? "mmap" : "no-mmap", v, st);
    CHECK(st != 137 && !(out && strstr(out, "OOM killer")), "%s %s %s: killed by the kernel (plan: %s): %s", mem,
          name, mmap ? "mmap" : "no-mmap", v, out);
    if (!strcmp(v, "no_fit"))
        CHECK(st == 1 && out && strstr(out, "does not fit") && strstr(out, "cgroup memory"),
              "%s %s: the plan says no fit, so run refuses naming the cgroup limit: %s", mem, name, out);
    else
        CHECK(st == 0 && out && strstr(out, "generated"), "%s %s %s: the plan says %s, so it runs: exit %d: %s", mem,
              name, mmap ? "mmap" : "no-mmap", v, st, out);
    if (paging && strstr(name, "F16")) paging_warning(mem, out ? out : "");
    free(out);
}

static void the_box_kills(void) {
    int st;
    char *out = sh(&st, "%s --mem 192M -- dd if=/dev/zero of=/dev/null bs=300M count=1 2>&1", SIM);
    CHECK(st == 137 && out && strstr(out, "OOM killer"), "a 300 MB buffer in a 192 MB box is killed: %d %s", st, out);
    free(out);
}

/* No -c: the largest context that fits; filled to its end, it lives. */
static void auto_fit(void) {
    int st;
    char *out = sh(&st, "XDG_CONFIG_HOME=%s %s --mem 264M -- %s run -m %s -b 512 -t 2 --no-mmap -p hi -n 1 2>&1", dir,
                   SIM, PLM_BIN, q4);
    unsigned n = 0;
    const char *at = out ? strstr(out, "context ") : NULL;
    if (at) sscanf(at, "context %u tokens", &n);
    CHECK(st == 0 && n >= 512 && n < 32768 && strstr(out, "cgroup memory"),
          "auto-fit in a 264 MB box picks a context below the trained 32768, naming the cgroup: %s", out);
    free(out);
    if (n < 512 || n > 8192) return;
    char fill[700];
    snprintf(fill, sizeof fill, "%s/fill.txt", dir);
    write_prompt(fill, (int)n - 12);
    out = sh(&st, "XDG_CONFIG_HOME=%s %s --mem 264M -- %s run -m %s -b 512 -t 2 --no-mmap -f %s -n 16 --ignore-eos "
                  "--no-display-prompt 2>&1",
             dir, SIM, PLM_BIN, q4, fill);
    printf("  auto-fit in 264M, --no-mmap: context %u, filled: exit %d\n", n, st);
    CHECK(st == 0 && out && (strstr(out, "context full") || strstr(out, "generated")),
          "the auto-fitted context, filled to the end, is not killed: exit %d: %s", st, out);
    free(out);
}

int main(void) {
    if (PLM_ASAN) {
        printf("test_phone_sim: skipped: sanitizer build (shadow memory is not in the plan)\n");
        return 0;
    }
    int st;
    char *out = sh(&st, "%s --check 2>&1", SIM);
    if (st != 0) {
        printf("test_phone_sim: skipped: %s", out ? out : "phone-sim.sh --check failed\n");
        free(out);
        return 0;
    }
    free(out);
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(f16, sizeof f16, "%s/q05-f16.gguf", dir);
    snprintf(q4, sizeof q4, "%s/q05-q4_0.gguf", dir);
    snprintf(prompt, sizeof prompt, "%s/prompt.txt", dir);
    snprintf(prompt_short, sizeof prompt_short, "%s/prompt-short.txt", dir);
    write_prompt(prompt, 470);
    write_prompt(prompt_short, 118);
    out = sh(&st, "%s synth qwen2.5-0.5b --vocab %s -o %s 2>&1 && %s quantize %s %s Q4_0 -t 2 2>&1", PLM_BIN, VOCAB,
             f16, PLM_BIN, f16, q4);
    free(out);
    if (st == 0) {
        the_box_kills();
        const char *mems[] = {"192M", "256M", "512M", "1G", "2G"};
        for (int i = 0; i < 5; i++)
            for (int m = 1; m >= 0; m--) cell(mems[i], q4, "Q4_0", m);
        const char *mems16[] = {"256M", "512M", "1G"};
        for (int i = 0; i < 3; i++)
            for (int m = 1; m >= 0; m--) cell(mems16[i], f16, "F16", m);
        auto_fit();
    } else {
        CHECK(0, "synth + quantize the test models failed");
    }
    sh(&st, "rm -rf %s", dir);
    return test_summary();
}
