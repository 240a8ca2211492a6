#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pocketlm.h"
#include "pocketlm_plan.h"

bool config_path(char *buf, size_t size) {
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) snprintf(buf, size, "%s/pocketlm/tuned.conf", xdg);
    else if (home && *home) snprintf(buf, size, "%s/.config/pocketlm/tuned.conf", home);
    else return false;
    return true;
}

void config_cpu_model(char *buf, size_t size) {
    plm_cpu_info *ci = calloc(1, sizeof *ci);  /* large: not on the stack */
    buf[0] = '\0';
    if (ci && plm_probe_cpu(ci, NULL) == PLM_OK) snprintf(buf, size, "%s", ci->model[0] ? ci->model : ci->arch);
    free(ci);
}

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\r')) s[--n] = '\0';
}

bool config_load(tuned_defaults *out) {
    memset(out, 0, sizeof *out);
    char path[1024], line[512];
    if (!config_path(path, sizeof path)) return false;
    FILE *f = fopen(path, "r");
    if (!f) return false;
    while (fgets(line, sizeof line, f)) {
        trim(line);
        char *eq = strchr(line, '=');
        if (line[0] == '#' || !eq) continue;
        char *val = eq + 1;
        while (*val == ' ') val++;
        if (!strncmp(line, "threads", 7) && (line[7] == ' ' || line[7] == '=')) out->threads = atoi(val);
        else if (!strncmp(line, "batch", 5) && (line[5] == ' ' || line[5] == '=')) out->batch = atoi(val);
        else if (!strncmp(line, "cpu", 3) && (line[3] == ' ' || line[3] == '=')) snprintf(out->cpu, sizeof out->cpu, "%s", val);
    }
    fclose(f);
    char here[128];
    config_cpu_model(here, sizeof here);
    if (strcmp(here, out->cpu) != 0 || out->threads < 0 || out->batch < 0) {
        memset(out, 0, sizeof *out);  /* measured elsewhere: not this device's */
        return false;
    }
    return true;
}

static bool make_dirs(char *path) {
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        bool ok = mkdir(path, 0755) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok) return false;
    }
    return true;
}

bool config_save(const tuned_defaults *t, char *err, size_t err_size) {
    char path[1024], tmp[1100];
    if (!config_path(path, sizeof path)) {
        snprintf(err, err_size, "neither XDG_CONFIG_HOME nor HOME is set");
        return false;
    }
    if (!make_dirs(path)) {
        snprintf(err, err_size, "cannot create the directory of %s: %s", path, strerror(errno));
        return false;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    bool ok = f && fprintf(f, "# written by pocketlm tune\ncpu = %s\nthreads = %d\nbatch = %d\n", t->cpu, t->threads,
                           t->batch) > 0;
    if (f) ok = fclose(f) == 0 && ok;
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) {
        snprintf(err, err_size, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
    return ok;
}
