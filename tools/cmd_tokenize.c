/* pocketlm tokenize: print the ids of a text, as llama.cpp's tokenizer tests
 * do; with --lines, of every line of a file (one model load for many texts). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "files.h"
#include "pocketlm.h"

/* Prints one line: the ids of text[0 .. len), or id:'piece' pairs. */
static bool print_tokens(plm_model *model, const char *text, size_t len, bool add_special,
                         bool parse_special, bool pieces) {
    int n = 0;
    plm_token *ids = plm_tokenize_alloc(model, text, len, &n, add_special, parse_special);
    if (!ids) n = -1;
    for (int i = 0; i < n; i++) {
        if (pieces) {
            char piece[256];
            int m = plm_token_to_piece(model, ids[i], piece, sizeof piece, true);
            printf("%s%d:'%.*s'", i ? " " : "", ids[i], m > 0 ? m : 0, piece);
        } else {
            printf("%s%d", i ? " " : "", ids[i]);
        }
    }
    printf("\n");
    if (n < 0) fprintf(stderr, "pocketlm tokenize: tokenization failed\n");
    free(ids);
    return n >= 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model_path = NULL, *file = NULL;
    bool add_special = false, parse_special = false, pieces = false, lines = false;
    const arg_spec specs[] = {
        {"-m", "--model", ARG_STR, &model_path, "PATH", "GGUF file (a vocab-only file is enough)"},
        {"-f", "--file", ARG_STR, &file, "PATH", "read the text from a file instead of the argument"},
        {NULL, "--add-special", ARG_FLAG, &add_special, NULL, "add BOS/EOS as the vocabulary asks"},
        {NULL, "--parse-special", ARG_FLAG, &parse_special, NULL, "turn special-token text into control tokens"},
        {NULL, "--pieces", ARG_FLAG, &pieces, NULL, "print id:'piece' pairs instead of bare ids"},
        {NULL, "--lines", ARG_FLAG, &lines, NULL, "with -f: each line is a text; one line of ids per line"},
    };
    const arg_parser parser = {"tokenize", "pocketlm tokenize -m VOCAB.gguf [options] \"text\"", specs,
                               sizeof specs / sizeof specs[0], 1};
    char *pos[1];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) return rc == ARGS_HELP ? 0 : 1;
    if (!model_path || (n_pos == 0) == (file == NULL) || (lines && !file)) {
        fprintf(stderr, "pocketlm tokenize: give -m MODEL and either a text or -f FILE (--lines needs -f; see --help)\n");
        return 1;
    }

    char *text = NULL;
    size_t len = 0;
    if (file) {
        text = read_file(file, &len);
        if (!text) {
            perror(file);
            return 1;
        }
    } else {
        text = strdup(pos[0]);
        len = strlen(pos[0]);
    }
    if (!text && len) {
        fprintf(stderr, "pocketlm tokenize: out of memory\n");
        return 1;
    }

    plm_model_params mp = plm_model_default_params();
    mp.vocab_only = true;
    plm_model *model;
    plm_error err;
    if (plm_model_load(model_path, &mp, &model, &err)) {
        fprintf(stderr, "pocketlm tokenize: %s\n", err.message);
        free(text);
        return 1;
    }
    bool ok = true;
    if (lines) {
        for (size_t at = 0; ok && at < len;) { /* a last line without '\n' counts too */
            const char *nl = memchr(text + at, '\n', len - at);
            size_t end = nl ? (size_t)(nl - text) : len;
            ok = print_tokens(model, text + at, end - at, add_special, parse_special, pieces);
            at = end + 1;
        }
    } else {
        ok = print_tokens(model, text ? text : "", len, add_special, parse_special, pieces);
    }
    free(text);
    plm_model_free(model);
    return ok ? 0 : 1;
}
