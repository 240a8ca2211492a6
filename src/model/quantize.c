/*
 * Re-encoding a model's weights, as llama-quantize does without an
 * importance matrix: the K-quant file types (Q4_K_M, Q3_K_S, ...) choose
 * each weight matrix's type by llama.cpp's rules (quantize_rules.c);
 * `pure` puts every weight matrix in one type; the older types (Q8_0,
 * Q4_0, IQ4_NL, F16, ...) are always written pure.  Either way a matrix
 * whose rows are not whole blocks of its type falls back to another, as in
 * llama.cpp.  Norms and biases are copied as they are.
 *
 * Tensors stream through the GGUF writer one at a time.  Each is split into
 * chunks of rows handed out to the threads; a row is dequantized to f32 and
 * quantized with the reference quantizers, which are bit-identical to
 * llama.cpp's — and a row's bytes depend on that row alone, so the output is
 * the same for any thread count.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/error.h"
#include "model/quantize_rules.h"
#include "pocketlm_gguf.h"
#include "pocketlm_tools.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "core/threadpool.h"

/* The names `type` accepts: llama-quantize's file types, with the
 * general.file_type it records and the type most weight matrices get. */
typedef struct file_type {
    const char *name;
    uint32_t ftype;
    plm_type base;
    bool mixture;  /* llama.cpp's per-tensor rules apply unless pure */
} file_type;

static const file_type file_types[] = {
    {"F32", 0, PLM_TYPE_F32, false},
    {"F16", 1, PLM_TYPE_F16, false},
    {"BF16", 32, PLM_TYPE_BF16, false},
    {"Q8_0", 7, PLM_TYPE_Q8_0, false},
    {"Q6_K", PLM_FTYPE_Q6_K, PLM_TYPE_Q6_K, true},
    {"Q5_K_M", PLM_FTYPE_Q5_K_M, PLM_TYPE_Q5_K, true},
    {"Q5_K_S", PLM_FTYPE_Q5_K_S, PLM_TYPE_Q5_K, true},
    {"Q5_1", 9, PLM_TYPE_Q5_1, false},
    {"Q5_0", 8, PLM_TYPE_Q5_0, false},
    {"Q4_K_M", PLM_FTYPE_Q4_K_M, PLM_TYPE_Q4_K, true},
    {"Q4_K_S", PLM_FTYPE_Q4_K_S, PLM_TYPE_Q4_K, true},
    {"Q4_1", 3, PLM_TYPE_Q4_1, false},
    {"Q4_0", 2, PLM_TYPE_Q4_0, false},
    {"IQ4_NL", 25, PLM_TYPE_IQ4_NL, false},
    {"Q3_K_L", PLM_FTYPE_Q3_K_L, PLM_TYPE_Q3_K, true},
    {"Q3_K_M", PLM_FTYPE_Q3_K_M, PLM_TYPE_Q3_K, true},
    {"Q3_K_S", PLM_FTYPE_Q3_K_S, PLM_TYPE_Q3_K, true},
    {"Q2_K", PLM_FTYPE_Q2_K, PLM_TYPE_Q2_K, true},
    /* llama-quantize's aliases */
    {"Q5_K", PLM_FTYPE_Q5_K_M, PLM_TYPE_Q5_K, true},
    {"Q4_K", PLM_FTYPE_Q4_K_M, PLM_TYPE_Q4_K, true},
    {"Q3_K", PLM_FTYPE_Q3_K_M, PLM_TYPE_Q3_K, true},
};
enum { N_FILE_TYPES = sizeof file_types / sizeof file_types[0], N_ALIASES = 3 };

static const file_type *find_file_type(const char *name) {
    for (int i = 0; name && i < N_FILE_TYPES; i++)
        if (!strcasecmp(file_types[i].name, name)) return &file_types[i];
    return NULL;
}

static plm_status unknown_type(const char *name, plm_error *err) {
    char list[256] = "";
    for (int i = 0; i < N_FILE_TYPES - N_ALIASES; i++) {
        const size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", file_types[i].name);
    }
    return plm_fail(err, PLM_ERR_UNSUPPORTED, "cannot quantize to '%s': known types are %s", name ? name : "(null)",
                    list);
}

/* ---- the parallel row loop ---------------------------------------------- */

typedef struct quant_job {
    const plm_gguf_file *in;
    const uint32_t *out_type;  /* per tensor */
    plm_pool *pool;
    float *rows;               /* f32 scratch: one row of the widest tensor per thread */
    size_t row_stride;         /* floats */
    /* the tensor being filled */
    plm_dequantize_fn deq;
    plm_quantize_fn quant;
    const char *src;
    char *dst;
    int64_t cols, n_rows, chunk;
    size_t in_row, out_row;
    atomic_llong next;         /* first row of the next chunk to hand out */
} quant_job;

static void quant_rows(void *arg, int ith, int nth) {
    (void)nth;
    quant_job *j = arg;
    float *row = j->rows + (size_t)ith * j->row_stride;
    for (;;) {
        const int64_t r0 = atomic_fetch_add(&j->next, j->chunk);
        if (r0 >= j->n_rows) break;
        const int64_t r1 = r0 + j->chunk < j->n_rows ? r0 + j->chunk : j->n_rows;
        for (int64_t r = r0; r < r1; r++) {
            j->deq(j->src + (size_t)r * j->in_row, row, j->cols);
            j->quant(row, j->dst + (size_t)r * j->out_row, j->cols);
        }
    }
}

static plm_status quant_fill(void *user, uint64_t index, void *dst, uint64_t nbytes, plm_error *err) {
    quant_job *j = user;
    const plm_gguf_tensor *t = &j->in->tensors[index];
    const plm_type to = (plm_type)j->out_type[index];
    if (to == t->type) {  /* kept as it is */
        memcpy(dst, t->data, nbytes);
        return PLM_OK;
    }
    j->deq = plm_get_dequantize((plm_type)t->type);
    j->quant = plm_get_quantize(to);
    if (!j->deq || !j->quant)
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "tensor %.*s: cannot convert %s to %s", (int)t->name.len,
                        t->name.ptr, plm_type_name(t->type), plm_type_name(to));
    j->src = t->data;
    j->dst = dst;
    j->cols = (int64_t)t->ne[0];
    j->n_rows = (int64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    j->in_row = plm_row_size((plm_type)t->type, j->cols);
    j->out_row = plm_row_size(to, j->cols);
    /* ~64K elements a chunk: coarse enough that handing out costs nothing,
     * fine enough that threads finish a tensor together */
    j->chunk = j->cols >= 65536 || j->cols < 1 ? 1 : 65536 / j->cols;
    atomic_store(&j->next, 0);
    plm_pool_run(j->pool, quant_rows, j);
    return PLM_OK;
}

/* ---- the file ------------------------------------------------------------- */

static int default_threads(void) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

plm_quantize_params plm_quantize_default_params(void) {
    return (plm_quantize_params){.pure = false, .n_threads = 0};
}

/* Output metadata: the input's, with llama.cpp's file type and
 * quantization version (alignment back to the default). */
static void copy_metadata(const plm_gguf_file *in, uint32_t ftype, plm_gguf_writer *w) {
    for (uint64_t i = 0; i < in->n_kv; i++) {
        const plm_gguf_kv *kv = &in->kv[i];
        if (!plm_gguf_str_eq(kv->key, "general.file_type") && !plm_gguf_str_eq(kv->key, "general.alignment"))
            plm_gguf_writer_copy_kv(w, kv);
    }
    plm_gguf_writer_set_u32(w, "general.file_type", ftype);
    plm_gguf_writer_set_u32(w, "general.quantization_version", 2);
}

static plm_status write_quantized(const plm_gguf_file *in, const char *out_path, const file_type *ft, quant_job *job,
                                  plm_error *err) {
    plm_gguf_writer *w = plm_gguf_writer_new();
    if (!w) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    copy_metadata(in, ft->ftype, w);
    for (uint64_t i = 0; i < in->n_tensors; i++) {
        const plm_gguf_tensor *t = &in->tensors[i];
        char name[256];
        plm_gguf_str_copy(t->name, name, sizeof name);
        plm_gguf_writer_add_tensor(w, name, job->out_type[i], t->n_dims, t->ne, NULL);
    }
    const plm_status st = plm_gguf_writer_write(w, out_path, quant_fill, job, err);
    plm_gguf_writer_free(w);
    return st;
}

/* Threads and their f32 row buffers, sized for the widest row converted. */
static plm_status start_threads(quant_job *job, int n_threads, plm_error *err) {
    uint64_t widest = 1;
    for (uint64_t i = 0; i < job->in->n_tensors; i++) {
        const plm_gguf_tensor *t = &job->in->tensors[i];
        if (job->out_type[i] != t->type && t->ne[0] > widest) widest = t->ne[0];
    }
    job->row_stride = (size_t)widest;
    job->rows = malloc((size_t)n_threads * widest * sizeof(float));
    if (!job->rows) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for %d rows of %llu floats", n_threads,
                                    (unsigned long long)widest);
    job->pool = plm_pool_new(n_threads);
    return job->pool ? PLM_OK : plm_fail(err, PLM_ERR_NOMEM, "cannot start %d threads", n_threads);
}

plm_status plm_quantize_ex(const char *in_path, const char *out_path, const char *type_name,
                           const plm_quantize_params *params, plm_error *err) {
    plm_error_clear(err);
    const plm_quantize_params p = params ? *params : plm_quantize_default_params();
    const file_type *ft = find_file_type(type_name);
    if (!ft) return unknown_type(type_name, err);
    if (!in_path || !out_path)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "quantize: input and output paths are required");
    plm_gguf_open_params gp = {.use_mmap = true};
    plm_gguf_file *in = plm_gguf_open(in_path, &gp, err);
    if (!in) return err ? err->code : PLM_ERR_IO;

    uint32_t *out_type = calloc(in->n_tensors ? in->n_tensors : 1, sizeof *out_type);
    quant_job job = {.in = in, .out_type = out_type};
    plm_status st = out_type ? PLM_OK : plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    if (!st) {
        plm_error e;
        st = plm_choose_tensor_types(in, ft->base, ft->ftype, p.pure || !ft->mixture, out_type, &e);
        if (st) plm_fail(err, st, "%s: %s", in_path, e.message);
    }
    if (!st) st = start_threads(&job, p.n_threads > 0 ? p.n_threads : default_threads(), err);
    if (!st) st = write_quantized(in, out_path, ft, &job, err);
    plm_pool_free(job.pool);
    free(job.rows);
    free(out_type);
    plm_gguf_close(in);
    return st;
}

plm_status plm_quantize(const char *in_path, const char *out_path, const char *type_name, plm_error *err) {
    return plm_quantize_ex(in_path, out_path, type_name, NULL, err);
}
