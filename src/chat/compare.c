/* Ordering values for sort/dictsort/comparisons, and attribute paths
 * ("details.priority", "items.0") for map/sort/selectattr. */
#include <string.h>

#include "chat/eval.h"
#include "chat/text.h"

static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c) return c < 0 ? -1 : 1;
    return (an > bn) - (an < bn);
}

int jv_compare(jeval *e, const jnode *at, const jv *a, const jv *b, bool case_sensitive, bool *ok) {
    *ok = true;
    if (a->type == JV_NONE && b->type == JV_NONE) return 0;
    if (a->type == JV_UNDEFINED && b->type == JV_UNDEFINED) return 0;
    bool a_num = jv_is_number(a) || a->type == JV_BOOL, b_num = jv_is_number(b) || b->type == JV_BOOL;
    if (a_num && b_num) {
        double x = jv_num(a), y = jv_num(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a->type == JV_STRING && b->type == JV_STRING) {
        if (case_sensitive) return bytes_cmp(a->u.str.s, a->u.str.n, b->u.str.s, b->u.str.n);
        jv *la = jtext_lower(e->a, a->u.str.s, a->u.str.n), *lb = jtext_lower(e->a, b->u.str.s, b->u.str.n);
        if (la && lb) return bytes_cmp(la->u.str.s, la->u.str.n, lb->u.str.s, lb->u.str.n);
        jeval_oom(e, at);
        *ok = false;
        return 0;
    }
    *ok = false;
    jeval_fail(e, at, "cannot compare %s with %s", jv_type_name(a), jv_type_name(b));
    return 0;
}

jv *jv_attribute_path(jv *item, const char *path, size_t n) {
    jv *v = item;
    size_t start = 0;
    while (start <= n) {
        const char *dot = memchr(path + start, '.', n - start);
        size_t end = dot ? (size_t)(dot - path) : n;
        const char *part = path + start;
        size_t len = end - start;
        if (v->type == JV_OBJECT || v->type == JV_NAMESPACE) {
            v = jobj_get(v->u.obj, part, len);
            if (!v) return jv_undefined();
        } else if (v->type == JV_ARRAY) {
            size_t idx = 0;
            if (len == 0 || len > 18) return jv_undefined();
            for (size_t k = 0; k < len; k++) {
                if (part[k] < '0' || part[k] > '9') return jv_undefined();
                idx = idx * 10 + (size_t)(part[k] - '0');
            }
            if (idx >= v->u.arr.n) return jv_undefined();
            v = v->u.arr.items[idx];
        } else {
            return jv_undefined();
        }
        if (!dot) break;
        start = end + 1;
    }
    return v;
}
