/* Minimal TAP producer for the C unit tests (plain TAP, read by
 * tests/test_c_units.py). Tests are counted as they run; the plan goes last. */
#ifndef PIN_TAP_H
#define PIN_TAP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

static int tap_n, tap_failed;

__attribute__((format(printf, 2, 3)))
static inline bool tap_ok(bool cond, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	if (!cond)
		tap_failed++;
	printf("%s %d - ", cond ? "ok" : "not ok", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	return cond;
}

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
