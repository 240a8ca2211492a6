/*
 * Jinja runtime values for chat templates, and the arena they live in.
 *
 * A render allocates every value, string and scope from one arena and frees
 * it in one go, so error paths never leak and hostile templates cannot grow
 * memory past the arena's cap.  Values are immutable once built, except a
 * namespace's attributes ({% set ns.x = ... %}), which templates share by
 * reference as Jinja does.
 */
#ifndef PLM_CHAT_VALUE_H
#define PLM_CHAT_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- arena ----------------------------------------------------------- */

typedef struct jarena jarena;

jarena *jarena_new(size_t cap_bytes);
void jarena_free(jarena *a);
/* Zeroed memory, or NULL once the cap would be passed (jarena_exhausted). */
void *jarena_alloc(jarena *a, size_t n);
bool jarena_exhausted(const jarena *a);

/* A growable byte buffer in an arena (old storage is abandoned on growth). */
typedef struct jbuf {
    jarena *a;
    char *s;
    size_t n, cap;
    size_t limit;  /* 0: none; growing past it fails */
    bool failed;   /* an append ran out of arena or passed the limit */
} jbuf;

void jbuf_init(jbuf *b, jarena *a, size_t limit);
/* Appends n bytes, keeping b->s NUL-terminated; after any add, even of
 * nothing, b->s points at the text (never NULL). */
bool jbuf_add(jbuf *b, const char *s, size_t n);
bool jbuf_adds(jbuf *b, const char *s);
bool jbuf_addc(jbuf *b, char c);

/* ---- values ---------------------------------------------------------- */

typedef enum {
    JV_UNDEFINED = 0,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STRING,
    JV_ARRAY,
    JV_OBJECT,
    JV_NAMESPACE,
    JV_FUNCTION,
} jv_type;

typedef struct jv jv;
typedef struct jobj jobj;
struct jeval;
struct jnode;

/* A callable: a C builtin (bound to `self` for methods) or a macro. */
typedef struct jfunc jfunc;
typedef jv *(*jbuiltin_fn)(struct jeval *e, const struct jnode *at, jv *self, jv **args,
                           size_t nargs, jobj *kwargs);

struct jv {
    jv_type type;
    bool tuple;  /* an array written as a tuple: (a, b) */
    union {
        bool b;
        int64_t i;
        double f;
        struct { const char *s; size_t n; } str;
        struct { jv **items; size_t n; } arr;
        jobj *obj;  /* JV_OBJECT and JV_NAMESPACE */
        jfunc *fn;
    } u;
};

/* An insertion-ordered string-keyed map with a hash index. */
struct jobj {
    const char **keys;
    size_t *key_lens;
    jv **vals;
    size_t n, cap;
    uint32_t *index;  /* open addressing, slot = position + 1; 0 empty */
    size_t index_cap;
};

jv *jv_undefined(void);
jv *jv_none(void);
jv *jv_bool(bool b);
jv *jv_int(jarena *a, int64_t i);
jv *jv_float(jarena *a, double f);
jv *jv_str(jarena *a, const char *s, size_t n);     /* copies s */
jv *jv_str_own(jarena *a, const char *s, size_t n); /* s already in the arena */
jv *jv_cstr(jarena *a, const char *s);
jv *jv_array(jarena *a, size_t n); /* n slots, filled by the caller */
jv *jv_object(jarena *a);
jv *jv_namespace(jarena *a);
jv *jv_func(jarena *a, jfunc *fn);

jobj *jobj_new(jarena *a);
jv *jobj_get(const jobj *o, const char *k, size_t n);  /* NULL when absent */
bool jobj_set(jarena *a, jobj *o, const char *k, size_t n, jv *v);

bool jv_truthy(const jv *v);
bool jv_is_number(const jv *v);  /* int or float */
double jv_num(const jv *v);      /* int, float or bool as a double */
const char *jv_type_name(const jv *v);

/* ---- text conversions (as @huggingface/jinja prints values) ---------- */

/* The shortest text that reads back as d, as JavaScript's Number#toString. */
void jv_format_js_number(double d, char *buf, size_t cap);
/* What {{ v }} prints: floats keep ".0", containers as JSON, none/undefined
 * as nothing. */
bool jv_append_output(jbuf *b, const jv *v);
/* What `~` and string `+` concatenate (JavaScript's String(value)). */
bool jv_append_concat(jbuf *b, const jv *v);

typedef struct jjson_opts {
    int indent;            /* < 0: none */
    bool ensure_ascii;
    bool sort_keys;
    const char *item_sep;  /* NULL: ", " (or "," with an indent) */
    const char *key_sep;   /* NULL: ": " */
    bool undefined_as_null;
} jjson_opts;
/* JSON as Python's json.dumps writes it under transformers' tojson (and as
 * @huggingface/jinja reproduces): key order kept, separators, indent. */
bool jv_append_json(jbuf *b, const jv *v, const jjson_opts *o, int depth);

/* JavaScript loose equality (==) and strict equality (===) of values. */
bool jv_loose_equal(const jv *a, const jv *b);
bool jv_strict_equal(const jv *a, const jv *b);

#endif
