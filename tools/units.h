/* Byte sizes for people: parsing "8G" and printing "1.50 GB". */
#ifndef PLM_TOOLS_UNITS_H
#define PLM_TOOLS_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "8G", "8GB", "7.5GiB", "512M"; a bare "B" suffix means unit_b (1 for
 * bytes, 1e9 for "35B" parameters).  False when not a size. */
bool parse_size(const char *s, double unit_b, double *out);
/* Decimal (GB/MB/kB) and binary (GiB/MiB) renderings into buf. */
const char *human(uint64_t b, char *buf, size_t n);
const char *mib(uint64_t b, char *buf, size_t n);

#endif
