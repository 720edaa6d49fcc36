#include "guarded_ports.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "why.h"

int guarded_ports_parse(const char *text, uint16_t *out, size_t *n_out, char *why, size_t why_len)
{
	uint16_t ports[GUARDED_PORTS_MAX];
	size_t n = 0;
	const char *p = text;

	if (!text || !*text)
		return why_invalid(why, why_len, "--ports: the list is empty");

	for (;;) {
		const char *start = p;
		unsigned long value = 0;

		while (*p >= '0' && *p <= '9') {
			/* Saturate: anything past 65535 is out of range anyway. */
			if (value <= 65535)
				value = value * 10 + (unsigned long)(*p - '0');
			p++;
		}
		int len = (int)(p - start);
		if (len == 0 && (*p == ',' || *p == '\0'))
			return why_invalid(why, why_len, "--ports: empty entry at position %zu in '%.64s'",
				    (size_t)(start - text) + 1, text);
		if (*p != ',' && *p != '\0') {
			if (*p > ' ' && *p < 0x7f)
				return why_invalid(why, why_len, "--ports: '%c' is not a digit, in '%.64s' (expected e.g. "
					    GUARDED_PORTS_DEFAULT ")", *p, text);
			return why_invalid(why, why_len, "--ports: byte 0x%02x is not a digit (expected e.g. "
				    GUARDED_PORTS_DEFAULT ")", (unsigned char)*p);
		}
		if (len > 1 && *start == '0')
			return why_invalid(why, why_len, "--ports: port '%.*s' has a leading zero", len > 16 ? 16 : len, start);
		if (value == 0 || value > 65535)
			return why_invalid(why, why_len, "--ports: port %.*s is out of range 1-65535",
				    len > 16 ? 16 : len, start);
		for (size_t i = 0; i < n; i++)
			if (ports[i] == value)
				return why_invalid(why, why_len, "--ports: port %lu is listed twice", value);
		if (n == GUARDED_PORTS_MAX)
			return why_invalid(why, why_len, "--ports: more than %d ports", GUARDED_PORTS_MAX);
		ports[n++] = (uint16_t)value;

		if (*p == '\0')
			break;
		p++; /* the comma */
		if (*p == '\0')
			return why_invalid(why, why_len, "--ports: trailing comma in '%s'", text);
	}

	memcpy(out, ports, n * sizeof(ports[0]));
	*n_out = n;
	return 0;
}
