/* Byte sizes for people: parsing "8G" and printing "1.50 GB". */
#include "units.h"

#include <stdio.h>
#include <stdlib.h>

/* "8G", "8GB", "7.5GiB", "512M", "35B" (billions, for --params) -> value. */
bool parse_size(const char *s, double unit_b, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return false;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1e3; end++; break;
    case 'm': case 'M': mul = 1e6; end++; break;
    case 'g': case 'G': mul = 1e9; end++; break;
    case 't': case 'T': mul = 1e12; end++; break;
    case 'b': case 'B': mul = unit_b; end++; break;
    default: break;
    }
    if (mul != 1 && *end == 'i') { /* GiB: binary */
        mul = mul == 1e3 ? 1024.0 : mul == 1e6 ? 1048576.0 : mul == 1e9 ? 1073741824.0 : 1099511627776.0;
        end++;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return false;
    *out = v * mul;
    return true;
}

const char *human(uint64_t b, char *buf, size_t n) {
    if (b >= 1000000000ull) snprintf(buf, n, "%.2f GB", b / 1e9);
    else if (b >= 1000000ull) snprintf(buf, n, "%.2f MB", b / 1e6);
    else snprintf(buf, n, "%.1f kB", b / 1e3);
    return buf;
}

const char *mib(uint64_t b, char *buf, size_t n) {
    if (b >= (1ull << 30)) snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
    else snprintf(buf, n, "%.2f MiB", b / 1048576.0);
    return buf;
}

