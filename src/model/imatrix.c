/*
 * Importance matrices, as llama.cpp's llama-imatrix collects and stores
 * them (tools/imatrix/imatrix.cpp, common/imatrix-loader.cpp) and
 * llama-quantize reads them.
 *
 * For every weight matrix W the entry holds, per input column j, the sum
 * over every token seen of x_j^2 (x: the row W multiplies), and the number
 * of tokens.  Their ratio, the mean square activation of column j, is how
 * much an error in column j of W costs: the quantizers weight their fits by
 * it.  A 3-D (expert) tensor has one row of sums and one count per matrix.
 *
 * GGUF (what llama-imatrix writes today): general.type = "imatrix",
 * imatrix.datasets (string array), imatrix.chunk_count and
 * imatrix.chunk_size (u32); per entry, in name order, two F32 tensors
 * NAME.in_sum2 [n_cols, n_mat] (the raw sums) and NAME.counts [1, n_mat].
 *
 * Legacy .dat (little-endian): i32 n_entries; per entry i32 name length,
 * the name, i32 ncall, i32 n_values, n_values f32 = (sum / count) * ncall;
 * then optionally i32 chunk count, i32 length and the dataset name.
 * Columns never activated (count 0) are stored as 1 there.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/imatrix.h"
#include "pocketlm_gguf.h"
#include "quant/types.h"

plm_imatrix *plm_imatrix_new(uint32_t chunk_size) {
    plm_imatrix *im = calloc(1, sizeof *im);
    if (im) im->chunk_size = chunk_size;
    return im;
}

void plm_imatrix_free(plm_imatrix *im) {
    if (!im) return;
    for (int i = 0; i < im->n; i++) {
        free(im->e[i].name);
        free(im->e[i].sums);
        free(im->e[i].counts);
    }
    for (int i = 0; i < im->n_datasets; i++) free(im->datasets[i]);
    free(im->datasets);
    free(im->e);
    free(im);
}

int plm_imatrix_n_entries(const plm_imatrix *im) { return im ? im->n : 0; }

uint32_t plm_imatrix_chunk_count(const plm_imatrix *im) { return im ? im->chunk_count : 0; }

const char *plm_imatrix_dataset(const plm_imatrix *im) {
    return im && im->n_datasets ? im->datasets[0] : NULL;
}

plm_imatrix_entry *plm_imatrix_find(const plm_imatrix *im, const char *name) {
    for (int i = 0; im && i < im->n; i++)
        if (!strcmp(im->e[i].name, name)) return &im->e[i];
    return NULL;
}

plm_imatrix_entry *plm_imatrix_add(plm_imatrix *im, const char *name, int64_t n_cols, int64_t n_mat) {
    plm_imatrix_entry *e = plm_imatrix_find(im, name);
    if (e) return e->n_cols == n_cols && e->n_mat == n_mat ? e : NULL;
    if (n_cols < 1 || n_mat < 1 || n_cols > (1 << 24) || n_mat > (1 << 16)) return NULL;
    if (im->n == im->cap) {
        const int cap = im->cap ? 2 * im->cap : 64;
        plm_imatrix_entry *bigger = realloc(im->e, (size_t)cap * sizeof *bigger);
        if (!bigger) return NULL;
        im->e = bigger;
        im->cap = cap;
    }
    e = &im->e[im->n];
    *e = (plm_imatrix_entry){.name = strdup(name), .n_cols = n_cols, .n_mat = n_mat};
    e->sums = calloc((size_t)(n_cols * n_mat), sizeof *e->sums);
    e->counts = calloc((size_t)n_mat, sizeof *e->counts);
    if (!e->name || !e->sums || !e->counts) {
        free(e->name);
        free(e->sums);
        free(e->counts);
        return NULL;
    }
    im->n++;
    return e;
}

bool plm_imatrix_add_dataset(plm_imatrix *im, const char *dataset) {
    char **bigger = realloc(im->datasets, (size_t)(im->n_datasets + 1) * sizeof *bigger);
    if (!bigger) return false;
    im->datasets = bigger;
    if (!(im->datasets[im->n_datasets] = strdup(dataset))) return false;
    im->n_datasets++;
    return true;
}

/* ---- importances for the quantizers -------------------------------------- */

bool plm_imatrix_importances(const plm_imatrix *im, const plm_imatrix_entry *e, float *out) {
    const int64_t n = e->n_cols;
    for (int64_t m = 0; m < e->n_mat; m++) {
        const float *s = e->sums + m * n;
        float *o = out + m * n;
        if (im->legacy) {  /* (sum / count) * ncall: divide by ncall */
            const int64_t ncall = e->counts[0];
            for (int64_t j = 0; j < n; j++) o[j] = ncall > 0 ? s[j] / (float)ncall : s[j];
        } else {
            const float count = (float)e->counts[m];
            for (int64_t j = 0; j < n; j++) o[j] = count > 0.0f ? s[j] / count : 1;
        }
    }
    for (int64_t j = 0; j < n * e->n_mat; j++)
        if (!isfinite(out[j])) return false;
    return true;
}

static bool contains_any(const char *name, const char *const *parts, int n) {
    for (int i = 0; i < n; i++)
        if (strstr(name, parts[i])) return true;
    return false;
}

void plm_imatrix_filter(plm_imatrix *im, const char *const *include, int n_include, const char *const *exclude,
                        int n_exclude) {
    int kept = 0;
    for (int i = 0; i < im->n; i++) {
        plm_imatrix_entry *e = &im->e[i];
        const bool keep = !contains_any(e->name, exclude, n_exclude) &&
                          (n_include == 0 || contains_any(e->name, include, n_include));
        if (keep) {
            im->e[kept++] = *e;
        } else {
            free(e->name);
            free(e->sums);
            free(e->counts);
        }
    }
    im->n = kept;
}

/* ---- reading -------------------------------------------------------------- */

static bool has_suffix(const char *s, size_t len, const char *suffix, size_t *stem) {
    const size_t n = strlen(suffix);
    if (len <= n || memcmp(s + len - n, suffix, n)) return false;
    *stem = len - n;
    return true;
}

static uint64_t n_elements(const plm_gguf_tensor *t) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) n *= t->ne[d];
    return n;
}

/* The entry of one NAME.in_sum2 tensor and its NAME.counts partner. */
static plm_status read_gguf_entry(plm_imatrix *im, const plm_gguf_file *f, const plm_gguf_tensor *sums,
                                  const char *name, plm_error *err) {
    char counts_name[600];
    snprintf(counts_name, sizeof counts_name, "%s.counts", name);
    const plm_gguf_tensor *counts = plm_gguf_find_tensor(f, counts_name);
    if (!counts) return plm_fail(err, PLM_ERR_FORMAT, "mismatched sums and counts for %s: no %s", name, counts_name);
    if (sums->type != PLM_TYPE_F32 || counts->type != PLM_TYPE_F32)
        return plm_fail(err, PLM_ERR_FORMAT, "sums and counts for %s must be F32", name);
    const uint64_t n_val = n_elements(sums), n_mat = n_elements(counts);
    if (n_mat == 0 || n_val == 0 || n_val % n_mat)
        return plm_fail(err, PLM_ERR_FORMAT, "%s: %llu sums do not divide into %llu matrices", name,
                        (unsigned long long)n_val, (unsigned long long)n_mat);
    plm_imatrix_entry *e = plm_imatrix_add(im, name, (int64_t)(n_val / n_mat), (int64_t)n_mat);
    if (!e) return plm_fail(err, PLM_ERR_FORMAT, "%s: duplicate or impossible entry (%llu values)", name,
                            (unsigned long long)n_val);
    memcpy(e->sums, sums->data, n_val * sizeof(float));
    const float *c = counts->data;
    for (uint64_t m = 0; m < n_mat; m++) {
        if (!(c[m] >= 0 && c[m] < 9e18f)) return plm_fail(err, PLM_ERR_FORMAT, "%s: bad count %g", name, c[m]);
        e->counts[m] = (int64_t)lroundf(c[m]);
    }
    return PLM_OK;
}

static plm_status read_gguf(plm_imatrix *im, const char *path, plm_error *err) {
    plm_gguf_file *f = plm_gguf_open(path, NULL, err);
    if (!f) return err ? err->code : PLM_ERR_FORMAT;
    plm_status st = PLM_OK;
    uint32_t v;
    /* llama-quantize refuses a GGUF imatrix without its metadata */
    if (!plm_gguf_find_kv(f, "imatrix.datasets") || !plm_gguf_get_u32(f, "imatrix.chunk_count", &v) ||
        !plm_gguf_get_u32(f, "imatrix.chunk_size", &v))
        st = plm_fail(err, PLM_ERR_FORMAT, "%s: missing imatrix metadata (imatrix.datasets, chunk_count, chunk_size)",
                      path);
    plm_gguf_get_u32(f, "imatrix.chunk_count", &im->chunk_count);
    plm_gguf_get_u32(f, "imatrix.chunk_size", &im->chunk_size);
    const plm_gguf_array *ds = plm_gguf_get_arr(f, "imatrix.datasets");
    for (uint64_t i = 0; !st && ds && ds->type == PLM_GGUF_TYPE_STRING && i < ds->n; i++) {
        char buf[4096];
        if (!plm_imatrix_add_dataset(im, plm_gguf_str_copy(ds->items[i].v.str, buf, sizeof buf)))
            st = plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    }
    for (uint64_t i = 0; !st && i < f->n_tensors; i++) {
        const plm_gguf_tensor *t = &f->tensors[i];
        size_t stem;
        if (!has_suffix(t->name.ptr, t->name.len, ".in_sum2", &stem)) continue;
        char name[512];
        if (stem >= sizeof name) {
            st = plm_fail(err, PLM_ERR_FORMAT, "%s: tensor name of %zu bytes is too long", path, stem);
            break;
        }
        memcpy(name, t->name.ptr, stem);
        name[stem] = 0;
        st = read_gguf_entry(im, f, t, name, err);
    }
    if (!st && im->n == 0) st = plm_fail(err, PLM_ERR_FORMAT, "%s: no data (no NAME.in_sum2 tensors)", path);
    plm_gguf_close(f);
    return st;
}

static bool read_i32(FILE *fp, int32_t *v) { return fread(v, sizeof *v, 1, fp) == 1; }

static plm_status read_dat_entry(plm_imatrix *im, FILE *fp, const char *path, int i, plm_error *err) {
    int32_t len, ncall, nval;
    char name[512];
    if (!read_i32(fp, &len) || len < 1 || len >= (int32_t)sizeof name || fread(name, 1, (size_t)len, fp) != (size_t)len)
        return plm_fail(err, PLM_ERR_FORMAT, "%s: failed reading the name of entry %d", path, i + 1);
    name[len] = 0;
    if (!read_i32(fp, &ncall) || !read_i32(fp, &nval) || nval < 1)
        return plm_fail(err, PLM_ERR_FORMAT, "%s: failed reading the number of values of entry %d (%s)", path, i + 1,
                        name);
    plm_imatrix_entry *e = plm_imatrix_add(im, name, nval, 1);
    if (!e) return plm_fail(err, PLM_ERR_FORMAT, "%s: duplicate or impossible entry %s", path, name);
    if (fread(e->sums, sizeof(float), (size_t)nval, fp) != (size_t)nval)
        return plm_fail(err, PLM_ERR_FORMAT, "%s: failed reading the data of entry %d (%s)", path, i + 1, name);
    e->counts[0] = ncall;
    return PLM_OK;
}

static plm_status read_dat(plm_imatrix *im, FILE *fp, const char *path, plm_error *err) {
    int32_t n_entries;
    if (!read_i32(fp, &n_entries) || n_entries < 1 || n_entries > 1000000)
        return plm_fail(err, PLM_ERR_FORMAT, "%s: neither a GGUF nor a legacy imatrix file (no entries)", path);
    im->legacy = true;
    for (int i = 0; i < n_entries; i++) {
        const plm_status st = read_dat_entry(im, fp, path, i, err);
        if (st) return st;
    }
    int32_t n_chunks, len;  /* optional trailer */
    if (read_i32(fp, &n_chunks)) {
        im->chunk_count = n_chunks > 0 ? (uint32_t)n_chunks : 0;
        char ds[4096];
        if (read_i32(fp, &len) && len > 0 && len < (int32_t)sizeof ds && fread(ds, 1, (size_t)len, fp) == (size_t)len) {
            ds[len] = 0;
            if (!plm_imatrix_add_dataset(im, ds)) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
        }
    }
    return PLM_OK;
}

plm_status plm_imatrix_load(const char *path, plm_imatrix **out, plm_error *err) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return plm_fail(err, PLM_ERR_IO, "cannot open imatrix file %s", path);
    char magic[4] = {0};
    const bool gguf = fread(magic, 1, 4, fp) == 4 && !memcmp(magic, PLM_GGUF_MAGIC, 4);
    rewind(fp);
    plm_imatrix *im = plm_imatrix_new(0);
    plm_status st = im ? PLM_OK : plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    if (!st) st = gguf ? read_gguf(im, path, err) : read_dat(im, fp, path, err);
    fclose(fp);
    if (st) {
        plm_imatrix_free(im);
        return st;
    }
    *out = im;
    return PLM_OK;
}

/* ---- writing -------------------------------------------------------------- */

static int by_name(const void *a, const void *b) {
    return strcmp((*(const plm_imatrix_entry *const *)a)->name, (*(const plm_imatrix_entry *const *)b)->name);
}

/* The entries in name order (llama-imatrix's deterministic order). */
static const plm_imatrix_entry **sorted_entries(const plm_imatrix *im) {
    const plm_imatrix_entry **v = malloc((size_t)(im->n ? im->n : 1) * sizeof *v);
    if (!v) return NULL;
    for (int i = 0; i < im->n; i++) v[i] = &im->e[i];
    qsort(v, (size_t)im->n, sizeof *v, by_name);
    return v;
}

typedef struct gguf_fill {
    const plm_imatrix_entry **e;
} gguf_fill;

/* Tensor 2i is entry i's sums, 2i+1 its counts (as floats). */
static plm_status fill_tensor(void *user, uint64_t index, void *dst, uint64_t nbytes, plm_error *err) {
    (void)nbytes, (void)err;
    const plm_imatrix_entry *e = ((gguf_fill *)user)->e[index / 2];
    if (index % 2 == 0) {
        memcpy(dst, e->sums, (size_t)(e->n_cols * e->n_mat) * sizeof(float));
    } else {
        float *c = dst;
        for (int64_t m = 0; m < e->n_mat; m++) c[m] = (float)e->counts[m];
    }
    return PLM_OK;
}

plm_status plm_imatrix_save(const plm_imatrix *im, const char *path, plm_error *err) {
    const plm_imatrix_entry **v = sorted_entries(im);
    plm_gguf_writer *w = plm_gguf_writer_new();
    plm_gguf_str *ds = malloc((size_t)(im->n_datasets ? im->n_datasets : 1) * sizeof *ds);
    plm_status st = v && w && ds ? PLM_OK : plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    if (!st) {
        for (int i = 0; i < im->n_datasets; i++) ds[i] = (plm_gguf_str){im->datasets[i], strlen(im->datasets[i])};
        plm_gguf_writer_set_str(w, "general.type", "imatrix");
        plm_gguf_writer_set_arr_str(w, "imatrix.datasets", ds, (uint64_t)im->n_datasets);
        plm_gguf_writer_set_u32(w, "imatrix.chunk_count", im->chunk_count);
        plm_gguf_writer_set_u32(w, "imatrix.chunk_size", im->chunk_size);
        for (int i = 0; i < im->n; i++) {
            char name[600];
            /* ggml drops trailing dimensions of 1: one matrix gives 1-D tensors */
            const uint64_t ne_sums[2] = {(uint64_t)v[i]->n_cols, (uint64_t)v[i]->n_mat};
            const uint64_t ne_counts[2] = {1, (uint64_t)v[i]->n_mat};
            const uint32_t dims = v[i]->n_mat > 1 ? 2 : 1;
            snprintf(name, sizeof name, "%s.in_sum2", v[i]->name);
            plm_gguf_writer_add_tensor(w, name, PLM_TYPE_F32, dims, ne_sums, NULL);
            snprintf(name, sizeof name, "%s.counts", v[i]->name);
            plm_gguf_writer_add_tensor(w, name, PLM_TYPE_F32, dims, ne_counts, NULL);
        }
        gguf_fill fill = {v};
        st = plm_gguf_writer_write(w, path, fill_tensor, &fill, err);
    }
    plm_gguf_writer_free(w);
    free(ds);
    free(v);
    return st;
}

static bool write_i32(FILE *fp, int32_t v) { return fwrite(&v, sizeof v, 1, fp) == 1; }

/* One legacy entry: values (sum / count) * ncall, ncall the chunks its
 * largest count spans. */
static bool write_dat_entry(FILE *fp, const plm_imatrix_entry *e, uint32_t chunk_size) {
    int64_t max_count = 0;
    for (int64_t m = 0; m < e->n_mat; m++) max_count = e->counts[m] > max_count ? e->counts[m] : max_count;
    const int32_t ncall = (int32_t)((max_count + (chunk_size - 1)) / chunk_size);
    const int32_t nval = (int32_t)(e->n_cols * e->n_mat), len = (int32_t)strlen(e->name);
    bool ok = write_i32(fp, len) && fwrite(e->name, 1, (size_t)len, fp) == (size_t)len && write_i32(fp, ncall) &&
              write_i32(fp, nval);
    for (int32_t i = 0; ok && i < nval; i++) {
        float count = (float)e->counts[i / e->n_cols], value = e->sums[i];
        if (count == 0.0f) value = count = 1.0f;  /* partial data: stored as 1 */
        const float x = (value / count) * (float)ncall;
        ok = fwrite(&x, sizeof x, 1, fp) == 1;
    }
    return ok;
}

plm_status plm_imatrix_save_dat(const plm_imatrix *im, const char *path, plm_error *err) {
    if (im->chunk_size == 0) return plm_fail(err, PLM_ERR_INVALID_ARG, "imatrix without a chunk size");
    const plm_imatrix_entry **v = sorted_entries(im);
    if (!v) return plm_fail(err, PLM_ERR_NOMEM, "out of memory");
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *fp = fopen(tmp, "wb");
    bool ok = fp != NULL;
    int32_t n_entries = 0;  /* entries with some data */
    for (int i = 0; i < im->n; i++)
        for (int64_t m = 0; m < v[i]->n_mat; m++)
            if (v[i]->counts[m]) {
                n_entries++;
                break;
            }
    ok = ok && write_i32(fp, n_entries);
    for (int i = 0; ok && i < im->n; i++) {
        bool some = false;
        for (int64_t m = 0; m < v[i]->n_mat; m++) some |= v[i]->counts[m] != 0;
        if (some) ok = write_dat_entry(fp, v[i], im->chunk_size);
    }
    const char *ds = plm_imatrix_dataset(im) ? im->datasets[im->n_datasets - 1] : "";
    ok = ok && write_i32(fp, (int32_t)im->chunk_count) && write_i32(fp, (int32_t)strlen(ds)) &&
         fwrite(ds, 1, strlen(ds), fp) == strlen(ds);
    ok = fp && !fflush(fp) && ok;
    if (fp && fclose(fp)) ok = false;
    free(v);
    if (!ok || rename(tmp, path)) {
        remove(tmp);
        return plm_fail(err, PLM_ERR_IO, "cannot write %s", path);
    }
    return PLM_OK;
}
