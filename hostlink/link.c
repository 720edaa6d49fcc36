#include "link.h"

#include <errno.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "io.h"
#include "text.h"
#include "vsock_ports.h"

/* EAGAIN from a unix connect: the VMM's listen backlog is full and the
 * connection was not queued; try again this often until the deadline. */
#define BACKLOG_RETRY_MS 10

enum phase {
	DIAL_CONNECT,     /* no socket yet, or waiting out a full backlog */
	DIAL_CONNECTING,  /* connect in progress */
	DIAL_VSOCK_SEND,  /* hybrid vsock: "CONNECT <vsock port>\n" */
	DIAL_VSOCK_READ,  /* "OK <n>\n" */
	DIAL_RELAY_SEND,  /* the dynamic relay: "CONNECT <loopback port>\n" */
	DIAL_RELAY_READ,  /* "OK\n" or "ERR ...\n" */
	DIAL_OPEN,
};

__attribute__((format(printf, 4, 5)))
static int fail(int code, char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
	return code;
}

int64_t link_end(const struct link *link)
{
	return link->deadline ? link->deadline : io_now_ms() + link->timeout_ms;
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

static void dial_init(struct link_dial *d, const struct link *link, uint32_t vport, uint16_t guest_port)
{
	*d = (struct link_dial){ .link = link, .fd = -1, .phase = DIAL_CONNECT, .vport = vport,
				 .guest_port = guest_port, .deadline = link_end(link) };
}

void link_dial_vsock(struct link_dial *d, const struct link *link, uint32_t vport)
{
	dial_init(d, link, vport, 0);
}

void link_dial_loopback(struct link_dial *d, const struct link *link, uint16_t port)
{
	if (port == VSOCK_PORT_ENVD || port == VSOCK_PORT_CODE_INTERPRETER)
		dial_init(d, link, port, 0);
	else
		dial_init(d, link, VSOCK_PORT_RELAY, port);
}

void link_dial_close(struct link_dial *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

int link_dial_take(struct link_dial *d)
{
	int fd = d->fd;

	d->fd = -1;
	return fd;
}

int64_t link_dial_wake_at(const struct link_dial *d)
{
	return d->phase == DIAL_CONNECT && d->retry_at && d->retry_at < d->deadline ? d->retry_at : d->deadline;
}

/* ---- what went wrong, by phase ------------------------------------------ */

static int connect_error(struct link_dial *d, int r, char *why, size_t why_len)
{
	const struct link *link = d->link;

	if (r == -ENOENT || (r == -ECONNREFUSED && link->kind == LINK_UDS))
		return fail(r, why, why_len, "%s: %s (is the VM running, with its vsock device at this path?)",
			    link->kind == LINK_UDS ? "no such socket" : "cannot connect", strerror(-r));
	if (r == -ETIMEDOUT)
		return fail(r, why, why_len, "vsock port %u: connect timed out after %d ms%s", d->vport,
			    link->timeout_ms, d->backlog_full ? " (the VMM's socket kept its listen backlog full)" : "");
	if (link->kind == LINK_CID)
		return fail(r, why, why_len, "vsock port %u: %s%s", d->vport, strerror(-r),
			    r == -ECONNRESET || r == -ECONNREFUSED ? " (nothing listens on that guest port)" : "");
	return fail(r, why, why_len, "%s", strerror(-r));
}

/* The parser's sentence in `why` (EPROTO, ECONNREFUSED) may quote the
 * guest's bytes: shown escaped. */
static void quote_inner(const char *why, char *inner, size_t inner_len)
{
	text_escape(why, strlen(why), false, inner, inner_len);
}

static int vsock_error(struct link_dial *d, int r, char *why, size_t why_len)
{
	char inner[4 * HANDSHAKE_LINE_MAX];

	if (r == -ECONNRESET)
		return fail(r, why, why_len, "vsock port %u: handshake refused: the VMM closed the connection "
			    "(nothing listens on that guest port)", d->vport);
	if (r == -ETIMEDOUT)
		return fail(r, why, why_len, "vsock port %u: no handshake answer within %d ms", d->vport,
			    d->link->timeout_ms);
	if (r == -EPROTO || r == -ECONNREFUSED) {
		quote_inner(why, inner, sizeof(inner));
		return fail(-EPROTO, why, why_len, "vsock port %u: bad handshake answer: %s", d->vport, inner);
	}
	return fail(r, why, why_len, "vsock port %u: handshake: %s", d->vport, strerror(-r));
}

static int relay_error(struct link_dial *d, int r, char *why, size_t why_len)
{
	char inner[4 * HANDSHAKE_LINE_MAX];
	unsigned port = d->guest_port, relay = VSOCK_PORT_RELAY;

	quote_inner(why, inner, sizeof(inner));
	if (r == -ECONNREFUSED)
		return fail(r, why, why_len, "guest port %u refused by the relay (vsock port %u): %s", port, relay,
			    inner);
	if (r == -ECONNRESET)
		return fail(r, why, why_len, "guest port %u: the relay (vsock port %u) closed without an answer",
			    port, relay);
	if (r == -ETIMEDOUT)
		return fail(r, why, why_len, "guest port %u: no answer from the relay (vsock port %u) within %d ms",
			    port, relay, d->link->timeout_ms);
	if (r == -EPROTO)
		return fail(r, why, why_len, "guest port %u: the relay (vsock port %u) answered badly: %s", port,
			    relay, inner);
	return fail(r, why, why_len, "guest port %u: the relay (vsock port %u): %s", port, relay, strerror(-r));
}

static int dial_fail(struct link_dial *d, int r, char *why, size_t why_len)
{
	int phase = d->phase;

	link_dial_close(d);
	if (phase <= DIAL_CONNECTING)
		return connect_error(d, r, why, why_len);
	if (phase <= DIAL_VSOCK_READ)
		return vsock_error(d, r, why, why_len);
	return relay_error(d, r, why, why_len);
}

/* ---- the steps ------------------------------------------------------------ */

static int start_connect(struct link_dial *d, short *events)
{
	const struct link *link = d->link;
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct sockaddr_vm vm = { .svm_family = AF_VSOCK, .svm_cid = link->cid, .svm_port = d->vport };
	const struct sockaddr *sa = link->kind == LINK_UDS ? (const struct sockaddr *)&un : (const struct sockaddr *)&vm;
	socklen_t sl = link->kind == LINK_UDS ? sizeof(un) : sizeof(vm);

	d->fd = socket(link->kind == LINK_UDS ? AF_UNIX : AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (d->fd < 0)
		return -errno;
	memcpy(un.sun_path, link->path, strlen(link->path));
	if (connect(d->fd, sa, sl) == 0)
		return 1;
	if (errno == EAGAIN && link->kind == LINK_UDS) {
		link_dial_close(d);
		d->backlog_full = true;
		d->retry_at = io_now_ms() + BACKLOG_RETRY_MS;
		*events = 0;
		return 0;
	}
	if (errno != EINPROGRESS)
		return -errno;
	d->phase = DIAL_CONNECTING;
	*events = POLLOUT;
	return 0;
}

/* The phase after the transport is connected, or after the VMM's OK. */
static void next_handshake(struct link_dial *d, bool vmm_done)
{
	uint32_t port;

	if (!vmm_done && d->link->kind == LINK_UDS) {
		d->phase = DIAL_VSOCK_SEND;
		port = d->vport;
	} else if (d->guest_port) {
		d->phase = DIAL_RELAY_SEND;
		port = d->guest_port;
	} else {
		d->phase = DIAL_OPEN;
		return;
	}
	d->out_len = (size_t)handshake_format_connect(d->out, sizeof(d->out), port);
	d->out_off = 0;
	d->line_len = 0;
}

static int send_line(struct link_dial *d, short *events)
{
	while (d->out_off < d->out_len) {
		ssize_t n = send(d->fd, d->out + d->out_off, d->out_len - d->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			*events = POLLOUT;
			return 0;
		}
		if (n < 0)
			return -errno;
		d->out_off += (size_t)n;
	}
	return 1;
}

/* The reply line, byte by byte: nothing after the '\n' is consumed, so the
 * guest's first bytes stay in the socket for whoever reads next. */
static int read_reply(struct link_dial *d, short *events, char *why, size_t why_len)
{
	uint32_t number;

	while (d->line_len < sizeof(d->line)) {
		ssize_t got = recv(d->fd, d->line + d->line_len, 1, MSG_DONTWAIT);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			*events = POLLIN;
			return 0;
		}
		if (got < 0)
			return -errno;
		if (got == 0)
			return d->line_len ? fail(-EPROTO, why, why_len, "closed inside the line") : -ECONNRESET;
		if (d->line[d->line_len++] == '\n') {
			int r = handshake_parse_reply(d->line, d->line_len, d->phase == DIAL_VSOCK_READ, &number, why,
						      why_len);
			return r < 0 ? r : 1;
		}
	}
	return fail(-EPROTO, why, why_len, "no newline in the first %zu bytes", sizeof(d->line));
}

int link_dial_step(struct link_dial *d, short *events, char *why, size_t why_len)
{
	int64_t now = io_now_ms();
	int r = 1;

	*events = 0;
	if (now >= d->deadline && d->phase != DIAL_OPEN)
		return dial_fail(d, -ETIMEDOUT, why, why_len);
	while (r > 0) {
		switch (d->phase) {
		case DIAL_CONNECT:
			if (d->retry_at > now)
				return 0;
			r = start_connect(d, events);
			if (r > 0)
				next_handshake(d, false);
			break;
		case DIAL_CONNECTING: {
			int err = 0;
			socklen_t el = sizeof(err);
			if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
				err = errno;
			r = err ? -err : 1;
			if (r > 0)
				next_handshake(d, false);
			break;
		}
		case DIAL_VSOCK_SEND:
		case DIAL_RELAY_SEND:
			r = send_line(d, events);
			if (r > 0)
				d->phase++;
			break;
		case DIAL_VSOCK_READ:
		case DIAL_RELAY_READ:
			r = read_reply(d, events, why, why_len);
			if (r > 0 && d->phase == DIAL_VSOCK_READ)
				next_handshake(d, true);
			else if (r > 0)
				d->phase = DIAL_OPEN;
			break;
		case DIAL_OPEN:
			return 1;
		}
	}
	return r < 0 ? dial_fail(d, r, why, why_len) : 0;
}

/* ---- blocking, for mmds and wait ------------------------------------------ */

static int dial_blocking(struct link_dial *d, char *why, size_t why_len)
{
	for (;;) {
		short events;
		int r = link_dial_step(d, &events, why, why_len);
		if (r > 0)
			return link_dial_take(d);
		if (r < 0)
			return r;
		int64_t wake = link_dial_wake_at(d);
		if (events) {
			r = io_wait(d->fd, events, wake);
			if (r < 0 && r != -ETIMEDOUT) {
				link_dial_close(d);
				return fail(r, why, why_len, "vsock port %u: poll: %s", d->vport, strerror(-r));
			}
		} else {
			int64_t left = wake - io_now_ms();
			struct timespec pause = { left / 1000, (left % 1000) * 1000000L };
			if (left > 0)
				nanosleep(&pause, NULL);
		}
	}
}

int link_open(const struct link *link, uint32_t vport, char *why, size_t why_len)
{
	struct link_dial d;

	link_dial_vsock(&d, link, vport);
	return dial_blocking(&d, why, why_len);
}

int link_open_loopback(const struct link *link, uint16_t port, char *why, size_t why_len)
{
	struct link_dial d;

	link_dial_loopback(&d, link, port);
	return dial_blocking(&d, why, why_len);
}
