/* Live memory telemetry for run/chat/serve: a CSV row every N tokens, an
 * SVG of the RSS watermark and tokens/s, and a one-time warning when decode
 * starts taking major page faults (weights paging in from storage). */
#ifndef PLM_TOOLS_TELEMETRY_H
#define PLM_TOOLS_TELEMETRY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

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
    bool decoding, warned;
    telemetry_point *points;
    int n_points, cap_points;
} telemetry;

/* Opens the CSV (if csv_path) and remembers svg_path; false with a message
 * on stderr when the file cannot be created. */
bool telemetry_open(telemetry *t, const char *csv_path, const char *svg_path, int every);
/* Records a sample when `tokens` has moved `every` past the last one, or
 * when force is set.  decoding: the tokens are generated ones. */
void telemetry_tick(telemetry *t, int tokens, bool decoding, bool force);
/* Writes the SVG and closes everything. */
void telemetry_close(telemetry *t);

#endif
