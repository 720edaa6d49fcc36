/* libFuzzer: the relay's port-range parser (relay/policy.c), which reads
 * --ephemeral-ports and /proc/sys/net/ipv4/ip_local_port_range, on arbitrary
 * NUL-terminated bytes. A success is 1 <= LO <= HI, and the same text parses
 * the same way twice. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), why[128];
	uint16_t lo = 0, hi = 0, lo2 = 0, hi2 = 0;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	int r = relay_parse_port_range(text, &lo, &hi, why, sizeof(why));
	if (r == 0 && (lo == 0 || lo > hi))
		__builtin_trap();
	if (relay_parse_port_range(text, &lo2, &hi2, why, sizeof(why)) != r || (r == 0 && (lo2 != lo || hi2 != hi)))
		__builtin_trap();
	free(text);
	return 0;
}
