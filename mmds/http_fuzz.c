/* libFuzzer: the HTTP request parser, fed the way the server feeds it (the
 * whole buffer, then what is left after each request), under limits the
 * input picks; plus the Connection token-list scanner on header values. */
#include <stdint.h>
#include <string.h>

#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_request req;
	struct http_limits limits = { .max_head = 4096, .max_headers = 64, .max_body = 4096 };

	if (size > 2) {
		limits.max_head = 16 + (size_t)data[0] * 16;
		limits.max_headers = 1 + data[1] % HTTP_MAX_HEADERS_CAP;
		limits.max_body = (size_t)data[0] * 4;
	}
	size_t off = 0;
	while (off < size) {
		long r = http_parse_request((const char *)data + off, size - off, &limits, &req);
		if (r < 0) {
			int status = http_error_status((int)r);
			if (status < 400 || status > 505)
				__builtin_trap();
			break;
		}
		if (r == 0) {
			if (req.head_len > size - off)
				__builtin_trap();
			break;
		}
		if ((size_t)r > size - off || req.head_len + req.content_length != (size_t)r)
			__builtin_trap();
		if (req.path_len == 0 || req.path[0] != '/')
			__builtin_trap();
		for (unsigned i = 0; i < req.n_headers; i++) {
			const struct http_header *h = &req.headers[i];
			if (h->name_len == 0 || memchr(h->value, '\r', h->value_len) || memchr(h->value, '\n', h->value_len))
				__builtin_trap();
			(void)http_list_has_token(h->value, h->value_len, "close");
		}
		(void)http_find_header(&req, "X-metadata-token");
		off += (size_t)r;
	}
	return 0;
}
