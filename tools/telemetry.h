/* Live memory telemetry for run/chat/serve: a CSV row every N tokens, an
 * SVG of the RSS watermark and tokens/s, and a one-time warning when decode
 * starts taking major page faults (weights paging in from storage). */
#ifndef PLM_TOOLS_TELEMETRY_H
#define PLM_TOOLS_TELEMETRY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "fit.h"
#include "pocketlm.h"

typedef struct telemetry_point {
    int tokens;
    double seconds, tok_per_s;
    plm_mem_sample mem;
} telemetry_point;

typedef struct telemetry {
    FILE *csv;
    const char *svg_path;
    int every;                 /* tokens between samples */
    double t0, last_t;
    int last_tokens;
    uint64_t decode_major0;    /* major faults when decode began */
    int decode_tokens0;        /* tokens when decode began */
    bool decoding, warned;
    bool have_plan;
    fit_info plan;             /* the bill and the budget, quoted by the paging warning */
    plm_context *trim_ctx;     /* trimmed on SIGUSR1; NULL = not armed */
    telemetry_point *points;
    int n_points, cap_points;
} telemetry;

/* Opens the CSV (if csv_path) and remembers svg_path; false with a message
 * on stderr when the file cannot be created. */
bool telemetry_open(telemetry *t, const char *csv_path, const char *svg_path, int every);
/* Call after every decode.  Checks major page faults each time (getrusage:
 * one syscall) so paging is reported at the first token it happens; records
 * a sample when `tokens` has moved `every` past the last one, or when force
 * is set.  decoding: the tokens are generated ones. */
void telemetry_tick(telemetry *t, int tokens, bool decoding, bool force);
/* The plan the run was fitted to (NULL: none), for the paging warning. */
void telemetry_set_plan(telemetry *t, const fit_info *plan);
/* A demo of answering memory pressure: SIGUSR1 asks for plm_context_trim
 * (PLM_TRIM_KV), done at the next tick (between two decodes) and reported
 * with the RSS before and after. */
void telemetry_trim_on_sigusr1(telemetry *t, plm_context *ctx);
/* Writes the SVG and closes everything. */
void telemetry_close(telemetry *t);

#endif
