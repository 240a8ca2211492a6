#include "args.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const arg_spec *find_spec(const arg_parser *p, const char *name) {
    for (int i = 0; i < p->n_specs; i++) {
        const arg_spec *s = &p->specs[i];
        if ((s->short_name && !strcmp(name, s->short_name)) || !strcmp(name, s->long_name)) return s;
    }
    return NULL;
}

static bool parse_number(const arg_spec *s, const char *v) {
    char *end;
    errno = 0;
    if (s->kind == ARG_INT) {
        long x = strtol(v, &end, 10);
        if (errno || *end || end == v || x < -2147483647L || x > 2147483647L) return false;
        *(int *)s->target = (int)x;
    } else if (s->kind == ARG_U64) {
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end || end == v || *v == '-') return false;
        *(uint64_t *)s->target = x;
    } else {
        float x = strtof(v, &end);
        if (errno || *end || end == v) return false;
        *(float *)s->target = x;
    }
    return true;
}

static bool list_push(arg_list *l, const char *v) {
    const char **items = realloc(l->items, (size_t)(l->n + 1) * sizeof *items);
    if (!items) return false;
    items[l->n++] = v;
    l->items = items;
    return true;
}

static bool apply(const arg_parser *p, const arg_spec *s, const char *v) {
    switch (s->kind) {
    case ARG_FLAG: *(bool *)s->target = true; return true;
    case ARG_STR: *(const char **)s->target = v; return true;
    case ARG_LIST: return list_push(s->target, v);
    default:
        if (parse_number(s, v)) return true;
        fprintf(stderr, "pocketlm %s: %s expects a number, got '%s'\n", p->command, s->long_name, v);
        return false;
    }
}

int args_parse(const arg_parser *p, int argc, char **argv, char **pos, int *n_pos) {
    *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            args_usage(p, stdout);
            return ARGS_HELP;
        }
        if (a[0] != '-' || a[1] == '\0') {
            if (*n_pos >= p->max_positional) {
                fprintf(stderr, "pocketlm %s: unexpected argument '%s' (see --help)\n", p->command, a);
                return ARGS_ERROR;
            }
            pos[(*n_pos)++] = argv[i];
            continue;
        }
        const arg_spec *s = find_spec(p, a);
        if (!s) {
            fprintf(stderr, "pocketlm %s: unknown option '%s' (see --help)\n", p->command, a);
            return ARGS_ERROR;
        }
        const char *v = NULL;
        if (s->kind != ARG_FLAG) {
            if (i + 1 >= argc) {
                fprintf(stderr, "pocketlm %s: %s needs a value\n", p->command, a);
                return ARGS_ERROR;
            }
            v = argv[++i];
        }
        if (!apply(p, s, v)) return ARGS_ERROR;
    }
    return ARGS_OK;
}

static void print_default(const arg_spec *s, FILE *out) {
    switch (s->kind) {
    case ARG_FLAG: fprintf(out, " (default: %s)", *(bool *)s->target ? "on" : "off"); break;
    case ARG_STR: {
        const char *v = *(const char **)s->target;
        if (v) fprintf(out, " (default: %s)", v);
        break;
    }
    case ARG_INT: fprintf(out, " (default: %d)", *(int *)s->target); break;
    case ARG_U64: fprintf(out, " (default: %" PRIu64 ")", *(uint64_t *)s->target); break;
    case ARG_FLOAT: fprintf(out, " (default: %g)", (double)*(float *)s->target); break;
    case ARG_LIST: fprintf(out, " (repeatable)"); break;
    }
}

void args_usage(const arg_parser *p, FILE *out) {
    fprintf(out, "usage: %s\n\noptions:\n", p->synopsis);
    for (int i = 0; i < p->n_specs; i++) {
        const arg_spec *s = &p->specs[i];
        char left[64];
        snprintf(left, sizeof left, "%s%s%s%s%s", s->short_name ? s->short_name : "", s->short_name ? ", " : "    ",
                 s->long_name, s->metavar ? " " : "", s->metavar ? s->metavar : "");
        fprintf(out, "  %-28s %s", left, s->help);
        print_default(s, out);
        fputc('\n', out);
    }
    fprintf(out, "  %-28s %s\n", "-h, --help", "show this help");
}

void args_free(const arg_parser *p) {
    for (int i = 0; i < p->n_specs; i++)
        if (p->specs[i].kind == ARG_LIST) {
            arg_list *l = p->specs[i].target;
            free(l->items);
            l->items = NULL;
            l->n = 0;
        }
}
