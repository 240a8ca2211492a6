/* A minimal test harness: CHECK records failures and keeps going; each test
 * program ends with test_summary(), which prints "N passed, N failed". */
#ifndef PLM_TEST_H
#define PLM_TEST_H

#include <stdio.h>
#include <stdlib.h>

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

#endif
