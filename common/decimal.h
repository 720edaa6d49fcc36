/* Strict decimal numbers for command lines and environment variables, shared
 * by pinfetch, mmds-serve, vsock-relay and e2b-hostlink. */
#ifndef E2B_DECIMAL_H
#define E2B_DECIMAL_H

#include <stdint.h>

/* text is digits only (no sign, no space, not empty) and in [min, max]:
 * 0 and *out set; otherwise -EINVAL and *out untouched. */
int parse_decimal(const char *text, uint64_t min, uint64_t max, uint64_t *out);

#endif
