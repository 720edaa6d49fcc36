#include "why.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

int why_invalid(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (why && why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}
