#include "lock.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum key { KEY_VERSION, KEY_URL, KEY_SHA256, KEY_SIZE, KEY_TREE_SHA256, KEY_COMMIT, KEY_COUNT };
static const char *const key_names[KEY_COUNT] = { "version", "url", "sha256", "size", "tree_sha256", "commit" };

__attribute__((format(printf, 3, 4)))
static int fail(struct lock_error *err, unsigned line, const char *fmt, ...)
{
	va_list ap;

	err->line = line;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* strndup() for a slice of a buffer that need not be NUL-terminated anywhere
 * (strict string checks would flag strndup's strnlen past the slice). */
static char *slice_dup(const char *s, size_t len)
{
	char *p = malloc(len + 1);

	if (p) {
		memcpy(p, s, len);
		p[len] = '\0';
	}
	return p;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

bool lock_valid_name(const char *s, size_t len)
{
	if (len == 0 || len > LOCK_MAX_NAME)
		return false;
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static bool lowercase_hex(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

bool lock_valid_sha256(const char *s, size_t len)
{
	return len == SHA256_HEX_LEN && lowercase_hex(s, len);
}

bool lock_valid_commit(const char *s, size_t len)
{
	return (len == 40 || len == 64) && lowercase_hex(s, len);
}

int lock_parse_size(const char *s, size_t len, uint64_t *out)
{
	uint64_t n = 0;

	if (len == 0 || len > 19 || (s[0] == '0'))
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		n = n * 10 + (uint64_t)(s[i] - '0'); /* 19 digits cannot overflow uint64 */
	}
	if (n > INT64_MAX)
		return -EINVAL;
	*out = n;
	return 0;
}

bool lock_version_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr(LOCK_VERSION_PUNCT, c) != NULL);
}

bool lock_valid_version(const char *s, size_t len)
{
	if (len == 0 || len > LOCK_MAX_VERSION)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!lock_version_char(s[i]))
			return false;
	return true;
}

static bool valid_url(const char *s, size_t len)
{
	size_t scheme;

	if (len >= 8 && memcmp(s, "https://", 8) == 0)
		scheme = 8;
	else if (len >= 7 && memcmp(s, "http://", 7) == 0)
		scheme = 7;
	else
		return false;
	if (len == scheme)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

static int b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int lock_parse_tree_sha256(const char *s, size_t len, unsigned char digest[LOCK_TREE_DIGEST])
{
	unsigned char out[33];
	int v[44];

	/* 32 bytes are 43 base64 characters and one "=". */
	if (len != LOCK_TREE_SRI_LEN || memcmp(s, "sha256-", 7) != 0 || s[7 + 43] != '=')
		return -EINVAL;
	for (int i = 0; i < 43; i++)
		if ((v[i] = b64_value(s[7 + i])) < 0)
			return -EINVAL;
	if (v[42] & 3) /* non-canonical: bits past the 32nd byte must be zero */
		return -EINVAL;
	v[43] = 0;
	for (int g = 0; g < 11; g++) {
		unsigned w = (unsigned)(v[4 * g] << 18 | v[4 * g + 1] << 12 | v[4 * g + 2] << 6 | v[4 * g + 3]);
		out[3 * g] = (unsigned char)(w >> 16);
		out[3 * g + 1] = (unsigned char)(w >> 8);
		if (3 * g + 2 < 33)
			out[3 * g + 2] = (unsigned char)w;
	}
	memcpy(digest, out, LOCK_TREE_DIGEST);
	return 0;
}

static int check_complete(const struct lock_entry *e, const bool seen[KEY_COUNT], struct lock_error *err)
{
	for (int k = 0; k < KEY_COUNT; k++)
		if (!seen[k] && (k == KEY_VERSION || k == KEY_URL))
			return fail(err, e->line, "[%s]: missing \"%s\"", e->name, key_names[k]);
	if (!seen[KEY_SHA256] && !seen[KEY_TREE_SHA256])
		return fail(err, e->line, "[%s]: missing \"sha256\" or \"tree_sha256\" (pin the bytes, the unpacked tree, or both)",
			    e->name);
	return 0;
}

static void entry_free(struct lock_entry *e)
{
	free(e->name);
	free(e->version);
	free(e->url);
}

void lock_free(struct lock *lock)
{
	for (size_t i = 0; i < lock->n; i++)
		entry_free(&lock->entries[i]);
	free(lock->entries);
	lock->entries = NULL;
	lock->n = 0;
}

const struct lock_entry *lock_find(const struct lock *lock, const char *name)
{
	for (size_t i = 0; i < lock->n; i++)
		if (strcmp(lock->entries[i].name, name) == 0)
			return &lock->entries[i];
	return NULL;
}

static int parse_line(struct lock *lock, bool seen[KEY_COUNT], const char *p, const char *end,
		      unsigned lineno, struct lock_error *err)
{
	struct lock_entry *cur = lock->n ? &lock->entries[lock->n - 1] : NULL;
	const char *q;

	for (q = p; q < end; q++) {
		if (*q == '\0')
			return fail(err, lineno, "NUL byte");
		if (*q == '\r')
			return fail(err, lineno, "carriage return (use LF line endings)");
		if ((unsigned char)*q < 0x20 && *q != '\t')
			return fail(err, lineno, "control character 0x%02x", (unsigned)(unsigned char)*q);
	}
	if (end - p > LOCK_MAX_LINE)
		return fail(err, lineno, "line longer than %d bytes", LOCK_MAX_LINE);

	/* A comment starts at a '#' at the start of the line or after a blank;
	 * values never contain blanks, so this is unambiguous. */
	for (q = p; q < end; q++)
		if (*q == '#' && (q == p || is_blank(q[-1]))) {
			end = q;
			break;
		}
	while (p < end && is_blank(*p))
		p++;
	while (end > p && is_blank(end[-1]))
		end--;
	if (p == end)
		return 0;

	if (*p == '[') {
		const char *name = p + 1, *close = memchr(name, ']', (size_t)(end - name));

		if (!close || close + 1 != end)
			return fail(err, lineno, "malformed stanza header (expected \"[name]\")");
		if (!lock_valid_name(name, (size_t)(close - name)))
			return fail(err, lineno, "invalid artifact name (letters, digits, '.', '_', '-'; at most %d)",
				    LOCK_MAX_NAME);
		if (cur) {
			int r = check_complete(cur, seen, err);
			if (r < 0)
				return r;
		}
		for (size_t i = 0; i < lock->n; i++)
			if (strlen(lock->entries[i].name) == (size_t)(close - name) &&
			    memcmp(lock->entries[i].name, name, (size_t)(close - name)) == 0)
				return fail(err, lineno, "duplicate artifact [%s] (first on line %u)",
					    lock->entries[i].name, lock->entries[i].line);
		if (lock->n == LOCK_MAX_ENTRIES)
			return fail(err, lineno, "more than %d artifacts", LOCK_MAX_ENTRIES);
		struct lock_entry *grown = realloc(lock->entries, (lock->n + 1) * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		lock->entries = grown;
		cur = &lock->entries[lock->n];
		memset(cur, 0, sizeof(*cur));
		cur->line = lineno;
		cur->name = slice_dup(name, (size_t)(close - name));
		if (!cur->name)
			return -ENOMEM;
		lock->n++;
		memset(seen, 0, KEY_COUNT * sizeof(bool));
		return 0;
	}

	/* key = value */
	const char *key = p, *key_end = p;
	while (key_end < end && !is_blank(*key_end) && *key_end != '=')
		key_end++;
	q = key_end;
	while (q < end && is_blank(*q))
		q++;
	if (q == end || *q != '=' || key_end == key)
		return fail(err, lineno, "expected \"key = value\" or \"[name]\"");
	q++;
	while (q < end && is_blank(*q))
		q++;
	const char *val = q;
	size_t vlen = (size_t)(end - val);
	for (const char *b = val; b < end; b++)
		if (is_blank(*b))
			return fail(err, lineno, "value contains a blank");
	if (vlen == 0)
		return fail(err, lineno, "empty value");

	int k;
	for (k = 0; k < KEY_COUNT; k++)
		if (strlen(key_names[k]) == (size_t)(key_end - key) && memcmp(key_names[k], key, (size_t)(key_end - key)) == 0)
			break;
	if (k == KEY_COUNT)
		return fail(err, lineno, "unknown key \"%.*s\" (known: version, url, sha256, tree_sha256, size, commit)",
			    (int)((key_end - key) > 32 ? 32 : (key_end - key)), key);
	if (!cur)
		return fail(err, lineno, "\"%s\" before any [name] stanza", key_names[k]);
	if (seen[k])
		return fail(err, lineno, "[%s]: duplicate key \"%s\"", cur->name, key_names[k]);
	seen[k] = true;

	switch (k) {
	case KEY_VERSION:
		if (!lock_valid_version(val, vlen))
			return fail(err, lineno, "[%s]: invalid version (letters, digits and \"" LOCK_VERSION_PUNCT "\")",
				    cur->name);
		if (!(cur->version = slice_dup(val, vlen)))
			return -ENOMEM;
		break;
	case KEY_URL:
		if (!valid_url(val, vlen))
			return fail(err, lineno, "[%s]: url must be an https:// (or http://) URL", cur->name);
		if (!(cur->url = slice_dup(val, vlen)))
			return -ENOMEM;
		break;
	case KEY_SHA256:
		if (vlen != SHA256_HEX_LEN)
			return fail(err, lineno, "[%s]: sha256 must be %d hex digits, got %zu", cur->name,
				    SHA256_HEX_LEN, vlen);
		if (!lock_valid_sha256(val, vlen))
			return fail(err, lineno, "[%s]: sha256 must be lowercase hex (0-9, a-f)", cur->name);
		memcpy(cur->sha256, val, SHA256_HEX_LEN);
		cur->sha256[SHA256_HEX_LEN] = '\0';
		cur->has_sha256 = true;
		break;
	case KEY_TREE_SHA256:
		if (lock_parse_tree_sha256(val, vlen, cur->tree_sha256) < 0)
			return fail(err, lineno, "[%s]: tree_sha256 must be \"sha256-\" and 44 base64 characters "
				    "(what pinfetch --print-pin or --hash-tree prints)", cur->name);
		cur->has_tree = true;
		break;
	case KEY_COMMIT:
		if (!lock_valid_commit(val, vlen))
			return fail(err, lineno, "[%s]: commit must be a git commit id, 40 (or 64) lowercase hex digits",
				    cur->name);
		memcpy(cur->commit, val, vlen);
		cur->commit[vlen] = '\0';
		cur->has_commit = true;
		break;
	case KEY_SIZE:
		if (lock_parse_size(val, vlen, &cur->size) < 0)
			return fail(err, lineno, "[%s]: size must be a decimal byte count without leading zeros",
				    cur->name);
		cur->has_size = true;
		break;
	}
	return 0;
}

int lock_parse(const char *buf, size_t len, struct lock *lock, struct lock_error *err)
{
	bool seen[KEY_COUNT] = { false };
	const char *p = buf, *end = buf + len;
	unsigned lineno = 0;
	int r = 0;

	lock->entries = NULL;
	lock->n = 0;
	err->line = 0;
	err->msg[0] = '\0';
	if (len > LOCK_MAX_BYTES)
		return fail(err, 0, "larger than %d bytes", LOCK_MAX_BYTES);

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *line_end = nl ? nl : end;

		lineno++;
		r = parse_line(lock, seen, p, line_end, lineno, err);
		if (r < 0)
			goto out;
		p = nl ? nl + 1 : end;
	}
	if (lock->n == 0) {
		r = fail(err, 0, "no [name] stanza");
		goto out;
	}
	r = check_complete(&lock->entries[lock->n - 1], seen, err);
out:
	if (r == -ENOMEM)
		fail(err, lineno, "out of memory");
	if (r < 0)
		lock_free(lock);
	return r;
}
