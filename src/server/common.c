/*
 * Small pieces the OpenAI and Ollama handlers share: clocks and timestamps,
 * generated text as a JSON string, the finish reason's name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void iso_time(double t, char out[40]) {
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    char base[24];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 40, "%s.%06ldZ", base, (long)((t - (double)s) * 1e6));
}

/* The UTF-8 sequence at s: its length, and whether it is a valid character
 * (RFC 3629: no overlongs, surrogates or code points past U+10FFFF).  An
 * invalid one is its "maximal subpart" (Unicode's recommended practice, and
 * the WHATWG decoder's): the longest prefix of a valid sequence, or 1 byte,
 * so each becomes one U+FFFD exactly as a browser or Node would decode it. */
static size_t utf8_scan(const unsigned char *s, size_t n, bool *valid) {
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t need;
    *valid = c < 0x80;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c == 0xE0) need = 3, lo = 0xA0;
    else if (c == 0xED) need = 3, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) need = 3;
    else if (c == 0xF0) need = 4, lo = 0x90;
    else if (c == 0xF4) need = 4, hi = 0x8F;
    else if (c >= 0xF1 && c <= 0xF3) need = 4;
    else return 1;
    if (n < 2 || s[1] < lo || s[1] > hi) return 1;
    size_t k = 2;
    while (k < need && k < n && (s[k] & 0xC0) == 0x80) k++;
    *valid = k == need;
    return k;
}

/* A model may emit bytes that are not UTF-8 (a byte-fallback token on its
 * own); JSON strings must be, so each invalid sequence becomes U+FFFD. */
json_t *json_text(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t bad = 0;
    bool ok;
    for (size_t i = 0; i < n;) {
        i += utf8_scan(s + i, n - i, &ok);
        bad += !ok;
    }
    if (!bad) return json_stringn(text, n);
    char *clean = malloc(n + 2 * bad + 1);
    if (!clean) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_scan(s + i, n - i, &ok);
        if (ok) memcpy(clean + o, text + i, k), o += k;
        else memcpy(clean + o, "\xEF\xBF\xBD", 3), o += 3;
        i += k;
    }
    json_t *j = json_stringn(clean, o);
    free(clean);
    return j;
}

const char *finish_reason_openai(const srv_job *j) {
    switch (j->result.finish) {
    case PLM_FINISH_LENGTH:
    case PLM_FINISH_CONTEXT: return "length";
    default: return "stop";
    }
}

void random_id(const char *prefix, char out[48]) {
    static atomic_uint counter;
    unsigned c = atomic_fetch_add(&counter, 1);
    uint64_t x = (uint64_t)(wall_now() * 1e6) ^ ((uint64_t)c * 0x9E3779B97F4A7C15ull);
    snprintf(out, 48, "%s%016llx", prefix, (unsigned long long)x);
}
