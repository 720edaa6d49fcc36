/* Unit tests (TAP) of common/decimal.c. */
#include <errno.h>
#include <stdint.h>

#include "decimal.h"
#include "tap.h"

int main(void)
{
	uint64_t v = 7;

	ok(parse_decimal("0", 0, 10, &v) == 0 && v == 0, "0 in 0-10");
	ok(parse_decimal("65535", 1, 65535, &v) == 0 && v == 65535, "the top of the range");
	ok(parse_decimal("18446744073709551615", 0, UINT64_MAX, &v) == 0 && v == UINT64_MAX, "UINT64_MAX");
	v = 7;
	ok(parse_decimal("18446744073709551616", 0, UINT64_MAX, &v) == -EINVAL && v == 7, "overflow refused, out untouched");
	ok(parse_decimal("65536", 1, 65535, &v) == -EINVAL, "above max");
	ok(parse_decimal("0", 1, 65535, &v) == -EINVAL, "below min");
	ok(parse_decimal("", 0, 10, &v) == -EINVAL, "empty");
	ok(parse_decimal("-1", 0, UINT64_MAX, &v) == -EINVAL, "a minus sign (strtoull would wrap it)");
	ok(parse_decimal("+5", 0, 10, &v) == -EINVAL, "a plus sign");
	ok(parse_decimal(" 5", 0, 10, &v) == -EINVAL, "leading space");
	ok(parse_decimal("5 ", 0, 10, &v) == -EINVAL, "trailing space");
	ok(parse_decimal("5x", 0, 10, &v) == -EINVAL, "trailing junk");
	ok(parse_decimal("0x10", 0, 100, &v) == -EINVAL, "hex is not decimal");
	ok(parse_decimal("010", 0, 100, &v) == 0 && v == 10, "leading zero is decimal, not octal");
	return tap_done();
}
