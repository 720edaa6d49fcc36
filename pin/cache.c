#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int mkdir_parents(const char *path)
{
	char *p = strdup(path);
	int r = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char saved = *s;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			r = -errno;
			break;
		}
		*s = saved;
		if (!saved)
			break;
	}
	free(p);
	if (r == 0) {
		struct stat st;
		if (stat(path, &st) < 0)
			r = -errno;
		else if (!S_ISDIR(st.st_mode))
			r = -ENOTDIR;
	}
	return r;
}

int cache_open(struct cache *c, const char *dir, const char *kind)
{
	char *locks = NULL;
	int r;

	*c = (struct cache)CACHE_INIT;
	if (!(c->dir = strdup(dir)) || asprintf(&c->entries, "%s/%s", dir, kind) < 0 ||
	    asprintf(&locks, "%s/locks", dir) < 0) {
		c->entries = NULL;
		r = -ENOMEM;
		goto fail;
	}
	if ((r = mkdir_parents(c->entries)) < 0 || (r = mkdir_parents(locks)) < 0)
		goto fail;
	c->entries_fd = open(c->entries, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->entries_fd < 0) {
		r = -errno;
		goto fail;
	}
	c->locks_fd = open(locks, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->locks_fd < 0) {
		r = -errno;
		goto fail;
	}
	free(locks);
	return 0;
fail:
	free(locks);
	cache_close(c);
	return r;
}

void cache_close(struct cache *c)
{
	if (c->entries_fd >= 0)
		close(c->entries_fd);
	if (c->locks_fd >= 0)
		close(c->locks_fd);
	free(c->dir);
	free(c->entries);
	*c = (struct cache)CACHE_INIT;
}

int cache_lock_entry(struct cache *c, const char *hex)
{
	char name[80];
	int fd;

	snprintf(name, sizeof(name), "%s.lock", hex);
	fd = openat(c->locks_fd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX) < 0) {
		/* EINTR included: a signal while waiting means stop, not retry. */
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

int cache_open_entry(struct cache *c, const char *hex)
{
	int fd = openat(c->entries_fd, hex, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EBADMSG;
	}
	return fd;
}

int cache_drop_entry(struct cache *c, const char *hex)
{
	if (unlinkat(c->entries_fd, hex, 0) < 0 && errno != ENOENT)
		return -errno;
	return fsync(c->entries_fd) < 0 ? -errno : 0;
}

char *cache_entry_path(const struct cache *c, const char *hex)
{
	char *p;

	return asprintf(&p, "%s/%s", c->entries, hex) < 0 ? NULL : p;
}
