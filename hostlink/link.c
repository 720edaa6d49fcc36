#include "link.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "io.h"
#include "handshake.h"
#include "vsock_ports.h"

__attribute__((format(printf, 4, 5)))
static int fail(int code, char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
	return code;
}

const char *link_name(const struct link *link)
{
	static char name[sizeof(link->path) + 16];

	if (link->kind == LINK_UDS)
		snprintf(name, sizeof(name), "%s", link->path);
	else
		snprintf(name, sizeof(name), "cid %u", link->cid);
	return name;
}

/* EAGAIN from a unix connect: the VMM's listen backlog is full. The
 * connection was not queued; try again every few ms until the deadline. */
#define BACKLOG_RETRY_MS 10

static int connect_once(const struct link *link, uint32_t vport, int64_t deadline)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct sockaddr_vm vm = { .svm_family = AF_VSOCK, .svm_cid = link->cid, .svm_port = vport };
	const struct sockaddr *sa = link->kind == LINK_UDS ? (const struct sockaddr *)&un : (const struct sockaddr *)&vm;
	socklen_t sl = link->kind == LINK_UDS ? sizeof(un) : sizeof(vm);
	_cleanup_close_ int fd = socket(link->kind == LINK_UDS ? AF_UNIX : AF_VSOCK,
					 SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int err = 0, r;
	socklen_t el = sizeof(err);

	if (fd < 0)
		return -errno;
	memcpy(un.sun_path, link->path, strlen(link->path));
	if (connect(fd, sa, sl) < 0) {
		if (errno == EAGAIN && link->kind == LINK_UDS)
			return -EAGAIN;
		if (errno != EINPROGRESS)
			return -errno;
		r = io_wait(fd, POLLOUT, deadline);
		if (r < 0)
			return r;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			return -errno;
		if (err)
			return -err;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)
		return -errno;
	return TAKE_FD(fd);
}

static int connect_transport(const struct link *link, uint32_t vport, int64_t deadline, bool *backlog_full)
{
	for (;;) {
		int fd = connect_once(link, vport, deadline);
		if (fd != -EAGAIN)
			return fd;
		*backlog_full = true;
		int64_t left = deadline - io_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct timespec pause = { 0, (left < BACKLOG_RETRY_MS ? left : BACKLOG_RETRY_MS) * 1000000L };
		nanosleep(&pause, NULL);
	}
}

/* One reply line, byte by byte: nothing after the '\n' is consumed, so the
 * guest's first bytes stay in the socket for whoever reads next. */
static int read_line(int fd, char *line, size_t max, int64_t deadline)
{
	size_t n = 0;

	while (n < max) {
		int r = io_wait(fd, POLLIN, deadline);
		if (r < 0)
			return r;
		ssize_t got = recv(fd, line + n, 1, 0);
		if (got == 0)
			return n ? -EPROTO : -ECONNRESET;
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (line[n++] == '\n')
			return (int)n;
	}
	return -EPROTO;
}

/* "CONNECT <port>\n" and its one-line answer. */
static int exchange(int fd, uint32_t port, int want_number, int64_t deadline, char *why, size_t why_len)
{
	char line[HANDSHAKE_LINE_MAX];
	uint32_t number;
	int n = handshake_format_connect(line, sizeof(line), port), r;

	if (n < 0)
		return n;
	r = io_send_all(fd, line, (size_t)n, deadline);
	if (r < 0)
		return r;
	n = read_line(fd, line, sizeof(line), deadline);
	if (n < 0)
		return n;
	return handshake_parse_reply(line, (size_t)n, want_number, &number, why, why_len);
}

int link_open(const struct link *link, uint32_t vport, char *why, size_t why_len)
{
	int64_t deadline = io_now_ms() + link->timeout_ms;
	bool backlog_full = false;
	_cleanup_close_ int fd = connect_transport(link, vport, deadline, &backlog_full);
	int r;

	if (fd == -ENOENT || (fd == -ECONNREFUSED && link->kind == LINK_UDS))
		return fail(fd, why, why_len, "%s: %s (is the VM running, with its vsock device at this path?)",
			    link->kind == LINK_UDS ? "no such socket" : "cannot connect", strerror(-fd));
	if (fd == -ETIMEDOUT)
		return fail(fd, why, why_len, "vsock port %u: connect timed out after %d ms%s", vport, link->timeout_ms,
			    backlog_full ? " (the VMM's socket kept its listen backlog full)" : "");
	if (fd < 0 && link->kind == LINK_CID)
		return fail(fd, why, why_len, "vsock port %u: %s%s", vport, strerror(-fd),
			    fd == -ECONNRESET || fd == -ECONNREFUSED ? " (nothing listens on that guest port)" : "");
	if (fd < 0)
		return fail(fd, why, why_len, "%s", strerror(-fd));
	if (link->kind == LINK_CID)
		return TAKE_FD(fd);
	r = exchange(fd, vport, 1, deadline, why, why_len);
	if (r == -ECONNRESET)
		return fail(r, why, why_len, "vsock port %u: handshake refused: the VMM closed the connection "
			    "(nothing listens on that guest port)", vport);
	if (r == -ETIMEDOUT)
		return fail(r, why, why_len, "vsock port %u: no handshake answer within %d ms", vport, link->timeout_ms);
	if (r == -EPROTO || r == -ECONNREFUSED) {
		char inner[HANDSHAKE_LINE_MAX];
		snprintf(inner, sizeof(inner), "%s", why);
		return fail(-EPROTO, why, why_len, "vsock port %u: bad handshake answer: %s", vport, inner);
	}
	if (r < 0)
		return fail(r, why, why_len, "vsock port %u: handshake: %s", vport, strerror(-r));
	return TAKE_FD(fd);
}

int link_open_loopback(const struct link *link, uint16_t port, char *why, size_t why_len)
{
	int64_t deadline = io_now_ms() + link->timeout_ms;
	_cleanup_close_ int fd = -1;
	int r;

	if (port == VSOCK_PORT_ENVD || port == VSOCK_PORT_CODE_INTERPRETER)
		return link_open(link, port, why, why_len);
	fd = link_open(link, VSOCK_PORT_RELAY, why, why_len);
	if (fd < 0)
		return fd;
	r = exchange(fd, port, 0, deadline, why, why_len);
	if (r == -ECONNREFUSED) {
		char inner[HANDSHAKE_LINE_MAX];
		snprintf(inner, sizeof(inner), "%s", why);
		return fail(r, why, why_len, "guest port %u refused by the relay (vsock port %u): %s", port,
			    VSOCK_PORT_RELAY, inner);
	}
	if (r == -ECONNRESET)
		return fail(r, why, why_len, "guest port %u: the relay (vsock port %u) closed without an answer",
			    port, VSOCK_PORT_RELAY);
	if (r == -ETIMEDOUT)
		return fail(r, why, why_len, "guest port %u: no answer from the relay (vsock port %u) within %d ms",
			    port, VSOCK_PORT_RELAY, link->timeout_ms);
	if (r == -EPROTO) {
		char inner[HANDSHAKE_LINE_MAX];
		snprintf(inner, sizeof(inner), "%s", why);
		return fail(r, why, why_len, "guest port %u: the relay (vsock port %u) answered badly: %s", port,
			    VSOCK_PORT_RELAY, inner);
	}
	if (r < 0)
		return fail(r, why, why_len, "guest port %u: the relay (vsock port %u): %s", port, VSOCK_PORT_RELAY,
			    strerror(-r));
	return TAKE_FD(fd);
}
