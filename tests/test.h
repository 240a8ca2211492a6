/* A minimal test harness: CHECK records failures and keeps going; each test
 * program ends with test_summary(), which prints "N passed, N failed". */
#ifndef PLM_TEST_H
#define PLM_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static int test_passed, test_failed;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            test_passed++;                                                 \
        } else {                                                           \
            test_failed++;                                                 \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

/* For fatal preconditions: a test that cannot run must not pass. */
#define REQUIRE(cond, ...)                                                 \
    do {                                                                   \
        int req_ok_ = (cond);                                              \
        CHECK(req_ok_, __VA_ARGS__);                                       \
        if (!req_ok_) return test_summary();                               \
    } while (0)

/* REQUIRE for void test functions. */
#define REQUIRE_VOID(cond, ...)                                            \
    do {                                                                   \
        int req_ok_ = (cond);                                              \
        CHECK(req_ok_, __VA_ARGS__);                                       \
        if (!req_ok_) return;                                              \
    } while (0)

static inline int test_summary(void) {
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return (test_failed || test_passed == 0) ? 1 : 0;
}

#define SHARED(path) PLM_SHARED_DIR "/" path

/* Runs cmd through the shell and returns everything it printed (malloc'd,
 * NUL-terminated; NULL if it could not start).  *status is its exit code as
 * a shell reports it: 128 + the signal for a killed command. */
static inline char *test_capture(const char *cmd, int *status) {
    *status = -1;
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, len = 0, got;
    char *out = malloc(cap);
    while (out && (got = fread(out + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (len + 1 == cap) {
            char *bigger = realloc(out, cap *= 2);
            if (!bigger) break;
            out = bigger;
        }
    }
    if (out) out[len] = '\0';
    const int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return out;
}

#endif
