/*
 * The chat-output parser of pocketlm serve (src/server/tool_calls.c) on fixed
 * model outputs in each format: Qwen3/Hermes <tool_call> tags (one, several,
 * malformed JSON), Llama 3.x JSON calls (bare, <|python_tag|>, several), and
 * <think> reasoning, whole and as a stream sees it (partial parses whose
 * content and reasoning stay prefixes of the final parse).  Expected values
 * are written by hand from the formats' documentation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "server/tool_calls.h"
#include "test.h"

static tc_result parse(const char *text, tc_format fmt, bool think_open, bool partial) {
    tc_result r;
    if (!tc_parse(text, strlen(text), fmt, think_open, partial, &r)) {
        fprintf(stderr, "FAIL: tc_parse ran out of memory\n");
        exit(1);
    }
    return r;
}

/* The i-th call's name and its arguments as compact sorted JSON. */
static void check_call(const tc_result *r, size_t i, const char *name, const char *args, int line) {
    json_t *c = r->calls ? json_array_get(r->calls, i) : NULL;
    if (!c) {
        CHECK(0, "line %d: no call %zu", line, i);
        return;
    }
    const char *got_name = json_string_value(json_object_get(c, "name"));
    char *got_args = json_dumps(json_object_get(c, "arguments"), JSON_COMPACT | JSON_SORT_KEYS);
    CHECK(got_name && !strcmp(got_name, name) && got_args && !strcmp(got_args, args),
          "line %d: call %zu is %s(%s), expected %s(%s)", line, i, got_name ? got_name : "?", got_args ? got_args : "?",
          name, args);
    free(got_args);
}

static size_t n_calls(const tc_result *r) { return r->calls ? json_array_size(r->calls) : 0; }

static void test_hermes(void) {
    tc_result r = parse("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                        TC_HERMES, false, false);
    CHECK(n_calls(&r) == 1, "one hermes call, got %zu", n_calls(&r));
    check_call(&r, 0, "get_weather", "{\"city\":\"Paris\"}", __LINE__);
    CHECK(!strcmp(r.content, ""), "no content, got '%s'", r.content);
    CHECK(!r.reasoning, "no reasoning");
    tc_result_free(&r);

    r = parse("Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
              "<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"y\\\": [2]}\"}\n</tool_call>",
              TC_HERMES, false, false);
    CHECK(n_calls(&r) == 2, "two calls, got %zu", n_calls(&r));
    check_call(&r, 0, "a", "{\"x\":1}", __LINE__);
    check_call(&r, 1, "b", "{\"y\":[2]}", __LINE__);
    CHECK(!strcmp(r.content, "Let me check."), "content before the calls, got '%s'", r.content);
    tc_result_free(&r);

    /* malformed JSON inside the tag: the whole output is content */
    const char *bad = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": }\n</tool_call>";
    r = parse(bad, TC_HERMES, false, false);
    CHECK(n_calls(&r) == 0, "malformed: no calls");
    CHECK(!strcmp(r.content, bad), "malformed: content is the output, got '%s'", r.content);
    tc_result_free(&r);

    /* a call without a name, and arguments that are not an object */
    const char *noname = "<tool_call>{\"arguments\": {}}</tool_call>";
    r = parse(noname, TC_HERMES, false, false);
    CHECK(n_calls(&r) == 0 && !strcmp(r.content, noname), "nameless call is content");
    tc_result_free(&r);
    const char *badargs = "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>";
    r = parse(badargs, TC_HERMES, false, false);
    CHECK(n_calls(&r) == 0 && !strcmp(r.content, badargs), "array arguments are content");
    tc_result_free(&r);

    /* the last call cut off before its closing tag still counts when its JSON is whole */
    r = parse("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n", TC_HERMES, false, false);
    CHECK(n_calls(&r) == 1, "unclosed but whole call");
    check_call(&r, 0, "f", "{}", __LINE__);
    tc_result_free(&r);

    /* truncated JSON: content, no crash */
    const char *cut = "<tool_call>\n{\"name\": \"f\", \"argu";
    r = parse(cut, TC_HERMES, false, false);
    CHECK(n_calls(&r) == 0 && !strcmp(r.content, cut), "truncated call is content");
    tc_result_free(&r);

    /* plain text, and the same text with a format that has no calls */
    r = parse("Hello there.", TC_HERMES, false, false);
    CHECK(n_calls(&r) == 0 && !strcmp(r.content, "Hello there."), "plain text");
    tc_result_free(&r);
}

static void test_llama3(void) {
    tc_result r = parse("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"days\": 3}}", TC_LLAMA3,
                        false, false);
    CHECK(n_calls(&r) == 1, "one llama3 call, got %zu", n_calls(&r));
    check_call(&r, 0, "get_weather", "{\"city\":\"Oslo\",\"days\":3}", __LINE__);
    CHECK(!strcmp(r.content, ""), "no content");
    tc_result_free(&r);

    r = parse("<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"k\": \"v\"}}",
              TC_LLAMA3, false, false);
    CHECK(n_calls(&r) == 2, "two llama3 calls, got %zu", n_calls(&r));
    check_call(&r, 0, "a", "{}", __LINE__);
    check_call(&r, 1, "b", "{\"k\":\"v\"}", __LINE__);
    tc_result_free(&r);

    const char *bad = "{\"name\": \"a\", \"parameters\": {\"x\": tru}}";
    r = parse(bad, TC_LLAMA3, false, false);
    CHECK(n_calls(&r) == 0 && !strcmp(r.content, bad), "malformed llama3 JSON is content");
    tc_result_free(&r);

    const char *trailing = "{\"name\": \"a\", \"parameters\": {}} and then some words";
    r = parse(trailing, TC_LLAMA3, false, false);
    CHECK(n_calls(&r) == 0 && !strcmp(r.content, trailing), "a call followed by prose is content");
    tc_result_free(&r);

    r = parse("The answer is 42.", TC_LLAMA3, false, false);
    CHECK(n_calls(&r) == 0 && !strcmp(r.content, "The answer is 42."), "prose");
    tc_result_free(&r);

    /* the Hermes tag means nothing to the Llama 3 format */
    const char *tag = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>";
    r = parse(tag, TC_LLAMA3, false, false);
    CHECK(n_calls(&r) == 0 && !strcmp(r.content, tag), "hermes tag under llama3 is content");
    tc_result_free(&r);
}

static void test_reasoning(void) {
    tc_result r = parse("<think>\nThe user greets me.\n</think>\n\nHello!", TC_NONE, false, false);
    CHECK(r.reasoning && !strcmp(r.reasoning, "The user greets me."), "reasoning, got '%s'",
          r.reasoning ? r.reasoning : "(null)");
    CHECK(!strcmp(r.content, "Hello!"), "content after think, got '%s'", r.content);
    tc_result_free(&r);

    /* the prompt opened the block (e.g. DeepSeek-R1's template) */
    r = parse("Thinking here.</think>Answer.", TC_NONE, true, false);
    CHECK(r.reasoning && !strcmp(r.reasoning, "Thinking here."), "open think");
    CHECK(!strcmp(r.content, "Answer."), "content after open think, got '%s'", r.content);
    tc_result_free(&r);

    /* an empty block (Qwen3 with thinking off writes it into the prompt; some models echo it) */
    r = parse("<think>\n\n</think>\n\nHi", TC_HERMES, false, false);
    CHECK(r.reasoning && !strcmp(r.reasoning, ""), "empty reasoning");
    CHECK(!strcmp(r.content, "Hi"), "content, got '%s'", r.content);
    tc_result_free(&r);

    /* reasoning then a call */
    r = parse("<think>I need the weather.</think>\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"c\": \"Rome\"}}\n"
              "</tool_call>",
              TC_HERMES, false, false);
    CHECK(r.reasoning && !strcmp(r.reasoning, "I need the weather."), "reasoning before call");
    CHECK(n_calls(&r) == 1 && !strcmp(r.content, ""), "call after reasoning");
    check_call(&r, 0, "w", "{\"c\":\"Rome\"}", __LINE__);
    tc_result_free(&r);

    /* unclosed at the end: all of it is reasoning */
    r = parse("<think>still going", TC_NONE, false, false);
    CHECK(r.reasoning && !strcmp(r.reasoning, "still going") && !strcmp(r.content, ""), "unclosed think");
    tc_result_free(&r);
}

/* Every prefix of `text` parsed partially gives content and reasoning that
 * are prefixes of the final parse's, and no calls. */
static void check_stream_prefixes(const char *text, tc_format fmt, bool think_open) {
    tc_result fin = parse(text, fmt, think_open, false);
    size_t n = strlen(text);
    char *buf = malloc(n + 1);
    for (size_t k = 0; k <= n; k++) {
        memcpy(buf, text, k);
        buf[k] = '\0';
        tc_result p = parse(buf, fmt, think_open, true);
        CHECK(!p.calls, "partial parse of %zu bytes has calls", k);
        CHECK(!strncmp(fin.content, p.content, strlen(p.content)), "partial content '%s' not a prefix of '%s'",
              p.content, fin.content);
        const char *fr = fin.reasoning ? fin.reasoning : "";
        const char *pr = p.reasoning ? p.reasoning : "";
        CHECK(!strncmp(fr, pr, strlen(pr)), "partial reasoning '%s' not a prefix of '%s'", pr, fr);
        tc_result_free(&p);
    }
    free(buf);
    tc_result_free(&fin);
}

static void test_streaming(void) {
    check_stream_prefixes("<think>\nLet me see.\n</think>\n\nSure: <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n"
                          "</tool_call>",
                          TC_HERMES, false);
    check_stream_prefixes("Once upon a time <tool the end", TC_HERMES, false);
    check_stream_prefixes("<|python_tag|>{\"name\": \"a\", \"parameters\": {}}", TC_LLAMA3, false);
    check_stream_prefixes("reasoning</think> answer", TC_NONE, true);
    check_stream_prefixes("<thinking is not a tag", TC_NONE, false);

    /* what a stream shows before the end */
    tc_result p = parse("Sure: <tool_call>\n{\"name\": \"f\"", TC_HERMES, false, true);
    CHECK(!strcmp(p.content, "Sure:"), "content before an open call, got '%s'", p.content);
    tc_result_free(&p);
    p = parse("<think>abc</thi", TC_NONE, false, true);
    CHECK(p.reasoning && !strcmp(p.reasoning, "abc") && !strcmp(p.content, ""), "held-back close marker");
    tc_result_free(&p);
}

static void test_format_of_template(void) {
    CHECK(tc_format_of_template("{{ '<tool_call>' }}") == TC_HERMES, "hermes template");
    CHECK(tc_format_of_template("<|start_header_id|>{% if tools %}") == TC_LLAMA3, "llama3 template");
    CHECK(tc_format_of_template("{{ '<|im_start|>' }}") == TC_NONE, "chatml has no tool format");
    CHECK(tc_format_of_template(NULL) == TC_NONE, "no template");
}

/* The server's streaming split (chat.c): output fed a few bytes at a time,
 * after a forced call's prefill, gives deltas that add up to the whole
 * content and reasoning, whole UTF-8 characters in each, and the calls at
 * the end. */
static void feed(const char *prefill, const char *output, tc_format fmt, bool think_open, size_t step,
                 const char *want_content, const char *want_reasoning, size_t want_calls) {
    srv_chat_prompt p = {.format = fmt, .think_open = think_open, .prefill = (char *)prefill};
    chat_split cs;
    REQUIRE_VOID(chat_split_init(&cs, &p), "chat_split_init");
    char content[1024] = "", reasoning[1024] = "";
    size_t n = strlen(output);
    json_t *calls = NULL;
    for (size_t at = 0; at <= n; at += step) {
        size_t k = at + step <= n ? step : n - at;
        bool final = at + step > n;
        char *c, *r;
        REQUIRE_VOID(chat_split_step(&cs, output + at, k, final, &c, &r, final ? &calls : NULL), "step");
        for (char *d = c; d; d = d == c ? r : NULL) {
            /* a delta never ends inside a UTF-8 sequence */
            size_t dl = strlen(d);
            CHECK(!dl || (unsigned char)d[dl - 1] < 0x80 || ((unsigned char)d[dl - 1] & 0xC0) == 0x80,
                  "delta '%s' ends on a lead byte", d);
        }
        if (c) strncat(content, c, sizeof content - strlen(content) - 1);
        if (r) strncat(reasoning, r, sizeof reasoning - strlen(reasoning) - 1);
        free(c);
        free(r);
    }
    CHECK(!strcmp(content, want_content), "streamed content '%s', want '%s'", content, want_content);
    CHECK(!strcmp(reasoning, want_reasoning), "streamed reasoning '%s', want '%s'", reasoning, want_reasoning);
    CHECK((calls ? json_array_size(calls) : 0) == want_calls, "streamed calls: %zu, want %zu",
          calls ? json_array_size(calls) : 0, want_calls);
    json_decref(calls);
    chat_split_free(&cs);
}

static void test_chat_split(void) {
    for (size_t step = 1; step <= 7; step += 3) {
        feed(NULL, "<think>h\xc3\xa9las</think>\n\nCaf\xc3\xa9 \xe2\x98\x95 ok", TC_NONE, false, step, "Caf\xc3\xa9 \xe2\x98\x95 ok",
             "h\xc3\xa9las", 0);
        feed("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ", "{\"city\": \"Paris\"}}\n</tool_call>", TC_HERMES,
             false, step, "", "", 1);
        feed("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ", "Once upon a time", TC_HERMES, false, step,
             "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": Once upon a time", "", 0);
        feed("</think>\n\n{\"name\": \"f\", \"parameters\": ", "{}}", TC_LLAMA3, true, step, "", "", 1);
        feed(NULL, "Plain answer.\n", TC_LLAMA3, false, step, "Plain answer.\n", "", 0);
    }
}

int main(void) {
    test_hermes();
    test_llama3();
    test_reasoning();
    test_streaming();
    test_format_of_template();
    test_chat_split();
    return test_summary();
}
