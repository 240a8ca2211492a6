/*
 * pocketlm serve: runs pocketlm-serve, built and installed beside this
 * binary, with the same arguments.  The HTTP server is an executable of its
 * own so that libmicrohttpd and what it links (GnuTLS initialises itself
 * when loaded) and jansson stay out of every other command: linked in, they
 * cost `pocketlm run` 2.4 MiB more resident memory before it loads a model
 * (stories260K -c 512: peak RSS 4.4 -> 6.8 MiB), which the memory plan
 * would then have to charge to every phone.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cmd_serve(int argc, char **argv) {
    (void)argc;
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) {
        fprintf(stderr, "pocketlm serve: cannot find this program's directory (/proc/self/exe)\n");
        return 1;
    }
    path[n] = '\0';
    char *slash = strrchr(path, '/');
    const char *name = "pocketlm-serve";
    if (!slash || (size_t)(slash + 1 - path) + strlen(name) + 1 > sizeof path) {
        fprintf(stderr, "pocketlm serve: path too long: %s\n", path);
        return 1;
    }
    strcpy(slash + 1, name);
    argv[0] = path;  /* argv[argc] is NULL: main's argv shifted by one */
    execv(path, argv);
    fprintf(stderr, "pocketlm serve: cannot run %s: %s (it is built beside pocketlm)\n", path, strerror(errno));
    return 1;
}
