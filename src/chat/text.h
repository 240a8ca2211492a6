/*
 * UTF-8 helpers for the template engine: decoding, JavaScript's notion of
 * whitespace (what `trim`, `\s` and the whitespace control strip), and case
 * mapping through utf8proc.
 */
#ifndef PLM_CHAT_TEXT_H
#define PLM_CHAT_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/value.h"

/* Decodes one code point at s[0..n); returns its byte length (>= 1).
 * Invalid bytes decode as themselves, one byte each. */
size_t jtext_decode(const char *s, size_t n, int32_t *cp);
/* Appends cp as UTF-8. */
bool jtext_encode(jbuf *b, int32_t cp);

/* JavaScript's WhiteSpace and LineTerminator set (what /\s/ and trim use). */
bool jtext_is_space_cp(int32_t cp);
/* Length of the whitespace character at s, or 0 when s[0] does not start one. */
size_t jtext_space_at(const char *s, size_t n);
/* Length of a whitespace character ending at s[n-1], or 0. */
size_t jtext_space_before(const char *s, size_t n);

size_t jtext_trim_start(const char *s, size_t n);  /* bytes of leading space */
size_t jtext_trim_end(const char *s, size_t n);    /* bytes of trailing space */

size_t jtext_count_cps(const char *s, size_t n);
/* Byte offsets of every code point start, plus n at the end: an array of
 * count+1 entries in the arena (NULL when the arena is spent). */
size_t *jtext_cp_offsets(jarena *a, const char *s, size_t n, size_t *count);

/* Case mapping of every code point (simple mappings). */
jv *jtext_upper(jarena *a, const char *s, size_t n);
jv *jtext_lower(jarena *a, const char *s, size_t n);

static inline bool jtext_is_word_byte(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

#endif
