/* The clone step's request parser (request.h). */
#include "request.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static long bad(char *why, size_t why_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static long bad(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Digits only, at least one, no leading zero (but "0"), at most max. */
static bool parse_digits(const char *s, size_t len, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0 || (len > 1 && s[0] == '0'))
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (max - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* One "name value\n" line at *pos, of the expected name; value and its
 * length out. */
static long field(const char *head, size_t head_len, size_t *pos, const char *name, const char **value,
		  size_t *value_len, char *why, size_t why_len)
{
	const char *line = head + *pos;
	const char *nl = memchr(line, '\n', head_len - *pos);
	size_t n = strlen(name);

	if (!nl) /* the head ends with its blank line, so this cannot happen */
		return bad(why, why_len, "field '%s': no line end", name);
	size_t line_len = (size_t)(nl - line);
	if (line_len < n + 2 || memcmp(line, name, n) != 0 || line[n] != ' ')
		return bad(why, why_len, "expected the field '%s <value>' at byte %zu", name, *pos);
	*value = line + n + 1;
	*value_len = line_len - n - 1;
	*pos += line_len + 1;
	return 0;
}

static long parse_realtime(const char *v, size_t len, struct clone_request *req, char *why, size_t why_len)
{
	const char *dot = memchr(v, '.', len);
	uint64_t sec, nsec = 0;
	bool ok = dot && (size_t)(v + len - dot - 1) == 9 && parse_digits(v, (size_t)(dot - v), INT64_MAX / 2, &sec);

	/* Nanoseconds are exactly 9 digits, leading zeros included. */
	for (size_t i = 0; ok && i < 9; i++) {
		ok = dot[1 + i] >= '0' && dot[1 + i] <= '9';
		nsec = nsec * 10 + (uint64_t)(dot[1 + i] - '0');
	}
	if (!ok)
		return bad(why, why_len, "realtime '%.*s': expected <seconds>.<9 digits>", (int)(len > 40 ? 40 : len), v);
	req->realtime_sec = (int64_t)sec;
	req->realtime_nsec = (long)nsec;
	return 0;
}

static long parse_entropy(const char *v, size_t len, struct clone_request *req, char *why, size_t why_len)
{
	if (len % 2 || len / 2 < CLONE_ENTROPY_MIN || len / 2 > CLONE_ENTROPY_MAX)
		return bad(why, why_len, "entropy: %zu hex digits; need an even count for %d-%d bytes", len,
			   CLONE_ENTROPY_MIN, CLONE_ENTROPY_MAX);
	for (size_t i = 0; i < len; i += 2) {
		int hi = hex_value(v[i]), lo = hex_value(v[i + 1]);
		if (hi < 0 || lo < 0)
			return bad(why, why_len, "entropy: byte %zu is not two lowercase hex digits", i / 2);
		req->entropy[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	req->entropy_len = len / 2;
	return 0;
}

long clone_request_parse(const char *buf, size_t len, struct clone_request *req, char *why, size_t why_len)
{
	const char *end = NULL;
	size_t magic = strlen(CLONE_MAGIC);

	/* Refuse a wrong start at once, not after CLONE_MAX_HEAD bytes. */
	if (memcmp(buf, CLONE_MAGIC " ", len < magic + 1 ? len : magic + 1) != 0)
		return bad(why, why_len, "not a clone-step request: it must start with '" CLONE_MAGIC " '");
	for (size_t i = 0; i < len && i < CLONE_MAX_HEAD && !end; i++) {
		if (buf[i] == '\r' || buf[i] == '\0')
			return bad(why, why_len, "request head holds a CR or NUL byte at byte %zu", i);
		if (i > 0 && buf[i] == '\n' && buf[i - 1] == '\n')
			end = buf + i + 1;
	}
	if (!end)
		return len >= CLONE_MAX_HEAD ? bad(why, why_len, "request head over %d bytes", CLONE_MAX_HEAD) : 0;
	size_t head_len = (size_t)(end - buf);

	const char *v;
	size_t vlen, pos = 0;
	memset(req, 0, sizeof(*req));
	long r = field(buf, head_len, &pos, CLONE_MAGIC, &v, &vlen, why, why_len);
	if (r < 0)
		return r;
	if (vlen == 6 && memcmp(v, "status", 6) == 0)
		req->kind = CLONE_STATUS;
	else if (vlen == 16 && memcmp(v, "prepare-snapshot", 16) == 0)
		req->kind = CLONE_PREPARE_SNAPSHOT;
	else if (vlen == 5 && memcmp(v, "clone", 5) == 0)
		req->kind = CLONE_STEP;
	else
		return bad(why, why_len, "unknown request '%.*s' (expected clone, status or prepare-snapshot)",
			   (int)(vlen > 40 ? 40 : vlen), v);

	if (req->kind == CLONE_STEP) {
		if ((r = field(buf, head_len, &pos, "generation", &v, &vlen, why, why_len)) < 0)
			return r;
		if (!parse_digits(v, vlen, INT64_MAX, &req->generation) || req->generation == 0)
			return bad(why, why_len, "generation '%.*s': expected 1-%lld", (int)(vlen > 40 ? 40 : vlen), v,
				   (long long)INT64_MAX);
		if ((r = field(buf, head_len, &pos, "realtime", &v, &vlen, why, why_len)) < 0 ||
		    (r = parse_realtime(v, vlen, req, why, why_len)) < 0)
			return r;
		if ((r = field(buf, head_len, &pos, "entropy", &v, &vlen, why, why_len)) < 0 ||
		    (r = parse_entropy(v, vlen, req, why, why_len)) < 0)
			return r;
		if (pos + 1 < head_len) {
			uint64_t n;
			if ((r = field(buf, head_len, &pos, "document", &v, &vlen, why, why_len)) < 0)
				return r;
			if (!parse_digits(v, vlen, CLONE_MAX_DOCUMENT, &n) || n == 0)
				return bad(why, why_len, "document length '%.*s': expected 1-%u bytes",
					   (int)(vlen > 40 ? 40 : vlen), v, CLONE_MAX_DOCUMENT);
			req->document = end;
			req->document_len = (size_t)n;
		}
	}
	if (pos + 1 != head_len)
		return bad(why, why_len, "unexpected field at byte %zu (fields: generation, realtime, entropy, document)",
			   pos);
	size_t total = head_len + req->document_len;
	if (len < total)
		return 0;
	if (len > total)
		return bad(why, why_len, "%zu bytes after the request: one request per connection", len - total);
	return (long)total;
}
