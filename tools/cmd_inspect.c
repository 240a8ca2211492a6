/* pocketlm inspect: a GGUF file's header, metadata and tensor table. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "pocketlm_gguf.h"

#define ARRAY_SHOWN 6      /* elements printed before "..." */
#define STR_SHOWN 60       /* bytes of a string value printed */
#define NAME_WIDTH_MAX 48  /* widest key/name column */

/* Length of the UTF-8 sequence at p (0 if invalid, or a C1 control that
 * some terminals obey). */
static int utf8_len(const unsigned char *p, uint64_t left) {
    int n = p[0] >= 0xf5 ? 0 : p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
    if (n == 0 || (uint64_t)n > left) return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (n == 2 && p[0] == 0xc2 && p[1] < 0xa0) return 0;
    return n;
}

/* Prints at most `max` bytes of s, escaped: file contents must not be able
 * to send control sequences to the terminal.  Returns the columns used
 * (approximately: one per character); with print false, only counts them. */
static int escaped(plm_gguf_str s, uint64_t max, bool print) {
    const unsigned char *p = (const unsigned char *)s.ptr;
    uint64_t len = s.len < max ? s.len : max, i = 0;
    int n = 0;
    while (i < len) {
        unsigned char c = p[i];
        int u = c >= 0x80 ? utf8_len(p + i, len - i) : 0;
        char e[8];
        if (u) {
            if (print) fwrite(p + i, 1, (size_t)u, stdout);
            i += (uint64_t)u;
            n++;
            continue;
        }
        if (c == '"' || c == '\\') snprintf(e, sizeof e, "\\%c", c);
        else if (c == '\n') snprintf(e, sizeof e, "\\n");
        else if (c == '\t') snprintf(e, sizeof e, "\\t");
        else if (c < 0x20 || c >= 0x7f) snprintf(e, sizeof e, "\\x%02x", c);
        else snprintf(e, sizeof e, "%c", c);
        if (print) fputs(e, stdout);
        n += (int)strlen(e);
        i++;
    }
    if (s.len > len) {
        if (print) fputs("...", stdout);
        n += 3;
    }
    return n;
}

static void put_quoted(plm_gguf_str s) {
    putchar('"');
    escaped(s, STR_SHOWN, true);
    putchar('"');
}

static void put_scalar(const plm_gguf_value *v) {
    switch (v->type) {
    case PLM_GGUF_TYPE_UINT8: case PLM_GGUF_TYPE_UINT16: case PLM_GGUF_TYPE_UINT32: case PLM_GGUF_TYPE_UINT64:
        printf("%" PRIu64, v->v.u64);
        break;
    case PLM_GGUF_TYPE_INT8: case PLM_GGUF_TYPE_INT16: case PLM_GGUF_TYPE_INT32: case PLM_GGUF_TYPE_INT64:
        printf("%" PRId64, v->v.i64);
        break;
    case PLM_GGUF_TYPE_FLOAT32: case PLM_GGUF_TYPE_FLOAT64: printf("%g", v->v.f64); break;
    case PLM_GGUF_TYPE_BOOL: fputs(v->v.b ? "true" : "false", stdout); break;
    case PLM_GGUF_TYPE_STRING: put_quoted(v->v.str); break;
    default: fputs("?", stdout); break;
    }
}

/* "[arr str x 512] "a", "b", ..." (nested arrays in parentheses). */
static void put_array(const plm_gguf_array *a) {
    printf("[arr %s x %" PRIu64 "]", plm_gguf_type_name(a->type), a->n);
    uint64_t shown = a->n < ARRAY_SHOWN + 2 ? a->n : ARRAY_SHOWN; /* never "..." for one or two more */
    for (uint64_t i = 0; i < shown; i++) {
        fputs(i ? ", " : " ", stdout);
        if (a->type == PLM_GGUF_TYPE_STRING) {
            put_quoted(plm_gguf_arr_str(a, i));
        } else if (a->type == PLM_GGUF_TYPE_ARRAY) {
            putchar('(');
            put_array(&a->items[i].v.arr);
            putchar(')');
        } else if (a->type == PLM_GGUF_TYPE_FLOAT32 || a->type == PLM_GGUF_TYPE_FLOAT64) {
            printf("%g", plm_gguf_arr_f64(a, i));
        } else if (a->type == PLM_GGUF_TYPE_UINT64) {
            uint64_t u; /* may exceed int64: read the raw element */
            memcpy(&u, a->data + 8 * i, 8);
            printf("%" PRIu64, u);
        } else {
            printf("%" PRId64, plm_gguf_arr_i64(a, i));
        }
    }
    if (shown < a->n) fputs(", ...", stdout);
}

static int name_width(plm_gguf_str s, int width) {
    int w = escaped(s, NAME_WIDTH_MAX, false);
    return w > width ? w : width;
}

static void put_padded(plm_gguf_str s, int width) {
    int n = escaped(s, NAME_WIDTH_MAX, true);
    printf("%*s", n < width ? width - n : 0, "");
}

static void put_metadata(const plm_gguf_file *f) {
    int width = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) width = name_width(f->kv[i].key, width);
    printf("\nmetadata (%" PRIu64 " keys):\n", f->n_kv);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const plm_gguf_kv *kv = &f->kv[i];
        printf("%6" PRIu64 "  ", i);
        put_padded(kv->key, width);
        fputs("  ", stdout);
        if (kv->value.type == PLM_GGUF_TYPE_ARRAY) {
            put_array(&kv->value.v.arr);
        } else {
            printf("%-4s ", plm_gguf_type_name(kv->value.type));
            put_scalar(&kv->value);
        }
        putchar('\n');
    }
}

static void put_tensors(const plm_gguf_file *f) {
    int width = 4;
    for (uint64_t i = 0; i < f->n_tensors; i++) width = name_width(f->tensors[i].name, width);
    printf("\ntensors (%" PRIu64 "):\n", f->n_tensors);
    printf("%6s  %-*s  %-7s  %-24s %12s %12s\n", "index", width, "name", "type", "shape", "bytes", "offset");
    uint64_t bytes = 0, params = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const plm_gguf_tensor *t = &f->tensors[i];
        char shape[96];
        int n = 0;
        for (uint32_t d = 0; d < t->n_dims; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRIu64, d ? " x " : "", t->ne[d]);
        if (t->n_dims == 0) snprintf(shape, sizeof shape, "scalar");
        printf("%6" PRIu64 "  ", i);
        put_padded(t->name, width);
        printf("  %-7s  %-24s %12" PRIu64 " %12" PRIu64 "\n", plm_gguf_tensor_type_name(t->type), shape, t->nbytes,
               t->offset);
        bytes += t->nbytes;
        params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    printf("\ntotal: %" PRIu64 " bytes (%.2f MiB) in %" PRIu64 " tensors, %" PRIu64 " parameters (%.2f M)\n",
           bytes, (double)bytes / (1 << 20), f->n_tensors, params, (double)params / 1e6);
}

int cmd_inspect(int argc, char **argv) {
    bool no_mmap = false, mlock = false;
    const arg_spec specs[] = {
        {NULL, "--no-mmap", ARG_FLAG, &no_mmap, NULL, "read the file into memory instead of mapping it"},
        {NULL, "--mlock", ARG_FLAG, &mlock, NULL, "lock the file image in RAM (a failure only warns)"},
    };
    const arg_parser parser = {"inspect", "pocketlm inspect FILE.gguf [options]\n\n"
                               "Validates a GGUF file and prints its header, every metadata key with its type\n"
                               "and value (long arrays abbreviated), and its tensor table",
                               specs, sizeof specs / sizeof specs[0], 1};
    char *pos[1];
    int n_pos;
    int rc = args_parse(&parser, argc, argv, pos, &n_pos);
    if (rc != ARGS_OK) return rc == ARGS_HELP ? 0 : 1;
    if (n_pos != 1) {
        fprintf(stderr, "pocketlm inspect: give one GGUF file (see --help)\n");
        return 1;
    }

    plm_gguf_open_params op = {.use_mmap = !no_mmap, .use_mlock = mlock};
    plm_error err;
    plm_gguf_file *f = plm_gguf_open(pos[0], &op, &err);
    if (!f) {
        fprintf(stderr, "pocketlm inspect: %s\n", err.message);
        return 1;
    }
    if (mlock && !f->locked) fprintf(stderr, "pocketlm inspect: warning: could not mlock %s\n", pos[0]);
    printf("file:        %s\n", pos[0]);
    printf("version:     %" PRIu32 "\n", f->version);
    printf("size:        %" PRIu64 " bytes (%s)\n", f->size, f->mapped ? "mapped" : "read");
    printf("alignment:   %" PRIu32 "\n", f->alignment);
    printf("tensors:     %" PRIu64 "\n", f->n_tensors);
    printf("kv pairs:    %" PRIu64 "\n", f->n_kv);
    printf("data offset: %" PRIu64 "\n", f->data_offset);
    put_metadata(f);
    put_tensors(f);
    plm_gguf_close(f);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "pocketlm inspect: cannot write the output\n");
        return 1;
    }
    return 0;
}
