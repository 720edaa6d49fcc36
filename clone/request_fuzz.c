/* libFuzzer: the clone-step request parser (request.c), the way e2b-clone
 * feeds it (every prefix as bytes arrive), and the mmds-serve answer parser
 * (mmds_client.c) on the same bytes. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "mmds_client.h"
#include "request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct clone_request req;
	char why[256];
	int status;

	for (size_t n = 1; n <= size; n += 1 + n / 4) {
		long r = clone_request_parse((const char *)data, n, &req, why, sizeof(why));
		if (r > 0 && ((size_t)r != n || req.entropy_len > CLONE_ENTROPY_MAX ||
			      (req.kind == CLONE_STEP && (req.generation == 0 || req.entropy_len < CLONE_ENTROPY_MIN)) ||
			      (req.document && (req.document < (const char *)data ||
						req.document + req.document_len != (const char *)data + n))))
			__builtin_trap();
		if (r < 0 && (r != -EINVAL || why[0] == '\0'))
			__builtin_trap();
	}
	long r = mmds_response_parse((const char *)data, size, &status);
	if (r > 0 && ((size_t)r > size || status < 100 || status > 599))
		__builtin_trap();
	return 0;
}
