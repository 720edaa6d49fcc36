/* The envd version grammar: the strings both SDK parsers accept and agree on.
 *
 *   version = number "." number "." number
 *   number  = "0" | nonzero-digit *8digit      (0 .. 999999999, no leading zeros)
 *
 * npm compare-versions accepts more (a leading "v", a fourth part,
 * "-prerelease", "+build", "x" wildcards) and so does Python packaging
 * (PEP 440: leading zeros, "rc1", ".post1", epochs...), but the two disagree on
 * how most of those extras order, and a leading zero is normalised away by one
 * and kept by the other. Plain MAJOR.MINOR.PATCH is accepted by both, orders
 * the same in both, and round-trips unchanged; nine digits keep every part
 * exact in a JavaScript number and in a uint32. */
#ifndef PIN_VERSION_H
#define PIN_VERSION_H

#include <stddef.h>
#include <stdint.h>

#define VERSION_MAX_LEN 29 /* 3 * 9 digits + 2 dots */

struct version {
	uint32_t major, minor, patch;
};

/* 0 if s[0..len) is exactly a version (no whitespace, no "v"), -EINVAL if not. */
int version_parse(const char *s, size_t len, struct version *out);

#endif
