/* libFuzzer target for the version grammar: accepted strings must round-trip
 * through their numbers exactly (no leading zeros, nothing extra). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "version.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct version v;
	char again[64];

	if (version_parse((const char *)data, size, &v) < 0)
		return 0;
	int n = snprintf(again, sizeof(again), "%u.%u.%u", v.major, v.minor, v.patch);
	if (n < 0 || (size_t)n != size || memcmp(again, data, size) != 0)
		abort();
	return 0;
}
