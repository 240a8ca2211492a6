/* String and mapping helpers shared by methods.c and filters.c. */
#ifndef PLM_CHAT_METHODS_H
#define PLM_CHAT_METHODS_H

#include "chat/eval.h"

jv *jstr_strip(jeval *e, const jnode *at, jv *self, jv *chars, bool left, bool right);
jv *jstr_title(jeval *e, const jnode *at, const jv *self);
jv *jstr_capitalize(jeval *e, const jnode *at, const jv *self);
jv *jstr_replace(jeval *e, const jnode *at, jv *self, jv *old, jv *new_, jv *count);
jv *jobj_items(jeval *e, const jnode *at, jv *self);
jv *jobj_dictsort(jeval *e, const jnode *at, jv *self, jv **args, size_t nargs, jobj *kwargs);

typedef jv *(*sort_key_fn)(jv *item, const void *ctx);
/* Stable sort by jv_compare of key(item); false after an error. */
bool jsort_values(jeval *e, const jnode *at, jv **items, size_t n, sort_key_fn key, const void *ctx,
                  bool case_sensitive, bool reverse);

#endif
