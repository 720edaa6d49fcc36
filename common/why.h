/* One sentence for the caller, in the parsers' convention: a parser returns
 * -errno and writes what went wrong, naming the value, into `why`. */
#ifndef E2B_WHY_H
#define E2B_WHY_H

#include <stddef.h>

/* Formats into why (if why and why_len) and returns -EINVAL. */
int why_invalid(char *why, size_t why_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
