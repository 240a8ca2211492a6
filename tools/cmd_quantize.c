/* pocketlm quantize: re-encode a model's weight matrices in one format. */
#include <stdio.h>

#include "args.h"
#include "cli.h"
#include "pocketlm.h"

int cmd_quantize(int argc, char **argv) {
    const arg_parser parser = {"quantize", "pocketlm quantize IN.gguf OUT.gguf TYPE   (TYPE: Q8_0 Q5_1 Q5_0 Q4_1 Q4_0 "
                               "IQ4_NL F16 BF16 F32)", NULL, 0, 3};
    char *pos[3];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) return rc == ARGS_HELP ? 0 : 1;
    if (n_pos != 3) {
        args_usage(&parser, stderr);
        return 1;
    }
    plm_error err;
    if (plm_quantize(pos[0], pos[1], pos[2], &err)) {
        fprintf(stderr, "pocketlm quantize: %s\n", err.message);
        return 1;
    }
    return 0;
}
