/* Answers, queued on a connection's output buffer: what the API handlers
 * (guest_api.c, control_api.c) call, and what conn.c writes out. The buffer
 * grows as needed and counts towards the server's queued_output. */
#include "conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

void conn_out_release(struct mmds_conn *c)
{
	c->s->queued_output -= c->out_cap;
	free(c->out);
	c->out = NULL;
	c->out_cap = c->out_len = c->out_off = 0;
}

static int out_reserve(struct mmds_conn *c, size_t more)
{
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_len + more <= c->out_cap)
		return 0;
	size_t cap = c->out_cap ? c->out_cap : 1024;
	while (cap < c->out_len + more)
		cap *= 2;
	char *p = realloc(c->out, cap);
	if (!p)
		return -ENOMEM;
	c->s->queued_output += cap - c->out_cap;
	c->out = p;
	c->out_cap = cap;
	return 0;
}

static void out_append(struct mmds_conn *c, const void *data, size_t len)
{
	memcpy(c->out + c->out_len, data, len);
	c->out_len += len;
}

/* The status line and headers up to, not including, the blank line. */
static int format_head(char *head, size_t cap, int status, const char *content_type, size_t body_len, bool closing)
{
	char length[40] = "";
	if (status != 204) /* RFC 9110 8.6: never on 204 */
		snprintf(length, sizeof(length), "Content-Length: %zu\r\n", body_len);
	int n = snprintf(head, cap, "HTTP/1.1 %d %s\r\nServer: mmds-serve\r\n%s%s%s%s%s", status,
			 http_reason(status), content_type ? "Content-Type: " : "", content_type ? content_type : "",
			 content_type ? "\r\n" : "", length, closing ? "Connection: close\r\n" : "");
	return n < 0 || (size_t)n >= cap ? -ENOBUFS : n;
}

void conn_respond(struct mmds_conn *c, int status, const char *content_type, const char *extra_headers,
		  const char *body, size_t body_len, bool close)
{
	char head[512];

	if (close && c->state == MMDS_CONN_ACTIVE)
		c->state = MMDS_CONN_CLOSING;
	int n = format_head(head, sizeof(head), status, content_type, body_len, c->state != MMDS_CONN_ACTIVE);
	if (n < 0)
		return;
	size_t extra_len = extra_headers ? strlen(extra_headers) : 0;
	if (c->head_method)
		body_len = 0;
	if (out_reserve(c, (size_t)n + extra_len + 2 + body_len) < 0) {
		c->state = MMDS_CONN_CLOSING;
		return;
	}
	out_append(c, head, (size_t)n);
	if (extra_len)
		out_append(c, extra_headers, extra_len);
	out_append(c, "\r\n", 2);
	if (body_len)
		out_append(c, body, body_len);
}

int respond_render_ok(const char *content_type, const char *body, size_t body_len, char **out, size_t *out_len)
{
	char head[256];
	int n = format_head(head, sizeof(head), 200, content_type, body_len, false);
	if (n < 0)
		return n;
	char *buf = malloc((size_t)n + 2 + body_len);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, head, (size_t)n);
	memcpy(buf + n, "\r\n", 2);
	memcpy(buf + n + 2, body, body_len);
	*out = buf;
	*out_len = (size_t)n + 2 + body_len;
	return 0;
}

void conn_respond_bytes(struct mmds_conn *c, const char *answer, size_t len)
{
	if (out_reserve(c, len) < 0) {
		c->state = MMDS_CONN_CLOSING;
		return;
	}
	out_append(c, answer, len);
}

void conn_respond_text(struct mmds_conn *c, int status, const char *msg, bool close)
{
	conn_respond(c, status, "text/plain", NULL, msg, strlen(msg), close);
}

void conn_respond_interim(struct mmds_conn *c, int status)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n\r\n", status, http_reason(status));
	if (out_reserve(c, (size_t)n) < 0) {
		c->state = MMDS_CONN_CLOSING;
		return;
	}
	out_append(c, line, (size_t)n);
}

static const char *parse_error_message(int err)
{
	switch (-err) {
	case HTTP_ERR_HEAD_TOO_LARGE: return "Request header section is too large.";
	case HTTP_ERR_TOO_MANY_HEADERS: return "Too many request headers.";
	case HTTP_ERR_BODY_TOO_LARGE: return "Request payload is too large.";
	case HTTP_ERR_NOT_IMPLEMENTED: return "Transfer-Encoding is not supported.";
	case HTTP_ERR_VERSION: return "Invalid HTTP Version: Unsupported HTTP version.";
	default: return "Invalid request.";
	}
}

/* After a framing error the rest of the stream cannot be trusted: answer
 * and close. */
void conn_respond_parse_error(struct mmds_conn *c, int err, const struct http_request *req)
{
	c->head_method = false;
	if (err == -HTTP_ERR_BODY_TOO_LARGE && c->api->refuse_expectation && c->api->refuse_expectation(c, req))
		return;
	conn_respond_text(c, http_error_status(err), parse_error_message(err), true);
}
