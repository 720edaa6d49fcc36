#include "atomicfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>


static int split_path(const char *path, char **dir, char **base)
{
	const char *slash = strrchr(path, '/');

	if (!*path || (slash && !slash[1]))
		return -EISDIR;
	if (!slash) {
		*dir = strdup(".");
		*base = strdup(path);
	} else {
		*dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
		*base = strdup(slash + 1);
	}
	if (!*dir || !*base) {
		free(*dir);
		free(*base);
		return -ENOMEM;
	}
	if (strcmp(*base, ".") == 0 || strcmp(*base, "..") == 0) {
		free(*dir);
		free(*base);
		return -EISDIR;
	}
	return 0;
}

/* A hidden name beside the destination: ".<base>.pin-<random>". */
static char *temp_name(const char *base)
{
	unsigned char rnd[6];
	char *name;

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return NULL;
	if (asprintf(&name, ".%.200s.pin-%02x%02x%02x%02x%02x%02x", base, rnd[0], rnd[1], rnd[2], rnd[3],
		     rnd[4], rnd[5]) < 0)
		return NULL;
	return name;
}

int atomic_file_open(struct atomic_file *af, const char *path, mode_t mode)
{
	char *dir = NULL;
	int r;

	*af = (struct atomic_file)ATOMIC_FILE_INIT;
	af->mode = mode;
	r = split_path(path, &dir, &af->base);
	if (r < 0)
		return r;
	af->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (af->dirfd < 0) {
		r = -errno;
		goto fail;
	}

	/* rename(2) would refuse a directory only after all the work. */
	struct stat st;
	if (fstatat(af->dirfd, af->base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
		r = -EISDIR;
		goto fail;
	}

	af->fd = openat(af->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	/* Linking an O_TMPFILE in goes through /proc/self/fd without privileges. */
	if (af->fd >= 0 && access("/proc/self/fd", X_OK) < 0) {
		close(af->fd);
		af->fd = -1;
		errno = EOPNOTSUPP;
	}
	if (af->fd < 0) {
		if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
			r = -errno;
			goto fail;
		}
		for (int tries = 0; tries < 16 && af->fd < 0; tries++) {
			free(af->tmpname);
			af->tmpname = temp_name(af->base);
			if (!af->tmpname) {
				r = -ENOMEM;
				goto fail;
			}
			af->fd = openat(af->dirfd, af->tmpname, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
			if (af->fd < 0 && errno != EEXIST) {
				r = -errno;
				goto fail;
			}
		}
		if (af->fd < 0) {
			r = -EEXIST;
			goto fail;
		}
	}
	return 0;
fail:
	atomic_file_abort(af);
	return r;
}

int atomic_file_reset(struct atomic_file *af)
{
	if (ftruncate(af->fd, 0) < 0 || lseek(af->fd, 0, SEEK_SET) < 0)
		return -errno;
	return 0;
}

/* The file at tmpname in dirfd is still the one we wrote: a named temporary
 * sits in a directory others may write to, and rename(2) moves a name. */
static int check_same_file(const struct atomic_file *af, const char *name)
{
	struct stat ours, there;

	if (fstat(af->fd, &ours) < 0)
		return -errno;
	if (fstatat(af->dirfd, name, &there, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? -ESTALE : -errno;
	return ours.st_dev == there.st_dev && ours.st_ino == there.st_ino ? 0 : -ESTALE;
}

/* An O_TMPFILE gets a hidden name through /proc/self/fd (no privilege needed). */
static int link_tmpfile(struct atomic_file *af)
{
	char proc[64];
	int r;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", af->fd);
	for (int tries = 0; tries < 16; tries++) {
		af->tmpname = temp_name(af->base);
		if (!af->tmpname)
			return -ENOMEM;
		if (linkat(AT_FDCWD, proc, af->dirfd, af->tmpname, AT_SYMLINK_FOLLOW) == 0)
			return 0;
		r = -errno;
		free(af->tmpname);
		af->tmpname = NULL;
		if (r != -EEXIST)
			return r;
	}
	return -EEXIST;
}

int atomic_file_commit(struct atomic_file *af)
{
	int r;

	af->in_place = false;
	/* The final mode only now: until verified, the content is ours alone. */
	if (fchmod(af->fd, af->mode) < 0 || fsync(af->fd) < 0)
		return -errno;
	if (!af->tmpname && (r = link_tmpfile(af)) < 0)
		return r;
	if ((r = check_same_file(af, af->tmpname)) < 0)
		return r;
	if (renameat(af->dirfd, af->tmpname, af->dirfd, af->base) < 0)
		return -errno;
	free(af->tmpname);
	af->tmpname = NULL;
	af->in_place = true;
	if (fsync(af->dirfd) < 0)
		return -errno;
	return 0;
}

void atomic_file_abort(struct atomic_file *af)
{
	if (af->tmpname && af->dirfd >= 0)
		unlinkat(af->dirfd, af->tmpname, 0);
	free(af->tmpname);
	af->tmpname = NULL;
	free(af->base);
	af->base = NULL;
	if (af->fd >= 0)
		close(af->fd);
	af->fd = -1;
	if (af->dirfd >= 0)
		close(af->dirfd);
	af->dirfd = -1;
}
