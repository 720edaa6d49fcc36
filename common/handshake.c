#include "handshake.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

__attribute__((format(printf, 4, 5)))
static int fail(int code, char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (why && why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* The line's length including '\n'; 0 if none yet; -EINVAL if too long. */
static int line_length(const char *buf, size_t len, char *why, size_t why_len)
{
	size_t limit = len < HANDSHAKE_LINE_MAX ? len : HANDSHAKE_LINE_MAX;
	const char *nl = memchr(buf, '\n', limit);

	if (nl)
		return (int)(nl - buf) + 1;
	if (len >= HANDSHAKE_LINE_MAX)
		return fail(-EINVAL, why, why_len, "no newline in the first %d bytes", HANDSHAKE_LINE_MAX);
	return 0;
}

/* Decimal digits in [p, end): 1..max, no leading zero. */
static int parse_number(const char *p, const char *end, uint32_t max, uint32_t *out,
			char *why, size_t why_len)
{
	uint64_t value = 0;
	int n = (int)(end - p);

	if (n == 0)
		return fail(-EINVAL, why, why_len, "the port is missing");
	for (const char *q = p; q < end; q++) {
		if (*q < '0' || *q > '9')
			return fail(-EINVAL, why, why_len, "byte 0x%02x in the port is not a digit",
				    (unsigned char)*q);
		if (value <= UINT32_MAX)
			value = value * 10 + (uint64_t)(*q - '0');
	}
	if (n > 1 && *p == '0')
		return fail(-EINVAL, why, why_len, "port '%.*s' has a leading zero", n > 12 ? 12 : n, p);
	if (value == 0 || value > max)
		return fail(-ERANGE, why, why_len, "port %.*s is out of range 1-%u", n > 12 ? 12 : n, p, max);
	*out = (uint32_t)value;
	return 0;
}

int handshake_parse_connect(const char *buf, size_t len, uint32_t max_port, uint32_t *port,
			    char *why, size_t why_len)
{
	static const char verb[] = "CONNECT ";
	int n = line_length(buf, len, why, why_len);
	int r;

	if (n <= 0)
		return n;
	if ((size_t)n < sizeof(verb) || memcmp(buf, verb, sizeof(verb) - 1) != 0)
		return fail(-EINVAL, why, why_len, "the line does not start with \"CONNECT \"");
	r = parse_number(buf + sizeof(verb) - 1, buf + n - 1, max_port, port, why, why_len);
	return r < 0 ? r : n;
}

int handshake_parse_reply(const char *buf, size_t len, bool want_number, uint32_t *number,
			  char *why, size_t why_len)
{
	int n = line_length(buf, len, why, why_len);
	int r;

	if (n <= 0)
		return n == -EINVAL ? -EPROTO : n;
	if (n >= 4 && memcmp(buf, "ERR ", 4) == 0) {
		int text = n - 5;
		for (int i = 0; i < text; i++)
			if ((unsigned char)buf[4 + i] < 0x20 || buf[4 + i] == 0x7f)
				return fail(-EPROTO, why, why_len, "control byte in an ERR reply");
		return fail(-ECONNREFUSED, why, why_len, "%.*s", text, buf + 4);
	}
	if (!want_number) {
		if (n == 3 && memcmp(buf, "OK\n", 3) == 0)
			return n;
		return fail(-EPROTO, why, why_len, "expected \"OK\\n\" or \"ERR <reason>\\n\"");
	}
	if (n < 4 || memcmp(buf, "OK ", 3) != 0)
		return fail(-EPROTO, why, why_len, "expected \"OK <port>\\n\"");
	r = parse_number(buf + 3, buf + n - 1, UINT32_MAX, number, why, why_len);
	return r < 0 ? -EPROTO : n;
}

int handshake_format_connect(char *buf, size_t len, uint32_t port)
{
	int n = snprintf(buf, len, "CONNECT %u\n", port);

	return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}
