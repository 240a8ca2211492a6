/*
 * The pocketlm command as a user meets it: help texts with defaults, the
 * demo-model fallback, stop strings, seeds, telemetry files, and clear
 * errors for a prompt longer than the context or a missing model.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

#define STORIES SHARED("models/stories260K.gguf")

/* Runs a shell command; returns its stdout+stderr (malloc'd) and exit code. */
static char *run(const char *cmd, int *status) { return test_capture(cmd, status); }

static char *runf(int *status, const char *fmt, const char *a, const char *b) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    return run(cmd, status);
}

static void test_help(void) {
    int st;
    char *out = run(PLM_BIN " run --help 2>&1", &st);
    CHECK(st == 0 && out, "run --help exits 0");
    const char *options[] = {"--model", "--prompt", "--n-predict", "--ctx-size", "--batch-size", "--threads",
                             "--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--seed", "--stop",
                             "--no-mmap", "--mlock", "--cache-type-k", "--mem-log"};
    for (size_t i = 0; out && i < sizeof options / sizeof options[0]; i++)
        CHECK(strstr(out, options[i]) != NULL, "run --help lacks %s", options[i]);
    CHECK(out && strstr(out, "(default: 128)") && strstr(out, "(default: f16)"), "defaults shown");
    free(out);
    out = run(PLM_BIN " --help 2>&1", &st);
    CHECK(st == 0 && out && strstr(out, "run") && strstr(out, "inspect") && strstr(out, "tokenize"), "--help");
    free(out);
}

static void test_no_model(void) {
    int st;
    /* From / there is no ../shared/models/stories260K.gguf to fall back on. */
    char *out = run("cd / && " PLM_BIN " run -n 4 2>&1", &st);
    CHECK(st != 0 && out && strstr(out, "-m MODEL.gguf"), "no model: says how to pass one: %s", out);
    free(out);
    out = run(PLM_BIN " run -m /nonexistent.gguf 2>&1", &st);
    CHECK(st != 0 && out && strstr(out, "/nonexistent.gguf"), "missing model named: %s", out);
    free(out);
}

static void test_stop_and_seed(void) {
    int st;
    char *out = runf(&st, "%s run -m %s -n 64 --temp 0 --no-display-prompt --stop Lily 2>/dev/null", PLM_BIN, STORIES);
    CHECK(st == 0 && out && strstr(out, "there was a little girl named") && !strstr(out, "Lily"),
          "stop string: '%s'", out);
    free(out);
    char *a = runf(&st, "%s run -m %s -n 32 --temp 1 --seed 7 --no-display-prompt 2>/dev/null", PLM_BIN, STORIES);
    char *b = runf(&st, "%s run -m %s -n 32 --temp 1 --seed 7 --no-display-prompt 2>/dev/null", PLM_BIN, STORIES);
    char *c = runf(&st, "%s run -m %s -n 32 --temp 1 --seed 8 --no-display-prompt 2>/dev/null", PLM_BIN, STORIES);
    CHECK(a && b && c && !strcmp(a, b), "same seed, same output");
    CHECK(a && c && strcmp(a, c), "another seed, another output");
    free(a);
    free(b);
    free(c);
}

static void test_context_errors(void) {
    int st;
    char *out = runf(&st, "%s run -m %s -c 4 -p 'Once upon a time there was' 2>&1", PLM_BIN, STORIES);
    CHECK(st != 0 && out && strstr(out, "context"), "prompt longer than the context: %s", out);
    free(out);
    out = runf(&st, "%s run -m %s -c 16 -n 100 --ignore-eos --no-display-prompt 2>&1", PLM_BIN, STORIES);
    CHECK(st == 0 && out && strstr(out, "context full"), "generation stops at a full context: %s", out);
    free(out);
    out = runf(&st, "%s run -m %s -c 16 -n 100 --ignore-eos --ctx-shift 2>&1", PLM_BIN, STORIES);
    CHECK(st == 0 && out && !strstr(out, "context full") && strstr(out, "generated 100 tok"),
          "--ctx-shift generates past the context: %s", out);
    free(out);
}

static void test_mem_limit(void) {
    int st;
    const char *fx = SHARED("models/fixtures/fixture-llama-Q4_K_M.gguf");
    char *out = runf(&st, "%s run -m %s -n 2 -c 4096 --mem-limit 14M 2>&1", PLM_BIN, fx);
    CHECK(st != 0 && out && strstr(out, "budget is 14.00 MB") && strstr(out, "try -c"),
          "--mem-limit refuses with the bill and a suggestion: %s", out);
    free(out);
    out = runf(&st, "%s run -m %s -n 2 --mem-limit 14M 2>&1", PLM_BIN, fx);
    CHECK(st == 0 && out && strstr(out, "context 512 tokens"), "auto-fit picks a context and says so: %s", out);
    free(out);
    out = runf(&st, "%s run -m %s -n 2 --mem-limit lots 2>&1", PLM_BIN, fx);
    CHECK(st != 0 && out && strstr(out, "not a size"), "bad --mem-limit: %s", out);
    free(out);
}

/* tune writes this device's defaults where XDG_CONFIG_HOME says; run reads them. */
static void test_tune(void) {
    char dir[] = "/tmp/plm-tune-XXXXXX";
    REQUIRE_VOID(mkdtemp(dir) != NULL, "mkdtemp");
    int st;
    char *out = runf(&st, "XDG_CONFIG_HOME=%s %s tune --dry-run -t 1,2 -b 16,32 2>&1", dir, PLM_BIN);
    CHECK(st == 0 && out && strstr(out, "threads {1,2} x batch {16,32}") && strstr(out, "pocketlm/tuned.conf"),
          "tune --dry-run prints the grid: %s", out);
    free(out);
    char cmd[1024], conf[512];
    snprintf(conf, sizeof conf, "%s/pocketlm/tuned.conf", dir);
    CHECK(access(conf, F_OK) != 0, "--dry-run writes nothing");
    snprintf(cmd, sizeof cmd, "XDG_CONFIG_HOME=%s %s tune -m %s -t 1,2 -b 16,32 -p 32 -n 8 -r 1 2>&1", dir, PLM_BIN,
             STORIES);
    out = run(cmd, &st);
    CHECK(st == 0 && out && strstr(out, "best:"), "tune: %s", out);
    free(out);
    FILE *f = fopen(conf, "r");
    char line[256];
    int threads = 0, batch = 0;
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "threads = %d", &threads);
        sscanf(line, "batch = %d", &batch);
    }
    if (f) fclose(f);
    CHECK((threads == 1 || threads == 2) && (batch == 16 || batch == 32), "saved threads %d batch %d", threads, batch);
    unlink(conf);
    snprintf(conf, sizeof conf, "%s/pocketlm", dir);
    rmdir(conf);
    rmdir(dir);
}

static void test_telemetry(void) {
    char dir[] = "/tmp/plm-cli-XXXXXX";
    REQUIRE_VOID(mkdtemp(dir) != NULL, "mkdtemp");
    char csv[256], svg[256], cmd[1024];
    snprintf(csv, sizeof csv, "%s/m.csv", dir);
    snprintf(svg, sizeof svg, "%s/m.svg", dir);
    snprintf(cmd, sizeof cmd, "%s run -m %s -n 40 --ignore-eos --mem-every 10 --mem-log %s --mem-plot %s >/dev/null 2>&1",
             PLM_BIN, STORIES, csv, svg);
    int st;
    free(run(cmd, &st));
    CHECK(st == 0, "run with telemetry");
    FILE *f = fopen(csv, "r");
    int rows = 0;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (rows == 0) CHECK(strstr(line, "rss_mib") && strstr(line, "major_faults"), "csv header: %s", line);
        rows++;
    }
    if (f) fclose(f);
    CHECK(rows >= 6, "csv rows: %d (header + start + prompt + every 10 of 40 tokens)", rows);
    f = fopen(svg, "r");
    CHECK(f && fgets(line, sizeof line, f) && strstr(line, "<svg"), "svg written");
    if (f) fclose(f);
    unlink(csv);
    unlink(svg);
    rmdir(dir);
}

/* Out-of-range sampler options are refused before anything loads, naming
 * the option and its valid range. */
static void test_sampler_options(void) {
    const char *cases[][3] = {{"--temp nan", "--temp", "finite"},
                              {"--top-p 2", "--top-p", "[0, 1]"},
                              {"--top-k -3", "--top-k", ">= 0"},
                              {"--min-p -1", "--min-p", "[0, 1]"},
                              {"--repeat-penalty 0", "--repeat-penalty", "> 0"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int st;
        char *out = runf(&st, "%s run -m " STORIES " -n 4 %s 2>&1", PLM_BIN, cases[i][0]);
        CHECK(st != 0 && out && strstr(out, cases[i][1]) && strstr(out, cases[i][2]), "%s: %s", cases[i][0], out);
        free(out);
    }
}

/* serve's options: help with defaults, and refusals that say what is wrong
 * (the HTTP behaviour itself is tests/oracle/serve.test.mjs). */
static void test_serve_options(void) {
    int st;
    char *out = run(PLM_BIN " serve --help 2>&1", &st);
    CHECK(st == 0 && out && strstr(out, "--api-key") && strstr(out, "--port") && strstr(out, "(default: 8080)") &&
              strstr(out, "(default: 127.0.0.1)"),
          "serve --help: %s", out);
    free(out);
    const char *cases[][2] = {{"--port 70000", "--port"},
                              {"--parallel 0", "--parallel"},
                              {"--parallel 257", "--parallel must be 1..256"},
                              {"--host not-an-address --port 0", "not an IPv4 or IPv6 address"},
                              {"--max-body 0", "--max-body"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        out = runf(&st, "%s serve -m " STORIES " %s 2>&1", PLM_BIN, cases[i][0]);
        CHECK(st == 1 && out && strstr(out, cases[i][1]), "serve %s: %s", cases[i][0], out);
        free(out);
    }
}

/* A number after `"key": ` in plan's JSON; 0 when absent. */
static unsigned long long json_number(const char *json, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = json ? strstr(json, pat) : NULL;
    return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

/* plan's JSON for the fixture with `extra` options: the number after "key". */
static unsigned long long plan_number(const char *fx, const char *extra, const char *key) {
    char cmd[4096];
    int st;
    snprintf(cmd, sizeof cmd, "%s plan -m %s %s -o json 2>&1", PLM_BIN, fx, extra);
    char *out = run(cmd, &st);
    unsigned long long v = st == 0 ? json_number(out, key) : 0;
    free(out);
    return v;
}

/* serve's memory fit counts the KV caches of all --parallel slots, as
 * `plan --parallel N` does: a budget between the bills of 1 and 4 slots
 * refuses 4 and passes 1 (which then stops at the bad --host, after the
 * fit, the load and the context), and without -c serve picks the context
 * plan names for 4 sequences, smaller than for one. */
static void test_serve_fit(void) {
    const char *fx = SHARED("models/fixtures/fixture-llama-Q4_K_M.gguf");
    char cmd[4096], opts[128];
    int st;
    const unsigned long long anon1 = plan_number(fx, "-c 2048 --parallel 1", "anon");
    const unsigned long long anon4 = plan_number(fx, "-c 2048 --parallel 4", "anon");
    REQUIRE_VOID(anon1 > 0 && anon4 > anon1, "plan bills 1 and 4 sequences: %llu, %llu", anon1, anon4);
    unsigned long long limit = (anon1 + anon4) / 2;
    snprintf(cmd, sizeof cmd, "%s serve -m %s -c 2048 --parallel 4 --mem-limit %llu --host bad-host 2>&1", PLM_BIN, fx,
             limit);
    char *out = run(cmd, &st);
    CHECK(st == 1 && out && strstr(out, "does not fit") && strstr(out, "2048 tokens of context x 4 sequences"),
          "serve --parallel 4 over the budget refuses, naming the sequences: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s serve -m %s -c 2048 --parallel 1 --mem-limit %llu --host bad-host 2>&1", PLM_BIN, fx,
             limit);
    out = run(cmd, &st);
    CHECK(st == 1 && out && !strstr(out, "does not fit") && strstr(out, "not an IPv4 or IPv6 address"),
          "serve --parallel 1 fits the same budget: %s", out);
    free(out);

    /* A budget where one slot takes the trained context but four do not. */
    limit = (plan_number(fx, "-c 512 --parallel 1", "peak_rss") + plan_number(fx, "-c 512 --parallel 4", "peak_rss")) / 2;
    snprintf(opts, sizeof opts, "--parallel 1 --mem-limit %llu", limit);
    const unsigned long long ctx1 = plan_number(fx, opts, "max_ctx");
    snprintf(opts, sizeof opts, "--parallel 4 --mem-limit %llu", limit);
    const unsigned long long ctx4 = plan_number(fx, opts, "max_ctx");
    CHECK(ctx4 > 0 && ctx4 < ctx1, "plan: 4 sequences get a shorter context (%llu) than one (%llu)", ctx4, ctx1);
    snprintf(cmd, sizeof cmd, "%s serve -m %s --parallel 4 --mem-limit %llu --host bad-host 2>&1", PLM_BIN, fx, limit);
    out = run(cmd, &st);
    char want[64];
    snprintf(want, sizeof want, "context %llu tokens x 4 sequences", ctx4);
    CHECK(out && strstr(out, want), "serve picks plan's context for 4 slots (%s): %s", want, out);
    free(out);
}

int main(void) {
    test_help();
    test_sampler_options();
    test_serve_options();
    test_serve_fit();
    test_no_model();
    test_stop_and_seed();
    test_context_errors();
    test_mem_limit();
    test_tune();
    test_telemetry();
    return test_summary();
}
