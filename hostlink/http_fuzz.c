/* libFuzzer: e2b-hostlink's HTTP response head parser on arbitrary bytes
 * (an exact-size heap copy, so ASan sees any overread). A success must lie
 * within the input, end in CRLF CRLF and give a status in 100-599. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size ? size : 1);
	int status = 0;
	long long clen = 0;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	long r = http_parse_head(buf, size, &status, &clen);
	if (r > 0 && ((size_t)r > size || r < 4 || memcmp(buf + r - 4, "\r\n\r\n", 4) != 0 || status < 100 ||
		      status > 599 || clen < -1 || clen > (long long)HTTP_MAX_RESPONSE))
		__builtin_trap();
	free(buf);
	return 0;
}
