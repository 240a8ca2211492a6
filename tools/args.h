/* Command-line options: a table of specs per subcommand.  --help prints every
 * option with its default, read from the target variables themselves, so the
 * help text cannot drift from the real defaults. */
#ifndef PLM_TOOLS_ARGS_H
#define PLM_TOOLS_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { ARG_FLAG, ARG_STR, ARG_INT, ARG_U64, ARG_FLOAT, ARG_LIST } arg_kind;

/* ARG_LIST collects repeated values into a string list. */
typedef struct arg_list {
    const char **items;
    int n;
} arg_list;

typedef struct arg_spec {
    const char *short_name;  /* "-m" or NULL */
    const char *long_name;   /* "--model" */
    arg_kind kind;
    void *target;            /* bool*, const char**, int*, uint64_t*, float*, arg_list* */
    const char *metavar;     /* "PATH"; NULL for flags */
    const char *help;
} arg_spec;

typedef struct arg_parser {
    const char *command;   /* "run" */
    const char *synopsis;  /* "pocketlm run [options]" */
    const arg_spec *specs;
    int n_specs;
    int max_positional;    /* extra arguments allowed */
} arg_parser;

enum { ARGS_OK = 0, ARGS_HELP = 1, ARGS_ERROR = 2 };

/* Parses argv[1..]; positional arguments are returned in pos (up to
 * max_positional).  Returns ARGS_OK, ARGS_HELP (usage printed to stdout) or
 * ARGS_ERROR (message printed to stderr).  Frees nothing; lists are freed by
 * args_free. */
int args_parse(const arg_parser *p, int argc, char **argv, char **pos, int *n_pos);
void args_usage(const arg_parser *p, FILE *out);
void args_free(const arg_parser *p);

#endif
