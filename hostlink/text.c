#include "text.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* How many bytes from p form one valid UTF-8 character other than a control
 * character (1-4), or 0: the first byte is to be escaped. */
static size_t printable_unit(const unsigned char *p, size_t left, bool keep_lines)
{
	unsigned char c = p[0];
	size_t n;
	uint32_t cp;

	if (c < 0x80) {
		if (keep_lines && (c == '\n' || c == '\t'))
			return 1;
		return c < 0x20 || c == 0x7f ? 0 : 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1fu;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0fu;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07u;
	} else {
		return 0;
	}
	if (left < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	/* overlong, surrogates, beyond Unicode, and the C1 controls */
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) ||
	    cp > 0x10ffff || (cp >= 0x80 && cp <= 0x9f))
		return 0;
	return n;
}

/* One unit of output into unit[] (at most 4 bytes plus NUL); bytes consumed. */
static size_t next_unit(const unsigned char *p, size_t left, bool keep_lines, char unit[5], size_t *unit_len)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = printable_unit(p, left, keep_lines);

	if (n) {
		memcpy(unit, p, n);
		*unit_len = n;
		return n;
	}
	unit[0] = '\\';
	unit[1] = 'x';
	unit[2] = hex[p[0] >> 4];
	unit[3] = hex[p[0] & 15];
	*unit_len = 4;
	return 1;
}

size_t text_escape(const char *in, size_t len, bool keep_lines, char *out, size_t out_len)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t o = 0;
	char unit[5];
	size_t unit_len;

	if (!out_len)
		return 0;
	while (len) {
		size_t used = next_unit(p, len, keep_lines, unit, &unit_len);
		if (o + unit_len >= out_len)
			break;
		memcpy(out + o, unit, unit_len);
		o += unit_len;
		p += used;
		len -= used;
	}
	out[o] = 0;
	return o;
}

int text_write(FILE *f, const char *in, size_t len, bool keep_lines)
{
	const unsigned char *p = (const unsigned char *)in;
	char unit[5];
	size_t unit_len;

	while (len) {
		size_t used = next_unit(p, len, keep_lines, unit, &unit_len);
		if (fwrite(unit, 1, unit_len, f) != unit_len)
			return -EIO;
		p += used;
		len -= used;
	}
	return 0;
}
