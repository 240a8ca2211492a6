/* UTF-8 decoding, JavaScript whitespace and case mapping for templates. */
#include "chat/text.h"

#include <string.h>
#include <utf8proc.h>

size_t jtext_decode(const char *s, size_t n, int32_t *cp) {
    utf8proc_int32_t c;
    utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &c);
    if (len <= 0) {
        *cp = (unsigned char)s[0];
        return 1;
    }
    *cp = c;
    return (size_t)len;
}

bool jtext_encode(jbuf *b, int32_t cp) {
    utf8proc_uint8_t tmp[4];
    utf8proc_ssize_t len = utf8proc_encode_char(cp, tmp);
    if (len <= 0) return jbuf_add(b, "\xEF\xBF\xBD", 3);
    return jbuf_add(b, (const char *)tmp, (size_t)len);
}

bool jtext_is_space_cp(int32_t cp) {
    if (cp == ' ' || (cp >= 9 && cp <= 13)) return true;
    if (cp < 0xA0) return false;
    return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

size_t jtext_space_at(const char *s, size_t n) {
    if (n == 0) return 0;
    unsigned char c = (unsigned char)s[0];
    if (c < 0x80) return (c == ' ' || (c >= 9 && c <= 13)) ? 1 : 0;
    int32_t cp;
    size_t len = jtext_decode(s, n, &cp);
    return jtext_is_space_cp(cp) ? len : 0;
}

size_t jtext_space_before(const char *s, size_t n) {
    if (n == 0) return 0;
    unsigned char c = (unsigned char)s[n - 1];
    if (c < 0x80) return (c == ' ' || (c >= 9 && c <= 13)) ? 1 : 0;
    /* back up to the lead byte of the last character (at most 4 bytes) */
    size_t start = n - 1;
    while (start > 0 && n - start < 4 && ((unsigned char)s[start] & 0xC0) == 0x80) start--;
    int32_t cp;
    size_t len = jtext_decode(s + start, n - start, &cp);
    return (start + len == n && jtext_is_space_cp(cp)) ? len : 0;
}

size_t jtext_trim_start(const char *s, size_t n) {
    size_t i = 0, len;
    while (i < n && (len = jtext_space_at(s + i, n - i)) > 0) i += len;
    return i;
}

size_t jtext_trim_end(const char *s, size_t n) {
    size_t end = n, len;
    while (end > 0 && (len = jtext_space_before(s, end)) > 0) end -= len;
    return n - end;
}

size_t jtext_count_cps(const char *s, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        i += jtext_decode(s + i, n - i, &cp);
        count++;
    }
    return count;
}

size_t *jtext_cp_offsets(jarena *a, const char *s, size_t n, size_t *count) {
    size_t c = jtext_count_cps(s, n);
    size_t *off = jarena_alloc(a, (c + 1) * sizeof *off);
    if (!off) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        off[k++] = i;
        i += jtext_decode(s + i, n - i, &cp);
    }
    off[k] = n;
    *count = c;
    return off;
}

static jv *map_case(jarena *a, const char *s, size_t n, bool upper) {
    jbuf b;
    jbuf_init(&b, a, 0);
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t len = jtext_decode(s + i, n - i, &cp);
        if (cp < 0x80) {
            char c = s[i];
            if (upper && c >= 'a' && c <= 'z') c = (char)(c - 32);
            if (!upper && c >= 'A' && c <= 'Z') c = (char)(c + 32);
            jbuf_addc(&b, c);
        } else if (len == 1) {
            jbuf_add(&b, s + i, 1);  /* an invalid byte stays as it is */
        } else {
            jtext_encode(&b, upper ? utf8proc_toupper(cp) : utf8proc_tolower(cp));
        }
        i += len;
    }
    if (b.failed) return NULL;
    return jv_str_own(a, b.s ? b.s : "", b.n);
}

jv *jtext_upper(jarena *a, const char *s, size_t n) { return map_case(a, s, n, true); }
jv *jtext_lower(jarena *a, const char *s, size_t n) { return map_case(a, s, n, false); }
