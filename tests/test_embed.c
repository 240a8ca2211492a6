/*
 * What an app embedding the library relies on: plm_version, loading from a
 * file descriptor range (a model inside an APK) and from memory with the
 * same logits as llama.cpp's (../shared/models/expected), a load progress
 * callback that only goes forward and ends at 1 (and can cancel), an abort
 * callback that stops a long prefill, versioned parameter structs (an older
 * caller's smaller struct, a newer caller's larger one), and constructors
 * that say why they failed.
 */
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "expected.h"
#include "pocketlm.h"
#include "test.h"

#define STORIES SHARED("models/stories260K.gguf")
#define N_VOCAB 512
#define LOGIT_TOL 0.01f /* tests/test_logits.c's tolerance for stories260K */

static plm_token prompt[512];
static int n_prompt;
static float *expected; /* llama.cpp's logits: n_prompt rows of N_VOCAB */

/* ---- helpers ------------------------------------------------------------ */

static uint8_t *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*size);
    if (b && fread(b, 1, *size, f) != *size) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

/* Largest |ours - llama.cpp| over every position's logits, evaluated in one
 * decode with logits_all; INFINITY when something failed. */
static float worst_logit_diff(plm_model *m, float *last_row) {
    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 512;
    cp.logits_all = true;
    plm_context *ctx;
    plm_error err;
    if (plm_context_new(m, &cp, &ctx, &err) != PLM_OK) return INFINITY;
    float worst = INFINITY;
    if (plm_decode(ctx, prompt, n_prompt, &err) == PLM_OK) {
        worst = 0;
        for (int i = 0; i < n_prompt; i++) {
            const float *l = plm_get_logits(ctx, i);
            for (int v = 0; v < N_VOCAB; v++) {
                float d = fabsf(l[v] - expected[(size_t)i * N_VOCAB + v]);
                if (!(d <= worst)) worst = d;
            }
        }
        memcpy(last_row, plm_get_logits(ctx, -1), N_VOCAB * sizeof(float));
    }
    plm_context_free(ctx);
    return worst;
}

/* ---- version ------------------------------------------------------------- */

static void test_version(void) {
    CHECK(strcmp(plm_version(), PLM_VERSION) == 0, "plm_version() '%s' is not PLM_VERSION '%s'", plm_version(),
          PLM_VERSION);
    char built[32];
    snprintf(built, sizeof built, "%d.%d.%d", PLM_VERSION_MAJOR, PLM_VERSION_MINOR, PLM_VERSION_PATCH);
    CHECK(strcmp(built, PLM_VERSION) == 0, "the version macros say %s, PLM_VERSION %s", built, PLM_VERSION);
    CHECK(PLM_VERSION_NUMBER == PLM_VERSION_MAJOR * 10000 + PLM_VERSION_MINOR * 100 + PLM_VERSION_PATCH,
          "PLM_VERSION_NUMBER");
}

/* ---- loading from a descriptor and from memory ------------------------------ */

/* The model file at an odd offset inside a bigger file, with bytes after
 * it, as in an APK: loaded by fd + offset + length, mapped and read. */
static void test_load_fd_at(size_t lead, const float *path_last) {
    size_t size;
    uint8_t *model = read_file(STORIES, &size);
    REQUIRE_VOID(model != NULL, "cannot read %s", STORIES);
    char tmp[] = "/tmp/plm_embed_XXXXXX";
    int fd = mkstemp(tmp);
    REQUIRE_VOID(fd >= 0, "mkstemp");
    unlink(tmp);
    const size_t tail = 777;
    uint8_t *junk = malloc(lead);
    memset(junk, 0xA5, lead);
    CHECK(write(fd, junk, lead) == (ssize_t)lead && write(fd, model, size) == (ssize_t)size &&
              write(fd, junk, tail) == (ssize_t)tail, "write the container file");
    for (int mmap_on = 0; mmap_on < 2; mmap_on++) {
        plm_model_params mp = plm_model_default_params();
        mp.use_mmap = mmap_on;
        plm_model *m;
        plm_error err;
        plm_status st = plm_model_load_fd(fd, lead, size, &mp, &m, &err);
        CHECK(st == PLM_OK, "load_fd (mmap %d): %s", mmap_on, err.message);
        if (st) continue;
        float last[N_VOCAB];
        float worst = worst_logit_diff(m, last);
        printf("load_fd at offset %zu (mmap %d): max |dlogit| vs llama.cpp %.5f\n", lead, mmap_on, worst);
        CHECK(worst <= LOGIT_TOL, "load_fd logits differ from llama.cpp's by %g", worst);
        CHECK(memcmp(last, path_last, sizeof last) == 0, "load_fd logits differ from loading by path");
        plm_model_free(m);
    }
    /* Length 0: to the end of the file, which here has junk after the model:
     * still a valid GGUF (the tail is past the tensor data). */
    plm_model *m;
    plm_error err;
    CHECK(plm_model_load_fd(fd, lead, 0, NULL, &m, &err) == PLM_OK, "load_fd length 0: %s", err.message);
    plm_model_free(m);
    /* Ranges outside the file and the wrong offset fail with a reason. */
    CHECK(plm_model_load_fd(fd, lead, size + tail + 1, NULL, &m, &err) == PLM_ERR_INVALID_ARG && m == NULL &&
              strstr(err.message, "past the end"), "a range past the end: %s", err.message);
    CHECK(plm_model_load_fd(fd, lead + size + tail + 1, 0, NULL, &m, &err) == PLM_ERR_INVALID_ARG,
          "an offset past the end: %s", err.message);
    CHECK(plm_model_load_fd(fd, lead - 1, size, NULL, &m, &err) == PLM_ERR_FORMAT && strstr(err.message, "fd "),
          "the wrong offset is a format error naming the fd: %s", err.message);
    CHECK(plm_model_load_fd(-1, 0, 0, NULL, &m, &err) == PLM_ERR_INVALID_ARG, "fd -1: %s", err.message);
    close(fd);
    free(junk);
    free(model);
}

static void test_load_memory(const float *path_last) {
    size_t size;
    uint8_t *model = read_file(STORIES, &size);
    REQUIRE_VOID(model != NULL, "cannot read %s", STORIES);
    plm_model *m;
    plm_error err;
    REQUIRE_VOID(plm_model_load_memory(model, size, NULL, &m, &err) == PLM_OK, "load_memory: %s", err.message);
    float last[N_VOCAB];
    float worst = worst_logit_diff(m, last);
    printf("load_memory: max |dlogit| vs llama.cpp %.5f\n", worst);
    CHECK(worst <= LOGIT_TOL, "load_memory logits differ from llama.cpp's by %g", worst);
    CHECK(memcmp(last, path_last, sizeof last) == 0, "load_memory logits differ from loading by path");
    plm_model_free(m);
    /* At an odd address (an asset buffer at an odd offset): copied, same logits. */
    uint8_t *odd = malloc(size + 1);
    memcpy(odd + 1, model, size);
    REQUIRE_VOID(plm_model_load_memory(odd + 1, size, NULL, &m, &err) == PLM_OK, "odd address: %s", err.message);
    memset(odd, 0, size + 1); /* the model must not depend on it any more */
    worst_logit_diff(m, last);
    CHECK(memcmp(last, path_last, sizeof last) == 0, "load_memory at an odd address: logits differ");
    plm_model_free(m);
    free(odd);
    CHECK(plm_model_load_memory(model, size / 2, NULL, &m, &err) == PLM_ERR_FORMAT && m == NULL,
          "half a file in memory: %s", err.message);
    CHECK(plm_model_load_memory(NULL, 10, NULL, &m, &err) == PLM_ERR_INVALID_ARG, "NULL memory: %s", err.message);
    free(model);
}

/* Not page-aligned: 16-aligned (mapped from the page it starts in) and odd
 * (read into memory, as a mapping would leave the tensors misaligned). */
static void test_load_fd(const float *path_last) {
    test_load_fd_at(12288 + 48, path_last);
    test_load_fd_at(12345, path_last);
}

/* ---- load progress -------------------------------------------------------- */

typedef struct {
    float seen[64];
    int n;
    int stop_at; /* answer false on this call (1-based); 0 = never */
} progress_log;

static bool on_progress(void *user, float f) {
    progress_log *p = user;
    if (p->n < 64) p->seen[p->n] = f;
    p->n++;
    return p->stop_at == 0 || p->n < p->stop_at;
}

static void test_progress(void) {
    for (int mmap_on = 0; mmap_on < 2; mmap_on++) {
        progress_log log = {0};
        plm_model_params mp = plm_model_default_params();
        mp.use_mmap = mmap_on;
        mp.progress = on_progress;
        mp.progress_user = &log;
        plm_model *m;
        plm_error err;
        CHECK(plm_model_load(STORIES, &mp, &m, &err) == PLM_OK, "load with progress: %s", err.message);
        plm_model_free(m);
        CHECK(log.n >= 3 && log.n <= 64, "progress called %d times", log.n);
        bool monotone = true, in_range = true;
        for (int i = 0; i < log.n && i < 64; i++) {
            if (i && log.seen[i] < log.seen[i - 1]) monotone = false;
            if (!(log.seen[i] >= 0 && log.seen[i] <= 1)) in_range = false;
        }
        CHECK(monotone && in_range, "progress goes backwards or leaves [0, 1] (mmap %d)", mmap_on);
        CHECK(log.n > 0 && log.seen[log.n - 1] == 1.0f, "progress ends at %g, not 1", log.n ? log.seen[log.n - 1] : -1);
        int ones = 0;
        for (int i = 0; i < log.n; i++) ones += log.seen[i] == 1.0f;
        CHECK(ones == 1, "1 reported %d times", ones);
    }
    /* Cancelling at each step: a clean error, no model, nothing leaked (ASan). */
    for (int stop_at = 1; stop_at <= 3; stop_at++) {
        progress_log log = {.stop_at = stop_at};
        plm_model_params mp = plm_model_default_params();
        mp.use_mmap = false;
        mp.progress = on_progress;
        mp.progress_user = &log;
        plm_model *m = (plm_model *)&log;
        plm_error err;
        plm_status st = plm_model_load(STORIES, &mp, &m, &err);
        CHECK(st == PLM_ERR_ABORTED && m == NULL && strstr(err.message, "cancelled"),
              "cancel at call %d: status %d (%s)", stop_at, st, err.message);
        log.n = 0;
        CHECK(plm_model_load(STORIES, &mp, &m, NULL) == PLM_ERR_ABORTED, "cancel without an error struct");
    }
}

/* ---- abort inside a long prefill ---------------------------------------- */

typedef struct {
    int calls, abort_after;
} abort_state;

static bool on_abort(void *user) {
    abort_state *a = user;
    return ++a->calls > a->abort_after;
}

static void test_abort_prefill(void) {
    plm_model *m;
    plm_error err;
    REQUIRE_VOID(plm_model_load(STORIES, NULL, &m, &err) == PLM_OK, "load: %s", err.message);
    plm_token toks[200];
    for (int i = 0; i < 200; i++) toks[i] = prompt[i % n_prompt];

    plm_context_params cp = plm_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 16;
    plm_context *ref, *ctx;
    REQUIRE_VOID(plm_context_new(m, &cp, &ref, &err) == PLM_OK, "context: %s", err.message);
    REQUIRE_VOID(plm_decode(ref, toks, 200, &err) == PLM_OK, "reference decode: %s", err.message);

    /* 5 layers per forward pass: 17 polls let three 16-token pieces through
     * and stop the fourth at its third layer. */
    abort_state a = {0, 17};
    cp.abort = on_abort;
    cp.abort_user = &a;
    REQUIRE_VOID(plm_context_new(m, &cp, &ctx, &err) == PLM_OK, "context: %s", err.message);
    plm_status st = plm_decode(ctx, toks, 200, &err);
    CHECK(st == PLM_ERR_ABORTED && strstr(err.message, "aborted"), "aborted prefill: status %d (%s)", st, err.message);
    CHECK(a.calls == 18, "the abort callback was polled %d times, expected 18", a.calls);
    CHECK(plm_context_n_past(ctx) == 48, "after the abort %u tokens are cached, expected 48", plm_context_n_past(ctx));
    CHECK(plm_get_logits(ctx, -1) == NULL, "an aborted decode has no logits");

    /* The cached pieces are sound: finishing the prompt gives the same logits. */
    a.abort_after = 1 << 30;
    st = plm_decode(ctx, toks + 48, 200 - 48, &err);
    CHECK(st == PLM_OK, "resume: %s", err.message);
    if (st == PLM_OK)
        CHECK(memcmp(plm_get_logits(ctx, -1), plm_get_logits(ref, -1), N_VOCAB * sizeof(float)) == 0,
              "resumed prefill's logits differ from an uninterrupted one");
    plm_context_free(ctx);
    plm_context_free(ref);
    plm_model_free(m);
}

/* ---- versioned parameter structs ------------------------------------------ */

static bool always_abort(void *user) {
    (void)user;
    return true;
}

static void test_struct_sizes(void) {
    plm_model *m;
    plm_error err;
    REQUIRE_VOID(plm_model_load(STORIES, NULL, &m, &err) == PLM_OK, "load: %s", err.message);
    plm_token t = plm_token_bos(m);

    /* A caller built before `abort` existed: its struct ends before it, and
     * whatever lies past its end is not read. */
    plm_context_params old = plm_context_default_params();
    CHECK(old.struct_size == sizeof old, "default struct_size %zu, sizeof %zu", old.struct_size, sizeof old);
    old.struct_size = offsetof(plm_context_params, abort);
    old.n_ctx = 64;
    old.abort = always_abort; /* past the old struct's end: garbage to the library */
    plm_context *ctx;
    CHECK(plm_context_new(m, &old, &ctx, &err) == PLM_OK, "old-size struct refused: %s", err.message);
    if (ctx) {
        CHECK(plm_context_n_ctx(ctx) == 64, "old-size struct's n_ctx not read");
        CHECK(plm_decode(ctx, &t, 1, &err) == PLM_OK, "a field past the old struct's end was read: %s", err.message);
        plm_context_free(ctx);
    }

    /* init writes only the caller's bytes. */
    unsigned char buf[sizeof(plm_context_params) + 16];
    memset(buf, 0xEE, sizeof buf);
    plm_context_params_init((plm_context_params *)buf, offsetof(plm_context_params, abort));
    size_t got;
    memcpy(&got, buf, sizeof got);
    CHECK(got == offsetof(plm_context_params, abort), "init set struct_size %zu", got);
    CHECK(buf[offsetof(plm_context_params, abort)] == 0xEE, "init wrote past the caller's struct");

    /* A newer caller: extra bytes the library does not know. */
    struct {
        plm_context_params p;
        uint64_t future;
    } newer;
    memset(&newer, 0, sizeof newer);
    newer.p = plm_context_default_params();
    newer.p.struct_size = sizeof newer;
    newer.p.n_ctx = 64;
    CHECK(plm_context_new(m, &newer.p, &ctx, &err) == PLM_OK, "a larger struct with unset new fields: %s",
          err.message);
    plm_context_free(ctx);
    newer.future = 1;
    CHECK(plm_context_new(m, &newer.p, &ctx, &err) == PLM_ERR_UNSUPPORTED && ctx == NULL &&
              strstr(err.message, "newer"), "a set unknown field: %s", err.message);

    /* Nonsense sizes are refused by name. */
    plm_sampler_params sp = plm_sampler_default_params();
    sp.struct_size = 3;
    plm_sampler *s;
    CHECK(plm_sampler_create(m, &sp, &s, &err) == PLM_ERR_INVALID_ARG && strstr(err.message, "plm_sampler_params"),
          "struct_size 3: %s", err.message);
    /* struct_size 0 (= {0}-built): this header's size. */
    plm_model_params zero = {0};
    zero.use_mmap = true;
    plm_model *m2;
    CHECK(plm_model_load(STORIES, &zero, &m2, &err) == PLM_OK, "struct_size 0: %s", err.message);
    plm_model_free(m2);
    plm_model_free(m);
}

/* ---- constructors say why ---------------------------------------------------- */

static void test_constructor_errors(void) {
    plm_model *m;
    plm_error err;
    REQUIRE_VOID(plm_model_load(STORIES, NULL, &m, &err) == PLM_OK, "load: %s", err.message);
    plm_sampler_params sp = plm_sampler_default_params();
    sp.top_p = 2;
    plm_sampler *s = (plm_sampler *)m;
    CHECK(plm_sampler_create(m, &sp, &s, &err) == PLM_ERR_INVALID_ARG && s == NULL && strstr(err.message, "top_p"),
          "bad top_p: %s", err.message);
    CHECK(plm_sampler_create(NULL, NULL, &s, &err) == PLM_ERR_INVALID_ARG && strstr(err.message, "model"),
          "no model: %s", err.message);

    plm_stop *stop = (plm_stop *)m;
    CHECK(plm_stop_create(NULL, 2, &stop, &err) == PLM_ERR_INVALID_ARG && stop == NULL && strstr(err.message, "NULL"),
          "NULL stops: %s", err.message);
    const char *stops[] = {"", "end"};
    CHECK(plm_stop_create(stops, 2, &stop, &err) == PLM_OK && stop, "stop_create: %s", err.message);
    plm_stop_free(stop);

    plm_token *ids;
    int n;
    CHECK(plm_tokenize_alloc_ex(m, "Once upon", 9, true, false, &ids, &n, &err) == PLM_OK && n == 3 && ids,
          "tokenize_alloc_ex: %s (n %d)", err.message, n);
    if (ids) CHECK(ids[0] == prompt[0] && ids[1] == prompt[1] && ids[2] == prompt[2], "tokens differ from llama.cpp's");
    plm_free(ids);
    CHECK(plm_tokenize_alloc_ex(NULL, "x", 1, true, false, &ids, &n, &err) == PLM_ERR_INVALID_ARG && ids == NULL,
          "tokenize with no model: %s", err.message);
    plm_free(NULL);
    plm_model_free(m);
}

int main(void) {
    n_prompt = expected_read_tokens(SHARED("models/expected/stories260K.tokens"), prompt, 512);
    REQUIRE(n_prompt > 8, "cannot read stories260K.tokens");
    expected = expected_read_logits(SHARED("models/expected/stories260K.logits.f32"), (size_t)n_prompt * N_VOCAB);
    REQUIRE(expected != NULL, "cannot read stories260K.logits.f32");

    plm_model *m;
    plm_error err;
    REQUIRE(plm_model_load(STORIES, NULL, &m, &err) == PLM_OK, "load: %s", err.message);
    float path_last[N_VOCAB];
    float worst = worst_logit_diff(m, path_last);
    CHECK(worst <= LOGIT_TOL, "loading by path: logits differ from llama.cpp's by %g", worst);
    plm_model_free(m);

    test_version();
    test_load_fd(path_last);
    test_load_memory(path_last);
    test_progress();
    test_abort_prefill();
    test_struct_sizes();
    test_constructor_errors();
    free(expected);
    return test_summary();
}
