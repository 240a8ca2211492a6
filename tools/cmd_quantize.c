/* pocketlm quantize: re-encode a model's weights as llama-quantize does. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "pocketlm.h"
#include "pocketlm_tools.h"

/* The writer streams into OUT.tmp and renames it when complete; an
 * interrupted run removes it, so no partial file is left behind. */
static char tmp_path[4096];

static void on_signal(int sig) {
    if (tmp_path[0]) unlink(tmp_path);  /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void remove_on_interrupt(const char *out) {
    snprintf(tmp_path, sizeof tmp_path, "%s.tmp", out);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    struct sigaction old;  /* a file size limit: unless the caller ignores it (then write fails) */
    if (!sigaction(SIGXFSZ, NULL, &old) && old.sa_handler != SIG_IGN) sigaction(SIGXFSZ, &sa, NULL);
}

static void summary(const char *in, uint64_t bytes, uint64_t weights, bool dry_run) {
    FILE *f = fopen(in, "rb");
    long in_size = -1;
    if (f && !fseek(f, 0, SEEK_END)) in_size = ftell(f);
    if (f) fclose(f);
    fprintf(stderr, "pocketlm quantize: %s%.2f MiB of tensors (input file %.2f MiB), %.4f bits per weight over %llu "
                    "weights\n", dry_run ? "dry run, would write " : "", (double)bytes / 1048576.0,
            (double)in_size / 1048576.0, weights ? 8.0 * (double)bytes / (double)weights : 0.0,
            (unsigned long long)weights);
}

int cmd_quantize(int argc, char **argv) {
    plm_quantize_params p = plm_quantize_default_params();
    arg_list include = {0}, exclude = {0}, tensor_types = {0};
    bool quiet = false;
    const arg_spec specs[] = {
        {NULL, "--pure", ARG_FLAG, &p.pure, NULL,
         "every 2-D weight matrix in TYPE's base format (Q4_K for Q4_K_M), no mixture"},
        {NULL, "--imatrix", ARG_STR, &p.imatrix, "FILE",
         "importance matrix (pocketlm imatrix or llama-imatrix; GGUF or legacy .dat)"},
        {NULL, "--include-weights", ARG_LIST, &include, "NAME", "use the imatrix only for tensors containing NAME"},
        {NULL, "--exclude-weights", ARG_LIST, &exclude, "NAME", "do not use the imatrix for tensors containing NAME"},
        {NULL, "--output-tensor-type", ARG_STR, &p.output_tensor_type, "TYPE", "output.weight's type"},
        {NULL, "--token-embedding-type", ARG_STR, &p.token_embedding_type, "TYPE", "token_embd.weight's type"},
        {NULL, "--tensor-type", ARG_LIST, &tensor_types, "REGEX=TYPE",
         "matrices whose name matches REGEX get TYPE (repeatable; the first match wins)"},
        {NULL, "--allow-requantize", ARG_FLAG, &p.allow_requantize, NULL, "accept an already quantized input"},
        {NULL, "--dry-run", ARG_FLAG, &p.dry_run, NULL, "print the size and bits per weight, write nothing"},
        {"-q", "--quiet", ARG_FLAG, &quiet, NULL, "no per-tensor progress"},
        {"-t", "--threads", ARG_INT, &p.n_threads, "N", "threads, 0 = every core (the output does not depend on it)"},
    };
    const arg_parser parser = {
        "quantize",
        "pocketlm quantize [options] IN.gguf OUT.gguf TYPE   (--dry-run: IN.gguf TYPE)\n"
        "  TYPE: llama.cpp's K-quant mixtures Q4_K_M Q4_K_S Q5_K_M Q5_K_S Q6_K Q3_K_M Q3_K_S Q3_K_L Q2_K\n"
        "        (Q4_K, Q5_K, Q3_K = the _M ones), Q8_0 Q5_1 Q5_0 Q4_1 Q4_0 IQ4_NL IQ4_XS (with\n"
        "        llama.cpp's per-tensor rules too), IQ3_M IQ3_S IQ3_XS IQ3_XXS IQ2_M IQ2_S IQ2_XS\n"
        "        IQ2_XXS IQ1_M IQ1_S (IQ1/IQ2 and IQ3_XXS need --imatrix), TQ2_0 TQ1_0 MXFP4_MOE,\n"
        "        or F16 BF16 F32",
        specs, (int)(sizeof specs / sizeof specs[0]), 3};
    char *pos[3];
    int n_pos, rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) {
        args_free(&parser);
        return rc == ARGS_HELP ? 0 : 1;
    }
    const bool args_ok = n_pos == 3 || (p.dry_run && n_pos == 2);
    if (!args_ok || p.n_threads < 0) {
        if (!args_ok) args_usage(&parser, stderr);
        else fprintf(stderr, "pocketlm quantize: -t must be >= 0\n");
        args_free(&parser);
        return 1;
    }
    const char *in = pos[0], *out = n_pos == 3 ? pos[1] : NULL, *type = pos[n_pos - 1];
    p.include_weights = include.items;
    p.n_include_weights = include.n;
    p.exclude_weights = exclude.items;
    p.n_exclude_weights = exclude.n;
    p.tensor_types = tensor_types.items;
    p.n_tensor_types = tensor_types.n;
    p.progress = !quiet && !p.dry_run;
    uint64_t bytes = 0, weights = 0;
    p.out_bytes = &bytes;
    p.out_weights = &weights;
    if (out && !p.dry_run) remove_on_interrupt(out);
    plm_error err;
    rc = 0;
    if (plm_quantize_ex(in, out, type, &p, &err)) {
        fprintf(stderr, "pocketlm quantize: %s\n", err.message);
        rc = 1;
    } else {
        summary(in, bytes, weights, p.dry_run);
    }
    args_free(&parser);
    return rc;
}
