/*
 * pocketlm quantize against llama.cpp's own quantizer on any model: runs
 * plm_quantize_ex, then llama_model_quantize from a libllama.so (loaded with
 * dlopen, e.g. node-llama-cpp's prebuilt one) with the same file type, times
 * both, and compares the two files tensor by tensor (type and bytes).  Built
 * and run by bench/quantize-vs-llamacpp.sh.
 *
 *   quantize-llamacpp LIBLLAMA.so IN.gguf TYPE [--pure] [-t N] [-o DIR] [-k]
 *
 * The two files go to DIR (/tmp) and are deleted unless -k.  Exit status 0
 * when every tensor is identical.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pocketlm.h"
#include "pocketlm_tools.h"
#include "pocketlm_gguf.h"

/* llama_model_quantize_params as llama.h lays it out (2024 on): int32
 * nthread, enum ftype, two enum ggml_type overrides, then the bools
 * allow_requantize, quantize_output_tensor, only_copy, pure, ...  Filled by
 * llama_model_quantize_default_params into a buffer larger than any version
 * of the struct, then only these fields are set. */
typedef struct {
    _Alignas(8) unsigned char bytes[512];
} llama_qparams;
enum { QP_NTHREAD = 0, QP_FTYPE = 4, QP_PURE = 19 };

typedef llama_qparams (*default_params_fn)(void);
typedef void (*log_fn)(int level, const char *text, void *user);
typedef uint32_t (*quantize_fn)(const char *in, const char *out, const llama_qparams *params);

static void quiet(int level, const char *text, void *user) {
    (void)level, (void)text, (void)user;
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int compare(const char *ours_path, const char *theirs_path) {
    plm_error err;
    plm_gguf_file *a = plm_gguf_open(ours_path, NULL, &err), *b = plm_gguf_open(theirs_path, NULL, &err);
    if (!a || !b) {
        fprintf(stderr, "open: %s\n", err.message);
        return 2;
    }
    int same = 0, differ = 0;
    for (uint64_t i = 0; i < b->n_tensors; i++) {
        char name[256];
        plm_gguf_str_copy(b->tensors[i].name, name, sizeof name);
        const plm_gguf_tensor *x = plm_gguf_find_tensor(a, name), *y = &b->tensors[i];
        if (x && x->type == y->type && x->nbytes == y->nbytes && !memcmp(x->data, y->data, y->nbytes)) {
            same++;
            continue;
        }
        differ++;
        printf("  differs: %-32s ours %-6s llama.cpp %s\n", name, x ? plm_gguf_tensor_type_name(x->type) : "(none)",
               plm_gguf_tensor_type_name(y->type));
    }
    uint32_t fa = 0, fb = 0;
    plm_gguf_get_u32(a, "general.file_type", &fa);
    plm_gguf_get_u32(b, "general.file_type", &fb);
    printf("%d of %llu tensors identical (%llu in ours), general.file_type %u vs %u\n", same,
           (unsigned long long)b->n_tensors, (unsigned long long)a->n_tensors, fa, fb);
    const int bad = differ || a->n_tensors != b->n_tensors || fa != fb;
    plm_gguf_close(a);
    plm_gguf_close(b);
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s LIBLLAMA.so IN.gguf TYPE [--pure] [-t N] [-o DIR] [-k]\n", argv[0]);
        return 2;
    }
    const char *lib = argv[1], *in = argv[2], *type = argv[3], *dir = "/tmp";
    plm_quantize_params p = plm_quantize_default_params();
    bool keep = false;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--pure")) p.pure = true;
        else if (!strcmp(argv[i], "-k")) keep = true;
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) p.n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) dir = argv[++i];
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    char ours[1024], theirs[1024];
    snprintf(ours, sizeof ours, "%s/quantize-pocketlm-%s.gguf", dir, type);
    snprintf(theirs, sizeof theirs, "%s/quantize-llamacpp-%s.gguf", dir, type);

    plm_error err;
    double t0 = seconds();
    if (plm_quantize_ex(in, ours, type, &p, &err)) {
        fprintf(stderr, "pocketlm: %s\n", err.message);
        return 2;
    }
    const double t_ours = seconds() - t0;
    /* llama.cpp gets the file type our file records */
    plm_gguf_file *f = plm_gguf_open(ours, NULL, &err);
    uint32_t ftype = 0;
    if (!f || !plm_gguf_get_u32(f, "general.file_type", &ftype)) {
        fprintf(stderr, "%s: no general.file_type\n", ours);
        return 2;
    }
    plm_gguf_close(f);

    void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    default_params_fn defaults = (default_params_fn)dlsym(h, "llama_model_quantize_default_params");
    quantize_fn quantize = (quantize_fn)dlsym(h, "llama_model_quantize");
    void (*backend_init)(void) = (void (*)(void))dlsym(h, "llama_backend_init");
    if (!defaults || !quantize) {
        fprintf(stderr, "%s: no llama_model_quantize\n", lib);
        return 2;
    }
    void (*log_set)(log_fn, void *) = (void (*)(log_fn, void *))dlsym(h, "llama_log_set");
    if (log_set) log_set(quiet, NULL);  /* its per-tensor progress lines */
    if (backend_init) backend_init();
    llama_qparams q = defaults();
    const int32_t nthread = p.n_threads, ft = (int32_t)ftype;
    memcpy(q.bytes + QP_NTHREAD, &nthread, sizeof nthread);
    memcpy(q.bytes + QP_FTYPE, &ft, sizeof ft);
    q.bytes[QP_PURE] = p.pure;
    t0 = seconds();
    if (quantize(in, theirs, &q) != 0) {
        fprintf(stderr, "llama_model_quantize failed\n");
        return 2;
    }
    const double t_theirs = seconds() - t0;
    char threads[32] = "all cores";
    if (p.n_threads > 0) snprintf(threads, sizeof threads, "%d threads", p.n_threads);
    printf("%s%s (file type %u), %s: pocketlm %.2f s, llama.cpp %.2f s\n", p.pure ? "--pure " : "", type, ftype,
           threads, t_ours, t_theirs);
    const int rc = compare(ours, theirs);
    if (!keep) unlink(ours), unlink(theirs);
    return rc;
}
