/* Lock files (recipes/NAME.lock): one stanza per pinned artifact.
 *
 *   # comment
 *   [envd]
 *   version = 0.8.0
 *   url = https://example.org/envd/v0.8.0/envd
 *   sha256 = 752cfbc7...   (64 lowercase hex digits)
 *   size = 12345678        # optional
 *   commit = 2acf2d51...   # optional: the git commit a source archive is of
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
#define LOCK_TREE_DIGEST 32
#define LOCK_TREE_SRI_LEN 51 /* "sha256-" and 44 base64 characters */
#define LOCK_COMMIT_MAX  64 /* a git object id: 40 hex digits (SHA-1) or 64 (SHA-256) */

struct lock_entry {
	char *name;
	char *version;
	char *url;
	char sha256[SHA256_HEX_LEN + 1]; /* valid when has_sha256 */
	unsigned char tree_sha256[LOCK_TREE_DIGEST]; /* valid when has_tree */
	char commit[LOCK_COMMIT_MAX + 1]; /* valid when has_commit: a record, never fetched by */
	uint64_t size; /* valid when has_size */
	bool has_size, has_sha256, has_tree, has_commit;
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
/* A git object id: 40 or 64 lowercase hex digits. */
bool lock_valid_commit(const char *s, size_t len);
/* A lock's version: the artifact's own version string, 1..LOCK_MAX_VERSION of
 * letters, digits and LOCK_VERSION_PUNCT; the one definition of that set
 * (envd's stricter grammar is version.h's). */
#define LOCK_VERSION_PUNCT "._-+~"
bool lock_version_char(char c);
bool lock_valid_version(const char *s, size_t len);
/* A tree pin, "sha256-<base64 of 32 bytes>" (SRI form, canonical padding). */
int lock_parse_tree_sha256(const char *s, size_t len, unsigned char digest[LOCK_TREE_DIGEST]);
/* Decimal, no sign, no leading zero, 1 .. 2^63-1. */
int lock_parse_size(const char *s, size_t len, uint64_t *out);

#endif
