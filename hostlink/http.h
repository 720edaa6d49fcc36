/* The little HTTP/1.1 client e2b-hostlink needs: one request per connection
 * (Connection: close) to mmds-serve's control API and to envd's /health. */
#ifndef HOSTLINK_HTTP_H
#define HOSTLINK_HTTP_H

#include <stddef.h>

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

/* Sends the request on a connected fd and reads the answer, all within
 * timeout_ms (a guest that stops reading or answering is a -ETIMEDOUT).
 * -errno; `why` names what went wrong. */
int http_exchange(int fd, const char *method, const char *path, const char *body, size_t body_len,
		  int timeout_ms, struct http_response *resp, char *why, size_t why_len);

void http_response_free(struct http_response *resp);

#endif
