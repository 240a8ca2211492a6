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

/* Bytes of the valid UTF-8 character at s (RFC 3629), 0 if there is none. */
static size_t valid_char(const unsigned char *s, size_t n) {
    if (s[0] < 0x80) return 1;
    size_t len = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] > 0x9F) || (s[0] == 0xF0 && s[1] < 0x90) ||
        (s[0] == 0xF4 && s[1] > 0x8F))
        return 0;
    return len;
}

/* A model may emit bytes that are not UTF-8 (a byte-fallback token on its
 * own); JSON strings must be, so each invalid byte becomes U+FFFD. */
json_t *json_text(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        size_t k = valid_char(s + i, n - i);
        if (!k) bad++, k = 1;
        i += k;
    }
    if (!bad) return json_stringn(text, n);
    char *clean = malloc(n + 2 * bad + 1);
    if (!clean) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = valid_char(s + i, n - i);
        if (k) {
            memcpy(clean + o, text + i, k);
            o += k;
            i += k;
        } else {
            memcpy(clean + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
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
