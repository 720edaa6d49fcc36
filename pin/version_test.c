/* Unit tests for the envd version grammar (pin/version.c). */
#include <string.h>

#include "version.h"
#include "tap.h"

static const char *const good[] = {
	"0.0.0", "0.8.0", "0.6.13", "1.2.3", "10.20.30", "999999999.999999999.999999999", "0.0.1", "1.0.0",
};

static const char *const bad[] = {
	"", "0", "0.8", "0.8.", ".8.0", "0..0", "0.8.0.", "0.8.0.1", "v0.8.0", "V0.8.0", "0.8.0 ", " 0.8.0",
	"0.8.0\n", "0.8.0-rc.1", "0.8.0+build", "0.8.0rc1", "0.8.0.post1", "1!0.8.0", "00.8.0", "0.08.0",
	"0.8.00", "01.2.3", "1000000000.0.0", "0.1000000000.0", "0.0.1000000000", "x.8.0", "0.x.0", "0.8.x",
	"0.8.*", "-1.0.0", "+1.0.0", "0,8,0", "0.8.0 junk", "v0.8.0 junk", "0.8.0\n0.8.0", "\xef\xbc\x90.8.0",
	"0x1.0.0", "1e3.0.0", "٠.8.0",
};

int main(void)
{
	struct version v;

	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		ok(version_parse(good[i], strlen(good[i]), NULL) == 0, "accepts \"%s\"", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		ok(version_parse(bad[i], strlen(bad[i]), NULL) < 0, "rejects bad[%zu]", i);

	/* Embedded NUL: the length, not the terminator, decides. */
	ok(version_parse("0.8.0\0", 6, NULL) < 0, "rejects a trailing NUL within the length");
	ok(version_parse("0.8.0xyz", 5, &v) == 0 && v.major == 0 && v.minor == 8 && v.patch == 0,
	   "parses only the given length");
	ok(version_parse(NULL, 0, NULL) < 0, "rejects NULL");
	ok(version_parse("1.22.333", 8, &v) == 0 && v.major == 1 && v.minor == 22 && v.patch == 333,
	   "parses the parts");
	ok(version_parse("999999999.0.4294", 16, &v) == 0 && v.major == 999999999 && v.patch == 4294,
	   "nine-digit parts are exact");
	return tap_done();
}
