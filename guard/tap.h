/* A minimal TAP producer for the guard's C unit tests. */
#ifndef GUARD_TAP_H
#define GUARD_TAP_H

#include <stdio.h>

static int tap_count, tap_failed;

#define ok(cond, ...) do {                                             \
	int ok_ = !!(cond);                                            \
	printf("%sok %d - ", ok_ ? "" : "not ", ++tap_count);          \
	printf(__VA_ARGS__);                                           \
	printf("\n");                                                  \
	if (!ok_) {                                                    \
		tap_failed++;                                          \
		printf("# failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
	}                                                              \
} while (0)

static inline int tap_done(void)
{
	printf("1..%d\n", tap_count);
	return tap_failed ? 1 : 0;
}

#endif
