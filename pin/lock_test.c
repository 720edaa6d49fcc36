/* Unit tests for the lock-file parser (pin/lock.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"
#include "tap.h"

#define SHA "752cfbc7ba66649ec1bffdc9b59529dd3527e7d3899c69351e05bd21dfc0dbf0"
#define GOOD_STANZA "[envd]\nversion = 0.8.0\nurl = https://example.org/envd/v0.8.0/envd\nsha256 = " SHA "\n"

static int parse(const char *text, struct lock *lock, struct lock_error *err)
{
	return lock_parse(text, strlen(text), lock, err);
}

/* Expects a parse error on `line` whose message contains `needle`. */
static void rejects(const char *what, const char *text, unsigned line, const char *needle)
{
	struct lock lock;
	struct lock_error err;
	int r = parse(text, &lock, &err);

	if (!ok(r == -EINVAL && err.line == line && strstr(err.msg, needle) && lock.n == 0 && !lock.entries,
		"rejects %s", what))
		printf("# r=%d line=%u msg=\"%s\" (wanted line %u, \"%s\")\n", r, err.line, err.msg, line, needle);
}

int main(void)
{
	struct lock lock;
	struct lock_error err;
	const struct lock_entry *e;

	/* The contract's own example, with a trailing comment on size. */
	ok(parse("# envd for the images\n\n" GOOD_STANZA "size = 12345678        # optional\n", &lock, &err) == 0,
	   "parses the contract example");
	e = lock_find(&lock, "envd");
	ok(e && strcmp(e->version, "0.8.0") == 0 && strcmp(e->url, "https://example.org/envd/v0.8.0/envd") == 0 &&
		   strcmp(e->sha256, SHA) == 0 && e->has_size && e->size == 12345678 && e->line == 3,
	   "fields of the example");
	ok(!lock_find(&lock, "env") && !lock_find(&lock, "envd2"), "lock_find is exact");
	lock_free(&lock);

	ok(parse(GOOD_STANZA "\n[other-1.x_y]\n\tsha256=" SHA "\n url=http://127.0.0.1:8080/a#frag\nversion=1.2.3+b~1\n",
		 &lock, &err) == 0 && lock.n == 2,
	   "two stanzas, any key order, tabs, no blanks around '='");
	e = lock_find(&lock, "other-1.x_y");
	ok(e && !e->has_size && strcmp(e->url, "http://127.0.0.1:8080/a#frag") == 0 && strcmp(e->version, "1.2.3+b~1") == 0,
	   "'#' inside a value is not a comment");
	lock_free(&lock);

	ok(parse("[envd]\nversion = 0.8.0\nurl = https://e.org/x\nsha256 = " SHA, &lock, &err) == 0,
	   "no final newline");
	lock_free(&lock);

	/* Malformed stanzas. */
	rejects("an empty file", "", 0, "no [name] stanza");
	rejects("only comments", "# nothing\n\n   # here\n", 0, "no [name] stanza");
	rejects("a key before any stanza", "version = 1\n" GOOD_STANZA, 1, "before any [name]");
	rejects("an unclosed header", "[envd\n", 1, "malformed stanza header");
	rejects("text after a header", "[envd] x\n", 1, "malformed stanza header");
	rejects("an empty name", "[]\n", 1, "invalid artifact name");
	rejects("a name with a slash", "[../etc]\n", 1, "invalid artifact name");
	rejects("a name with a blank", "[en vd]\n", 1, "invalid artifact name");
	rejects("a name starting with a dot", "[.envd]\n", 1, "invalid artifact name");
	rejects("a too-long name", "[aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa]\n", 1, "invalid artifact name");
	rejects("a line without '='", "[envd]\nversion 0.8.0\n", 2, "expected \"key = value\"");
	rejects("a line with only '='", "[envd]\n= 0.8.0\n", 2, "expected \"key = value\"");
	rejects("an empty value", "[envd]\nversion =\n", 2, "empty value");
	rejects("an empty value before a comment", "[envd]\nversion = # none\n", 2, "empty value");
	rejects("a value with a blank", "[envd]\nversion = 0.8 .0\n", 2, "value contains a blank");
	rejects("a missing sha256", "[envd]\nversion = 0.8.0\nurl = https://e.org/x\n", 1, "missing \"sha256\"");
	rejects("a missing url in the first of two", "[a]\nversion = 1\nsha256 = " SHA "\n" GOOD_STANZA, 1, "[a]: missing \"url\"");
	rejects("an empty stanza", GOOD_STANZA "[b]\n", 5, "[b]: missing \"version\"");
	rejects("a carriage return", "[envd]\r\n", 1, "carriage return");
	{
		struct lock l;
		struct lock_error er;
		static const char nul[] = "[envd]\nversion = 0.8.0\0x\n";
		int r = lock_parse(nul, sizeof(nul) - 1, &l, &er);
		ok(r == -EINVAL && er.line == 2 && strstr(er.msg, "NUL"), "rejects an embedded NUL byte");
	}
	rejects("a control character", "[envd]\nversion = 0.8.0\x1b\n", 2, "control character");

	/* Duplicates. */
	rejects("a duplicate name", GOOD_STANZA "\n" GOOD_STANZA, 6, "duplicate artifact [envd] (first on line 1)");
	rejects("a duplicate key", "[envd]\nversion = 0.8.0\nversion = 0.8.1\n", 3, "duplicate key \"version\"");
	rejects("a duplicate sha256", GOOD_STANZA "sha256 = " SHA "\n", 5, "duplicate key \"sha256\"");

	/* Unknown keys. */
	rejects("an unknown key", GOOD_STANZA "md5 = abc\n", 5, "unknown key \"md5\"");
	rejects("a key in the wrong case", "[envd]\nSHA256 = " SHA "\n", 2, "unknown key \"SHA256\"");

	/* sha256. */
	rejects("a short sha256", "[envd]\nsha256 = " "752cfbc7\n", 2, "64 hex digits, got 8");
	rejects("a long sha256", "[envd]\nsha256 = " SHA "0\n", 2, "64 hex digits, got 65");
	rejects("an uppercase sha256", "[envd]\nsha256 = 752CFBC7ba66649ec1bffdc9b59529dd3527e7d3899c69351e05bd21dfc0dbf0\n", 2,
		"lowercase hex");
	rejects("a non-hex sha256", "[envd]\nsha256 = 752cfbc7ba66649ec1bffdc9b59529dd3527e7d3899c69351e05bd21dfc0dbfg\n", 2,
		"lowercase hex");
	rejects("a sha256: prefix", "[envd]\nsha256 = sha256:" SHA "\n", 2, "64 hex digits");

	/* size. */
	rejects("a negative size", GOOD_STANZA "size = -1\n", 5, "size must be");
	rejects("a zero size", GOOD_STANZA "size = 0\n", 5, "size must be");
	rejects("a size with a leading zero", GOOD_STANZA "size = 0123\n", 5, "size must be");
	rejects("a size with a unit", GOOD_STANZA "size = 12M\n", 5, "size must be");
	rejects("a hex size", GOOD_STANZA "size = 0x10\n", 5, "size must be");
	rejects("a size over 2^63-1", GOOD_STANZA "size = 9223372036854775808\n", 5, "size must be");
	rejects("a 20-digit size", GOOD_STANZA "size = 18446744073709551616\n", 5, "size must be");
	ok(parse(GOOD_STANZA "size = 9223372036854775807\n", &lock, &err) == 0 && lock.entries[0].size == 9223372036854775807ULL,
	   "size 2^63-1 is fine");
	lock_free(&lock);

	/* commit: recorded (a source archive's git commit), 40 or 64 lowercase hex. */
	ok(parse(GOOD_STANZA "commit = 2acf2d51bd1e2fe146914f24c44f7ee07d2213c5\n", &lock, &err) == 0 &&
	   lock.entries[0].has_commit && strcmp(lock.entries[0].commit, "2acf2d51bd1e2fe146914f24c44f7ee07d2213c5") == 0,
	   "a 40-digit commit is kept");
	lock_free(&lock);
	ok(parse(GOOD_STANZA "commit = " SHA "\n", &lock, &err) == 0 && strlen(lock.entries[0].commit) == 64,
	   "a 64-digit (SHA-256 repository) commit is kept");
	lock_free(&lock);
	ok(parse(GOOD_STANZA, &lock, &err) == 0 && !lock.entries[0].has_commit, "commit is optional");
	lock_free(&lock);
	rejects("a short commit", GOOD_STANZA "commit = 2acf2d51\n", 5, "commit must be a git commit id");
	rejects("an uppercase commit", GOOD_STANZA "commit = 2ACF2D51BD1E2FE146914F24C44F7EE07D2213C5\n", 5,
		"commit must be a git commit id");
	rejects("a 41-digit commit", GOOD_STANZA "commit = 2acf2d51bd1e2fe146914f24c44f7ee07d2213c50\n", 5,
		"commit must be a git commit id");
	rejects("a duplicate commit", GOOD_STANZA "commit = 2acf2d51bd1e2fe146914f24c44f7ee07d2213c5\n"
		"commit = 2acf2d51bd1e2fe146914f24c44f7ee07d2213c5\n", 6, "duplicate key \"commit\"");

	/* url and version. */
	rejects("an ftp url", "[envd]\nurl = ftp://e.org/x\n", 2, "https://");
	rejects("a file url", "[envd]\nurl = file:///tmp/x\n", 2, "https://");
	rejects("a bare scheme", "[envd]\nurl = https://\n", 2, "https://");
	rejects("a url with a non-ASCII byte", "[envd]\nurl = https://e.org/\xc3\xa9\n", 2, "https://");
	rejects("a version with a slash", "[envd]\nversion = 0.8/0\n", 2, "invalid version");

	/* Size limits. */
	{
		size_t big = LOCK_MAX_BYTES + 1;
		char *buf = malloc(big);
		memset(buf, '#', big);
		ok(buf && lock_parse(buf, big, &lock, &err) == -EINVAL && strstr(err.msg, "larger than"),
		   "rejects a lock over 1 MiB");
		free(buf);
		char line[LOCK_MAX_LINE + 16];
		memset(line, ' ', sizeof(line));
		memcpy(line, "[envd]\n", 7);
		line[sizeof(line) - 1] = '\n';
		ok(lock_parse(line, sizeof(line), &lock, &err) == -EINVAL && err.line == 2 && strstr(err.msg, "longer than"),
		   "rejects a line over 4096 bytes");
	}

	/* Validators shared with the command line. */
	uint64_t n;
	ok(lock_valid_sha256(SHA, 64) && !lock_valid_sha256(SHA, 63), "lock_valid_sha256 length");
	ok(lock_parse_size("1", 1, &n) == 0 && n == 1 && lock_parse_size("", 0, &n) < 0, "lock_parse_size edges");
	ok(lock_valid_name("a", 1) && !lock_valid_name("-a", 2) && !lock_valid_name("", 0), "lock_valid_name edges");
	ok(lock_valid_version("0.8.0+b~1_x-y", 13) && !lock_valid_version("", 0) && !lock_valid_version("1/2", 3) &&
	   !lock_valid_version("1 2", 3) && !lock_valid_version("1\0", 2), "lock_valid_version: the one character set");
	ok(lock_valid_version("0123456789012345678901234567890123456789012345678901234567890123", 64) &&
	   !lock_valid_version("01234567890123456789012345678901234567890123456789012345678901234", 65),
	   "lock_valid_version: at most LOCK_MAX_VERSION");
	return tap_done();
}
