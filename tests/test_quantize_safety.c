/*
 * pocketlm quantize never leaves a truncated model behind: interrupted
 * mid-way (SIGINT after the first tensor's progress line) or stopped by a
 * full disk (a file size limit, RLIMIT_FSIZE, makes write fail as ENOSPC
 * would), neither OUT nor OUT.tmp exists afterwards, and the failure is
 * named.  Also: --dry-run writes nothing and reports the size, and a
 * quantized input is refused unless --allow-requantize.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define FIXTURES PLM_SHARED_DIR "/models/fixtures/"

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void check_no_output(const char *out, const char *label) {
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    CHECK(!exists(out), "%s: %s exists", label, out);
    CHECK(!exists(tmp), "%s: %s left behind", label, tmp);
}

/* SIGINT as soon as the first tensor is reported: the rest is still to do. */
static void check_interrupt(const char *dir) {
    char out[512];
    snprintf(out, sizeof out, "%s/interrupted.gguf", dir);
    int err_pipe[2];
    REQUIRE_VOID(pipe(err_pipe) == 0, "pipe");
    const pid_t pid = fork();
    REQUIRE_VOID(pid >= 0, "fork");
    if (pid == 0) {
        dup2(err_pipe[1], 2);
        close(err_pipe[0]);
        execl(PLM_BIN, PLM_BIN, "quantize", "-t", "1", FIXTURES "fixture-llama-f16.gguf", out, "Q2_K", (char *)NULL);
        _exit(127);
    }
    close(err_pipe[1]);
    FILE *f = fdopen(err_pipe[0], "r");
    char line[512];
    bool started = false;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "[   1/")) {
            started = true;
            kill(pid, SIGINT);
            break;
        }
    int status = 0;
    waitpid(pid, &status, 0);
    if (f) fclose(f);
    CHECK(started, "no progress line seen");
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT, "quantize did not die of SIGINT (status %d)", status);
    check_no_output(out, "SIGINT");
}

/* A file size limit below the model's size: the write fails part-way. */
static void check_disk_full(const char *dir) {
    char out[512];
    snprintf(out, sizeof out, "%s/full.gguf", dir);
    const pid_t pid = fork();
    REQUIRE_VOID(pid >= 0, "fork");
    if (pid == 0) {
        const struct rlimit lim = {512 * 1024, 512 * 1024};  /* the Q8_0 file is ~3.6 MB */
        setrlimit(RLIMIT_FSIZE, &lim);
        signal(SIGXFSZ, SIG_IGN);  /* then write() fails with EFBIG, as with ENOSPC on a full disk */
        const int null = open("/dev/null", 1);
        if (null >= 0) dup2(null, 1);
        execl(PLM_BIN, PLM_BIN, "quantize", "-q", FIXTURES "fixture-llama-f16.gguf", out, "Q8_0", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1, "quantize on a full disk: status %d, expected exit 1",
          status);
    check_no_output(out, "full disk");
}

static void check_dry_run_and_requantize(const char *dir) {
    char cmd[1024];
    int status;
    snprintf(cmd, sizeof cmd, "%s quantize --dry-run %sfixture-llama-f16.gguf Q4_K_M 2>&1", PLM_BIN, FIXTURES);
    char *text = test_capture(cmd, &status);
    CHECK(status == 0 && text && strstr(text, "dry run, would write") && strstr(text, "bits per weight"),
          "dry run: status %d, output: %s", status, text ? text : "(none)");
    free(text);

    char out[512];
    snprintf(out, sizeof out, "%s/requant.gguf", dir);
    snprintf(cmd, sizeof cmd, "%s quantize -q %sfixture-llama-Q4_K_M.gguf %s Q2_K 2>&1", PLM_BIN, FIXTURES, out);
    text = test_capture(cmd, &status);
    CHECK(status == 1 && text && strstr(text, "--allow-requantize"), "requantize refused: status %d, %s", status,
          text ? text : "(none)");
    free(text);
    check_no_output(out, "refused requantize");
    snprintf(cmd, sizeof cmd, "%s quantize -q --allow-requantize %sfixture-llama-Q4_K_M.gguf %s Q2_K 2>&1", PLM_BIN,
             FIXTURES, out);
    text = test_capture(cmd, &status);
    CHECK(status == 0 && exists(out), "--allow-requantize: status %d, %s", status, text ? text : "(none)");
    free(text);
    remove(out);
}

int main(void) {
    char dir[] = "/tmp/plm-qsafe-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    check_interrupt(dir);
    check_disk_full(dir);
    check_dry_run_and_requantize(dir);
    rmdir(dir);
    return test_summary();
}
