#include "http.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "cleanup.h"
#include "io.h"
#include "text.h"

/* Content-Length's value, strict decimal; -EPROTO if malformed. */
static long long parse_length(const char *p, const char *end)
{
	long long v = 0;
	bool digits = false;

	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9' || v > (long long)HTTP_MAX_RESPONSE)
			return -EPROTO;
		v = v * 10 + (*p - '0');
		digits = true;
	}
	return digits && v <= (long long)HTTP_MAX_RESPONSE ? v : -EPROTO;
}

long http_parse_head(const char *buf, size_t len, int *status, long long *content_length)
{
	const char *end = NULL;

	for (size_t i = 0; i + 3 < len; i++)
		if (memcmp(buf + i, "\r\n\r\n", 4) == 0) {
			end = buf + i + 2; /* the last header line's CRLF included */
			break;
		}
	if (!end)
		return len > 16384 ? -EPROTO : 0;
	/* "HTTP/1.x NNN" then a space or the line's end. */
	if (end - buf < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || (buf[7] != '0' && buf[7] != '1') ||
	    buf[8] != ' ' || buf[9] < '1' || buf[9] > '5' || buf[10] < '0' || buf[10] > '9' ||
	    buf[11] < '0' || buf[11] > '9' || (buf[12] != ' ' && buf[12] != '\r'))
		return -EPROTO;
	*status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
	*content_length = -1;
	const char *line = memchr(buf, '\n', (size_t)(end - buf));
	if (line[-1] != '\r')
		return -EPROTO;
	line++;
	while (line < end) {
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		if (!eol || eol == line || eol[-1] != '\r')
			return -EPROTO;
		const char *colon = memchr(line, ':', (size_t)(eol - line));
		if (!colon)
			return -EPROTO;
		if (colon - line == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
			long long v = parse_length(colon + 1, eol - 1);
			if (v < 0 || (*content_length >= 0 && *content_length != v))
				return -EPROTO;
			*content_length = v;
		}
		line = eol + 1;
	}
	return (long)(end - buf) + 2;
}

/* Reads until the whole answer is there (by Content-Length or EOF). */
static int read_response(int fd, int64_t deadline, struct http_response *resp, char *why, size_t why_len)
{
	_cleanup_free_ char *buf = malloc(HTTP_MAX_RESPONSE + 1);
	size_t len = 0;
	long head = 0;
	long long clen = -1;
	int status = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (head > 0 && clen >= 0 && len >= (size_t)head + (size_t)clen)
			break;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - io_now_ms();
		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			snprintf(why, why_len, "no complete answer before --timeout ran out (%zu bytes so far)", len);
			return -ETIMEDOUT;
		}
		if (len == HTTP_MAX_RESPONSE) {
			snprintf(why, why_len, "answer larger than %u bytes", HTTP_MAX_RESPONSE);
			return -EFBIG;
		}
		ssize_t n = recv(fd, buf + len, HTTP_MAX_RESPONSE - len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(why, why_len, "reading the answer: %s", strerror(errno));
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (head == 0) {
			head = http_parse_head(buf, len, &status, &clen);
			if (head < 0) {
				char shown[4 * 40 + 1];
				text_escape(buf, len < 40 ? len : 40, false, shown, sizeof(shown));
				snprintf(why, why_len, "not an HTTP/1.x answer: '%s'", shown);
				return -EPROTO;
			}
		}
	}
	if (head <= 0) {
		snprintf(why, why_len, "connection closed %s", len ? "inside the answer's head" : "without an answer");
		return -ECONNRESET;
	}
	size_t body = len - (size_t)head;
	if (clen >= 0 && body < (size_t)clen) {
		snprintf(why, why_len, "connection closed after %zu of %lld body bytes", body, clen);
		return -ECONNRESET;
	}
	if (clen >= 0)
		body = (size_t)clen;
	resp->status = status;
	resp->body_len = body;
	resp->body = malloc(body + 1);
	if (!resp->body)
		return -ENOMEM;
	memcpy(resp->body, buf + head, body);
	resp->body[body] = 0;
	return 0;
}

int http_exchange(int fd, const struct http_request *req, int64_t deadline, struct http_response *resp,
		  char *why, size_t why_len)
{
	const char *method = req->method, *path = req->path, *more = req->headers ? req->headers : "";
	char length[96] = "";
	int r;

	*resp = (struct http_response){ 0 };
	if (req->body)
		snprintf(length, sizeof(length), "Content-Type: application/json\r\nContent-Length: %zu\r\n",
			 req->body_len);
	size_t cap = strlen(method) + strlen(path) + strlen(more) + sizeof(length) + 256;
	_cleanup_free_ char *head = malloc(cap);
	if (!head)
		return -ENOMEM;
	int n = snprintf(head, cap,
			 "%s %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: e2b-hostlink\r\nAccept: */*\r\n"
			 "Connection: close\r\n%s%s\r\n", method, path, more, length);
	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	r = io_send_all(fd, head, (size_t)n, deadline);
	explicit_bzero(head, (size_t)n);
	if (r == 0 && req->body)
		r = io_send_all(fd, req->body, req->body_len, deadline);
	if (r == -ETIMEDOUT) {
		snprintf(why, why_len, "sending %s %s: not taken before --timeout ran out (the guest stopped reading)",
			 method, path);
		return r;
	}
	if (r < 0) {
		snprintf(why, why_len, "sending %s %s: %s", method, path, strerror(-r));
		return r;
	}
	return read_response(fd, deadline, resp, why, why_len);
}

void http_response_free(struct http_response *resp)
{
	free(resp->body);
	resp->body = NULL;
}
