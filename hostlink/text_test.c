/* Unit tests (TAP) of hostlink/text.c: what guest bytes look like when shown. */
#include <string.h>

#include "tap.h"
#include "text.h"

static const char *esc(const char *in, size_t len, bool keep)
{
	static char out[256];

	text_escape(in, len, keep, out, sizeof(out));
	return out;
}

int main(void)
{
	char small[8];

	ok(strcmp(esc("plain {\"a\": 1}", 14, false), "plain {\"a\": 1}") == 0, "printable ASCII passes");
	ok(strcmp(esc("\x1b]0;pwned\x07", 10, false), "\\x1b]0;pwned\\x07") == 0, "OSC title: ESC and BEL escaped");
	ok(strcmp(esc("\x1b[2J", 4, true), "\\x1b[2J") == 0, "ESC escaped with keep_lines too");
	ok(strcmp(esc("a\nb\tc\r", 6, false), "a\\x0ab\\x09c\\x0d") == 0, "one line: \\n \\t \\r escaped");
	ok(strcmp(esc("a\nb\tc\r", 6, true), "a\nb\tc\\x0d") == 0, "keep_lines: \\n and \\t pass, \\r does not");
	ok(strcmp(esc("\x7f", 1, true), "\\x7f") == 0, "DEL escaped");
	ok(strcmp(esc("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14, false), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == 0,
	   "valid UTF-8 passes (2, 3, 4 bytes)");
	ok(strcmp(esc("\xc2\x9b" "31m", 5, true), "\\xc2\\x9b31m") == 0, "C1 CSI (U+009B) escaped");
	ok(strcmp(esc("\x9b", 1, true), "\\x9b") == 0, "a raw 8-bit CSI byte escaped");
	ok(strcmp(esc("\xc0\xaf", 2, true), "\\xc0\\xaf") == 0, "overlong escaped");
	ok(strcmp(esc("\xed\xa0\x80", 3, true), "\\xed\\xa0\\x80") == 0, "surrogate escaped");
	ok(strcmp(esc("\xe2\x82", 2, true), "\\xe2\\x82") == 0, "truncated sequence escaped");
	ok(strcmp(esc("a\0b", 3, true), "a\\x00b") == 0, "NUL escaped, the rest kept");
	ok(text_escape("\x1b\x1b", 2, false, small, sizeof(small)) == 4 && strcmp(small, "\\x1b") == 0,
	   "cut at a whole unit: \"%s\"", small);
	ok(text_escape("abc", 3, false, small, 1) == 0 && small[0] == 0, "room for the NUL only");
	return tap_done();
}
