#include "io.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

int64_t io_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int io_wait(int fd, short events, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };

	for (;;) {
		int64_t left = deadline - io_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		int r = poll(&p, 1, (int)left);
		if (r > 0)
			return 0;
		if (r == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

int io_send_all(int fd, const char *buf, size_t len, int64_t deadline)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			int r = io_wait(fd, POLLOUT, deadline);
			if (r < 0)
				return r;
			continue;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}
