#include "telemetry.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "measure.h"
#include "units.h"

static double now_s(void) { return measure_now_ns() * 1e-9; }

static double mib_of(uint64_t b) { return b / 1048576.0; }

bool telemetry_open(telemetry *t, const char *csv_path, const char *svg_path, int every) {
    *t = (telemetry){.svg_path = svg_path, .every = every > 0 ? every : 200};
    t->t0 = t->last_t = now_s();
    if (csv_path) {
        t->csv = fopen(csv_path, "w");
        if (!t->csv) {
            perror(csv_path);
            return false;
        }
        fprintf(t->csv, "tokens,seconds,rss_mib,rss_file_mib,rss_anon_mib,peak_rss_mib,minor_faults,major_faults,"
                        "tok_per_s\n");
    }
    return true;
}

void telemetry_set_plan(telemetry *t, const fit_info *plan) {
    t->have_plan = plan != NULL;
    if (plan) t->plan = *plan;
}

static volatile sig_atomic_t trim_requested;

static void on_sigusr1(int sig) {
    (void)sig;
    trim_requested = 1;
}

void telemetry_trim_on_sigusr1(telemetry *t, plm_context *ctx) {
    t->trim_ctx = ctx;
    struct sigaction sa = {0};
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
}

static void trim_if_asked(telemetry *t) {
    if (!trim_requested || !t->trim_ctx) return;
    trim_requested = 0;
    plm_mem_sample a, b;
    plm_mem_sample_now(&a);
    uint64_t released = plm_context_trim(t->trim_ctx, PLM_TRIM_KV);
    plm_mem_sample_now(&b);
    fprintf(stderr, "\n[SIGUSR1] plm_context_trim: released %.1f MiB of address space; RSS %.1f -> %.1f MiB "
                    "(anonymous %.1f -> %.1f MiB)\n",
            mib_of(released), mib_of(a.rss_bytes), mib_of(b.rss_bytes), mib_of(a.rss_anon_bytes), mib_of(b.rss_anon_bytes));
}

static uint64_t major_faults_now(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_majflt : 0;
}

/* The cause (weights re-read from storage) and the fix (the bill against the
 * limit that bound the plan). */
static void warn_major_faults(telemetry *t, uint64_t faults, int tokens) {
    t->warned = true;
    plm_mem_sample m;
    plm_mem_sample_now(&m);
    fprintf(stderr,
            "\nwarning: decode is paging: %llu major page faults in %d generated token%s: the mapped weights do not "
            "stay in RAM and are read back from storage, so every token waits on the disk "
            "(resident %.0f MiB, %.0f MiB of it file-backed).\n",
            (unsigned long long)faults, tokens, tokens == 1 ? "" : "s", mib_of(m.rss_bytes), mib_of(m.rss_file_bytes));
    if (t->have_plan) {
        char a[32], b[32], c[32];
        fprintf(stderr, "         The bill is %s (weights %s) against a budget of %s (%s). ",
                human(t->plan.peak_rss, a, sizeof a), human(t->plan.weights_bytes, b, sizeof b),
                human(t->plan.budget_bytes, c, sizeof c), t->plan.budget_source);
        if (t->plan.fit == PLM_FITS)
            fprintf(stderr, "It fits, so something else took the memory (other processes, the page cache of "
                            "other files): --mlock pins the weights.\n");
        else
            fprintf(stderr, "Fix: a smaller quant%s%s%s, a shorter context, or a higher limit.\n",
                    t->plan.smaller_quant[0] ? " (" : "", t->plan.smaller_quant,
                    t->plan.smaller_quant[0] ? " fits)" : "");
    } else {
        fprintf(stderr, "         Use a smaller quant or a shorter context, or --mlock if the model fits in RAM.\n");
    }
}

/* Every decode: one getrusage, no /proc read. */
static void check_paging(telemetry *t, int tokens, bool decoding) {
    if (t->warned) return;
    uint64_t maj = major_faults_now();
    if (!decoding) {
        t->decode_major0 = maj;
        t->decode_tokens0 = tokens;
    } else if (maj > t->decode_major0) {
        warn_major_faults(t, maj - t->decode_major0, tokens - t->decode_tokens0);
    }
    t->decoding = decoding;
}

void telemetry_tick(telemetry *t, int tokens, bool decoding, bool force) {
    trim_if_asked(t);
    check_paging(t, tokens, decoding);
    if (!t->csv && !t->svg_path) return;
    if (!force && tokens - t->last_tokens < t->every) return;
    telemetry_point p = {.tokens = tokens};
    plm_mem_sample_now(&p.mem);
    const double now = now_s();
    p.seconds = now - t->t0;
    p.tok_per_s = now > t->last_t && tokens > t->last_tokens ? (tokens - t->last_tokens) / (now - t->last_t) : 0;
    t->last_t = now;
    t->last_tokens = tokens;
    if (t->csv)
        fprintf(t->csv, "%d,%.3f,%.2f,%.2f,%.2f,%.2f,%llu,%llu,%.2f\n", tokens, p.seconds, mib_of(p.mem.rss_bytes),
                mib_of(p.mem.rss_file_bytes), mib_of(p.mem.rss_anon_bytes), mib_of(p.mem.peak_rss_bytes),
                (unsigned long long)p.mem.minor_faults, (unsigned long long)p.mem.major_faults, p.tok_per_s);
    if (t->svg_path) {
        if (t->n_points == t->cap_points) {
            int cap = t->cap_points ? 2 * t->cap_points : 64;
            telemetry_point *pts = realloc(t->points, (size_t)cap * sizeof *pts);
            if (!pts) return;
            t->points = pts;
            t->cap_points = cap;
        }
        t->points[t->n_points++] = p;
    }
}

/* One polyline of (tokens, value) scaled into the plot box. */
static void polyline(FILE *f, const telemetry *t, int which, double ymax, int xmax, const char *color) {
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
    for (int i = 0; i < t->n_points; i++) {
        const telemetry_point *p = &t->points[i];
        const double v = which == 0 ? mib_of(p->mem.rss_bytes) : which == 1 ? mib_of(p->mem.rss_file_bytes) : p->tok_per_s;
        fprintf(f, "%.1f,%.1f ", 60 + 700.0 * p->tokens / (xmax ? xmax : 1), 340 - 300.0 * v / (ymax > 0 ? ymax : 1));
    }
    fprintf(f, "\"/>\n");
}

static void write_svg(const telemetry *t) {
    FILE *f = fopen(t->svg_path, "w");
    if (!f) {
        perror(t->svg_path);
        return;
    }
    double max_mib = 0, max_tps = 0;
    int max_tok = 0;
    for (int i = 0; i < t->n_points; i++) {
        const telemetry_point *p = &t->points[i];
        if (mib_of(p->mem.rss_bytes) > max_mib) max_mib = mib_of(p->mem.rss_bytes);
        if (p->tok_per_s > max_tps) max_tps = p->tok_per_s;
        if (p->tokens > max_tok) max_tok = p->tokens;
    }
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"400\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"800\" height=\"400\" fill=\"white\"/>\n"
               "<line x1=\"60\" y1=\"340\" x2=\"760\" y2=\"340\" stroke=\"black\"/>\n"
               "<line x1=\"60\" y1=\"40\" x2=\"60\" y2=\"340\" stroke=\"black\"/>\n");
    fprintf(f, "<text x=\"400\" y=\"375\" text-anchor=\"middle\">tokens (0 .. %d)</text>\n", max_tok);
    fprintf(f, "<text x=\"60\" y=\"25\" fill=\"#c0392b\">RSS (max %.1f MiB)</text>\n", max_mib);
    fprintf(f, "<text x=\"260\" y=\"25\" fill=\"#e67e22\">file-backed RSS</text>\n");
    fprintf(f, "<text x=\"460\" y=\"25\" fill=\"#2471a3\">tokens/s (max %.1f)</text>\n", max_tps);
    polyline(f, t, 0, max_mib, max_tok, "#c0392b");
    polyline(f, t, 1, max_mib, max_tok, "#e67e22");
    polyline(f, t, 2, max_tps, max_tok, "#2471a3");
    fprintf(f, "</svg>\n");
    fclose(f);
}

void telemetry_close(telemetry *t) {
    if (t->csv) fclose(t->csv);
    if (t->svg_path && t->n_points) write_svg(t);
    free(t->points);
    t->points = NULL;
    t->csv = NULL;
}
