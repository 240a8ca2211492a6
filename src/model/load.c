/* Loading a model: open the GGUF, pick the architecture, bind the weights,
 * load the vocabulary.  Also the model's public accessors. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fault_guard.h"
#include "core/params.h"
#include "gguf/gguf_internal.h"
#include "model/model.h"

static plm_model_params model_defaults(void) {
    return (plm_model_params){.struct_size = sizeof(plm_model_params), .use_mmap = true, .use_mlock = false,
                              .vocab_only = false};
}

void plm_model_params_init(plm_model_params *p, size_t struct_size) {
    plm_model_params d = model_defaults();
    plm_params_give(p, struct_size, &d, sizeof d);
}

static plm_status read_identity(plm_model *m, plm_error *err) {
    plm_gguf_str arch;
    if (!plm_gguf_get_str(m->file, "general.architecture", &arch))
        return plm_fail(err, PLM_ERR_FORMAT, "metadata general.architecture is missing");
    plm_gguf_str_copy(arch, m->hp.arch, sizeof m->hp.arch);
    plm_gguf_str name;
    if (plm_gguf_get_str(m->file, "general.name", &name)) plm_gguf_str_copy(name, m->hp.name, sizeof m->hp.name);
    m->arch = plm_arch_find(m->hp.arch);
    if (m->arch) m->arch = plm_arch_for_file(m->arch, m->file);
    return PLM_OK;
}

static void will_need(const void *p, size_t n) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t start = (uintptr_t)p & ~(page - 1);
    madvise((void *)start, (uintptr_t)p + n - start, MADV_WILLNEED);
}

/* A Mixture-of-Experts tensor: most of its bytes are experts a token does
 * not select. */
static bool is_experts(const plm_gguf_tensor *t) { return t->n_dims == 3; }

/* Ask the kernel to start reading the mapped weights now, in the background
 * (MADV_WILLNEED returns at once), so the first token does not stall on a
 * page fault per weight page.  Not the experts of a MoE model: each token
 * reads only the ones its router selects, and reading them all ahead would
 * fill memory with what may never be used (a phone cannot hold them). */
static void warm_up(const plm_gguf_file *f) {
    if (!f->mapped || f->size <= f->data_offset) return;
    bool experts = false;
    for (uint64_t i = 0; i < f->n_tensors && !experts; i++) experts = is_experts(&f->tensors[i]);
    if (!experts) {
        will_need((const char *)f->image + f->data_offset, (size_t)(f->size - f->data_offset));
        return;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (!is_experts(&f->tensors[i]) && f->tensors[i].nbytes) will_need(f->tensors[i].data, f->tensors[i].nbytes);
}

/* Load progress: reading the file (when it is read, not mapped) is the
 * first READ_SHARE of the way; the rest are the steps after it. */
#define READ_SHARE 0.7f

typedef struct progress {
    const plm_model_params *p;
    float last;
} progress;

/* Tells the app, never going backwards; false when it asked to stop. */
static bool report(progress *pr, float fraction) {
    if (!pr->p->progress) return true;
    if (fraction < pr->last) fraction = pr->last;
    pr->last = fraction;
    return pr->p->progress(pr->p->progress_user, fraction);
}

static bool report_read(void *user, float fraction) { return report(user, fraction * READ_SHARE); }

static plm_status step(progress *pr, float fraction, const char *name, plm_error *err) {
    return report(pr, fraction) ? PLM_OK : plm_fail(err, PLM_ERR_ABORTED, "%s: loading was cancelled", name);
}

static plm_status load_weights(plm_model *m, const char *name, plm_error *err) {
    if (!m->arch) {
        char names[256];
        plm_arch_names(names, sizeof names);
        return plm_fail(err, PLM_ERR_UNSUPPORTED, "%s: unknown architecture '%s'; supported: %s", name, m->hp.arch,
                        names);
    }
    plm_status st = plm_model_bind(m, err);
    if (!st && plm_vocab_n_tokens(m->vocab) > m->hp.n_vocab)
        st = plm_fail(err, PLM_ERR_FORMAT, "vocabulary has %d tokens but token_embd.weight only %d rows",
                      plm_vocab_n_tokens(m->vocab), m->hp.n_vocab);
    return st;
}

/* Every way in: a path, a descriptor range, memory (gguf/gguf_internal.h). */
static plm_status load_source(plm_gguf_source *src, const plm_model_params *params, plm_model **out,
                              plm_error *err) {
    plm_error local;
    if (!err) err = &local;  /* the status below is read from it */
    if (!out) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_model_load: out is NULL");
    *out = NULL;
    plm_model_params p = model_defaults();
    plm_status st = plm_params_take(&p, sizeof p, params, "plm_model_params", err);
    if (st) return st;
    progress pr = {&p, 0.0f};
    src->progress = report_read;
    src->user = &pr;
    plm_model *m = calloc(1, sizeof *m);
    if (!m) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");

    plm_gguf_open_params gp = {.use_mmap = p.use_mmap, .use_mlock = p.use_mlock};
    m->file = plm_gguf_open_source(src, &gp, err);
    if (!m->file) st = err->code;
    if (!st) st = step(&pr, READ_SHARE, src->name, err);
    if (!st) st = read_identity(m, err);
    if (!st) {
        m->vocab = plm_vocab_load(m->file, err);
        if (!m->vocab) st = err->code;
    }
    if (!st) st = step(&pr, 0.8f, src->name, err);
    m->own_vectors = p.repack && p.use_mmap; /* plm_model_repack will drop the file's pages */
    if (!st && !p.vocab_only) st = load_weights(m, src->name, err);
    if (!st) st = step(&pr, 0.95f, src->name, err);
    if (st) {
        plm_model_free(m);
        return st;
    }
    if (!p.vocab_only && p.repack && (st = plm_model_repack(m, err))) {
        plm_model_free(m);
        return st;
    }
    if (p.vocab_only) m->hp.n_vocab = plm_vocab_n_tokens(m->vocab);
    else warm_up(m->file);
    /* A decode that reads a page the file no longer has fails cleanly. */
    if (m->file->mapped) plm_fault_guard_register(m->file->image, (size_t)m->file->size, src->name);
    /* Ready: the last word, whatever the app answers. */
    report(&pr, 1.0f);
    *out = m;
    return PLM_OK;
}

plm_status plm_model_load(const char *path, const plm_model_params *params, plm_model **out, plm_error *err) {
    if (!path) {
        if (out) *out = NULL;
        return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_model_load: path is NULL");
    }
    plm_gguf_source src = {.name = path, .path = path, .fd = -1};
    return load_source(&src, params, out, err);
}

plm_status plm_model_load_fd(int fd, uint64_t offset, uint64_t length, const plm_model_params *params,
                             plm_model **out, plm_error *err) {
    if (fd < 0) {
        if (out) *out = NULL;
        return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_model_load_fd: fd %d is not a file descriptor", fd);
    }
    char name[96];
    snprintf(name, sizeof name, "fd %d at offset %" PRIu64, fd, offset);
    plm_gguf_source src = {.name = name, .fd = fd, .offset = offset, .length = length};
    return load_source(&src, params, out, err);
}

plm_status plm_model_load_memory(const void *data, size_t size, const plm_model_params *params, plm_model **out,
                                 plm_error *err) {
    if (!data) {
        if (out) *out = NULL;
        return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_model_load_memory: data is NULL");
    }
    plm_gguf_source src = {.name = "model in memory", .fd = -1, .length = size, .data = data};
    return load_source(&src, params, out, err);
}

void plm_model_free(plm_model *m) {
    if (!m) return;
    if (m->file && m->file->mapped) plm_fault_guard_unregister(m->file->image);
    plm_vocab_free(m->vocab);
    plm_gguf_close(m->file);
    if (m->repack_mem) munmap(m->repack_mem, m->repack_bytes);
    free(m->layers);
    free(m->owned_f32);
    free(m);
}

const char *plm_model_arch(const plm_model *m) { return m->hp.arch; }
const char *plm_model_name(const plm_model *m) { return m->hp.name; }
int plm_model_n_vocab(const plm_model *m) { return m->hp.n_vocab; }
int plm_model_n_ctx_train(const plm_model *m) { return m->hp.n_ctx_train; }
int plm_model_n_embd(const plm_model *m) { return m->hp.n_embd; }
int plm_model_n_layer(const plm_model *m) { return m->hp.n_layer; }
uint64_t plm_model_n_params(const plm_model *m) { return m->n_params; }
uint64_t plm_model_weight_bytes(const plm_model *m) { return m->weight_bytes; }
uint64_t plm_model_weight_bytes_active(const plm_model *m) { return m->weight_bytes_active; }
uint64_t plm_model_repacked_bytes(const plm_model *m) { return m->repack_bytes; }

plm_token plm_token_bos(const plm_model *m) { return plm_vocab_bos(m->vocab); }
plm_token plm_token_eos(const plm_model *m) { return plm_vocab_eos(m->vocab); }
plm_token plm_token_eot(const plm_model *m) { return plm_vocab_eot(m->vocab); }
bool plm_token_is_eog(const plm_model *m, plm_token t) { return plm_vocab_is_eog(m->vocab, t); }
bool plm_vocab_add_bos(const plm_model *m) { return plm_vocab_wants_bos(m->vocab); }

int plm_tokenize(const plm_model *m, const char *text, size_t len, plm_token *out, int max, bool add_special,
                 bool parse_special) {
    return plm_vocab_tokenize(m->vocab, text, len, out, max, add_special, parse_special);
}

plm_status plm_tokenize_alloc_ex(const plm_model *m, const char *text, size_t len, bool add_special,
                                 bool parse_special, plm_token **out, int *n_out, plm_error *err) {
    if (!out || !n_out) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_tokenize_alloc: out and n_out are required");
    *out = NULL;
    *n_out = 0;
    if (!m || (!text && len)) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_tokenize_alloc: NULL model or text");
    /* A guess first; a negative answer says how many ids are really needed. */
    int cap = len < INT_MAX / 2 ? (int)len + 8 : INT_MAX / 2;
    for (int attempt = 0; attempt < 2; attempt++) {
        plm_token *ids = malloc((size_t)cap * sizeof *ids);
        if (!ids) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for %d token ids", cap);
        int n = plm_tokenize(m, text, len, ids, cap, add_special, parse_special);
        if (n >= 0) {
            *out = ids;
            *n_out = n;
            return PLM_OK;
        }
        free(ids);
        if (n == INT_MIN) return plm_fail(err, PLM_ERR_NOMEM, "out of memory tokenizing %zu bytes", len);
        cap = -n;
    }
    return plm_fail(err, PLM_ERR_NOMEM, "tokenizing %zu bytes: the token count kept growing", len);
}

plm_token *plm_tokenize_alloc(const plm_model *m, const char *text, size_t len, int *n_out, bool add_special,
                              bool parse_special) {
    plm_token *ids;
    int n;
    if (plm_tokenize_alloc_ex(m, text, len, add_special, parse_special, &ids, &n, NULL) != PLM_OK) return NULL;
    if (n_out) *n_out = n;
    return ids;
}

int plm_token_to_piece(const plm_model *m, plm_token t, char *buf, int size, bool special) {
    return plm_vocab_token_to_piece(m->vocab, t, buf, size, special);
}
