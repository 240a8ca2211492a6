/* The functions every template can call: namespace(), range(),
 * raise_exception(), strftime_now(); and the constants true/false/none. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "chat/eval.h"

static jv *g_namespace(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)self;
    jv *ns = jv_namespace(e->a);
    if (!ns) return jeval_oom(e, at);
    if (nargs > 1) return jeval_fail(e, at, "namespace() takes at most 1 positional argument, got %zu", nargs);
    if (nargs == 1) {
        jv *src = args[0];
        if (src->type == JV_OBJECT) {
            for (size_t i = 0; i < src->u.obj->n; i++)
                if (!jobj_set(e->a, ns->u.obj, src->u.obj->keys[i], src->u.obj->key_lens[i], src->u.obj->vals[i]))
                    return jeval_oom(e, at);
        } else if (src->type == JV_ARRAY) {
            for (size_t i = 0; i < src->u.arr.n; i++) {
                jv *pair = src->u.arr.items[i];
                if (pair->type != JV_ARRAY || pair->u.arr.n != 2 || pair->u.arr.items[0]->type != JV_STRING)
                    return jeval_fail(e, at, "namespace() expects a mapping or a list of [key, value] pairs");
                jv *k = pair->u.arr.items[0];
                if (!jobj_set(e->a, ns->u.obj, k->u.str.s, k->u.str.n, pair->u.arr.items[1])) return jeval_oom(e, at);
            }
        } else {
            return jeval_fail(e, at, "namespace() cannot take a %s", jv_type_name(src));
        }
    }
    for (size_t i = 0; kwargs && i < kwargs->n; i++)
        if (!jobj_set(e->a, ns->u.obj, kwargs->keys[i], kwargs->key_lens[i], kwargs->vals[i])) return jeval_oom(e, at);
    return ns;
}

static jv *g_range(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)self, (void)kwargs;
    if (nargs < 1 || nargs > 3) return jeval_fail(e, at, "range() takes 1 to 3 arguments, got %zu", nargs);
    for (size_t i = 0; i < nargs; i++)
        if (args[i]->type != JV_INT) return jeval_fail(e, at, "range() arguments must be integers, not %s", jv_type_name(args[i]));
    int64_t start = nargs > 1 ? args[0]->u.i : 0, stop = nargs > 1 ? args[1]->u.i : args[0]->u.i;
    int64_t stepv = nargs > 2 ? args[2]->u.i : 1;
    if (stepv == 0) return jeval_fail(e, at, "range() step must not be zero");
    double count_d = stepv > 0 ? ((double)stop - (double)start) / (double)stepv : ((double)start - (double)stop) / (double)-stepv;
    size_t count = count_d <= 0 ? 0 : (size_t)(count_d + 0.999999999);
    if (count > e->limits.max_steps) return jeval_limit(e, at, "range() of %zu numbers is too long", count);
    jv *out = jv_array(e->a, count);
    if (!out) return jeval_oom(e, at);
    for (size_t i = 0; i < count; i++)
        if (!(out->u.arr.items[i] = jv_int(e->a, start + (int64_t)i * stepv))) return jeval_oom(e, at);
    return out;
}

static jv *g_raise_exception(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)self, (void)kwargs;
    if (nargs > 0 && args[0]->type == JV_STRING)
        return jeval_fail(e, at, "raise_exception: %.*s", (int)(args[0]->u.str.n < 300 ? args[0]->u.str.n : 300),
                          args[0]->u.str.s);
    return jeval_fail(e, at, "raise_exception called");
}

/* strftime_now(format) with the directives @huggingface/jinja supports
 * (%Y %m %d %b %B %H %M %%), in local time; any other stays as written. */
static jv *g_strftime_now(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs) {
    (void)self, (void)kwargs;
    if (nargs < 1 || args[0]->type != JV_STRING) return jeval_fail(e, at, "strftime_now() needs a format string");
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    static const char *months[] = {"January", "February", "March",     "April",   "May",      "June",
                                   "July",    "August",   "September", "October", "November", "December"};
    jbuf b;
    jbuf_init(&b, e->a, e->limits.max_output);
    jbuf_add(&b, "", 0);
    const char *f = args[0]->u.str.s;
    size_t n = args[0]->u.str.n;
    for (size_t i = 0; i < n; i++) {
        char tmp[32];
        if (f[i] != '%' || i + 1 >= n || !strchr("YmdbBHM%", f[i + 1]) || !f[i + 1]) {
            jbuf_addc(&b, f[i]);
            continue;
        }
        switch (f[++i]) {
        case 'Y': snprintf(tmp, sizeof tmp, "%d", tm.tm_year + 1900); break;
        case 'm': snprintf(tmp, sizeof tmp, "%02d", tm.tm_mon + 1); break;
        case 'd': snprintf(tmp, sizeof tmp, "%02d", tm.tm_mday); break;
        case 'b': snprintf(tmp, sizeof tmp, "%.3s", months[tm.tm_mon]); break;
        case 'B': snprintf(tmp, sizeof tmp, "%s", months[tm.tm_mon]); break;
        case 'H': snprintf(tmp, sizeof tmp, "%02d", tm.tm_hour); break;
        case 'M': snprintf(tmp, sizeof tmp, "%02d", tm.tm_min); break;
        default: snprintf(tmp, sizeof tmp, "%%"); break;
        }
        jbuf_adds(&b, tmp);
    }
    if (b.failed) return jeval_oom(e, at);
    return jv_str_own(e->a, b.s, b.n);
}

bool jglobals_install(jeval *e, jenv *env) {
    static const struct {
        const char *name;
        jbuiltin_fn fn;
    } fns[] = {
        {"namespace", g_namespace},
        {"range", g_range},
        {"raise_exception", g_raise_exception},
        {"strftime_now", g_strftime_now},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (!jenv_set(e, env, fns[i].name, strlen(fns[i].name), jeval_builtin(e, fns[i].fn, NULL))) return false;
    return jenv_set(e, env, "true", 4, jv_bool(true)) && jenv_set(e, env, "false", 5, jv_bool(false)) &&
           jenv_set(e, env, "none", 4, jv_none()) && jenv_set(e, env, "True", 4, jv_bool(true)) &&
           jenv_set(e, env, "False", 5, jv_bool(false)) && jenv_set(e, env, "None", 4, jv_none());
}
