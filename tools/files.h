/* Reading a whole file (a prompt, a text to tokenize) into memory. */
#ifndef PLM_TOOLS_FILES_H
#define PLM_TOOLS_FILES_H

#include <stddef.h>

/* The file's bytes, NUL-terminated (malloc'd; free() it); *len gets the byte
 * count.  NULL when it cannot be opened or memory runs out (errno says which). */
char *read_file(const char *path, size_t *len);

#endif
