/* HTTP/1.x request parsing for mmds-serve (see http.h). Strict where
 * leniency would let two parsers disagree about where a request ends
 * (Content-Length, Transfer-Encoding, folded headers, stray CR), lenient
 * where it is harmless (bare LF line ends, leading empty lines). */
#include "http.h"

#include <string.h>
#include <strings.h>

static bool is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Field values: HTAB, SP, visible ASCII and obs-text; no other controls. */
static bool is_value_char(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* Target: visible ASCII only (no spaces, no controls, no obs-text). */
static bool is_target_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f;
}

bool http_header_is(const struct http_header *h, const char *name)
{
	size_t n = strlen(name);
	return h->name_len == n && strncasecmp(h->name, name, n) == 0;
}

const struct http_header *http_find_header(const struct http_request *req, const char *name)
{
	for (unsigned i = 0; i < req->n_headers; i++)
		if (http_header_is(&req->headers[i], name))
			return &req->headers[i];
	return NULL;
}

bool http_list_has_token(const char *value, size_t len, const char *token)
{
	size_t tlen = strlen(token);
	size_t i = 0;

	while (i < len) {
		while (i < len && (value[i] == ' ' || value[i] == '\t' || value[i] == ','))
			i++;
		size_t start = i;
		while (i < len && value[i] != ',')
			i++;
		size_t end = i;
		while (end > start && (value[end - 1] == ' ' || value[end - 1] == '\t'))
			end--;
		if (end - start == tlen && tlen && strncasecmp(value + start, token, tlen) == 0)
			return true;
	}
	return false;
}

/* Parses "METHOD SP target SP HTTP/1.x" (line without its line end). */
static int parse_request_line(const char *line, size_t len, struct http_request *req)
{
	size_t i = 0;

	while (i < len && is_tchar((unsigned char)line[i]))
		i++;
	if (i == 0 || i >= len || line[i] != ' ')
		return -HTTP_ERR_BAD_REQUEST;
	req->method = line;
	req->method_len = i;
	i++;

	size_t t = i;
	while (i < len && is_target_char((unsigned char)line[i]))
		i++;
	if (i == t || i >= len || line[i] != ' ')
		return -HTTP_ERR_BAD_REQUEST;
	req->target = line + t;
	req->target_len = i - t;
	req->path = req->target;
	req->path_len = req->target_len;
	/* absolute-form (RFC 9112 3.2.2), as clients talking to a proxy send:
	 * the path is what follows the authority. */
	if (req->target_len >= 7 && strncasecmp(req->target, "http://", 7) == 0) {
		const char *p = memchr(req->target + 7, '/', req->target_len - 7);
		if (p) {
			req->path = p;
			req->path_len = req->target_len - (size_t)(p - req->target);
		} else {
			req->path = "/";
			req->path_len = 1;
		}
	} else if (req->target[0] != '/') {
		return -HTTP_ERR_BAD_REQUEST;
	}
	for (size_t k = 0; k < req->path_len; k++)
		if (req->path[k] == '?' || req->path[k] == '#') {
			req->path_len = k;
			break;
		}
	i++;

	const char *v = line + i;
	size_t vlen = len - i;
	if (vlen != 8 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' ||
	    v[7] < '0' || v[7] > '9')
		return -HTTP_ERR_BAD_REQUEST;
	if (v[5] != '1')
		return -HTTP_ERR_VERSION;
	req->minor_version = v[7] - '0';
	return 0;
}

static int parse_header_line(const char *line, size_t len, struct http_header *h)
{
	size_t i = 0;

	while (i < len && is_tchar((unsigned char)line[i]))
		i++;
	/* No whitespace between name and colon (RFC 9112 5.1), no empty name;
	 * a leading space would be obs-fold, refused for the same reason. */
	if (i == 0 || i >= len || line[i] != ':')
		return -HTTP_ERR_BAD_REQUEST;
	h->name = line;
	h->name_len = i;
	i++;
	for (size_t k = i; k < len; k++)
		if (!is_value_char((unsigned char)line[k]))
			return -HTTP_ERR_BAD_REQUEST;
	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	size_t end = len;
	while (end > i && (line[end - 1] == ' ' || line[end - 1] == '\t'))
		end--;
	h->value = line + i;
	h->value_len = end - i;
	return 0;
}

static int parse_content_length(const struct http_header *h, size_t *out)
{
	size_t v = 0;

	if (h->value_len == 0 || h->value_len > 15)
		return h->value_len ? -HTTP_ERR_BODY_TOO_LARGE : -HTTP_ERR_BAD_REQUEST;
	for (size_t i = 0; i < h->value_len; i++) {
		char c = h->value[i];
		if (c < '0' || c > '9')
			return -HTTP_ERR_BAD_REQUEST;
		v = v * 10 + (size_t)(c - '0');
	}
	*out = v;
	return 0;
}

/* 86 lines, on purpose: one pass over the head (lines, then the framing
 * headers, then the body bound) reads as the grammar it checks; the line
 * parsers are already apart. */
long http_parse_request(const char *buf, size_t len, const struct http_limits *limits,
			struct http_request *req)
{
	size_t pos = 0, line_no = 0;
	unsigned max_headers = limits->max_headers;
	bool have_cl = false;
	int r;

	if (max_headers > HTTP_MAX_HEADERS_CAP)
		max_headers = HTTP_MAX_HEADERS_CAP;
	memset(req, 0, offsetof(struct http_request, headers));
	req->n_headers = 0;
	req->head_len = 0;
	req->content_length = 0;
	req->body = NULL;
	req->keep_alive = false;

	/* A few empty lines before a request are tolerated (RFC 9112 2.2). */
	while (pos < len && pos < 8 && (buf[pos] == '\r' || buf[pos] == '\n'))
		pos++;

	for (;;) {
		size_t limit = len < limits->max_head ? len : limits->max_head;
		const char *nl = pos < limit ? memchr(buf + pos, '\n', limit - pos) : NULL;
		if (!nl)
			return len >= limits->max_head ? -HTTP_ERR_HEAD_TOO_LARGE : 0;

		size_t line_len = (size_t)(nl - (buf + pos));
		const char *line = buf + pos;
		if (line_len && line[line_len - 1] == '\r')
			line_len--;
		pos = (size_t)(nl - buf) + 1;

		if (line_no == 0) {
			r = parse_request_line(line, line_len, req);
			if (r < 0)
				return r;
		} else if (line_len == 0) {
			break;
		} else {
			if (req->n_headers >= max_headers)
				return -HTTP_ERR_TOO_MANY_HEADERS;
			struct http_header *h = &req->headers[req->n_headers++];
			r = parse_header_line(line, line_len, h);
			if (r < 0)
				return r;
		}
		line_no++;
	}
	req->head_len = pos;

	req->keep_alive = req->minor_version >= 1;
	for (unsigned i = 0; i < req->n_headers; i++) {
		const struct http_header *h = &req->headers[i];
		if (http_header_is(h, "Content-Length")) {
			size_t v;
			r = parse_content_length(h, &v);
			if (r < 0)
				return r;
			if (have_cl && v != req->content_length)
				return -HTTP_ERR_BAD_REQUEST;
			have_cl = true;
			req->content_length = v;
		} else if (http_header_is(h, "Transfer-Encoding")) {
			/* No client of a metadata service sends chunked bodies;
			 * refusing them leaves one framing rule: Content-Length. */
			return -HTTP_ERR_NOT_IMPLEMENTED;
		} else if (http_header_is(h, "Connection")) {
			if (http_list_has_token(h->value, h->value_len, "close"))
				req->keep_alive = false;
			else if (http_list_has_token(h->value, h->value_len, "keep-alive"))
				req->keep_alive = true;
		}
	}
	/* "close" wins over "keep-alive" whatever the header order. */
	for (unsigned i = 0; i < req->n_headers; i++)
		if (http_header_is(&req->headers[i], "Connection") &&
		    http_list_has_token(req->headers[i].value, req->headers[i].value_len, "close"))
			req->keep_alive = false;

	if (req->content_length > limits->max_body)
		return -HTTP_ERR_BODY_TOO_LARGE;
	if (len - pos < req->content_length)
		return 0;
	req->body = buf + pos;
	return (long)(pos + req->content_length);
}

int http_error_status(int err)
{
	switch (-err) {
	case HTTP_ERR_HEAD_TOO_LARGE:
	case HTTP_ERR_TOO_MANY_HEADERS:
		return 431;
	case HTTP_ERR_BODY_TOO_LARGE:
		return 413;
	case HTTP_ERR_NOT_IMPLEMENTED:
		return 501;
	case HTTP_ERR_VERSION:
		return 505;
	default:
		return 400;
	}
}

const char *http_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Payload Too Large";
	case 417: return "Expectation Failed";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default:  return "Unknown";
	}
}

bool http_method_is(const struct http_request *req, const char *m)
{
	size_t n = strlen(m);
	return req->method_len == n && memcmp(req->method, m, n) == 0;
}
