/*
 * The oracle side of the codebook-format tests (tests/oracle/iq_formats.test.mjs),
 * talking to llama.cpp's own libraries (node-llama-cpp's prebuilt ones,
 * loaded with dlopen):
 *
 *   ggml_formats dequant LIBGGML_BASE.so
 *       random blocks of every IQ1/IQ2/IQ3, TQ1_0, TQ2_0 and MXFP4 type
 *       (every code, sane scales) dequantized by ggml's dequantize_row_*
 *       and by our reference; the floats must be identical, bit for bit.
 *   ggml_formats quantize LIBLLAMA.so IN.gguf OUT.gguf FTYPE
 *       llama_model_quantize with --pure to llama.cpp file type FTYPE, with
 *       a flat importance matrix (every column weight 1) for the types that
 *       require one: the file llama.cpp's quantizer writes, not ours.
 *
 * Exit status 0 on success, 1 on a mismatch, 2 on a usage or load error.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocketlm_gguf.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/types.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static void put_f16(uint8_t *p, float f) {
    const plm_fp16_t h = plm_fp32_to_fp16(f);
    memcpy(p, &h, sizeof h);
}

/* A random block of type t: random bytes (every index, sign and scale
 * code), then a finite block scale where the format keeps one. */
static void random_block(plm_type t, uint8_t *b, size_t size) {
    for (size_t i = 0; i < size; i++) b[i] = (uint8_t)rng_u32();
    const float d = (1 + rng_u32() % 1000) * 1e-4f * (rng_u32() & 1 ? -1 : 1);
    switch (t) {
    case PLM_TYPE_TQ1_0: put_f16(b + offsetof(block_tq1_0, d), d); break;
    case PLM_TYPE_TQ2_0: put_f16(b + offsetof(block_tq2_0, d), d); break;
    case PLM_TYPE_MXFP4: b[0] = (uint8_t)(rng_u32() % 8 == 0 ? rng_u32() % 4 : 110 + rng_u32() % 30); break;
    case PLM_TYPE_IQ1_M: {
        /* the f16 scale's four nibbles sit in the top of the four u16 scales */
        const plm_fp16_t h = plm_fp32_to_fp16(d);
        block_iq1_m *m = (block_iq1_m *)b;
        for (int k = 0; k < 4; k++) m->scales[2 * k + 1] = (uint8_t)((m->scales[2 * k + 1] & 0x0f) | (((h >> (4 * k)) & 15) << 4));
        break;
    }
    default: put_f16(b, d); break;  /* the IQ formats lead with d */
    }
}

typedef void (*ggml_dequantize_fn)(const void *x, float *y, int64_t k);

static int check_dequant(const char *lib) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    static const plm_type types[] = {
        PLM_TYPE_IQ2_XXS, PLM_TYPE_IQ2_XS, PLM_TYPE_IQ2_S, PLM_TYPE_IQ3_XXS, PLM_TYPE_IQ3_S,
        PLM_TYPE_IQ1_S, PLM_TYPE_IQ1_M, PLM_TYPE_TQ1_0, PLM_TYPE_TQ2_0, PLM_TYPE_MXFP4,
    };
    enum { N = 64 * 256 };  /* 64 super-blocks, 512 MXFP4 blocks */
    static uint8_t blocks[N];
    static float ours[N], theirs[N];
    int bad = 0;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const plm_type t = types[k];
        const plm_type_info *ti = plm_type_info_get(t);
        char sym[64], name[16];
        snprintf(name, sizeof name, "%s", ti->name);
        for (char *c = name; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
        snprintf(sym, sizeof sym, "dequantize_row_%s", name);
        ggml_dequantize_fn ref = (ggml_dequantize_fn)dlsym(h, sym);
        if (!ref) {
            fprintf(stderr, "%s: no %s\n", lib, sym);
            bad = 1;
            continue;
        }
        const int64_t nb = N / ti->block_size;
        for (int64_t i = 0; i < nb; i++) random_block(t, blocks + i * ti->type_size, ti->type_size);
        ref(blocks, theirs, N);
        ti->dequantize_row(blocks, ours, N);
        int64_t first = -1, n_diff = 0;
        for (int64_t i = 0; i < N; i++)
            if (memcmp(&ours[i], &theirs[i], sizeof(float)) != 0) {
                if (first < 0) first = i;
                n_diff++;
            }
        if (n_diff) {
            printf("%-8s %lld of %d values differ; first at %lld: ours %g, ggml %g\n", ti->name, (long long)n_diff,
                   N, (long long)first, ours[first], theirs[first]);
            bad = 1;
        } else {
            printf("%-8s %d values identical to ggml's\n", ti->name, N);
        }
    }
    dlclose(h);
    return bad;
}

/* llama_model_quantize_params as llama.h lays it out (see
 * bench/quantize-llamacpp.c): int32 nthread, enum ftype, two enum ggml_type,
 * six bools (pure at byte 19), then the imatrix pointer at byte 24: an
 * array of {name, data, size} ended by a NULL name. */
typedef struct {
    _Alignas(8) unsigned char bytes[512];
} llama_qparams;
enum { QP_NTHREAD = 0, QP_FTYPE = 4, QP_PURE = 19, QP_IMATRIX = 24 };

typedef struct {
    const char *name;
    const float *data;
    size_t size;
} imatrix_entry;

static void quiet(int level, const char *text, void *user) {
    (void)level, (void)text, (void)user;
}

static int quantize(const char *lib, const char *in, const char *out, int32_t ftype) {
    plm_error err;
    plm_gguf_file *f = plm_gguf_open(in, NULL, &err);
    if (!f) {
        fprintf(stderr, "%s: %s\n", in, err.message);
        return 2;
    }
    /* a flat importance matrix: one entry per 2-D tensor, ne[0] ones */
    imatrix_entry *im = calloc(f->n_tensors + 1, sizeof *im);
    char (*names)[256] = calloc(f->n_tensors, sizeof *names);
    static float ones[1 << 16];
    for (size_t i = 0; i < sizeof ones / sizeof ones[0]; i++) ones[i] = 1.0f;
    size_t n_im = 0;
    for (uint64_t i = 0; im && names && i < f->n_tensors; i++) {
        const plm_gguf_tensor *t = &f->tensors[i];
        if (t->n_dims < 2 || t->ne[0] > sizeof ones / sizeof ones[0]) continue;
        plm_gguf_str_copy(t->name, names[n_im], sizeof names[n_im]);
        im[n_im] = (imatrix_entry){names[n_im], ones, (size_t)t->ne[0]};
        n_im++;
    }
    plm_gguf_close(f);
    int rc = 2;
    void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        goto done;
    }
    llama_qparams (*defaults)(void) = (llama_qparams(*)(void))dlsym(h, "llama_model_quantize_default_params");
    uint32_t (*run)(const char *, const char *, const llama_qparams *) =
        (uint32_t(*)(const char *, const char *, const llama_qparams *))dlsym(h, "llama_model_quantize");
    void (*backend_init)(void) = (void (*)(void))dlsym(h, "llama_backend_init");
    void (*log_set)(void (*)(int, const char *, void *), void *) =
        (void (*)(void (*)(int, const char *, void *), void *))dlsym(h, "llama_log_set");
    if (!defaults || !run || !im || !names) {
        fprintf(stderr, "%s: no llama_model_quantize\n", lib);
        goto done;
    }
    if (log_set) log_set(quiet, NULL);
    if (backend_init) backend_init();
    llama_qparams q = defaults();
    const int32_t nthread = 2;
    const void *imp = im;
    memcpy(q.bytes + QP_NTHREAD, &nthread, sizeof nthread);
    memcpy(q.bytes + QP_FTYPE, &ftype, sizeof ftype);
    memcpy(q.bytes + QP_IMATRIX, &imp, sizeof imp);
    q.bytes[QP_PURE] = 1;
    rc = run(in, out, &q) == 0 ? 0 : 1;
    if (rc) fprintf(stderr, "llama_model_quantize to file type %d failed\n", ftype);
done:
    free(im);
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "dequant")) return check_dequant(argv[2]);
    if (argc == 6 && !strcmp(argv[1], "quantize")) return quantize(argv[2], argv[3], argv[4], atoi(argv[5]));
    fprintf(stderr, "usage: ggml_formats dequant LIBGGML_BASE.so\n"
                    "       ggml_formats quantize LIBLLAMA.so IN.gguf OUT.gguf FTYPE\n");
    return 2;
}
