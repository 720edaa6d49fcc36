/* Lock files (recipes/NAME.lock): one stanza per pinned artifact.
 *
 *   # comment
 *   [envd]
 *   version = 0.8.0
 *   url = https://example.org/envd/v0.8.0/envd
 *   sha256 = 752cfbc7...   (64 lowercase hex digits)
 *   size = 12345678        # optional
 *
 * The full specification is in pin/README.md. The parser is strict on purpose:
 * a lock is reviewed in diffs, so anything ambiguous is an error with a line
 * number rather than a guess. */
#ifndef PIN_LOCK_H
#define PIN_LOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOCK_MAX_BYTES   (1024 * 1024)
#define LOCK_MAX_LINE    4096
#define LOCK_MAX_NAME    64
#define LOCK_MAX_VERSION 64
#define LOCK_MAX_ENTRIES 1024
#define SHA256_HEX_LEN   64

struct lock_entry {
	char *name;
	char *version;
	char *url;
	char sha256[SHA256_HEX_LEN + 1];
	uint64_t size; /* valid when has_size */
	bool has_size;
	unsigned line; /* of the [name] header */
};

struct lock {
	struct lock_entry *entries;
	size_t n;
};

struct lock_error {
	unsigned line; /* 0 when the problem is not tied to a line */
	char msg[160];
};

/* Parses buf[0..len). On error returns -EINVAL (or -ENOMEM), fills *err and
 * leaves *lock empty. */
int lock_parse(const char *buf, size_t len, struct lock *lock, struct lock_error *err);
void lock_free(struct lock *lock);
const struct lock_entry *lock_find(const struct lock *lock, const char *name);

/* Shared validators, also used for command-line values. */
bool lock_valid_name(const char *s, size_t len);
bool lock_valid_sha256(const char *s, size_t len);
/* A lock's version: the artifact's own version string, 1..LOCK_MAX_VERSION of
 * letters, digits and LOCK_VERSION_PUNCT; the one definition of that set
 * (envd's stricter grammar is version.h's). */
#define LOCK_VERSION_PUNCT "._-+~"
bool lock_version_char(char c);
bool lock_valid_version(const char *s, size_t len);
/* Decimal, no sign, no leading zero, 1 .. 2^63-1. */
int lock_parse_size(const char *s, size_t len, uint64_t *out);

#endif
