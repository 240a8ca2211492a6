/*
 * Re-encoding a model's weights: every 2-D weight matrix into one target
 * format (llama.cpp's `--pure`), everything else (norms, biases) as it is.
 * Tensors stream through the GGUF writer one at a time: dequantize each row
 * to f32, quantize it to the target with the reference quantizers, which are
 * bit-identical to llama.cpp's for these formats.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pocketlm_gguf.h"
#include "quant/quant.h"
#include "quant/types.h"

/* Target formats we can write, and the general.file_type llama.cpp records. */
static const struct {
    plm_type type;
    uint32_t file_type;
} targets[] = {
    {PLM_TYPE_F32, 0},  {PLM_TYPE_F16, 1},  {PLM_TYPE_Q4_0, 2},  {PLM_TYPE_Q4_1, 3},  {PLM_TYPE_Q8_0, 7},
    {PLM_TYPE_Q5_0, 8}, {PLM_TYPE_Q5_1, 9}, {PLM_TYPE_BF16, 32}, {PLM_TYPE_IQ4_NL, 25},
};

typedef struct quant_job {
    const gguf_file *in;
    uint32_t *out_type;  /* per tensor */
    float *row;          /* f32 scratch: one row of the widest tensor */
} quant_job;

static bool is_weight_matrix(const gguf_tensor *t) {
    const char *suffix = ".weight";
    const size_t n = strlen(suffix);
    return t->n_dims == 2 && t->name.len > n && !memcmp(t->name.ptr + t->name.len - n, suffix, n);
}

static plm_status quant_fill(void *user, uint64_t index, void *dst, uint64_t nbytes, plm_error *err) {
    quant_job *j = user;
    const gguf_tensor *t = &j->in->tensors[index];
    if (j->out_type[index] == t->type) {  /* kept as it is */
        memcpy(dst, t->data, nbytes);
        return PLM_OK;
    }
    plm_dequantize_fn deq = plm_get_dequantize((plm_type)t->type);
    plm_quantize_fn q = plm_get_quantize((plm_type)j->out_type[index]);
    if (!deq || !q)
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "tensor %.*s: cannot convert %s to %s", (int)t->name.len,
                        t->name.ptr, plm_type_name(t->type), plm_type_name(j->out_type[index]));
    const int64_t cols = (int64_t)t->ne[0], rows = (int64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    const size_t in_row = plm_row_size((plm_type)t->type, cols), out_row = plm_row_size((plm_type)j->out_type[index], cols);
    for (int64_t r = 0; r < rows; r++) {
        deq((const char *)t->data + (size_t)r * in_row, j->row, cols);
        q(j->row, (char *)dst + (size_t)r * out_row, cols);
    }
    return PLM_OK;
}

plm_status plm_quantize(const char *in_path, const char *out_path, const char *type_name, plm_error *err) {
    const int type = plm_type_from_name(type_name);
    int ti = -1;
    for (int i = 0; i < (int)(sizeof targets / sizeof targets[0]); i++)
        if ((int)targets[i].type == type) ti = i;
    if (ti < 0)
        return plm_fail(err, PLM_ERR_UNSUPPORTED,
                        "cannot quantize to '%s': known targets are F32, F16, BF16, Q8_0, Q5_1, Q5_0, Q4_1, Q4_0, IQ4_NL",
                        type_name);
    gguf_open_params gp = {.use_mmap = true};
    gguf_file *in = gguf_open(in_path, &gp, err);
    if (!in) return err ? err->code : PLM_ERR_IO;

    quant_job job = {.in = in};
    job.out_type = calloc(in->n_tensors ? in->n_tensors : 1, sizeof *job.out_type);
    uint64_t widest = 1;
    for (uint64_t i = 0; i < in->n_tensors; i++)
        if (in->tensors[i].ne[0] > widest) widest = in->tensors[i].ne[0];
    job.row = malloc(widest * sizeof(float));
    gguf_writer *w = gguf_writer_new();
    plm_status st = job.out_type && job.row && w ? PLM_OK : plm_fail(err, PLM_ERR_NOMEM, "out of memory");

    for (uint64_t i = 0; !st && i < in->n_kv; i++) {
        const gguf_kv *kv = &in->kv[i];
        if (!gguf_str_eq(kv->key, "general.file_type") && !gguf_str_eq(kv->key, "general.alignment"))
            gguf_writer_copy_kv(w, kv);
    }
    if (!st) {
        gguf_writer_set_u32(w, "general.file_type", targets[ti].file_type);
        gguf_writer_set_u32(w, "general.quantization_version", 2);
    }
    for (uint64_t i = 0; !st && i < in->n_tensors; i++) {
        const gguf_tensor *t = &in->tensors[i];
        /* Rows that are not whole blocks of the target stay as they are. */
        const bool convert = is_weight_matrix(t) && plm_row_size((plm_type)type, (int64_t)t->ne[0]) != 0;
        job.out_type[i] = convert ? (uint32_t)type : t->type;
        char name[256];
        gguf_str_copy(t->name, name, sizeof name);
        gguf_writer_add_tensor(w, name, job.out_type[i], t->n_dims, t->ne, NULL);
    }
    if (!st) st = gguf_writer_write(w, out_path, quant_fill, &job, err);
    gguf_writer_free(w);
    free(job.out_type);
    free(job.row);
    gguf_close(in);
    return st;
}
