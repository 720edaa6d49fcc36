#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"

int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int read_small_fd(int fd, size_t max, char **out, size_t *len)
{
	_cleanup_free_ char *buf = malloc(max + 1);
	size_t have = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + have, max + 1 - have);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		have += (size_t)n;
		if (have > max)
			return -EFBIG;
	}
	buf[have] = '\0';
	*len = have;
	*out = TAKE_PTR(buf);
	return 0;
}

int read_small_file(const char *path, size_t max, char **out, size_t *len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	return read_small_fd(fd, max, out, len);
}

/* "<dir>/.<name>.XXXXXX" for path "<dir>/<name>". */
static int hidden_temp_name(const char *path, char **out)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	int dir_len = slash ? (int)(slash - path) + 1 : 0;

	if (!*name)
		return -EISDIR;
	if (asprintf(out, "%.*s.%s.XXXXXX", dir_len, path, name) < 0)
		return -ENOMEM;
	return 0;
}

int write_file_replacing(const char *path, const void *buf, size_t len, mode_t mode)
{
	_cleanup_free_ char *tmp = NULL;
	int r = hidden_temp_name(path, &tmp);
	if (r < 0)
		return r;
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = fchmod(fd, mode) < 0 ? -errno : 0;
	if (r == 0)
		r = write_all(fd, buf, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		(void)unlink(tmp);
	return r;
}
