/*
 * This device's tuned defaults (`pocketlm tune` writes them; run, chat, serve
 * and bench read them): $XDG_CONFIG_HOME/pocketlm/tuned.conf, else
 * ~/.config/pocketlm/tuned.conf.  Plain "key = value" lines.  The file names
 * the CPU it was measured on and is ignored on any other.
 */
#ifndef PLM_TOOLS_CONFIG_H
#define PLM_TOOLS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tuned_defaults {
    int threads;   /* best for generation; 0 = not tuned */
    int batch;     /* best prompt batch size; 0 = not tuned */
    char cpu[128]; /* CPU model it was measured on */
} tuned_defaults;

/* The config file's path; false when neither variable gives a home. */
bool config_path(char *buf, size_t size);
/* Loads the tuned defaults if the file exists and matches this CPU. */
bool config_load(tuned_defaults *out);
/* Writes them atomically (tmp file + rename), creating the directory. */
bool config_save(const tuned_defaults *t, char *err, size_t err_size);
/* This machine's CPU model string, as probe reports it. */
void config_cpu_model(char *buf, size_t size);

#endif
