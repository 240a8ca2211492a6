/*
 * Server metrics in Prometheus' text exposition format (version 0.0.4):
 * counters end in _total, durations in _seconds, sizes in _bytes.  Token
 * rates are derivable from the counters (rate(...generated_tokens_total) /
 * rate(...generate_seconds_total)); the gauge gives the last request's.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

void metrics_init(srv_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void metrics_destroy(srv_metrics *m) { pthread_mutex_destroy(&m->mu); }

void metrics_request(srv_metrics *m, int route) {
    if (route < 0 || route >= 16) return;
    pthread_mutex_lock(&m->mu);
    m->requests[route]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_response(srv_metrics *m, unsigned status) {
    pthread_mutex_lock(&m->mu);
    if (status < 300) m->responses_2xx++;
    else if (status < 500) m->responses_4xx++;
    else m->responses_5xx++;
    if (status == 503) m->rejected_busy++;
    pthread_mutex_unlock(&m->mu);
}

typedef struct textbuf {
    char *s;
    size_t len, cap;
} textbuf;

static void put(textbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(textbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->s && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap : 1024) * 2 + (size_t)n;
        char *ns = realloc(b->s, cap);
        if (!ns) return;
        b->s = ns;
        b->cap = cap;
    }
}

static void metric(textbuf *b, const char *name, const char *type, const char *help) {
    put(b, "# HELP pocketlm_%s %s\n# TYPE pocketlm_%s %s\n", name, help, name, type);
}

char *metrics_render(srv_metrics *m, const char *const *route_names, int n_routes, int queue_depth, int slots_busy,
                     int n_slots) {
    srv_metrics c;
    pthread_mutex_lock(&m->mu);
    c = *m;
    pthread_mutex_unlock(&m->mu);
    plm_mem_sample mem;
    plm_mem_sample_now(&mem);

    textbuf b = {0};
    metric(&b, "requests_total", "counter", "HTTP requests by endpoint.");
    for (int i = 0; i < n_routes && i < 16; i++)
        put(&b, "pocketlm_requests_total{endpoint=\"%s\"} %llu\n", route_names[i], (unsigned long long)c.requests[i]);
    metric(&b, "responses_total", "counter", "HTTP responses by status class.");
    put(&b, "pocketlm_responses_total{class=\"2xx\"} %llu\n", (unsigned long long)c.responses_2xx);
    put(&b, "pocketlm_responses_total{class=\"4xx\"} %llu\n", (unsigned long long)c.responses_4xx);
    put(&b, "pocketlm_responses_total{class=\"5xx\"} %llu\n", (unsigned long long)c.responses_5xx);
    metric(&b, "rejected_busy_total", "counter", "Requests refused with 503 (queue full or stopping).");
    put(&b, "pocketlm_rejected_busy_total %llu\n", (unsigned long long)c.rejected_busy);
    metric(&b, "prompt_tokens_total", "counter", "Prompt tokens of finished generations.");
    put(&b, "pocketlm_prompt_tokens_total %llu\n", (unsigned long long)c.prompt_tokens);
    metric(&b, "prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's cache (not evaluated).");
    put(&b, "pocketlm_prompt_tokens_cached_total %llu\n", (unsigned long long)c.prompt_tokens_cached);
    metric(&b, "generated_tokens_total", "counter", "Tokens generated.");
    put(&b, "pocketlm_generated_tokens_total %llu\n", (unsigned long long)c.generated_tokens);
    metric(&b, "prompt_seconds_total", "counter", "Time spent evaluating prompts.");
    put(&b, "pocketlm_prompt_seconds_total %.6f\n", c.prompt_seconds);
    metric(&b, "generate_seconds_total", "counter", "Time spent generating.");
    put(&b, "pocketlm_generate_seconds_total %.6f\n", c.generate_seconds);
    metric(&b, "decode_tokens_per_second", "gauge", "Generation speed of the last finished request.");
    put(&b, "pocketlm_decode_tokens_per_second %.3f\n", c.last_decode_tps);
    metric(&b, "jobs_total", "counter", "Generations finished, and those cancelled (client gone, shutdown).");
    put(&b, "pocketlm_jobs_total{outcome=\"done\"} %llu\n", (unsigned long long)(c.jobs_done - c.jobs_cancelled));
    put(&b, "pocketlm_jobs_total{outcome=\"cancelled\"} %llu\n", (unsigned long long)c.jobs_cancelled);
    metric(&b, "decode_steps_total", "counter", "Forward passes of generation steps (all busy slots' tokens in one).");
    put(&b, "pocketlm_decode_steps_total %llu\n", (unsigned long long)c.decode_steps);
    metric(&b, "decode_step_tokens_total", "counter", "Tokens evaluated by those passes (/ steps = slots batched).");
    put(&b, "pocketlm_decode_step_tokens_total %llu\n", (unsigned long long)c.decode_step_tokens);
    metric(&b, "spec_verifications_total", "counter", "Speculative verifications (a slot's drafts checked in a pass).");
    put(&b, "pocketlm_spec_verifications_total %llu\n", (unsigned long long)c.spec_verifications);
    metric(&b, "spec_drafted_tokens_total", "counter", "Tokens drafted and verified (speculative decoding).");
    put(&b, "pocketlm_spec_drafted_tokens_total %llu\n", (unsigned long long)c.spec_drafted);
    metric(&b, "spec_accepted_tokens_total", "counter", "Drafted tokens the model accepted (/ drafted = acceptance).");
    put(&b, "pocketlm_spec_accepted_tokens_total %llu\n", (unsigned long long)c.spec_accepted);
    metric(&b, "queue_depth", "gauge", "Requests waiting for a slot.");
    put(&b, "pocketlm_queue_depth %d\n", queue_depth);
    metric(&b, "slots_busy", "gauge", "Slots running a generation.");
    put(&b, "pocketlm_slots_busy %d\n", slots_busy);
    metric(&b, "slots", "gauge", "Slots (sequences of the context).");
    put(&b, "pocketlm_slots %d\n", n_slots);
    metric(&b, "resident_memory_bytes", "gauge", "Resident set size of the process.");
    put(&b, "pocketlm_resident_memory_bytes %llu\n", (unsigned long long)mem.rss_bytes);
    metric(&b, "resident_memory_peak_bytes", "gauge", "Peak resident set size (VmHWM).");
    put(&b, "pocketlm_resident_memory_peak_bytes %llu\n", (unsigned long long)mem.peak_rss_bytes);
    return b.s;
}
