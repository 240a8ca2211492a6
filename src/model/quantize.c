/*
 * Re-encoding a model's weights, as llama-quantize does: every quantized
 * file type (Q4_K_M, Q3_K_S, Q4_0, IQ4_XS, ...) chooses each weight
 * matrix's type by llama.cpp's rules (quantize_rules.c) and its overrides
 * (--tensor-type, --output-tensor-type, --token-embedding-type); `pure`
 * puts every weight matrix in one type; F16/BF16/F32 convert every matrix.
 * A matrix whose rows are not whole blocks of its type falls back to
 * another, as in llama.cpp.  Norms and biases are copied as they are.
 *
 * With an importance matrix (model/imatrix.c) each matrix that has an entry
 * is quantized by the weighted quantizers (quant/quantize_weighted.c), rows
 * of expert e with the importances of expert e; the output records the
 * file, dataset, entry and chunk counts under quantize.imatrix.*, as
 * llama-quantize does.
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
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "model/imatrix.h"
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
    {"Q8_0", 7, PLM_TYPE_Q8_0, true},
    {"Q6_K", PLM_FTYPE_Q6_K, PLM_TYPE_Q6_K, true},
    {"Q5_K_M", PLM_FTYPE_Q5_K_M, PLM_TYPE_Q5_K, true},
    {"Q5_K_S", PLM_FTYPE_Q5_K_S, PLM_TYPE_Q5_K, true},
    {"Q5_1", 9, PLM_TYPE_Q5_1, true},
    {"Q5_0", PLM_FTYPE_Q5_0, PLM_TYPE_Q5_0, true},
    {"Q4_K_M", PLM_FTYPE_Q4_K_M, PLM_TYPE_Q4_K, true},
    {"Q4_K_S", PLM_FTYPE_Q4_K_S, PLM_TYPE_Q4_K, true},
    {"Q4_1", 3, PLM_TYPE_Q4_1, true},
    {"Q4_0", PLM_FTYPE_Q4_0, PLM_TYPE_Q4_0, true},
    {"IQ4_NL", PLM_FTYPE_IQ4_NL, PLM_TYPE_IQ4_NL, true},
    {"IQ4_XS", PLM_FTYPE_IQ4_XS, PLM_TYPE_IQ4_XS, true},
    {"Q3_K_L", PLM_FTYPE_Q3_K_L, PLM_TYPE_Q3_K, true},
    {"Q3_K_M", PLM_FTYPE_Q3_K_M, PLM_TYPE_Q3_K, true},
    {"Q3_K_S", PLM_FTYPE_Q3_K_S, PLM_TYPE_Q3_K, true},
    {"Q2_K", PLM_FTYPE_Q2_K, PLM_TYPE_Q2_K, true},
    /* below 4 bits: the codebook types (IQ1/IQ2 and IQ3_XXS need an
     * importance matrix, as llama-quantize insists), ternary, MXFP4 experts */
    {"IQ3_M", PLM_FTYPE_IQ3_M, PLM_TYPE_IQ3_S, true},
    {"IQ3_S", PLM_FTYPE_IQ3_S, PLM_TYPE_IQ3_S, true},
    {"IQ3_XS", PLM_FTYPE_IQ3_XS, PLM_TYPE_IQ3_S, true},
    {"IQ3_XXS", PLM_FTYPE_IQ3_XXS, PLM_TYPE_IQ3_XXS, true},
    {"IQ2_M", PLM_FTYPE_IQ2_M, PLM_TYPE_IQ2_S, true},
    {"IQ2_S", PLM_FTYPE_IQ2_S, PLM_TYPE_IQ2_XS, true},
    {"IQ2_XS", PLM_FTYPE_IQ2_XS, PLM_TYPE_IQ2_XS, true},
    {"IQ2_XXS", PLM_FTYPE_IQ2_XXS, PLM_TYPE_IQ2_XXS, true},
    {"IQ1_M", PLM_FTYPE_IQ1_M, PLM_TYPE_IQ1_M, true},
    {"IQ1_S", PLM_FTYPE_IQ1_S, PLM_TYPE_IQ1_S, true},
    {"TQ2_0", PLM_FTYPE_TQ2_0, PLM_TYPE_TQ2_0, true},
    {"TQ1_0", PLM_FTYPE_TQ1_0, PLM_TYPE_TQ1_0, true},
    {"MXFP4_MOE", PLM_FTYPE_MXFP4_MOE, PLM_TYPE_MXFP4, true},
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
    char list[512] = "";
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
    const plm_imatrix *im;     /* NULL: none */
    bool progress;
    plm_pool *pool;
    float *rows;               /* f32 scratch: one row of the widest tensor per thread */
    size_t row_stride;         /* floats */
    float *imp;                /* importances of the tensor being filled, NULL: none */
    float *imp_buf;            /* owned, imp_cap floats */
    size_t imp_cap;
    /* the tensor being filled */
    plm_dequantize_fn deq;
    plm_quantize_fn quant;
    plm_quantize_weighted_fn quant_w;  /* with importances */
    const char *src;
    char *dst;
    int64_t cols, n_rows, rows_per_mat, chunk;
    size_t in_row, out_row;
    atomic_llong next;         /* first row of the next chunk to hand out */
    /* progress */
    uint64_t t0, done_bytes, total_bytes;
    uint64_t n_done, n_tensors;
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
            char *out = j->dst + (size_t)r * j->out_row;
            if (j->imp) j->quant_w(row, out, j->cols, j->imp + (r / j->rows_per_mat) * j->cols);
            else j->quant(row, out, j->cols);
        }
    }
}

/* The importances of tensor t into j->imp (left NULL when the imatrix has
 * no entry for it or its quantizer takes none).  An entry of another size
 * is an error, as in llama-quantize, except for token_embd (never
 * collected: it is not a product's input). */
static plm_status load_importances(quant_job *j, const plm_gguf_tensor *t, const char *name, plm_type to,
                                   plm_error *err) {
    j->imp = NULL;
    if (!j->im || !plm_get_quantize_weighted(to)) return PLM_OK;
    const plm_imatrix_entry *e = plm_imatrix_find(j->im, name);
    if (!e) {
        if (j->progress) fprintf(stderr, "====== no importance matrix entry for %s\n", name);
        return PLM_OK;
    }
    const uint64_t n = t->ne[0] * t->ne[2];
    if ((uint64_t)(e->n_cols * e->n_mat) != n) {
        if (!strcmp(name, "token_embd.weight")) return PLM_OK;
        return plm_fail(err, PLM_ERR_FORMAT, "imatrix size %lld is different from tensor size %llu for %s",
                        (long long)(e->n_cols * e->n_mat), (unsigned long long)n, name);
    }
    if (n > j->imp_cap) {
        float *bigger = realloc(j->imp_buf, n * sizeof *bigger);
        if (!bigger) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
        j->imp_buf = bigger;
        j->imp_cap = n;
    }
    if (!plm_imatrix_importances(j->im, e, j->imp_buf))
        return plm_fail(err, PLM_ERR_FORMAT, "imatrix contains non-finite values for %s", name);
    j->imp = j->imp_buf;
    return PLM_OK;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void report(quant_job *j, const plm_gguf_tensor *t, plm_type to, uint64_t nbytes) {
    j->n_done++;
    j->done_bytes += t->nbytes;
    if (!j->progress) return;
    const double s = (double)(now_ns() - j->t0) * 1e-9, mb = (double)j->done_bytes / 1e6;
    const double rate = s > 0 ? mb / s : 0, left = rate > 0 ? ((double)j->total_bytes / 1e6 - mb) / rate : 0;
    fprintf(stderr, "[%4llu/%4llu] %-32.*s %-6s -> %-6s %8.2f MiB -> %8.2f MiB  %7.1f MB/s  ETA %4.0f s\n",
            (unsigned long long)j->n_done, (unsigned long long)j->n_tensors, (int)t->name.len, t->name.ptr,
            plm_type_name(t->type), plm_type_name(to), (double)t->nbytes / 1048576.0, (double)nbytes / 1048576.0,
            rate, left);
}

static plm_status quant_fill(void *user, uint64_t index, void *dst, uint64_t nbytes, plm_error *err) {
    quant_job *j = user;
    const plm_gguf_tensor *t = &j->in->tensors[index];
    const plm_type to = (plm_type)j->out_type[index];
    if (to == t->type) {  /* kept as it is */
        memcpy(dst, t->data, nbytes);
        report(j, t, to, nbytes);
        return PLM_OK;
    }
    char name[256];
    plm_gguf_str_copy(t->name, name, sizeof name);
    j->deq = plm_get_dequantize((plm_type)t->type);
    j->quant = plm_get_quantize(to);
    j->quant_w = plm_get_quantize_weighted(to);
    if (!j->deq || (!j->quant && !j->quant_w))
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "tensor %s: cannot convert %s to %s", name,
                        plm_type_name(t->type), plm_type_name(to));
    const plm_status st = load_importances(j, t, name, to, err);
    if (st) return st;
    if (!j->imp && !j->quant)  /* check_importances refuses this before writing */
        return plm_fail(err, PLM_ERR_INVALID_ARG, "tensor %s: %s needs an importance matrix entry", name,
                        plm_type_name(to));
    j->src = t->data;
    j->dst = dst;
    j->cols = (int64_t)t->ne[0];
    j->n_rows = (int64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    j->rows_per_mat = (int64_t)t->ne[1] > 0 ? (int64_t)t->ne[1] : 1;
    j->in_row = plm_row_size((plm_type)t->type, j->cols);
    j->out_row = plm_row_size(to, j->cols);
    /* ~64K elements a chunk: coarse enough that handing out costs nothing,
     * fine enough that threads finish a tensor together */
    j->chunk = j->cols >= 65536 || j->cols < 1 ? 1 : 65536 / j->cols;
    atomic_store(&j->next, 0);
    plm_pool_run(j->pool, quant_rows, j);
    report(j, t, to, nbytes);
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

/* The input's metadata with llama.cpp's file type and quantization version
 * (alignment back to the default), then what llama-quantize records of an
 * importance matrix (its strings cut to 127 bytes, as it does). */
static void copy_metadata(const plm_gguf_file *in, uint32_t ftype, const plm_imatrix *im, const char *im_path,
                          plm_gguf_writer *w) {
    for (uint64_t i = 0; i < in->n_kv; i++) {
        const plm_gguf_kv *kv = &in->kv[i];
        if (!plm_gguf_str_eq(kv->key, "general.file_type") && !plm_gguf_str_eq(kv->key, "general.alignment"))
            plm_gguf_writer_copy_kv(w, kv);
    }
    plm_gguf_writer_set_u32(w, "general.file_type", ftype);
    plm_gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (!im) return;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", im_path);
    plm_gguf_writer_set_str(w, "quantize.imatrix.file", buf);
    if (plm_imatrix_dataset(im)) {
        snprintf(buf, sizeof buf, "%s", plm_imatrix_dataset(im));
        plm_gguf_writer_set_str(w, "quantize.imatrix.dataset", buf);
    }
    plm_gguf_writer_set_u32(w, "quantize.imatrix.entries_count", (uint32_t)plm_imatrix_n_entries(im));
    if (plm_imatrix_chunk_count(im) > 0)
        plm_gguf_writer_set_u32(w, "quantize.imatrix.chunks_count", plm_imatrix_chunk_count(im));
}

static plm_status write_quantized(const plm_gguf_file *in, const char *out_path, const file_type *ft,
                                  const plm_quantize_params *p, quant_job *job, plm_error *err) {
    plm_gguf_writer *w = plm_gguf_writer_new();
    if (!w) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    copy_metadata(in, ft->ftype, job->im, p->imatrix, w);
    for (uint64_t i = 0; i < in->n_tensors; i++) {
        const plm_gguf_tensor *t = &in->tensors[i];
        char name[256];
        plm_gguf_str_copy(t->name, name, sizeof name);
        plm_gguf_writer_add_tensor(w, name, job->out_type[i], t->n_dims, t->ne, NULL);
    }
    job->t0 = now_ns();
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

/* A type name given for one tensor (--output-tensor-type and the like):
 * -1 when not given. */
static plm_status tensor_type_arg(const char *name, const char *option, int *out, plm_error *err) {
    *out = -1;
    if (!name) return PLM_OK;
    const int t = plm_type_from_name(name);
    if (t < 0 || (!plm_get_quantize((plm_type)t) && !plm_get_quantize_weighted((plm_type)t)))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "%s: cannot quantize to '%s'", option, name);
    *out = t;
    return PLM_OK;
}

/* llama-quantize refuses to quantize again what is already quantized
 * (quality would suffer twice) unless allowed. */
static plm_status check_requantize(const plm_gguf_file *in, const uint32_t *out_type, bool allowed, plm_error *err) {
    for (uint64_t i = 0; !allowed && i < in->n_tensors; i++) {
        const plm_gguf_tensor *t = &in->tensors[i];
        const plm_type_info *ti = plm_type_info_get(t->type);
        if (out_type[i] != t->type && ti && ti->block_size > 1)
            return plm_fail(err, PLM_ERR_INVALID_ARG,
                            "%.*s is already %s: requantizing loses quality twice (--allow-requantize to do it anyway)",
                            (int)t->name.len, t->name.ptr, ti->name);
    }
    return PLM_OK;
}

/* llama-quantize refuses the very low-bit types without importances ("the
 * result will be garbage"): before writing, every tensor that needs them
 * (and every one whose type has no quantizer without them) must have an
 * entry in the importance matrix. */
static plm_status check_importances(const plm_gguf_file *in, const uint32_t *out_type, const plm_imatrix *im,
                                    plm_error *err) {
    for (uint64_t i = 0; i < in->n_tensors; i++) {
        const plm_gguf_tensor *t = &in->tensors[i];
        const plm_type to = (plm_type)out_type[i];
        char name[256];
        plm_gguf_str_copy(t->name, name, sizeof name);
        if (to == t->type || (!plm_type_needs_imatrix(name, to) && plm_get_quantize(to))) continue;
        if (!im)
            return plm_fail(err, PLM_ERR_INVALID_ARG,
                            "this quantization requires an importance matrix: %s would be %s (--imatrix FILE)", name,
                            plm_type_name(to));
        if (!plm_imatrix_find(im, name))
            return plm_fail(err, PLM_ERR_INVALID_ARG,
                            "missing importance matrix for tensor %s in a very low-bit quantization (%s)", name,
                            plm_type_name(to));
    }
    return PLM_OK;
}

static plm_status load_imatrix(const plm_quantize_params *p, plm_imatrix **out, plm_error *err) {
    *out = NULL;
    if (!p->imatrix) return PLM_OK;
    if (p->n_include_weights && p->n_exclude_weights)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "--include-weights and --exclude-weights cannot be combined");
    const plm_status st = plm_imatrix_load(p->imatrix, out, err);
    if (st) return st;
    plm_imatrix_filter(*out, p->include_weights, p->n_include_weights, p->exclude_weights, p->n_exclude_weights);
    if (plm_imatrix_n_entries(*out) == 0) {  /* llama-quantize then goes on as without one */
        plm_imatrix_free(*out);
        *out = NULL;
    }
    return PLM_OK;
}

/* Output tensor bytes and quantized-matrix elements, for the summary. */
static void count_sizes(const plm_gguf_file *in, const uint32_t *out_type, const plm_quantize_params *p) {
    uint64_t bytes = 0, weights = 0;
    for (uint64_t i = 0; i < in->n_tensors; i++) {
        const plm_gguf_tensor *t = &in->tensors[i];
        const uint64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        bytes += out_type[i] == t->type ? t->nbytes : plm_row_size((plm_type)out_type[i], (int64_t)t->ne[0]) * (n / t->ne[0]);
        weights += n;
    }
    if (p->out_bytes) *p->out_bytes = bytes;
    if (p->out_weights) *p->out_weights = weights;
}

static plm_status choose_types(const plm_gguf_file *in, const file_type *ft, const plm_quantize_params *p,
                               bool has_imatrix, uint32_t *out_type, plm_error *err) {
    plm_type_choice c = {.base = ft->base, .ftype = ft->ftype, .pure = p->pure || !ft->mixture,
                         .has_imatrix = has_imatrix, .tensor_types = p->tensor_types,
                         .n_tensor_types = p->n_tensor_types};
    plm_status st = tensor_type_arg(p->output_tensor_type, "--output-tensor-type", &c.output_type, err);
    if (!st) st = tensor_type_arg(p->token_embedding_type, "--token-embedding-type", &c.token_embd_type, err);
    if (!st) st = plm_choose_tensor_types(in, &c, out_type, err);
    if (!st) st = check_requantize(in, out_type, p->allow_requantize, err);
    return st;
}

plm_status plm_quantize_ex(const char *in_path, const char *out_path, const char *type_name,
                           const plm_quantize_params *params, plm_error *err) {
    plm_error_clear(err);
    const plm_quantize_params p = params ? *params : plm_quantize_default_params();
    const file_type *ft = find_file_type(type_name);
    if (!ft) return unknown_type(type_name, err);
    if (!in_path || (!out_path && !p.dry_run))
        return plm_fail(err, PLM_ERR_INVALID_ARG, "quantize: input and output paths are required");
    plm_imatrix *im = NULL;
    plm_status st = load_imatrix(&p, &im, err);
    if (st) return st;
    plm_gguf_open_params gp = {.use_mmap = true};
    plm_gguf_file *in = plm_gguf_open(in_path, &gp, err);
    if (!in) {
        plm_imatrix_free(im);
        return err ? err->code : PLM_ERR_IO;
    }

    uint32_t *out_type = calloc(in->n_tensors ? in->n_tensors : 1, sizeof *out_type);
    quant_job job = {.in = in, .out_type = out_type, .im = im, .progress = p.progress, .n_tensors = in->n_tensors};
    st = out_type ? PLM_OK : plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    if (!st) {
        plm_error e;
        if ((st = choose_types(in, ft, &p, im != NULL, out_type, &e))) plm_fail(err, st, "%s: %s", in_path, e.message);
    }
    if (!st) count_sizes(in, out_type, &p);
    if (!st && !p.dry_run) st = check_importances(in, out_type, im, err);
    for (uint64_t i = 0; i < in->n_tensors; i++) job.total_bytes += in->tensors[i].nbytes;
    if (!st && !p.dry_run) st = start_threads(&job, p.n_threads > 0 ? p.n_threads : default_threads(), err);
    if (!st && !p.dry_run) st = write_quantized(in, out_path, ft, &p, &job, err);
    plm_pool_free(job.pool);
    free(job.rows);
    free(job.imp_buf);
    free(out_type);
    plm_gguf_close(in);
    plm_imatrix_free(im);
    return st;
}

plm_status plm_quantize(const char *in_path, const char *out_path, const char *type_name, plm_error *err) {
    return plm_quantize_ex(in_path, out_path, type_name, NULL, err);
}
