/*
 * Repacking a loaded model's matrices into the row-interleaved layout
 * (quant/repack.h), at load, when plm_model_params.repack asks for it.
 *
 * The copies live in one anonymous mapping sized by plm_model_repack_bytes
 * (the same number the memory plan counts).  As each matrix is copied, the
 * file pages it came from are dropped from this process (MADV_DONTNEED on
 * the read-only mapping: they are clean, the kernel can reclaim them, and a
 * later read would only page them in again), so the peak RSS stays near one
 * copy of the weights rather than two.  A tied output matrix is the token
 * embedding: repacked too, for the logits, whose every row each token
 * reads; the embedding lookup gathers a row back from its group.
 * Only the formats the CPU's kernel table has interleaved kernels for are
 * copied (elsewhere they would meet the scalar reference).
 */
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "quant/repack.h"

static size_t page_up(size_t n) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (n + page - 1) / page * page;
}

/* Drops this process's mapping of the whole pages inside [p, p + n). */
static void release_file_pages(const void *p, size_t n) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + n) & ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* One pass over the matrices: counting (to == NULL) or copying into to. */
typedef struct {
    const plm_kernels *kt; /* the table a context will pick: types it has kernels for */
    uint8_t *to;
    bool release;     /* the weights are a file mapping whose pages may go */
    uint64_t bytes;
} repack_walk;

static void repack_one(repack_walk *s, plm_weight *w) {
    /* A 3-D tensor of experts is one matrix of experts x rows: with rows a
     * multiple of 16 every row group stays inside one expert. */
    const int64_t rows = w->rows * (w->experts ? w->experts : 1);
    if (!w->data || w->repacked || !plm_repack_fits(w->type, w->rows, w->cols) || !plm_kernels_repacks(s->kt, w->type))
        return;
    const size_t size = (size_t)rows * w->row_bytes;
    if (s->to) {
        plm_repack_rows(w->type, w->cols, rows, w->data, s->to + s->bytes);
        if (s->release) release_file_pages(w->data, size);
        w->data = s->to + s->bytes;
        w->repacked = true;
    }
    s->bytes += page_up(size);
}

/* Every matrix the forward pass multiplies by. */
static void repack_walk_model(plm_model *m, repack_walk *s) {
    for (int l = 0; l < m->hp.n_layer; l++) {
        plm_layer *y = &m->layers[l];
        plm_weight *w[] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->w_gate, &y->w_up, &y->w_down,
                           &y->ffn_gate_exps, &y->ffn_up_exps, &y->ffn_down_exps};
        for (int i = 0; i < 10; i++) repack_one(s, w[i]);
    }
    if (m->output.data != m->tok_embd.data) {
        repack_one(s, &m->output);
        return;
    }
    /* A tied output is the embedding: repacked, the logits stream it as
     * the other matrices, and the embedding lookup gathers its rows back
     * (forward.c). */
    repack_one(s, &m->tok_embd);
    m->output.data = m->tok_embd.data;
    m->output.repacked = m->tok_embd.repacked;
}

uint64_t plm_model_repack_bytes(plm_model *m) {
    repack_walk s = {plm_kernels_select(NULL), NULL, false, 0};
    repack_walk_model(m, &s);
    return s.bytes;
}

plm_status plm_model_repack(plm_model *m, plm_error *err) {
    const uint64_t bytes = plm_model_repack_bytes(m);
    if (bytes == 0) return PLM_OK;
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return plm_fail(err, PLM_ERR_NOMEM, "cannot allocate %.1f MiB for the repacked weights", bytes / 1048576.0);
#ifdef MADV_HUGEPAGE
    /* Transparent huge pages where the system offers them (Linux, Android;
     * a no-op elsewhere): decode streams every byte once per token, and with
     * 4 KiB pages each page costs a TLB miss, under a hypervisor a nested
     * page walk.  Every page is written below, so RSS is the same. */
    madvise(mem, bytes, MADV_HUGEPAGE);
#endif
    repack_walk s = {plm_kernels_select(NULL), mem, m->file->mapped, 0};
    repack_walk_model(m, &s);
    m->repack_mem = mem;
    m->repack_bytes = bytes;
    return PLM_OK;
}
