/* JSON text to template values, through jansson (no hand-written parser). */
#include "chat/json.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>

static jv *convert(jarena *a, json_t *j) {
    switch (json_typeof(j)) {
    case JSON_NULL: return jv_none();
    case JSON_TRUE: return jv_bool(true);
    case JSON_FALSE: return jv_bool(false);
    case JSON_INTEGER: return jv_int(a, (int64_t)json_integer_value(j));
    case JSON_REAL: {
        double d = json_real_value(j);
        if (d == floor(d) && fabs(d) < 9.007199254740992e15 && !(d == 0 && signbit(d))) return jv_int(a, (int64_t)d);
        return jv_float(a, d);
    }
    case JSON_STRING: return jv_str(a, json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        jv *arr = jv_array(a, json_array_size(j));
        if (!arr) return NULL;
        for (size_t i = 0; i < arr->u.arr.n; i++)
            if (!(arr->u.arr.items[i] = convert(a, json_array_get(j, i)))) return NULL;
        return arr;
    }
    case JSON_OBJECT: {
        jv *obj = jv_object(a);
        if (!obj) return NULL;
        const char *key;
        size_t key_len;
        json_t *val;
        json_object_keylen_foreach(j, key, key_len, val) {  /* insertion order */
            jv *v = convert(a, val);
            if (!v || !jobj_set(a, obj->u.obj, key, key_len, v)) return NULL;
        }
        return obj;
    }
    }
    return NULL;
}

jv *jjson_parse(jarena *a, const char *text, size_t n, char *err, size_t err_cap) {
    json_error_t je;
    json_t *root = json_loadb(text, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!root) {
        snprintf(err, err_cap, "invalid JSON at line %d, column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    jv *v = convert(a, root);
    json_decref(root);
    if (!v) snprintf(err, err_cap, "JSON value too large");
    return v;
}
