/* A small HTTP/1.x request parser: bytes in, one request (or "need more",
 * or an error naming the status to answer) out. It keeps no state between
 * calls and never allocates: the caller keeps the bytes, feeds everything it
 * has, and removes the returned number of bytes once the request is served.
 * That is what lets the fuzzer and the unit tests drive it directly. */
#ifndef MMDS_HTTP_H
#define MMDS_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_MAX_HEADERS_CAP 128

struct http_limits {
	size_t max_head;      /* request line + headers + blank line */
	unsigned max_headers; /* at most HTTP_MAX_HEADERS_CAP */
	size_t max_body;      /* Content-Length bound */
};

struct http_header {
	const char *name;
	size_t name_len;
	const char *value; /* optional whitespace trimmed */
	size_t value_len;
};

struct http_request {
	const char *method;
	size_t method_len;
	const char *target; /* as sent */
	size_t target_len;
	const char *path;   /* target's path: no scheme, authority, query, fragment */
	size_t path_len;
	int minor_version;  /* HTTP/1.<minor> */
	struct http_header headers[HTTP_MAX_HEADERS_CAP];
	unsigned n_headers;
	size_t head_len;       /* set as soon as the head is complete */
	size_t content_length; /* 0 without the header */
	const char *body;
	bool keep_alive;       /* what the client asked for */
};

enum http_error {
	HTTP_ERR_BAD_REQUEST = 1,     /* 400 */
	HTTP_ERR_HEAD_TOO_LARGE,      /* 431 */
	HTTP_ERR_TOO_MANY_HEADERS,    /* 431 */
	HTTP_ERR_BODY_TOO_LARGE,      /* 413 */
	HTTP_ERR_NOT_IMPLEMENTED,     /* 501: Transfer-Encoding */
	HTTP_ERR_VERSION,             /* 505 */
};

/* Returns the length of a complete request (head and body) at the start of
 * buf; 0 when more bytes are needed (req->head_len is non-zero once the head
 * is complete and only body bytes are missing); or -enum http_error. */
long http_parse_request(const char *buf, size_t len, const struct http_limits *limits,
			struct http_request *req);

int http_error_status(int err);     /* -enum http_error -> status code */
const char *http_reason(int status);

/* Case-insensitive lookup of the first header named `name`. */
const struct http_header *http_find_header(const struct http_request *req, const char *name);
bool http_header_is(const struct http_header *h, const char *name);

/* Is the request's method exactly m (methods are case-sensitive)? */
bool http_method_is(const struct http_request *req, const char *m);

/* Does a comma-separated header value contain `token` (case-insensitive)? */
bool http_list_has_token(const char *value, size_t len, const char *token);

#endif
