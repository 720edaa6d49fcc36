/* The one TAP producer for the C unit tests (read by tests/test_c_units.py).
 * Tests are counted as they run and the plan goes last, so a test file never
 * keeps a count by hand. A failing check also names its file, line and
 * expression in a TAP comment. Unit tests live beside their code as
 * <module>_test.c and include it as "tap.h"; it is test code and never ships. */
#ifndef E2B_TESTS_TAP_H
#define E2B_TESTS_TAP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

static int tap_count, tap_failed;

/* ok(cond, "description", ...): one TAP line; returns cond, so a caller can
 * print more "# ..." detail when it fails. */
#define ok(cond, ...) tap_result(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)

__attribute__((format(printf, 5, 6)))
static inline bool tap_result(bool pass, const char *file, int line, const char *expr, const char *fmt, ...)
{
	va_list ap;

	tap_count++;
	printf("%s %d - ", pass ? "ok" : "not ok", tap_count);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	if (!pass) {
		tap_failed++;
		printf("# failed at %s:%d: %s\n", file, line, expr);
	}
	return pass;
}

/* Prints the plan; the exit code for main. */
static inline int tap_done(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? 1 : 0;
}

#endif
