/* See mmds_client.h. */
#include "mmds_client.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fileio.h"

#define RESPONSE_MAX 8192

int mmds_control_open(const char *path, int timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = timeout_ms % 1000 * 1000 };

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Bounds the connect (a full backlog) and every send of the calls. */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	return TAKE_FD(fd);
}

long mmds_response_parse(const char *buf, size_t len, int *status)
{
	const char *end = NULL;
	uint64_t content_length = 0;

	if (memcmp(buf, "HTTP/1.1 ", len < 9 ? len : 9) != 0)
		return -EPROTO;
	for (size_t i = 3; i < len; i++)
		if (memcmp(buf + i - 3, "\r\n\r\n", 4) == 0) {
			end = buf + i + 1;
			break;
		}
	if (!end)
		return len >= RESPONSE_MAX ? -EPROTO : 0;
	if (end - buf < 14 || buf[9] < '1' || buf[9] > '5' || buf[10] < '0' || buf[10] > '9' || buf[11] < '0' ||
	    buf[11] > '9' || buf[12] != ' ')
		return -EPROTO;
	*status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
	/* Headers: only Content-Length matters; the server sends it on every
	 * answer (no chunked encoding). */
	for (const char *line = memchr(buf, '\n', (size_t)(end - buf)) + 1; line < end - 2;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		static const char cl[] = "Content-Length:";
		if (!nl)
			return -EPROTO;
		if ((size_t)(nl - line) > sizeof(cl) - 1 && strncasecmp(line, cl, sizeof(cl) - 1) == 0) {
			const char *v = line + sizeof(cl) - 1;
			while (*v == ' ')
				v++;
			content_length = 0;
			if (*v < '0' || *v > '9')
				return -EPROTO;
			for (; *v >= '0' && *v <= '9'; v++)
				if ((content_length = content_length * 10 + (uint64_t)(*v - '0')) > RESPONSE_MAX)
					return -EPROTO;
			if (*v != '\r')
				return -EPROTO;
		}
		line = nl + 1;
	}
	size_t total = (size_t)(end - buf) + content_length;
	return len >= total ? (long)total : 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int mmds_control_call(int fd, const char *method, const char *target, const char *body, size_t len,
		      int timeout_ms, int *status, char *why, size_t why_len)
{
	char head[256], answer[RESPONSE_MAX];
	size_t have = 0;
	int64_t deadline = now_ms() + timeout_ms;
	int n = snprintf(head, sizeof(head),
			 "%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\n\r\n",
			 method, target, len);
	int r = write_all(fd, head, (size_t)n);

	if (r == 0 && len)
		r = write_all(fd, body, len);
	if (r < 0) {
		snprintf(why, why_len, "%s %s: sending: %s", method, target, strerror(-r));
		return r;
	}
	for (;;) {
		long t = mmds_response_parse(answer, have, status);
		if (t > 0)
			return 0;
		if (t < 0) {
			snprintf(why, why_len, "%s %s: not an HTTP/1.1 answer", method, target);
			return -EPROTO;
		}
		int64_t left = deadline - now_ms();
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			snprintf(why, why_len, "%s %s: no answer within %d ms", method, target, timeout_ms);
			return -ETIMEDOUT;
		}
		ssize_t got = read(fd, answer + have, sizeof(answer) - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			snprintf(why, why_len, "%s %s: connection closed before the answer", method, target);
			return -ECONNRESET;
		}
		have += (size_t)got;
	}
}
