/*
 * Chat templates (include/pocketlm_chat.h): errors name the template's line
 * and column, hostile templates and inputs end in clean errors within the
 * limits, the Python-Jinja behaviour beyond @huggingface/jinja (whose
 * byte-for-byte conformance is tests/oracle/chat_template.test.mjs), GGUF
 * templates, and the `pocketlm template` command.
 *
 * Expected outputs of the Python-Jinja extensions are what Jinja 3.1
 * documents and renders for those expressions.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pocketlm.h"
#include "pocketlm_chat.h"
#include "pocketlm_gguf.h"
#include "test.h"

static const char *MSGS = "[{\"role\":\"user\",\"content\":\"Hi\"}]";

/* Compiles and renders; returns the status, *out (malloc'd) or the error text. */
static plm_status render_ex(const char *src, const plm_chat_params *params, char **out, plm_error *err) {
    plm_chat_template *t;
    *out = NULL;
    plm_status s = plm_chat_compile(src, strlen(src), &t, err);
    if (s) return s;
    s = plm_chat_render(t, params, out, NULL, err);
    plm_chat_free(t);
    return s;
}

static plm_status render(const char *src, const char *vars_json, char **out, plm_error *err) {
    plm_chat_params p = {.messages_json = MSGS, .vars_json = vars_json};
    return render_ex(src, &p, out, err);
}

static void expect_output(const char *src, const char *vars, const char *want) {
    char *out;
    plm_error err = {0};
    plm_status s = render(src, vars, &out, &err);
    CHECK(s == PLM_OK && !strcmp(out, want), "%s\n  want %s\n  got  %s", src, want, s ? err.message : out);
    free(out);
}

/* The error message must start with "line L, column C:" and mention `word`. */
static void expect_error(const char *src, const char *vars, int line, int col, const char *word) {
    char *out;
    plm_error err = {0};
    plm_status s = render(src, vars, &out, &err);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "line %d, column %d:", line, col);
    CHECK(s != PLM_OK && !strncmp(err.message, prefix, strlen(prefix)) && strstr(err.message, word),
          "%s: want an error at %s mentioning '%s', got %s", src, prefix, word, s ? err.message : out);
    free(out);
}

static void test_error_positions(void) {
    expect_error("line one\n{{ 1 + }}", NULL, 2, 8, "'}}'");
    expect_error("{% if x %}\nabc", NULL, 1, 4, "never closed");
    expect_error("a\n\n  {{ 'x' | nosuch }}", NULL, 3, 12, "unknown filter 'nosuch'");
    expect_error("{% if true %}\n  {{ raise_exception('bad role') }}\n{% endif %}", NULL, 2, 6, "bad role");
    expect_error("ok\n{{ 'abc }}", NULL, 2, 4, "unterminated string");
    expect_error("{{ a ! b }}", NULL, 1, 6, "unexpected character");
    expect_error("x\n    {% frob %}", NULL, 2, 8, "unknown statement 'frob'");
    expect_error("\xc3\xa9\xc3\xa9{{ 1 + }}", NULL, 1, 10, "'}}'");      /* columns count characters */
    expect_error("{% for m in 5 %}{% endfor %}", NULL, 1, 13, "cannot loop over a integer");
    expect_error("{{ 'a' ~ none }}", NULL, 1, 8, "none");
    expect_error("{{ {'a': 1}[0] }}", NULL, 1, 12, "key");
    expect_error("{# unclosed", NULL, 1, 1, "comment");
    expect_error("{{ x }}\n{% endif %}", NULL, 2, 4, "unknown statement 'endif'");
    expect_error("{% set 1 = 2 %}", NULL, 1, 8, "assign");
    expect_error("{% macro m(a=1, b) %}{% endmacro %}", NULL, 1, 17, "default");
    expect_error("{{ 5 is odd }}{{ 'x' is odd }}", NULL, 1, 25, "integer");
    expect_error("{% set a, b = [1] %}", NULL, 1, 8, "few");
}

static void expect_refusal(const char *what, const char *src, const plm_chat_params *base, const char *word,
                           plm_status want) {
    char *out;
    plm_error err = {0};
    plm_chat_params p = *base;
    if (!p.messages_json) p.messages_json = MSGS;
    plm_status s = render_ex(src, &p, &out, &err);
    CHECK(s == want && strstr(err.message, word), "%s: want %s mentioning '%s', got %s: %s", what,
          plm_status_name(want), word, plm_status_name(s), s ? err.message : "success");
    free(out);
}

/* A limit reached: PLM_ERR_NOMEM.  Bad input: PLM_ERR_INVALID_ARG. */
static void expect_limit(const char *what, const char *src, const plm_chat_params *base, const char *word) {
    expect_refusal(what, src, base, word, PLM_ERR_NOMEM);
}
static void expect_bad_input(const char *what, const char *src, const plm_chat_params *base, const char *word) {
    expect_refusal(what, src, base, word, PLM_ERR_INVALID_ARG);
}

static void test_hostile(void) {
    plm_chat_params none = {0}, small = {.max_steps = 100000, .max_output = 1 << 20};
    expect_limit("endless recursion", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", &none, "nested deeper");
    expect_limit("mutual recursion", "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
                 &none, "nested deeper");
    expect_limit("huge range", "{% for i in range(1000000000) %}{% endfor %}", &none, "too long");
    expect_limit("nested loops", "{% for a in range(10000) %}{% for b in range(10000) %}{% endfor %}{% endfor %}", &small,
                 "steps");
    expect_limit("doubling string", "{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
                 &small, "limit");
    expect_limit("output flood", "{% for i in range(20000) %}{{ '0123456789abcdef' ~ '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef' }}{% endfor %}", &small, "limit");
    expect_limit("list doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
                 &(plm_chat_params){.max_memory = 8 << 20}, "memory");

    /* deep nesting: parenthesis, lists, blocks */
    size_t n = 100000;
    char *deep = malloc(n * 2 + 16);
    REQUIRE_VOID(deep != NULL, "malloc");
    memcpy(deep, "{{ ", 3);
    memset(deep + 3, '(', n);
    strcpy(deep + 3 + n, "1 }}");
    expect_refusal("deep parentheses", deep, &none, "nested too deeply", PLM_ERR_FORMAT);
    memcpy(deep, "{{ ", 3);
    memset(deep + 3, '[', n);
    strcpy(deep + 3 + n, " }}");
    expect_refusal("deep lists", deep, &none, "nested too deeply", PLM_ERR_FORMAT);
    deep[0] = '\0';
    for (int i = 0; i < 5000; i++) strcat(deep, "{% if 1 %}");
    expect_refusal("deep ifs", deep, &none, "nested too deeply", PLM_ERR_FORMAT);
    expect_refusal("raise_exception", "{{ raise_exception('no system role') }}", &none, "no system role", PLM_ERR_FORMAT);

    /* deep JSON input is refused by the JSON reader, not by the stack */
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    plm_chat_params deep_json = {.messages_json = deep};
    expect_bad_input("deep JSON", "{{ messages }}", &deep_json, "JSON");
    free(deep);

    plm_chat_params bad_utf8 = {.messages_json = "[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]"};
    expect_bad_input("invalid UTF-8 JSON", "{{ messages }}", &bad_utf8, "JSON");
    plm_chat_params not_array = {.messages_json = "{\"role\":\"user\"}"};
    expect_bad_input("messages not an array", "x", &not_array, "array");
    plm_chat_params bad_tools = {.messages_json = "[]", .tools_json = "[1,"};
    expect_bad_input("bad tools JSON", "x", &bad_tools, "tools");
    plm_chat_params bad_vars = {.messages_json = "[]", .vars_json = "[1]"};
    expect_bad_input("vars not an object", "x", &bad_vars, "object");
}

/* Random token soup and every prefix of a real template: each compile and
 * render ends in success or an error (ASan in CI checks the rest). */
static void test_fuzz(void) {
    static const char *parts[] = {"{%", "%}", "{{", "}}", "{#", "#}", "-", "if ", "for ", "in ", "else", "endif",
                                  "endfor", "set ", "x", "messages", "(", ")", "[", "]", "{", "}", ",", ":", "'s'",
                                  "\"", "1", "2.5", "|", "length", "tojson", "is ", "not ", "and", "or", "~", "+", "*",
                                  ".", "loop", "macro ", "endmacro", "=", "\n", " ", "\\", "é", "namespace", "ns.a"};
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    int rendered = 0, refused = 0;
    for (int iter = 0; iter < 3000; iter++) {
        char src[512];
        size_t len = 0;
        int count = 1 + (int)(seed % 24);
        for (int k = 0; k < count; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            const char *p = parts[(seed >> 33) % (sizeof parts / sizeof parts[0])];
            size_t pl = strlen(p);
            if (len + pl >= sizeof src) break;
            memcpy(src + len, p, pl);
            len += pl;
        }
        src[len] = '\0';
        char *out;
        plm_error err;
        plm_chat_params p = {.messages_json = MSGS, .max_steps = 20000};
        if (render_ex(src, &p, &out, &err) == PLM_OK) rendered++;
        else refused++;
        free(out);
    }
    CHECK(rendered > 0 && refused > 0, "fuzz: %d rendered, %d refused", rendered, refused);

    const char *qwen3 = plm_chat_builtin("qwen3");
    size_t qn = strlen(qwen3);
    int ok_prefixes = 0;
    for (size_t cut = 0; cut <= qn; cut++) {
        plm_chat_template *t;
        plm_error err;
        if (plm_chat_compile(qwen3, cut, &t, &err) == PLM_OK) {
            ok_prefixes++;
            char *out = NULL;
            plm_chat_params p = {.messages_json = MSGS};
            plm_chat_render(t, &p, &out, NULL, &err);
            free(out);
            plm_chat_free(t);
        }
    }
    CHECK(ok_prefixes > 0, "some prefixes of the qwen3 template compile");
}

/* What Python Jinja does where @huggingface/jinja has nothing to compare. */
static void test_python_semantics(void) {
    expect_output("{{ 10 is divisibleby 5 }}{{ 10 is divisibleby(3) }}{{ 3 is equalto 3 }}{{ 3 is ne 4 }}", NULL,
                  "truefalsetruetrue");
    expect_output("{{ [1,2,3,4] | select('odd') | list }} {{ [1,2,3,4] | reject('odd') | list }}", NULL, "[1, 3] [2, 4]");
    expect_output("{{ [1,2,3,4,5] | select('divisibleby', 2) | join }}", NULL, "24");
    expect_output("{{ ['a','b'] | map('upper') | join }} {{ ['ab','cb'] | map('replace', 'b', 'x') | join(',') }}", NULL, "AB ax,cx");
    expect_output("{{ 2.5 | round }} {{ 3.5 | round }} {{ 3.14159 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(method='floor') }}",
                  NULL, "2.0 4.0 3.14 3.0 2.0");
    expect_output("{{ 'one two  three' | wordcount }} {{ 'abc' | count }} {{ [1,2] | count }}", NULL, "3 3 2");
    expect_output("{{ '\\n\\nx\\n'.strip('\\n') }}|{{ 'xxhixx'.lstrip('x') }}|{{ 'xxhixx'.rstrip('x') }}|{{ '  a '.strip('\\n') }}|",
                  NULL, "x|hixx|xxhi|  a |");
    expect_output("{% for i in [1,2,3] %}{{ i }}{% if i == 2 %}{% break %}{% endif %}{% endfor %}", NULL, "12");
    expect_output("{% for i in [1,2,3] %}{% if i == 2 %}{% continue %}{% endif %}{{ i }}{% endfor %}", NULL, "13");
    expect_output("{{ 'b' > 'a' }}{{ 'abc' < 'abd' }}{{ 'B' < 'a' }}", NULL, "truetruetrue");
    expect_output("{{ [3,1,2] | min }}{{ [3,1,2] | max }}{{ [1,2,3] | sum }}{{ [{'n':2},{'n':3}] | sum(attribute='n') }}", NULL, "1365");
    expect_output("{{ 'abc' | list }} {{ {'a': 1, 'b': 2} | list }} {{ 'abc' | reverse }} {{ 'abc' | first }}", NULL,
                  "[\"a\", \"b\", \"c\"] [\"a\", \"b\"] cba a");
    expect_output("{{ none | string }}|{{ nothing | string }}|", NULL, "None||");
    expect_output("{{ 'abcabc'.count('b') }} {{ 'hello'.find('l') }} {{ 'hello'.find('z') }}", NULL, "2 2 -1");
    /* empty strings through every string operation (UBSan: no NULL pointers) */
    expect_output("{{ '' | indent(2) }}{{ ''.split(',') }}{{ '' | trim }}{{ '' | upper }}{{ ''[::-1] }}{{ '' ~ '' }}"
                  "{{ '' | replace('', 'x') }}{{ ''.startswith('') }}{{ '' in '' }}{{ '' | wordcount }}{{ '' | reverse }}"
                  "{{ '' | list }}{{ ''.strip('x') }}{{ '' | title }}{{ '' | capitalize }}{{ '' | tojson }}{{ ''.count('') }}",
                  NULL, "[\"\"]xtruetrue0[]\"\"1");
    expect_output("{{ enable_thinking }} {{ custom.k }}", "{\"enable_thinking\": false, \"custom\": {\"k\": [1]}}", "false [1]");
}

static void test_api(void) {
    plm_chat_template *t = NULL;
    plm_error err;
    CHECK(plm_chat_compile(NULL, 0, &t, &err) == PLM_ERR_INVALID_ARG && !t, "NULL source");
    CHECK(plm_chat_compile("{{ x }}", 7, &t, &err) == PLM_OK, "compile");
    plm_chat_params p = {0};
    char *out = (char *)"unchanged";
    CHECK(plm_chat_render(t, &p, &out, NULL, &err) == PLM_ERR_INVALID_ARG && !out, "no messages: %s", err.message);
    plm_chat_free(t);
    plm_chat_free(NULL);

    /* the template is given by length: text after it is not read */
    CHECK(plm_chat_compile("ab{{", 2, &t, &err) == PLM_OK, "length-bounded compile");
    p.messages_json = "[]";
    size_t len = 0;
    CHECK(plm_chat_render(t, &p, &out, &len, &err) == PLM_OK && len == 2 && !strcmp(out, "ab"), "length-bounded render");
    free(out);
    plm_chat_free(t);

    /* standard variables */
    p = (plm_chat_params){.messages_json = MSGS, .tools_json = "[{\"name\":\"f\"}]", .add_generation_prompt = true,
                          .bos_token = "<s>", .eos_token = "</s>"};
    CHECK(render_ex("{{ bos_token }}{{ messages[0].content }}{{ tools[0].name }}{{ add_generation_prompt }}{{ eos_token }}"
                    "{{ enable_thinking is defined }}", &p, &out, &err) == PLM_OK &&
              !strcmp(out, "<s>Hiftrue</s>false"),
          "variables: %s", out ? out : err.message);
    free(out);
    p.tools_json = NULL;
    CHECK(render_ex("{{ tools is defined }}", &p, &out, &err) == PLM_OK && !strcmp(out, "false"), "no tools: undefined");
    free(out);

    /* built-in names */
    size_t count = 0;
    for (; plm_chat_builtin_name(count); count++)
        CHECK(plm_chat_builtin(plm_chat_builtin_name(count)) != NULL, "built-in %s", plm_chat_builtin_name(count));
    CHECK(count >= 7 && !plm_chat_builtin("nope") && !plm_chat_builtin(NULL), "built-in table");
}

/* One compiled template rendered from several threads at once gives every
 * thread the single-threaded output (the server renders this way). */
typedef struct {
    const plm_chat_template *t;
    const char *want;
    int mismatches;
} render_job;

static const char *THREAD_MSGS =
    "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Q1\"},"
    "{\"role\":\"assistant\",\"content\":\"<think>\\nr\\n</think>\\n\\nA1\"},{\"role\":\"user\",\"content\":\"Q2\"}]";

static void *render_many(void *arg) {
    render_job *job = arg;
    plm_chat_params p = {.messages_json = THREAD_MSGS, .tools_json = "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]",
                         .add_generation_prompt = true};
    for (int i = 0; i < 200; i++) {
        char *out = NULL;
        plm_error err;
        if (plm_chat_render(job->t, &p, &out, NULL, &err) != PLM_OK || strcmp(out, job->want)) job->mismatches++;
        free(out);
    }
    return NULL;
}

static void test_threads(void) {
    const char *src = plm_chat_builtin("qwen3");
    plm_chat_template *t;
    plm_error err;
    REQUIRE_VOID(plm_chat_compile(src, strlen(src), &t, &err) == PLM_OK, "compile qwen3: %s", err.message);
    plm_chat_params p = {.messages_json = THREAD_MSGS, .tools_json = "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]",
                         .add_generation_prompt = true};
    char *want = NULL;
    CHECK(plm_chat_render(t, &p, &want, NULL, &err) == PLM_OK && strstr(want, "<tools>"), "single render");
    render_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (render_job){t, want ? want : "", 0};
        CHECK(pthread_create(&th[i], NULL, render_many, &jobs[i]) == 0, "thread %d", i);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].mismatches == 0, "thread %d: %d renders differed", i, jobs[i].mismatches);
    }
    free(want);
    plm_chat_free(t);
}

static char *write_template_gguf(const char *dir) {
    static char path[512];
    snprintf(path, sizeof path, "%s/chat.gguf", dir);
    plm_gguf_writer *w = plm_gguf_writer_new();
    plm_gguf_writer_set_str(w, "general.architecture", "llama");
    plm_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    plm_gguf_str toks[3] = {{"<unk>", 5}, {"<|begin|>", 9}, {"<|end|>", 7}};
    plm_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
    plm_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    plm_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    plm_gguf_writer_set_str(w, "tokenizer.chat_template",
                        "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}\n{% endfor %}");
    plm_error err;
    plm_status s = plm_gguf_writer_write(w, path, NULL, NULL, &err);
    plm_gguf_writer_free(w);
    return s == PLM_OK ? path : NULL;
}

static char *run_command(const char *cmd, int *status) {
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    (void)n;
    *status = pclose(f);
    return buf;
}

static void test_gguf_and_cli(void) {
    char dir[] = "/tmp/plm-chat-XXXXXX";
    REQUIRE_VOID(mkdtemp(dir) != NULL, "mkdtemp");
    const char *model = write_template_gguf(dir);
    REQUIRE_VOID(model != NULL, "write a GGUF with a chat template");
    char *tmpl, *bos, *eos;
    plm_error err;
    CHECK(plm_chat_template_from_gguf(model, &tmpl, &bos, &eos, &err) == PLM_OK && tmpl && bos && eos &&
              !strcmp(bos, "<|begin|>") && !strcmp(eos, "<|end|>") && strstr(tmpl, "m.role"),
          "template from GGUF");
    free(tmpl), free(bos), free(eos);
    CHECK(plm_chat_template_from_gguf(SHARED("models/stories260K.gguf"), &tmpl, &bos, &eos, &err) == PLM_OK && !tmpl &&
              bos && !strcmp(bos, "<s>") && eos && !strcmp(eos, "</s>"),
          "stories260K: no template, <s> and </s>");
    free(tmpl), free(bos), free(eos);
    CHECK(plm_chat_template_from_gguf("/nonexistent.gguf", &tmpl, NULL, NULL, &err) != PLM_OK, "missing file");

    char msgs[100], cmd[1024];
    snprintf(msgs, sizeof msgs, "%s/m.json", dir);
    FILE *f = fopen(msgs, "w");
    REQUIRE_VOID(f != NULL, "write messages");
    fputs("[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"}]", f);
    fclose(f);
    int status;
    snprintf(cmd, sizeof cmd, "%s template -m %s --messages %s", PLM_BIN, model, msgs);
    char *out = run_command(cmd, &status);
    CHECK(out && status == 0 && !strcmp(out, "<|begin|>[system] Be brief.<|end|>\n[user] Hi<|end|>\n"),
          "template -m: %s", out ? out : "(none)");
    free(out);
    snprintf(cmd, sizeof cmd, "%s template --chat-template chatml --messages %s --add-generation-prompt", PLM_BIN, msgs);
    out = run_command(cmd, &status);
    CHECK(out && status == 0 &&
              !strcmp(out, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
          "template --chat-template chatml: %s", out ? out : "(none)");
    free(out);
    snprintf(cmd, sizeof cmd, "%s template --chat-template qwen3 --messages %s --add-generation-prompt --var enable_thinking=false",
             PLM_BIN, msgs);
    out = run_command(cmd, &status);
    CHECK(out && status == 0 && strstr(out, "<|im_start|>assistant\n<think>\n\n</think>\n\n"), "--var: %s", out ? out : "(none)");
    free(out);
    snprintf(cmd, sizeof cmd, "%s template -m %s --messages %s 2>&1", PLM_BIN, SHARED("models/stories260K.gguf"), msgs);
    out = run_command(cmd, &status);
    CHECK(out && status == 0 && strstr(out, "no tokenizer.chat_template; using the built-in chatml") &&
              strstr(out, "<|im_start|>user\nHi<|im_end|>\n"),
          "a model without a template falls back to chatml: %s", out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s template --chat-template nope --messages %s 2>&1", PLM_BIN, msgs);
    out = run_command(cmd, &status);
    CHECK(out && status != 0 && strstr(out, "chatml"), "unknown built-in lists the known ones: %s", out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s template --chat-template chatml --messages %s --var 'bad name=1' 2>&1", PLM_BIN, msgs);
    out = run_command(cmd, &status);
    CHECK(out && status != 0 && strstr(out, "NAME=JSON"), "bad --var: %s", out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s/t.jinja", dir);
    f = fopen(cmd, "w");
    REQUIRE_VOID(f != NULL, "write a template");
    fputs("ok\n{{ messages[0].content | nosuch }}\n", f);
    fclose(f);
    char cmd2[4096];
    snprintf(cmd2, sizeof cmd2, "%s template --template %s --messages %s 2>&1", PLM_BIN, cmd, msgs);
    out = run_command(cmd2, &status);
    CHECK(out && status != 0 && strstr(out, "line 2, column 26: unknown filter 'nosuch'"), "CLI error position: %s", out ? out : "");
    free(out);
    snprintf(cmd2, sizeof cmd2, "rm -rf %s", dir);
    CHECK(system(cmd2) == 0, "cleanup");
}

int main(void) {
    test_error_positions();
    test_hostile();
    test_fuzz();
    test_python_semantics();
    test_api();
    test_threads();
    test_gguf_and_cli();
    return test_summary();
}
