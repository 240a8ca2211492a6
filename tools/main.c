/* pocketlm: one command, ollama-style subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pocketlm.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"chat", cmd_chat, "talk to a model in its chat template: a REPL, a pipe or one -p message"},
    {"serve", cmd_serve, "OpenAI- and Ollama-compatible HTTP server"},
    {"inspect", cmd_inspect, "print a GGUF file's metadata and tensor table"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"quantize", cmd_quantize, "re-encode the weight matrices: Q8_0, Q4_0, Q5_0, IQ4_NL, F16..."},
    {"imatrix", cmd_imatrix, "importance matrix from a calibration text, for quantize --imatrix"},
    {"synth", cmd_synth, "write a random-weight GGUF of a real model's shape"},
    {"plan", cmd_plan, "will a model fit a device: memory bill, verdict, speed ceilings"},
    {"probe", cmd_probe, "measure this device: cores, RAM, memory bandwidth, file read speed"},
    {"tune", cmd_tune, "search thread count and batch size; save the best as this device's defaults"},
    {"bench", cmd_bench, "time prompt processing and generation, llama-bench style"},
    {"perplexity", cmd_perplexity, "score a text: perplexity, llama-perplexity style; --kld-save a base"},
    {"kld", cmd_kld, "KL divergence of a model or KV cache type against a saved base"},
    {"template", cmd_template, "render a chat template: the exact prompt for a conversation"},
    {"smoke", cmd_smoke, "release check: a candidate's answers, top-1 agreement and KLD against its base"},
};

static void usage(FILE *out) {
    fprintf(out, "pocketlm %s — LLM inference that fits in a phone's memory\n\n", PLM_VERSION);
    fprintf(out, "usage: pocketlm COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(out, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(out, "\n'pocketlm COMMAND --help' lists a command's options and defaults.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return argc < 2 ? 1 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("pocketlm %s\n", PLM_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(argv[1], subcommands[i].name)) return subcommands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "pocketlm: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 1;
}
