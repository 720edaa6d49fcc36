/* libFuzzer: both handshake parsers on arbitrary bytes, fed whole and then
 * one byte longer at a time (as a socket delivers them). Invariants: a parse
 * never reads past `len`, a success consumes a line ending in '\n' within
 * HANDSHAKE_LINE_MAX, the port is in range, and "why" is a terminated string. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "handshake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_line(const char *buf, size_t len, int r)
{
	if (r > 0 && ((size_t)r > len || r > HANDSHAKE_LINE_MAX || buf[r - 1] != '\n'))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A heap copy of exactly `size` bytes: ASan catches any overread. */
	char *buf = malloc(size ? size : 1);
	char why[96];
	uint32_t port, number;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	for (size_t len = 0; len <= size; len++) {
		int r = handshake_parse_connect(buf, len, 65535, &port, why, sizeof(why));
		check_line(buf, len, r);
		if (r > 0 && (port == 0 || port > 65535))
			__builtin_trap();
		if (r < 0 && (r != -EINVAL && r != -ERANGE))
			__builtin_trap();
		if (r < 0 && strnlen(why, sizeof(why)) == sizeof(why))
			__builtin_trap();
		for (int want = 0; want < 2; want++) {
			r = handshake_parse_reply(buf, len, want, &number, why, sizeof(why));
			check_line(buf, len, r);
			if (r < 0 && r != -EPROTO && r != -ECONNREFUSED)
				__builtin_trap();
			if (r > 0 && want && number == 0)
				__builtin_trap();
		}
	}
	free(buf);
	return 0;
}
