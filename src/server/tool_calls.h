/*
 * A chat model's raw output -> the parts an API reply has: the answer
 * (content), the reasoning (<think>...</think>) and tool calls, in the
 * format the chat template taught the model:
 *
 *   TC_HERMES  Qwen 2.5/3, Hermes: <tool_call>{"name": N, "arguments": {...}}</tool_call>,
 *              several in a row
 *   TC_LLAMA3  Llama 3.x: [<|python_tag|>]{"name": N, "parameters": {...}}, several
 *              separated by ';'
 *
 * Output that does not parse as the format's calls (malformed JSON inside a
 * tag, a call without a name) is returned whole as content: a model that
 * talks about tool calls is not an error.  Kept free of HTTP so the unit test
 * (tests/test_tool_calls.c) can feed it fixed outputs.
 */
#ifndef PLM_SERVER_TOOL_CALLS_H
#define PLM_SERVER_TOOL_CALLS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef enum { TC_NONE = 0, TC_HERMES, TC_LLAMA3 } tc_format;

typedef struct tc_result {
    char *content;    /* malloc'd, NUL-terminated; never NULL after tc_parse */
    char *reasoning;  /* malloc'd; NULL when the output had none */
    json_t *calls;    /* array of {"name": string, "arguments": object}; NULL when none */
} tc_result;

/* The tool-call format a template's source teaches (TC_NONE: neither). */
tc_format tc_format_of_template(const char *source);

/* Splits `text`.  think_open: the prompt already opened a <think> block,
 * so the output starts inside it.  partial: the output is still being
 * generated; an unfinished tool call or a tail that may be the start of a
 * marker is held back (neither content nor reasoning), so what a stream
 * has sent stays a prefix of the final parse.  false on out of memory. */
bool tc_parse(const char *text, size_t len, tc_format fmt, bool think_open, bool partial, tc_result *out);
void tc_result_free(tc_result *r);

#endif
