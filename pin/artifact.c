/* The artifact to fetch: a stanza of a lock, or the command line's pin. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "fileio.h"
#include "lock.h"
#include "pinfetch.h"

void artifact_free(struct artifact *a)
{
	free(a->name);
	free(a->version);
	free(a->url);
	a->name = a->version = a->url = NULL;
}

/* The last path segment of a URL, if it makes a valid artifact name. */
char *artifact_name_from_url(const char *url)
{
	const char *end = url + strcspn(url, "?#"), *start = end;

	while (start > url && start[-1] != '/')
		start--;
	if (lock_valid_name(start, (size_t)(end - start)))
		return strndup(start, (size_t)(end - start));
	return strdup("artifact");
}

/* A path segment like "v0.8.0" or "1.2.3" in a release URL, without the "v":
 * a valid lock version that starts with a digit and has a dot. */
char *artifact_version_from_url(const char *url)
{
	const char *p = strstr(url, "://");
	const char *end = url + strcspn(url, "?#");

	p = p ? strchr(p + 3, '/') : NULL;
	while (p && p < end) {
		const char *seg = p + 1, *seg_end = seg + strcspn(seg, "/?#");
		size_t len;

		if (seg_end > seg && *seg == 'v')
			seg++;
		len = (size_t)(seg_end - seg);
		if (len > 0 && *seg >= '0' && *seg <= '9' && memchr(seg, '.', len) && seg_end < end &&
		    lock_valid_version(seg, len))
			return strndup(seg, len);
		p = *seg_end == '/' ? seg_end : NULL;
	}
	return NULL;
}

static void list_names(const struct lock *lock, char *names, size_t size)
{
	names[0] = '\0';
	for (size_t i = 0; i < lock->n; i++) {
		if (i)
			strncat(names, ", ", size - strlen(names) - 1);
		strncat(names, lock->entries[i].name, size - strlen(names) - 1);
	}
}

/* Trees are cached and mirrored under their tree pin, files under their sha256. */
void artifact_set_key(struct artifact *a)
{
	if (a->has_tree)
		nar_hex(a->tree_sha256, a->key);
	else
		memcpy(a->key, a->sha256, SHA256_HEX_SIZE);
}

static int artifact_from_entry(const struct lock_entry *e, struct artifact *a)
{
	a->name = strdup(e->name);
	a->version = strdup(e->version);
	a->url = strdup(e->url);
	memcpy(a->sha256, e->sha256, SHA256_HEX_SIZE);
	memcpy(a->tree_sha256, e->tree_sha256, NAR_DIGEST_SIZE);
	a->has_sha256 = e->has_sha256;
	a->has_tree = e->has_tree;
	memcpy(a->commit, e->commit, sizeof(a->commit));
	a->has_commit = e->has_commit;
	a->has_size = e->has_size;
	a->size = e->size;
	artifact_set_key(a);
	return a->name && a->version && a->url ? 0 : -ENOMEM;
}

int artifact_from_lock(const char *path, const char *name, struct artifact *a, char *why, size_t why_len)
{
	_cleanup_free_ char *buf = NULL;
	struct lock lock;
	struct lock_error err;
	size_t len = 0;
	char names[256];
	int r;

	r = read_small_file(path, LOCK_MAX_BYTES, &buf, &len);
	if (r < 0) {
		snprintf(why, why_len, "%s: cannot read the lock file: %s", path,
			 r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
		return -EINVAL;
	}
	r = lock_parse(buf, len, &lock, &err);
	if (r < 0) {
		if (err.line)
			snprintf(why, why_len, "%s:%u: %s", path, err.line, err.msg);
		else
			snprintf(why, why_len, "%s: %s", path, err.msg);
		return -EINVAL;
	}
	const struct lock_entry *e = lock_find(&lock, name);
	if (!e) {
		list_names(&lock, names, sizeof(names));
		snprintf(why, why_len, "%s: no [%s] stanza (it has: %s)", path, name, names);
		r = -EINVAL;
	} else {
		r = artifact_from_entry(e, a);
		if (r < 0)
			snprintf(why, why_len, "%s: out of memory", path);
	}
	lock_free(&lock);
	return r;
}

int artifact_from_args(const struct options *o, struct artifact *a, char *why, size_t why_len)
{
	if (o->sha256 && !lock_valid_sha256(o->sha256, strlen(o->sha256))) {
		snprintf(why, why_len, "--sha256 must be 64 lowercase hex digits");
		return -EINVAL;
	}
	if (o->tree_sha256 && lock_parse_tree_sha256(o->tree_sha256, strlen(o->tree_sha256), a->tree_sha256) < 0) {
		snprintf(why, why_len, "--tree-sha256 must be \"sha256-\" and 44 base64 characters");
		return -EINVAL;
	}
	if (o->sha256)
		memcpy(a->sha256, o->sha256, SHA256_HEX_SIZE);
	a->has_sha256 = o->sha256 != NULL;
	a->has_tree = o->tree_sha256 != NULL;
	artifact_set_key(a);
	if (o->size) {
		if (lock_parse_size(o->size, strlen(o->size), &a->size) < 0) {
			snprintf(why, why_len, "--size must be a decimal byte count");
			return -EINVAL;
		}
		a->has_size = true;
	}
	if (o->name && !lock_valid_name(o->name, strlen(o->name))) {
		snprintf(why, why_len, "--name: invalid artifact name \"%s\"", o->name);
		return -EINVAL;
	}
	a->name = o->name ? strdup(o->name) : artifact_name_from_url(o->url);
	a->url = strdup(o->url);
	if (!a->name || !a->url) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	return 0;
}
