/*
 * Binding: every tensor of the architecture's tables found in the file,
 * checked against the shape the hyperparameters give, and pointed to from
 * plm_model / plm_layer.  Matrices stay in their stored format; vectors
 * (norms, biases) are used as f32, converted once at load when stored
 * otherwise.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "model/forward.h"
#include "model/model.h"

/* Floats in one slot of owned_f32: the longest vector a table may hold. */
static size_t vector_slot(const plm_hparams *hp) {
    const size_t q_dim = (size_t)hp->n_head * hp->head_dim;
    return (size_t)hp->n_embd > q_dim ? (size_t)hp->n_embd : q_dim;
}

/* A matrix, or with experts > 0 a 3-D tensor of `experts` matrices. */
static plm_status bind_matrix(plm_model *m, const plm_gguf_tensor *t, const char *name, int64_t cols, int64_t rows,
                              int64_t experts, plm_weight *w, plm_error *err) {
    const uint64_t ne2 = experts > 0 ? (uint64_t)experts : 1;
    if (t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows || t->ne[2] != ne2 || t->ne[3] != 1)
        return plm_fail(err, PLM_ERR_FORMAT,
                        "tensor '%s' has shape %llu x %llu x %llu x %llu, expected %lld x %lld x %llu", name,
                        (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                        (unsigned long long)t->ne[3], (long long)cols, (long long)rows, (unsigned long long)ne2);
    const plm_type_info *ti = plm_type_info_get(t->type);
    if (!ti || !ti->supported)
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "tensor '%s' has type %s, which pocketlm cannot compute with",
                        name, plm_type_name(t->type));
    *w = (plm_weight){t->data, (plm_type)t->type, cols, rows, plm_row_size((plm_type)t->type, cols), experts, false};
    m->n_params += (uint64_t)cols * rows * ne2;
    m->weight_bytes += t->nbytes;
    const uint64_t used = experts > 0 ? (uint64_t)m->hp.n_expert_used : 1;
    m->n_params_active += (uint64_t)cols * rows * used;
    m->weight_bytes_active += t->nbytes / ne2 * used;
    return PLM_OK;
}

/* A 1-D tensor as f32: points into the file when stored as F32 (unless
 * m->own_vectors), else is converted into `spare` (n floats the caller owns). */
static plm_status bind_vector(plm_model *m, const plm_gguf_tensor *t, const char *name, int64_t n, const float **out,
                              float *spare, plm_error *err) {
    if (t->n_dims != 1 || t->ne[0] != (uint64_t)n)
        return plm_fail(err, PLM_ERR_FORMAT, "tensor '%s' has %llu elements, expected %lld", name,
                        (unsigned long long)t->ne[0], (long long)n);
    m->n_params += (uint64_t)n;
    m->weight_bytes += t->nbytes;
    m->n_params_active += (uint64_t)n;
    m->weight_bytes_active += t->nbytes;
    if (t->type == PLM_TYPE_F32) {
        if (((uintptr_t)t->data % sizeof(float)) == 0 && !m->own_vectors) {
            *out = t->data;
            return PLM_OK;
        }
        memcpy(spare, t->data, (size_t)n * sizeof(float));
        *out = spare;
        return PLM_OK;
    }
    const plm_type_info *ti = plm_type_info_get(t->type);
    if (!ti || !ti->supported || n % ti->block_size)
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "tensor '%s' has type %s, unsupported for a vector", name,
                        plm_type_name(t->type));
    plm_kernels_ref()->dequantize_row[t->type](t->data, spare, n);
    *out = spare;
    return PLM_OK;
}

/* The fused matrices' parts are consecutive fields of plm_layer. */
_Static_assert(offsetof(plm_layer, wk) == offsetof(plm_layer, wq) + sizeof(plm_weight) &&
                   offsetof(plm_layer, wv) == offsetof(plm_layer, wk) + sizeof(plm_weight) &&
                   offsetof(plm_layer, w_up) == offsetof(plm_layer, w_gate) + sizeof(plm_weight),
               "fused parts must be adjacent");

/* A fused matrix as its parts: each a range of its rows (rows are whole
 * blocks in every format, so a part is a matrix of its own). */
static void split_rows(const plm_hparams *hp, plm_dim fused, const plm_weight *all, plm_weight *parts) {
    const int64_t q = plm_dim_size(hp, PLM_DIM_Q), kv = plm_dim_size(hp, PLM_DIM_KV), ff = hp->n_ff;
    const int64_t qkv_rows[3] = {q, kv, kv}, ff_rows[2] = {ff, ff};
    const int64_t *rows = fused == PLM_DIM_QKV ? qkv_rows : ff_rows;
    const int n = fused == PLM_DIM_QKV ? 3 : 2;
    int64_t first = 0;
    for (int i = 0; i < n; i++) {
        parts[i] = *all;
        parts[i].data = (const char *)all->data + (size_t)first * all->row_bytes;
        parts[i].rows = rows[i];
        first += rows[i];
    }
}

/* Binds one table entry into `base` (a plm_model or a plm_layer).  A vector
 * converts into *spare, which then moves on by one slot. */
static plm_status bind_spec(plm_model *m, const plm_tensor_spec *spec, int il, void *base, float **spare,
                            size_t slot, plm_error *err) {
    char name[96];
    snprintf(name, sizeof name, spec->name, il);
    void *field = (char *)base + spec->offset;
    const bool vector = spec->ne1 == PLM_DIM_NONE;
    const plm_gguf_tensor *t = plm_gguf_find_tensor(m->file, name);
    if (vector) *spare += slot;
    if (!t && spec->need == PLM_REQUIRED)
        return plm_fail(err, PLM_ERR_FORMAT, "tensor '%s' is missing (architecture '%s' requires it)", name,
                        m->arch->name);
    if (!t && spec->need == PLM_OPTIONAL) return PLM_OK;  /* calloc'd: NULL / empty */
    if (!t) {
        const plm_tensor_spec *to = NULL;
        for (const plm_tensor_spec *g = m->arch->globals; g->name; g++)
            if (!strcmp(g->name, spec->tied_to)) to = g;
        if (!to) return plm_fail(err, PLM_ERR_FORMAT, "tensor '%s' is missing", name);
        *(plm_weight *)field = *(const plm_weight *)((const char *)m + to->offset);
        return PLM_OK;
    }
    const int64_t ne0 = plm_dim_size(&m->hp, spec->ne0);
    if (vector) return bind_vector(m, t, name, ne0, (const float **)field, *spare - slot, err);
    const int64_t experts = plm_dim_experts(&m->hp, spec->ne1);
    if (spec->ne1 != PLM_DIM_QKV && spec->ne1 != PLM_DIM_FF2)
        return bind_matrix(m, t, name, ne0, plm_dim_size(&m->hp, spec->ne1), experts, (plm_weight *)field, err);
    plm_weight all;
    plm_status st = bind_matrix(m, t, name, ne0, plm_dim_size(&m->hp, spec->ne1), 0, &all, err);
    if (!st) split_rows(&m->hp, spec->ne1, &all, (plm_weight *)field);
    return st;
}

uint64_t plm_model_owned_f32_floats(const plm_arch *arch, const plm_hparams *hp) {
    uint64_t n_global = 0;
    for (const plm_tensor_spec *t = arch->globals; t->name; t++) n_global += t->ne1 == PLM_DIM_NONE;
    return ((uint64_t)hp->n_layer * plm_arch_layer_vectors(arch) + n_global) * vector_slot(hp);
}

plm_status plm_model_bind(plm_model *m, plm_error *err) {
    plm_status st = plm_forward_check(m->arch, err);
    if (!st) st = plm_hparams_read(m->arch, m->file, &m->hp, err);
    if (st) return st;
    const plm_hparams *hp = &m->hp;
    for (const char *const *r = m->arch->refused_tensors; r && *r; r++)
        if (plm_gguf_find_tensor(m->file, *r))
            return plm_fail(err, PLM_ERR_UNSUPPORTED, "'%s' model with tensor '%s': %s is not supported",
                            m->arch->name, *r, m->arch->refused_why);
    if (hp->n_vocab <= 0)
        return plm_fail(err, PLM_ERR_FORMAT, "tensor 'token_embd.weight' is missing or not 2-D");

    /* Vectors not stored as f32 get converted once, into one allocation of
     * equal slots, each big enough for the longest vector (n_embd or q_dim). */
    const size_t slot = vector_slot(hp);
    m->owned_f32 = calloc(plm_model_owned_f32_floats(m->arch, hp), sizeof(float));
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->owned_f32 || !m->layers) return plm_fail(err, PLM_ERR_NOMEM, "out of memory binding weights");
    float *spare = m->owned_f32;
    for (const plm_tensor_spec *t = m->arch->globals; t->name; t++)
        if ((st = bind_spec(m, t, 0, m, &spare, slot, err))) return st;
    for (int il = 0; il < hp->n_layer; il++)
        for (const plm_tensor_spec *t = m->arch->layer; t->name; t++)
            if ((st = bind_spec(m, t, il, &m->layers[il], &spare, slot, err))) return st;
    return PLM_OK;
}
