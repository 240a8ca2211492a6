/*
 * The built-in chat templates produce their families' prompt formats.
 *
 * Expected prompts are written out here from each family's published
 * format (model cards and the families' own tokenizer_config.json
 * templates); tests/oracle/chat_template.test.mjs also renders llama3,
 * chatml, qwen3 and gemma against the real templates shipped in npm.
 */
#include <stdlib.h>
#include <string.h>

#include "pocketlm_chat.h"
#include "test.h"

static const char *CONVERSATION =
    "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
    "{\"role\":\"user\",\"content\":\"Hi!\"},"
    "{\"role\":\"assistant\",\"content\":\"Hello.\"},"
    "{\"role\":\"user\",\"content\":\"Name a color.\"}]";

static char *render_builtin(const char *name, const char *messages, bool agp, plm_error *err) {
    const char *src = plm_chat_builtin(name);
    plm_chat_template *t;
    char *out = NULL;
    if (!src || plm_chat_compile(src, strlen(src), &t, err)) return NULL;
    plm_chat_params p = {.messages_json = messages, .add_generation_prompt = agp, .bos_token = "<s>", .eos_token = "</s>"};
    if (plm_chat_render(t, &p, &out, NULL, err)) out = NULL;
    plm_chat_free(t);
    return out;
}

static void expect(const char *name, bool agp, const char *want) {
    plm_error err = {0};
    char *out = render_builtin(name, CONVERSATION, agp, &err);
    CHECK(out && !strcmp(out, want), "%s (generation prompt %d):\n  want %s\n  got  %s", name, agp, want,
          out ? out : err.message);
    free(out);
}

int main(void) {
    expect("chatml", true,
           "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
           "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nName a color.<|im_end|>\n"
           "<|im_start|>assistant\n");
    expect("chatml", false,
           "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
           "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nName a color.<|im_end|>\n");
    expect("llama2", true,
           "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi! [/INST] Hello. </s><s>[INST] Name a color. [/INST]");
    expect("llama3", true,
           "<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nName a color.<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect("gemma", true,
           "<s><start_of_turn>user\nBe brief.\n\nHi!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
           "<start_of_turn>user\nName a color.<end_of_turn>\n<start_of_turn>model\n");
    expect("phi3", true,
           "<|system|>\nBe brief.<|end|>\n<|user|>\nHi!<|end|>\n<|assistant|>\nHello.<|end|>\n"
           "<|user|>\nName a color.<|end|>\n<|assistant|>\n");
    expect("phi3", false,
           "<|system|>\nBe brief.<|end|>\n<|user|>\nHi!<|end|>\n<|assistant|>\nHello.<|end|>\n"
           "<|user|>\nName a color.<|end|>\n</s>");
    expect("mistral", true, "<s>[INST] Be brief.\n\nHi! [/INST]Hello.</s>[INST] Name a color. [/INST]");
    expect("qwen3", true,
           "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
           "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nName a color.<|im_end|>\n"
           "<|im_start|>assistant\n");

    /* families that require alternating turns refuse others, naming the rule */
    const char *bad = "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}]";
    const char *strict[] = {"llama2", "gemma"};
    for (int i = 0; i < 2; i++) {
        plm_error err = {0};
        char *out = render_builtin(strict[i], bad, true, &err);
        CHECK(!out && strstr(err.message, "alternate"), "%s refuses user,user: %s", strict[i], out ? out : err.message);
        free(out);
    }

    /* every built-in compiles and renders a single user turn */
    for (size_t i = 0; plm_chat_builtin_name(i); i++) {
        plm_error err = {0};
        char *out = render_builtin(plm_chat_builtin_name(i), "[{\"role\":\"user\",\"content\":\"Q\"}]", true, &err);
        CHECK(out && strstr(out, "Q"), "built-in %s: %s", plm_chat_builtin_name(i), out ? out : err.message);
        free(out);
    }
    return test_summary();
}
