/*
 * Importance matrices against llama.cpp's tools, from files they wrote once
 * (tests/data/imatrix/, made by scripts/record-imatrix-expected.sh, which
 * holds the commands):
 *
 *  - our statistics: `pocketlm imatrix` on fixture-llama-f16 and the
 *    tinystories text must give llama-imatrix's entries, counts and chunk
 *    count exactly, and its per-column sums to float accuracy;
 *  - reading: llama-imatrix's GGUF and legacy .dat files of the same run
 *    give the same importances; ours round-trip through both formats;
 *  - quantizing: `pocketlm quantize --imatrix` with llama-imatrix's file,
 *    and with ours, must write every tensor byte for byte as
 *    `llama-quantize --imatrix` did with the same file (expected.txt holds
 *    FNV-1a hashes of llama-quantize's tensors) — so llama-quantize accepts
 *    our file and we accept its — and the quantize.imatrix.* metadata; so
 *    must the non-K file types' rules without an imatrix, and
 *    llama-quantize's options (--include/--exclude-weights, --tensor-type,
 *    --output-tensor-type, --token-embedding-type, --pure), for every file
 *    type down to IQ1_S, TQ1_0 and MXFP4_MOE; and the refusals of the very
 *    low-bit types without importances.
 *
 * `test_imatrix --hashes FILE` prints a file's tensor hashes in
 * expected.txt's format (how the script records llama-quantize's output).
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/imatrix.h"
#include "pocketlm.h"
#include "pocketlm_gguf.h"
#include "test.h"

#define DATA PLM_SOURCE_DIR "/tests/data/imatrix/"
#define F16 PLM_SHARED_DIR "/models/fixtures/fixture-llama-f16.gguf"
#define TEXT PLM_SOURCE_DIR "/tests/data/tinystories.txt"
#define N_CTX 64
#define N_CHUNKS 4

static uint64_t fnv1a(const void *data, uint64_t n) {
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static int print_hashes(const char *path) {
    plm_error err;
    plm_gguf_file *f = plm_gguf_open(path, NULL, &err);
    if (!f) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++)
        printf("%.*s %s %016llx\n", (int)f->tensors[i].name.len, f->tensors[i].name.ptr,
               plm_gguf_tensor_type_name(f->tensors[i].type),
               (unsigned long long)fnv1a(f->tensors[i].data, f->tensors[i].nbytes));
    plm_gguf_close(f);
    return 0;
}

static const float *tensor_f32(const plm_gguf_file *f, const char *name, uint64_t *n) {
    const plm_gguf_tensor *t = plm_gguf_find_tensor(f, name);
    *n = t ? t->nbytes / 4 : 0;
    return t && t->type == 0 ? t->data : NULL;
}

/* Ours against llama-imatrix's: the same entries and counts, sums within
 * float accuracy (the two forward passes round differently). */
static void compare_imatrix_files(const char *ours_path, const char *theirs_path) {
    plm_error err;
    plm_gguf_file *a = plm_gguf_open(ours_path, NULL, &err), *b = plm_gguf_open(theirs_path, NULL, &err);
    REQUIRE_VOID(a && b, "open: %s", err.message);
    CHECK(a->n_tensors == b->n_tensors, "%llu tensors, llama-imatrix's %llu", (unsigned long long)a->n_tensors,
          (unsigned long long)b->n_tensors);
    uint32_t ca = 0, cb = 1, sa = 0, sb = 1;
    CHECK(plm_gguf_get_u32(a, "imatrix.chunk_count", &ca) && plm_gguf_get_u32(b, "imatrix.chunk_count", &cb) &&
              ca == cb, "chunk_count %u, llama-imatrix's %u", ca, cb);
    CHECK(plm_gguf_get_u32(a, "imatrix.chunk_size", &sa) && plm_gguf_get_u32(b, "imatrix.chunk_size", &sb) &&
              sa == sb, "chunk_size %u, llama-imatrix's %u", sa, sb);
    double worst = 0;
    for (uint64_t i = 0; i < b->n_tensors; i++) {
        char name[256];
        plm_gguf_str_copy(b->tensors[i].name, name, sizeof name);
        uint64_t na, nb;
        const float *x = tensor_f32(a, name, &na), *y = tensor_f32(b, name, &nb);
        CHECK(x && y && na == nb && a->tensors[i].n_dims == b->tensors[i].n_dims, "%s: missing or shaped differently",
              name);
        if (!x || !y || na != nb) continue;
        for (uint64_t j = 0; j < nb; j++) {
            const double rel = fabs((double)x[j] - y[j]) / (fabs((double)y[j]) + 1e-6);
            if (rel > worst) worst = rel;
        }
        if (strstr(name, ".counts")) CHECK(!memcmp(x, y, nb * 4), "%s: counts differ", name);
    }
    printf("our imatrix vs llama-imatrix's: worst relative difference of a column sum %.2e\n", worst);
    CHECK(worst < 5e-3, "column sums differ from llama-imatrix's by up to %.2e", worst);
    plm_gguf_close(a);
    plm_gguf_close(b);
}

static void check_collect(const char *dir) {
    char out[512], cmd[2048];
    snprintf(out, sizeof out, "%s/ours.imatrix.gguf", dir);
    snprintf(cmd, sizeof cmd, "%s imatrix -m %s -f %s -c %d --chunks %d -t 2 -o %s 2>&1", PLM_BIN, F16, TEXT, N_CTX,
             N_CHUNKS, out);
    int status;
    char *text = test_capture(cmd, &status);
    CHECK(status == 0 && text && strstr(text, "Final estimate: PPL"), "imatrix: status %d: %s", status,
          text ? text : "");
    free(text);
    if (status == 0) compare_imatrix_files(out, DATA "llamacpp.imatrix.gguf");
    remove(out);
}

/* The importances (what the quantizers get) of every entry, by name,
 * equal within tol (relative), and the same chunk count and dataset. */
static void compare_importances(const char *a_path, const char *b_path, double tol) {
    plm_error err;
    plm_imatrix *a = NULL, *b = NULL;
    REQUIRE_VOID(!plm_imatrix_load(a_path, &a, &err), "%s: %s", a_path, err.message);
    REQUIRE_VOID(!plm_imatrix_load(b_path, &b, &err), "%s: %s", b_path, err.message);
    CHECK(a->n == b->n && a->n == 28, "%s: %d entries, %s: %d", a_path, a->n, b_path, b->n);
    CHECK(a->chunk_count == b->chunk_count, "chunk counts %u vs %u", a->chunk_count, b->chunk_count);
    const char *da = plm_imatrix_dataset(a), *db = plm_imatrix_dataset(b);
    CHECK(da && db && !strcmp(da, db), "datasets %s vs %s", da ? da : "-", db ? db : "-");
    double worst = 0;
    for (int i = 0; i < b->n; i++) {
        const plm_imatrix_entry *x = plm_imatrix_find(a, b->e[i].name), *y = &b->e[i];
        CHECK(x && x->n_cols == y->n_cols && x->n_mat == y->n_mat, "%s: entry %s missing or shaped differently",
              a_path, y->name);
        if (!x || x->n_cols != y->n_cols || x->n_mat != y->n_mat) continue;
        const int64_t n = y->n_cols * y->n_mat;
        float *ix = malloc((size_t)n * sizeof *ix), *iy = malloc((size_t)n * sizeof *iy);
        REQUIRE_VOID(ix && iy, "out of memory");
        CHECK(plm_imatrix_importances(a, x, ix) && plm_imatrix_importances(b, y, iy), "%s: non-finite", y->name);
        for (int64_t j = 0; j < n; j++) {
            const double rel = fabs((double)ix[j] - iy[j]) / (fabs((double)iy[j]) + 1e-12);
            if (rel > worst) worst = rel;
        }
        free(ix);
        free(iy);
    }
    CHECK(worst <= tol, "%s vs %s: importances differ by %.2e (relative)", a_path, b_path, worst);
    plm_imatrix_free(a);
    plm_imatrix_free(b);
}

/* Our GGUF and .dat writers, read back: the same importances as the file
 * they came from, with quantize as the judge (identical bytes). */
static void check_round_trip(const char *dir) {
    char dat[512], gguf[512];
    snprintf(dat, sizeof dat, "%s/rt.imatrix.dat", dir);
    snprintf(gguf, sizeof gguf, "%s/rt.imatrix.gguf", dir);
    plm_error err;
    plm_imatrix *im = NULL;
    REQUIRE_VOID(!plm_imatrix_load(DATA "llamacpp.imatrix.gguf", &im, &err), "%s", err.message);
    CHECK(!plm_imatrix_save(im, gguf, &err), "save gguf: %s", err.message);
    CHECK(!plm_imatrix_save_dat(im, dat, &err), "save dat: %s", err.message);
    plm_imatrix_free(im);
    compare_importances(gguf, DATA "llamacpp.imatrix.gguf", 0);     /* raw sums: exact */
    compare_importances(dat, DATA "llamacpp.imatrix.dat", 0);       /* our .dat writer is llama-imatrix's */
    compare_importances(DATA "llamacpp.imatrix.dat", DATA "llamacpp.imatrix.gguf", 1e-6);  /* one rounding apart */
    remove(gguf);
    remove(dat);
}

/* Bad files are refused with their name in the message. */
static void check_bad_files(const char *dir) {
    plm_error err;
    plm_imatrix *im = NULL;
    CHECK(plm_imatrix_load("/nonexistent/im.gguf", &im, &err) && strstr(err.message, "/nonexistent/im.gguf"),
          "missing file: %s", err.message);
    char bad[512];
    snprintf(bad, sizeof bad, "%s/garbage.dat", dir);
    FILE *f = fopen(bad, "wb");
    if (f) {
        const unsigned char cut[] = {2, 0, 0, 0, 5, 0, 0, 0, 'a', 'b', 'c'};  /* 2 entries, a name cut short */
        fwrite(cut, 1, sizeof cut, f);
        fclose(f);
    }
    CHECK(plm_imatrix_load(bad, &im, &err) && strstr(err.message, "garbage.dat"), "truncated .dat: %s", err.message);
    CHECK(im == NULL, "a failed load returns no imatrix");
    remove(bad);
}

/* One line of expected.txt: CASE TYPE TENSOR GGML_TYPE HASH. */
typedef struct expected_line {
    char imatrix[32], type[16], tensor[128], ggml_type[16];
    unsigned long long hash;
} expected_line;

/* The cases of expected.txt: quantize's arguments besides IN OUT TYPE, the
 * same as scripts/record-imatrix-expected.sh gave llama-quantize. */
typedef struct quant_args {
    const char *name, *args;
} quant_args;

static const quant_args cases[] = {
    {"llamacpp", "--imatrix " DATA "llamacpp.imatrix.gguf"},
    {"pocketlm", "--imatrix " DATA "pocketlm.imatrix.gguf"},
    {"none", ""},
    {"overrides", "--imatrix " DATA "llamacpp.imatrix.gguf --exclude-weights attn_q --tensor-type 'ffn_down=q8_0' "
                  "--tensor-type 'blk\\.[12]\\.attn_v=q5_k' --output-tensor-type q4_k --token-embedding-type q3_k"},
    {"include", "--imatrix " DATA "llamacpp.imatrix.gguf --include-weights ffn_ --include-weights attn_output"},
    {"pure", "--pure --imatrix " DATA "pocketlm.imatrix.gguf --tensor-type 'attn_k=iq4_nl'"},
    {"lowbit", "--pure --imatrix " DATA "pocketlm.imatrix.gguf --tensor-type 'attn_k=iq1_m' "
               "--token-embedding-type iq3_xxs --output-tensor-type tq1_0"},
};

/* What llama-quantize records of the imatrix for the two plain cases. */
static void check_metadata(const plm_gguf_file *f, const char *case_name, const char *type) {
    char im_path[512];
    snprintf(im_path, sizeof im_path, DATA "%s.imatrix.gguf", case_name);
    uint32_t entries = 0, chunks = 0;
    plm_gguf_str file, dataset;
    CHECK(plm_gguf_get_u32(f, "quantize.imatrix.entries_count", &entries) && entries == 28 &&
              plm_gguf_get_u32(f, "quantize.imatrix.chunks_count", &chunks) && chunks == N_CHUNKS &&
              plm_gguf_get_str(f, "quantize.imatrix.file", &file) && plm_gguf_str_eq(file, im_path) &&
              plm_gguf_get_str(f, "quantize.imatrix.dataset", &dataset) &&
              plm_gguf_str_eq(dataset, "tests/data/tinystories.txt"),
          "%s %s: quantize.imatrix.* metadata", case_name, type);
}

static void check_quantize(const char *dir, const char *case_name, const char *type, const expected_line *lines,
                           int n_lines) {
    const quant_args *qa = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!strcmp(cases[i].name, case_name)) qa = &cases[i];
    REQUIRE_VOID(qa != NULL, "expected.txt: unknown case %s", case_name);
    char out[512], cmd[2048];
    snprintf(out, sizeof out, "%s/q-%s-%s.gguf", dir, case_name, type);
    snprintf(cmd, sizeof cmd, "%s quantize -q %s %s %s %s 2>&1", PLM_BIN, qa->args, F16, out, type);
    int status;
    char *text = test_capture(cmd, &status);
    CHECK(status == 0, "%s: %s", cmd, text ? text : "");
    free(text);
    plm_error err;
    plm_gguf_file *f = plm_gguf_open(out, NULL, &err);
    REQUIRE_VOID(f != NULL, "%s: %s", out, err.message);
    int same = 0, n = 0;
    for (int i = 0; i < n_lines; i++) {
        if (strcmp(lines[i].imatrix, case_name) || strcmp(lines[i].type, type)) continue;
        n++;
        const plm_gguf_tensor *t = plm_gguf_find_tensor(f, lines[i].tensor);
        const bool ok = t && !strcmp(plm_gguf_tensor_type_name(t->type), lines[i].ggml_type) &&
                        fnv1a(t->data, t->nbytes) == lines[i].hash;
        CHECK(ok, "%s %s: %s differs from llama-quantize's (%s, expected %s)", case_name, type, lines[i].tensor,
              t ? plm_gguf_tensor_type_name(t->type) : "missing", lines[i].ggml_type);
        same += ok;
    }
    CHECK(n > 0 && (uint64_t)n == f->n_tensors, "%s %s: %d expected tensors for %llu", case_name, type, n,
          (unsigned long long)f->n_tensors);
    if (!strcmp(case_name, "llamacpp") || !strcmp(case_name, "pocketlm")) check_metadata(f, case_name, type);
    printf("quantize %-8s %-9s %d/%d tensors identical to llama-quantize's\n", type, case_name, same, n);
    plm_gguf_close(f);
    remove(out);
}

/* llama-quantize refuses the IQ1/IQ2 types and IQ3_XXS without
 * importances for the tensors that get them (and so do we, before writing
 * anything): with no imatrix at all, and with one that lacks the entry
 * (--include-weights leaves only the ffn_ ones). */
static void check_refusals(const char *dir) {
    static const struct {
        const char *args, *type, *message;
    } refused[] = {
        {"", "IQ2_XXS", "requires an importance matrix"},
        {"", "IQ1_M", "requires an importance matrix"},
        {"", "IQ3_XS", "requires an importance matrix"},  /* its attn_q/attn_k are IQ3_XXS */
        {"--imatrix " DATA "llamacpp.imatrix.gguf --include-weights ffn_", "IQ2_M",
         "missing importance matrix for tensor blk.0.attn_q.weight"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char out[512], cmd[2048];
        snprintf(out, sizeof out, "%s/refused.gguf", dir);
        snprintf(cmd, sizeof cmd, "%s quantize -q %s %s %s %s 2>&1", PLM_BIN, refused[i].args, F16, out,
                 refused[i].type);
        int status;
        char *text = test_capture(cmd, &status);
        CHECK(status != 0 && text && strstr(text, refused[i].message), "%s: expected a refusal (%s), got: %s", cmd,
              refused[i].message, text ? text : "");
        CHECK(access(out, F_OK) != 0, "%s left %s behind", cmd, out);
        free(text);
    }
}

static int read_expected(expected_line *lines, int cap) {
    FILE *f = fopen(DATA "expected.txt", "r");
    if (!f) return 0;
    int n = 0;
    char buf[512];
    while (n < cap && fgets(buf, sizeof buf, f)) {
        if (buf[0] == '#') continue;
        expected_line *l = &lines[n];
        if (sscanf(buf, "%31s %15s %127s %15s %llx", l->imatrix, l->type, l->tensor, l->ggml_type, &l->hash) == 5)
            n++;
    }
    fclose(f);
    return n;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--hashes")) return print_hashes(argv[2]);
    char dir[] = "/tmp/plm-imatrix-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    check_collect(dir);
    check_round_trip(dir);
    check_bad_files(dir);
    check_refusals(dir);

    static expected_line lines[4096];
    const int n = read_expected(lines, 4096);
    REQUIRE(n > 0, "no %sexpected.txt", DATA);
    /* every (imatrix, type) pair the file records */
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int k = 0; k < i && !seen; k++)
            seen = !strcmp(lines[k].imatrix, lines[i].imatrix) && !strcmp(lines[k].type, lines[i].type);
        if (!seen) check_quantize(dir, lines[i].imatrix, lines[i].type, lines, n);
    }
    rmdir(dir);
    return test_summary();
}
