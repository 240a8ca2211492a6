/*
 * A model file that shrinks while mapped (deleted and replaced by an app
 * update, truncated by a sync) must not kill the process: the decode that
 * touches a vanished page fails with PLM_ERR_IO naming the file, the context
 * stays poisoned, and the process goes on.  Worker threads read weights too,
 * so the decodes run on two threads.  A model read into memory (--no-mmap)
 * does not notice at all.  A SIGBUS that is not ours still reaches the
 * handler that was installed before the library's.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pocketlm.h"
#include "test.h"

#define STORIES SHARED("models/stories260K.gguf")

static bool copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    bool ok = a && b;
    char buf[65536];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b && fclose(b) != 0) ok = false;
    return ok;
}

static long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static plm_context *new_ctx(plm_model *m) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 2;
    plm_context *c = NULL;
    plm_error err;
    if (plm_context_new(m, &cp, &c, &err)) fprintf(stderr, "context: %s\n", err.message);
    return c;
}

static const plm_token prompt[] = {1, 403, 407, 261, 378, 2, 300, 50};
#define N_PROMPT (int)(sizeof prompt / sizeof prompt[0])

/* Cut the file to `keep` bytes under a mapped model: the next decode fails
 * cleanly, and so does every one after it. */
static void truncated_while_mapped(const char *dir, long keep, const char *what) {
    char path[512];
    snprintf(path, sizeof path, "%s/model-%ld.gguf", dir, keep);
    REQUIRE_VOID(copy_file(STORIES, path), "copy %s", path);
    plm_model_params mp = plm_model_default_params();
    mp.use_mmap = true;
    plm_model *m;
    plm_error err;
    REQUIRE_VOID(plm_model_load(path, &mp, &m, &err) == PLM_OK, "load: %s", err.message);
    plm_context *c = new_ctx(m);
    REQUIRE_VOID(c != NULL, "context");
    CHECK(plm_decode(c, prompt, N_PROMPT, &err) == PLM_OK, "decode before truncation: %s", err.message);
    CHECK(!plm_context_poisoned(c), "a healthy context is not poisoned");

    REQUIRE_VOID(truncate(path, keep) == 0, "truncate");
    memset(&err, 0, sizeof err);
    plm_status st = plm_decode(c, prompt, 1, &err);
    CHECK(st == PLM_ERR_IO, "%s: decode after truncation returns PLM_ERR_IO, got %s", what, plm_status_name(st));
    CHECK(strstr(err.message, path) && strstr(err.message, "shrank") && strstr(err.message, "unusable"),
          "%s: the message names the file and says the context is unusable: %s", what, err.message);
    CHECK(plm_context_poisoned(c), "%s: the context is poisoned", what);
    CHECK(plm_get_logits(c, -1) == NULL, "%s: no logits from a failed decode", what);
    memset(&err, 0, sizeof err);
    st = plm_decode(c, prompt, 1, &err);
    CHECK(st == PLM_ERR_IO && strstr(err.message, "shrank"), "%s: poisoned for good: %s %s", what,
          plm_status_name(st), err.message);
    /* A fresh context on the same (broken) model fails the same way. */
    plm_context *c2 = new_ctx(m);
    if (c2) {
        st = plm_decode(c2, prompt, N_PROMPT, &err);
        CHECK(st == PLM_ERR_IO, "%s: a new context on the truncated file fails too: %s", what, plm_status_name(st));
        plm_context_free(c2);
    }
    plm_context_free(c);
    plm_model_free(m);
    unlink(path);
}

/* Read into memory: the file's fate no longer matters. */
static void truncated_after_read(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/model-read.gguf", dir);
    REQUIRE_VOID(copy_file(STORIES, path), "copy");
    plm_model_params mp = plm_model_default_params();
    mp.use_mmap = false;
    plm_model *m;
    plm_error err;
    REQUIRE_VOID(plm_model_load(path, &mp, &m, &err) == PLM_OK, "load: %s", err.message);
    plm_context *c = new_ctx(m);
    REQUIRE_VOID(c != NULL, "context");
    CHECK(plm_decode(c, prompt, N_PROMPT, &err) == PLM_OK, "decode: %s", err.message);
    const int nv = plm_model_n_vocab(m);
    float *before = malloc((size_t)nv * sizeof *before);
    memcpy(before, plm_get_logits(c, -1), (size_t)nv * sizeof *before);
    plm_context_free(c);
    REQUIRE_VOID(truncate(path, 0) == 0, "truncate");
    c = new_ctx(m);
    CHECK(c && plm_decode(c, prompt, N_PROMPT, &err) == PLM_OK, "--no-mmap decode after truncation: %s",
          err.message);
    CHECK(c && !memcmp(before, plm_get_logits(c, -1), (size_t)nv * sizeof *before),
          "--no-mmap: the same logits after the file was truncated");
    free(before);
    plm_context_free(c);
    plm_model_free(m);
    unlink(path);
}

/* A handler the application had before loading a model. */
static sigjmp_buf app_jmp;
static volatile sig_atomic_t app_handler_ran;
static void app_sigbus(int sig) {
    (void)sig;
    app_handler_ran = 1;
    siglongjmp(app_jmp, 1);
}

/* A SIGBUS on a mapping of the application's own, outside any decode. */
static void foreign_fault_chains(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/own.bin", dir);
    REQUIRE_VOID(copy_file(STORIES, path), "copy");
    int fd = open(path, O_RDONLY);
    REQUIRE_VOID(fd >= 0, "open");
    volatile const char *p = mmap(NULL, 65536, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    REQUIRE_VOID(p != MAP_FAILED, "mmap");
    REQUIRE_VOID(truncate(path, 0) == 0, "truncate");
    if (sigsetjmp(app_jmp, 1) == 0) {
        char x = p[8192];
        (void)x;
    }
    CHECK(app_handler_ran, "a SIGBUS outside the library's mappings reaches the application's own handler");
    munmap((void *)p, 65536);
    unlink(path);
}

int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = app_sigbus;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGBUS, &sa, NULL) == 0, "install the application's handler");

    char dir[] = "/tmp/plm-fault-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    const long size = file_size(STORIES);
    REQUIRE(size > 65536, "stories260K present");
    truncated_while_mapped(dir, 4096, "cut to its first page");       /* the embedding is gone: caller thread */
    truncated_while_mapped(dir, size / 2, "cut in half");             /* later layers: the pool's matmuls */
    truncated_after_read(dir);
    foreign_fault_chains(dir);
    rmdir(dir);
    return test_summary();
}
