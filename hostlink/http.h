/* The little HTTP/1.1 client e2b-hostlink needs: one request per connection
 * (Connection: close) to mmds-serve's control API and to envd's /health. */
#ifndef HOSTLINK_HTTP_H
#define HOSTLINK_HTTP_H

#include <stddef.h>
#include <stdint.h>

/* Largest answer read: mmds-serve's document limit with room to spare. */
#define HTTP_MAX_RESPONSE (1024u * 1024u)

struct http_response {
	int status;
	char *body;          /* NUL-terminated, malloc'ed; NULL if none */
	size_t body_len;
};

/* Parses the head of a response in buf[0..len): the status code and, if
 * present, Content-Length (-1 if absent). Returns the head's length (> 0),
 * 0 if incomplete, -EPROTO if it is not an HTTP/1.x response head. */
long http_parse_head(const char *buf, size_t len, int *status, long long *content_length);

struct http_request {
	const char *method, *path;
	const char *headers;   /* more header lines, each ending in CRLF; NULL: none */
	const char *body;      /* sent as application/json; NULL: none */
	size_t body_len;
};

/* Sends the request on a connected fd and reads the answer, all before the
 * deadline (io_now_ms() time: the command's, so a guest that stops reading
 * or answering is a -ETIMEDOUT). The request's head is wiped once sent (it
 * may carry a token). -errno; `why` names what went wrong. */
int http_exchange(int fd, const struct http_request *req, int64_t deadline, struct http_response *resp,
		  char *why, size_t why_len);

void http_response_free(struct http_response *resp);

#endif
