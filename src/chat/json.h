/* JSON text to template values, through jansson. */
#ifndef PLM_CHAT_JSON_H
#define PLM_CHAT_JSON_H

#include "chat/value.h"

/* Parses `text` (any JSON value) into arena values.  Integral numbers become
 * integers, as JavaScript (and so @huggingface/jinja) sees them; object key
 * order is kept.  NULL with a message naming line and column on bad JSON. */
jv *jjson_parse(jarena *a, const char *text, size_t n, char *err, size_t err_cap);

#endif
