/* pocketlm synth: write a random-weight GGUF with a real model's shape. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cli.h"
#include "pocketlm.h"
#include "pocketlm_tools.h"

static void list_shapes(FILE *out) {
    for (const char *const *s = plm_synth_shapes(); *s; s++)
        fprintf(out, "%s%s\n", *s, !strncmp(*s, "test-", 5) ? "  (tiny test shape)" : "");
}

int cmd_synth(int argc, char **argv) {
    const char *vocab = NULL, *out = NULL;
    bool f32 = false, list = false, sparse = false;
    uint64_t seed = 42;
    int n_layer = 0;
    float layer_scale = 1.0f;
    const arg_spec specs[] = {
        {NULL, "--vocab", ARG_STR, &vocab, "PATH", "GGUF whose tokenizer.* keys are copied (sets n_vocab)"},
        {"-o", "--output", ARG_STR, &out, "PATH", "GGUF file to write"},
        {NULL, "--f32", ARG_FLAG, &f32, NULL, "store matrices as F32 instead of F16"},
        {NULL, "--seed", ARG_U64, &seed, "N", "random seed: same seed, same file"},
        {NULL, "--list", ARG_FLAG, &list, NULL, "print the known shapes and exit"},
        {NULL, "--layers", ARG_INT, &n_layer, "N", "layer count, 0 = the shape's (a shallow draft: same seed, fewer layers)"},
        {NULL, "--layer-scale", ARG_FLOAT, &layer_scale, "X",
         "scale the layer matrices' deviation; small (0.05) makes deep and shallow copies agree"},
        {NULL, "--sparse", ARG_FLAG, &sparse, NULL,
         "write no weights: a sparse file of the full size, for plan and quantize --dry-run of big shapes"},
    };
    const arg_parser parser = {"synth", "pocketlm synth SHAPE --vocab VOCAB.gguf -o OUT.gguf [options]\n\n"
                               "Writes a GGUF with the tensor shapes and hyperparameters of a real model and\n"
                               "random weights (norms 1, matrices N(0, 0.02), embeddings N(0, 0.1)).\n"
                               "SHAPE is one of the names --list prints",
                               specs, sizeof specs / sizeof specs[0], 1};
    char *pos[1];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) return rc == ARGS_HELP ? 0 : 1;
    if (list) {
        list_shapes(stdout);
        return 0;
    }
    if (n_pos != 1 || !vocab || !out) {
        fprintf(stderr, "pocketlm synth: give SHAPE, --vocab VOCAB.gguf and -o OUT.gguf (see --help)\n");
        return 1;
    }

    if (n_layer < 0 || n_layer > 1000 || !(layer_scale > 0.0f)) {
        fprintf(stderr, "pocketlm synth: --layers takes 0..1000 and --layer-scale a positive number\n");
        return 1;
    }
    plm_synth_params p = {pos[0], vocab, out, f32, seed};
    plm_error err;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if ((sparse ? plm_synth_sparse(&p, &err) : plm_synth_ex(&p, (uint32_t)n_layer, layer_scale, &err)) != PLM_OK) {
        fprintf(stderr, "pocketlm synth: %s\n", err.message);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    FILE *f = fopen(out, "rb");
    long long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) size = (long long)ftell(f);
    if (f) fclose(f);
    fprintf(stderr, "pocketlm synth: wrote %s (%s, %.1f MiB) in %.1f s\n", out, pos[0],
            size >= 0 ? (double)size / (1 << 20) : 0.0,
            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return 0;
}
