#include "version.h"

#include <errno.h>

static int parse_number(const char **p, const char *end, uint32_t *out)
{
	const char *s = *p;
	uint32_t n = 0;
	int digits = 0;

	while (s < end && *s >= '0' && *s <= '9') {
		if (digits == 9)
			return -EINVAL;
		n = n * 10 + (uint32_t)(*s - '0');
		digits++;
		s++;
	}
	if (digits == 0)
		return -EINVAL;
	/* "0" alone is fine, "07" is not: packaging would print it back as "7". */
	if (digits > 1 && **p == '0')
		return -EINVAL;
	*out = n;
	*p = s;
	return 0;
}

int version_parse(const char *s, size_t len, struct version *out)
{
	const char *p = s, *end = s + len;
	struct version v;

	if (!s || len == 0 || len > VERSION_MAX_LEN)
		return -EINVAL;
	if (parse_number(&p, end, &v.major) < 0 || p == end || *p++ != '.')
		return -EINVAL;
	if (parse_number(&p, end, &v.minor) < 0 || p == end || *p++ != '.')
		return -EINVAL;
	if (parse_number(&p, end, &v.patch) < 0 || p != end)
		return -EINVAL;
	if (out)
		*out = v;
	return 0;
}
