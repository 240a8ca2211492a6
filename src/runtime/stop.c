/*
 * Stop-string matcher.  buf holds the text not yet released: at the start of
 * a feed only the held-back tail (shorter than the longest stop string).  The
 * new piece is appended, the buffer is searched for the earliest complete stop
 * string, and otherwise the longest suffix that is a proper prefix of some
 * stop string stays held.  Any stop string that begins in released text would
 * have been such a suffix, so searching buf alone is enough.
 */
#include "runtime/stop.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

struct plm_stop {
    int n;            /* stop strings (empty ones dropped) */
    char **str;
    size_t *len;
    int *index;       /* index in the caller's array */
    char *buf;
    size_t buf_len;   /* bytes in buf: held tail + current piece */
    size_t buf_cap;
    size_t emitted;   /* bytes at the front of buf released by the last call */
    int stopped;      /* caller's index of the completed stop, or -1 */
};

plm_stop *plm_stop_new(const char *const *stops, int n_stops) {
    plm_stop *m;
    return plm_stop_create(stops, n_stops, &m, NULL) == PLM_OK ? m : NULL;
}

plm_status plm_stop_create(const char *const *stops, int n_stops, plm_stop **out, plm_error *err) {
    if (!out) return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_stop_create: out is NULL");
    *out = NULL;
    if (n_stops > 0 && !stops)
        return plm_fail(err, PLM_ERR_INVALID_ARG, "plm_stop_create: %d stop strings but the array is NULL", n_stops);
    plm_stop *m = calloc(1, sizeof *m);
    if (!m) return plm_fail(err, PLM_ERR_NOMEM, "out of memory for the stop strings");
    m->stopped = -1;
    if (n_stops > 0) {
        m->str = calloc((size_t)n_stops, sizeof *m->str);
        m->len = calloc((size_t)n_stops, sizeof *m->len);
        m->index = calloc((size_t)n_stops, sizeof *m->index);
        if (!m->str || !m->len || !m->index) goto oom;
    }
    size_t longest = 0;
    for (int i = 0; i < n_stops; i++) {
        if (!stops[i] || !stops[i][0]) continue;
        size_t l = strlen(stops[i]);
        char *c = malloc(l + 1);
        if (!c) goto oom;
        memcpy(c, stops[i], l + 1);
        m->str[m->n] = c;
        m->len[m->n] = l;
        m->index[m->n] = i;
        m->n++;
        if (l > longest) longest = l;
    }
    m->buf_cap = longest + 256;
    m->buf = malloc(m->buf_cap);
    if (!m->buf) goto oom;
    *out = m;
    return PLM_OK;
oom:
    plm_stop_free(m);
    return plm_fail(err, PLM_ERR_NOMEM, "out of memory for %d stop strings", n_stops);
}

void plm_stop_free(plm_stop *m) {
    if (!m) return;
    for (int i = 0; i < m->n; i++) free(m->str[i]);
    free(m->str);
    free(m->len);
    free(m->index);
    free(m->buf);
    free(m);
}

void plm_stop_reset(plm_stop *m) {
    if (!m) return;
    m->buf_len = 0;
    m->emitted = 0;
    m->stopped = -1;
}

size_t plm_stop_held(const plm_stop *m) {
    return m ? m->buf_len - m->emitted : 0;
}

/* Drops the bytes released by the previous call from the front of buf. */
static void drop_emitted(plm_stop *m) {
    if (m->emitted) {
        memmove(m->buf, m->buf + m->emitted, m->buf_len - m->emitted);
        m->buf_len -= m->emitted;
        m->emitted = 0;
    }
}

static const char *find(const char *hay, size_t n, const char *needle, size_t k) {
    if (k > n) return NULL;
    for (size_t i = 0; i + k <= n; i++)
        if (hay[i] == needle[0] && !memcmp(hay + i, needle, k)) return hay + i;
    return NULL;
}

plm_stop_out plm_stop_feed(plm_stop *m, const char *piece, size_t len) {
    plm_stop_out o = {"", 0, -1};
    if (!m) return o;
    drop_emitted(m);
    if (m->stopped >= 0) {
        o.stop = m->stopped;
        return o;
    }
    if (m->n == 0) {  /* nothing to match: pass the piece through */
        o.text = piece ? piece : "";
        o.len = piece ? len : 0;
        return o;
    }
    if (m->buf_len + len > m->buf_cap) {
        size_t cap = m->buf_cap;
        while (cap < m->buf_len + len) cap = cap > SIZE_MAX / 2 ? m->buf_len + len : cap * 2;
        char *nb = realloc(m->buf, cap);
        if (!nb) {
            /* Out of memory for an unusually long piece: release the held
             * tail and drop the piece (see stop.h). */
            o.text = m->buf;
            o.len = m->buf_len;
            m->emitted = m->buf_len;
            return o;
        }
        m->buf = nb;
        m->buf_cap = cap;
    }
    if (len) memcpy(m->buf + m->buf_len, piece, len);
    m->buf_len += len;

    /* The earliest complete stop string wins. */
    const char *first = NULL;
    int which = -1;
    for (int i = 0; i < m->n; i++) {
        const char *p = find(m->buf, m->buf_len, m->str[i], m->len[i]);
        if (p && (!first || p < first)) {
            first = p;
            which = m->index[i];
        }
    }
    if (first) {
        m->stopped = which;
        o.text = m->buf;
        o.len = (size_t)(first - m->buf);
        o.stop = which;
        m->emitted = m->buf_len;  /* the rest is discarded */
        return o;
    }

    /* Hold the longest suffix that is a proper prefix of some stop string. */
    size_t hold = 0;
    for (int i = 0; i < m->n; i++) {
        size_t maxk = m->len[i] - 1;
        if (maxk > m->buf_len) maxk = m->buf_len;
        for (size_t k = maxk; k > hold; k--) {
            if (!memcmp(m->buf + m->buf_len - k, m->str[i], k)) {
                hold = k;
                break;
            }
        }
    }
    o.text = m->buf;
    o.len = m->buf_len - hold;
    m->emitted = o.len;
    return o;
}

plm_stop_out plm_stop_flush(plm_stop *m) {
    plm_stop_out o = {"", 0, -1};
    if (!m) return o;
    drop_emitted(m);
    if (m->stopped >= 0) {
        o.stop = m->stopped;
        return o;
    }
    o.text = m->buf;
    o.len = m->buf_len;
    m->emitted = m->buf_len;
    return o;
}
