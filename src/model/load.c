/* Loading a model: open the GGUF, pick the architecture, bind the weights,
 * load the vocabulary.  Also the model's public accessors. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fault_guard.h"
#include "model/model.h"

plm_model_params plm_model_default_params(void) {
    return (plm_model_params){.use_mmap = true, .use_mlock = false, .vocab_only = false};
}

static plm_status read_identity(plm_model *m, plm_error *err) {
    plm_gguf_str arch;
    if (!plm_gguf_get_str(m->file, "general.architecture", &arch))
        return plm_fail(err, PLM_ERR_FORMAT, "metadata general.architecture is missing");
    plm_gguf_str_copy(arch, m->hp.arch, sizeof m->hp.arch);
    plm_gguf_str name;
    if (plm_gguf_get_str(m->file, "general.name", &name)) plm_gguf_str_copy(name, m->hp.name, sizeof m->hp.name);
    m->arch = plm_arch_find(m->hp.arch);
    return PLM_OK;
}

/* Ask the kernel to start reading the mapped weights now, in the background
 * (MADV_WILLNEED returns at once), so the first token does not stall on a
 * page fault per weight page. */
static void warm_up(const plm_gguf_file *f) {
    if (!f->mapped || f->size <= f->data_offset) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t start = ((uintptr_t)f->image + f->data_offset) & ~(page - 1);
    madvise((void *)start, (uintptr_t)f->image + f->size - start, MADV_WILLNEED);
}

plm_status plm_model_load(const char *path, const plm_model_params *params, plm_model **out, plm_error *err) {
    *out = NULL;
    plm_model_params p = params ? *params : plm_model_default_params();
    plm_model *m = calloc(1, sizeof *m);
    if (!m) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");

    plm_gguf_open_params gp = {.use_mmap = p.use_mmap, .use_mlock = p.use_mlock};
    plm_status st = PLM_OK;
    m->file = plm_gguf_open(path, &gp, err);
    if (!m->file) st = err ? err->code : PLM_ERR_IO;
    if (!st) st = read_identity(m, err);
    if (!st) {
        m->vocab = plm_vocab_load(m->file, err);
        if (!m->vocab) st = err ? err->code : PLM_ERR_FORMAT;
    }
    if (!st && !p.vocab_only) {
        if (!m->arch) {
            char names[256];
            plm_arch_names(names, sizeof names);
            st = plm_fail(err, PLM_ERR_UNSUPPORTED, "%s: unknown architecture '%s'; supported: %s", path,
                          m->hp.arch, names);
        } else
            st = plm_model_bind(m, err);
        if (!st && plm_vocab_n_tokens(m->vocab) > m->hp.n_vocab)
            st = plm_fail(err, PLM_ERR_FORMAT, "vocabulary has %d tokens but token_embd.weight only %d rows",
                          plm_vocab_n_tokens(m->vocab), m->hp.n_vocab);
    }
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
    if (m->file->mapped) plm_fault_guard_register(m->file->image, (size_t)m->file->size, path);
    *out = m;
    return PLM_OK;
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

plm_token *plm_tokenize_alloc(const plm_model *m, const char *text, size_t len, int *n_out, bool add_special,
                              bool parse_special) {
    /* A guess first; a negative answer says how many ids are really needed. */
    int cap = len < INT_MAX / 2 ? (int)len + 8 : INT_MAX / 2;
    for (int attempt = 0; attempt < 2; attempt++) {
        plm_token *ids = malloc((size_t)cap * sizeof *ids);
        if (!ids) return NULL;
        int n = plm_tokenize(m, text, len, ids, cap, add_special, parse_special);
        if (n >= 0) {
            *n_out = n;
            return ids;
        }
        free(ids);
        if (n == INT_MIN) return NULL;
        cap = -n;
    }
    return NULL;
}

int plm_token_to_piece(const plm_model *m, plm_token t, char *buf, int size, bool special) {
    return plm_vocab_token_to_piece(m->vocab, t, buf, size, special);
}
