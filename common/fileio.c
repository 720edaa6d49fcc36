#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
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
