/* pocketlm quantize: re-encode a model's weights as llama-quantize does. */
#include <stdio.h>

#include "args.h"
#include "cli.h"
#include "pocketlm.h"
#include "pocketlm_tools.h"

int cmd_quantize(int argc, char **argv) {
    plm_quantize_params p = plm_quantize_default_params();
    const arg_spec specs[] = {
        {NULL, "--pure", ARG_FLAG, &p.pure, NULL,
         "every 2-D weight matrix in TYPE's base format (Q4_K for Q4_K_M), no mixture"},
        {"-t", "--threads", ARG_INT, &p.n_threads, "N", "threads, 0 = every core (the output does not depend on it)"},
    };
    const arg_parser parser = {
        "quantize",
        "pocketlm quantize [--pure] [-t N] IN.gguf OUT.gguf TYPE\n"
        "  TYPE: llama.cpp's K-quant mixtures Q4_K_M Q4_K_S Q5_K_M Q5_K_S Q6_K Q3_K_M Q3_K_S Q3_K_L Q2_K\n"
        "        (Q4_K, Q5_K, Q3_K = the _M ones), or one format for every weight matrix:\n"
        "        Q8_0 Q5_1 Q5_0 Q4_1 Q4_0 IQ4_NL F16 BF16 F32",
        specs, (int)(sizeof specs / sizeof specs[0]), 3};
    char *pos[3];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) return rc == ARGS_HELP ? 0 : 1;
    if (n_pos != 3) {
        args_usage(&parser, stderr);
        return 1;
    }
    if (p.n_threads < 0) {
        fprintf(stderr, "pocketlm quantize: -t must be >= 0\n");
        return 1;
    }
    plm_error err;
    if (plm_quantize_ex(pos[0], pos[1], pos[2], &p, &err)) {
        fprintf(stderr, "pocketlm quantize: %s\n", err.message);
        return 1;
    }
    return 0;
}
