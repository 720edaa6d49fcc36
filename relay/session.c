/* One relayed connection: read the CONNECT line, check the port, connect to
 * 127.0.0.1:<port> without blocking, answer OK, then hand both fds to the
 * bridge (common/bridge.c). Every refusal is the same "ERR ...\n" line, then
 * close; the journal line says why. */
#include "relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <linux/vm_sockets.h>
#include <time.h>
#include <unistd.h>

#include "bridge.h"
#include "cleanup.h"
#include "handshake.h"
#include "log.h"

struct session {
	struct io_handler handler;
	struct relay *relay;
	struct session *next, **pprev;
	int client, target;
	bool connecting;
	uint32_t port;
	uint64_t deadline_ms;
	size_t len;
	char line[HANDSHAKE_LINE_MAX];
	char peer[64];
};

uint64_t relay_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void peer_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char addr[INET6_ADDRSTRLEN];

	snprintf(buf, len, "peer ?");
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
		return;
	if (ss.ss_family == AF_VSOCK) {
		const struct sockaddr_vm *vm = (const struct sockaddr_vm *)&ss;
		snprintf(buf, len, "cid %u port %u", vm->svm_cid, vm->svm_port);
	} else if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
		snprintf(buf, len, "%s:%u", inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr)),
			 ntohs(in->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
		snprintf(buf, len, "[%s]:%u", inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr)),
			 ntohs(in6->sin6_port));
	} else if (ss.ss_family == AF_UNIX) {
		snprintf(buf, len, "unix peer");
	}
}

static void unlink_pending(struct session *s)
{
	if (!s->pprev)
		return;
	*s->pprev = s->next;
	if (s->next)
		s->next->pprev = s->pprev;
	s->next = NULL;
	s->pprev = NULL;
}

static void connection_ended(struct relay *relay)
{
	relay->active--;
	relay_update_listeners(relay);
}

static void session_free(struct session *s)
{
	struct relay *relay = s->relay;

	unlink_pending(s);
	if (s->client >= 0) {
		epoll_ctl(relay->epfd, EPOLL_CTL_DEL, s->client, NULL);
		close(s->client);
	}
	if (s->target >= 0) {
		epoll_ctl(relay->epfd, EPOLL_CTL_DEL, s->target, NULL);
		close(s->target);
	}
	free(s);
	connection_ended(relay);
}

/* The one refusal line to the host (the reason to the journal only), then
 * close. The socket is fresh and the line short, so a non-blocking send
 * either takes it whole or the host is gone. */
__attribute__((format(printf, 2, 3)))
static void refuse(struct session *s, const char *fmt, ...)
{
	char msg[HANDSHAKE_LINE_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_notice("%s: refused: %s", s->peer, msg);
	/* A fixed relay speaks no protocol of its own: it just closes. */
	if (!s->relay->fixed_port)
		(void)!send(s->client, RELAY_ERR_LINE_TEXT "\n", sizeof(RELAY_ERR_LINE_TEXT), MSG_NOSIGNAL | MSG_DONTWAIT);
	session_free(s);
}

static void bridge_ended(void *owner, int error, uint64_t up, uint64_t down)
{
	struct relay *relay = owner;

	if (error < 0)
		log_debug("relayed connection ended: %s (%llu bytes in, %llu out)", strerror(-error),
			  (unsigned long long)up, (unsigned long long)down);
	connection_ended(relay);
}

static int on_connected(struct session *s)
{
	struct relay *relay = s->relay;
	int err = 0;
	socklen_t len = sizeof(err);
	size_t rest;
	char rest_buf[HANDSHAKE_LINE_MAX];

	if (getsockopt(s->target, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		refuse(s, "127.0.0.1:%u: %s", s->port, strerror(err));
		return 0;
	}
	if (!relay->fixed_port && send(s->client, "OK\n", 3, MSG_NOSIGNAL | MSG_DONTWAIT) != 3) {
		log_notice("%s: gone before OK: %s", s->peer, strerror(errno));
		session_free(s);
		return 0;
	}
	log_debug("%s: relaying to 127.0.0.1:%u", s->peer, s->port);
	/* Bytes the host sent after its line go first. */
	rest = s->len;
	memcpy(rest_buf, s->line, rest);
	epoll_ctl(relay->epfd, EPOLL_CTL_DEL, s->target, NULL);
	int client = TAKE_FD(s->client), target = TAKE_FD(s->target);
	unlink_pending(s);
	free(s);
	/* The connection stays counted until the bridge reports its end. */
	int r = bridge_start(relay->epfd, client, target, rest_buf, rest, bridge_ended, relay, &relay->bridges);
	if (r < 0) {
		log_error("relay to 127.0.0.1: %s", strerror(-r));
		connection_ended(relay);
	}
	return 0;
}

static void start_connect(struct session *s)
{
	struct relay *relay = s->relay;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)s->port),
				   .sin_addr = relay->target };
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = &s->handler };

	s->target = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->target < 0) {
		refuse(s, "127.0.0.1:%u: socket: %s", s->port, strerror(errno));
		return;
	}
	if (connect(s->target, (struct sockaddr *)&sin, sizeof(sin)) < 0 && errno != EINPROGRESS) {
		refuse(s, "127.0.0.1:%u: %s", s->port, strerror(errno));
		return;
	}
	/* Stop reading the host until the target answers: bytes after the line
	 * wait in the socket (backpressure from the start). */
	epoll_ctl(relay->epfd, EPOLL_CTL_DEL, s->client, NULL);
	if (epoll_ctl(relay->epfd, EPOLL_CTL_ADD, s->target, &ev) < 0) {
		refuse(s, "127.0.0.1:%u: epoll: %s", s->port, strerror(errno));
		return;
	}
	s->connecting = true;
}

static void on_line_bytes(struct session *s)
{
	char why[128];
	uint32_t port;
	ssize_t n = recv(s->client, s->line + s->len, sizeof(s->line) - s->len, 0);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		log_notice("%s: closed before a CONNECT line%s%s", s->peer, n < 0 ? ": " : "",
			   n < 0 ? strerror(errno) : "");
		session_free(s);
		return;
	}
	s->len += (size_t)n;
	int r = handshake_parse_connect(s->line, s->len, 65535, &port, why, sizeof(why));
	if (r == 0)
		return;
	if (r < 0) {
		refuse(s, "bad request line: %s (expected \"CONNECT <port>\\n\")", why);
		return;
	}
	const char *role = relay_policy_refusal(&s->relay->policy, port);
	if (role) {
		refuse(s, "port %u is refused: %s", port, role);
		return;
	}
	s->port = port;
	s->len -= (size_t)r;
	memmove(s->line, s->line + r, s->len);
	start_connect(s);
}

static int on_session_events(struct io_handler *handler, uint32_t events)
{
	struct session *s = container_of(handler, struct session, handler);

	if (s->connecting)
		return on_connected(s);
	on_line_bytes(s);
	return 0;
}

/* Room for one more connection: under the limit, or at it with a bridge
 * idle long enough to be evicted (checked before accept, evicted after, so
 * an empty backlog never costs a bridge). */
static bool has_room(const struct relay *relay, uint64_t now_ms)
{
	uint64_t oldest;

	if (now_ms < relay->accept_paused_until)
		return false;
	if (relay->active < relay->max_connections)
		return true;
	if (!relay->idle_evict_ms)
		return false;
	oldest = bridge_set_oldest_activity_ms(&relay->bridges);
	return oldest != UINT64_MAX && now_ms >= oldest && now_ms - oldest >= relay->idle_evict_ms;
}

static void make_room(struct relay *relay, uint64_t now_ms)
{
	uint64_t oldest = bridge_set_oldest_activity_ms(&relay->bridges);

	if (relay->active <= relay->max_connections)
		return;
	if (bridge_set_evict_idle(&relay->bridges, now_ms, relay->idle_evict_ms))
		log_notice("connection limit %u reached: closed the relayed connection idle the longest (%llu ms)",
			   relay->max_connections, (unsigned long long)(now_ms - oldest));
}

int relay_accept(struct relay *relay, int listener)
{
	while (has_room(relay, relay_now_ms())) {
		int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				break;
			if (errno == ECONNABORTED || errno == EPROTO)
				continue;
			/* EMFILE and friends: the listener stays readable, so
			 * polling it now would spin. Pause it briefly. */
			log_warning("accept: %s: not accepting for %u ms", strerror(errno), RELAY_ACCEPT_PAUSE_MS);
			relay->accept_paused_until = relay_now_ms() + RELAY_ACCEPT_PAUSE_MS;
			break;
		}
		struct session *s = calloc(1, sizeof(*s));
		if (!s) {
			close(fd);
			return -ENOMEM;
		}
		uint64_t now = relay_now_ms();
		*s = (struct session){ .handler.on_events = on_session_events, .relay = relay,
				       .client = fd, .target = -1,
				       .deadline_ms = now + relay->handshake_timeout_ms };
		peer_name(fd, s->peer, sizeof(s->peer));
		relay->active++;
		make_room(relay, now);
		/* Append: the list stays in deadline order. */
		struct session **tail = &relay->pending;
		while (*tail)
			tail = &(*tail)->next;
		s->pprev = tail;
		*tail = s;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->handler };
		if (relay->fixed_port) {
			s->port = relay->fixed_port;
			start_connect(s);
		} else if (epoll_ctl(relay->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			log_error("%s: epoll: %s", s->peer, strerror(errno));
			session_free(s);
		}
	}
	return relay_update_listeners(relay);
}

int relay_expire(struct relay *relay, uint64_t now_ms, int *timeout_ms)
{
	uint64_t next = UINT64_MAX, oldest;

	while (relay->pending && relay->pending->deadline_ms <= now_ms) {
		struct session *s = relay->pending;
		if (s->connecting)
			refuse(s, "127.0.0.1:%u: no answer within %u ms", s->port, relay->handshake_timeout_ms);
		else
			refuse(s, "no complete CONNECT line within %u ms", relay->handshake_timeout_ms);
	}
	int r = relay_update_listeners(relay);
	if (r < 0)
		return r;
	if (relay->pending)
		next = relay->pending->deadline_ms;
	/* Paused after a failed accept: wake to resume. */
	if (!relay->listening && relay->accept_paused_until > now_ms && relay->accept_paused_until < next)
		next = relay->accept_paused_until;
	/* Full and not accepting: wake when the longest-idle bridge may go. */
	oldest = bridge_set_oldest_activity_ms(&relay->bridges);
	if (!relay->listening && relay->idle_evict_ms && oldest != UINT64_MAX &&
	    oldest + relay->idle_evict_ms < next)
		next = oldest + relay->idle_evict_ms;
	if (next == UINT64_MAX)
		*timeout_ms = -1;
	else
		*timeout_ms = next <= now_ms ? 0 : (int)(next - now_ms > INT32_MAX ? INT32_MAX : next - now_ms);
	return 0;
}

int relay_update_listeners(struct relay *relay)
{
	int want = has_room(relay, relay_now_ms());

	if (want == relay->listening)
		return 0;
	for (unsigned i = 0; i < relay->n_listeners; i++) {
		struct epoll_event ev = { .events = want ? EPOLLIN : 0,
					  .data.ptr = &relay->listeners[i].handler };
		if (epoll_ctl(relay->epfd, EPOLL_CTL_MOD, relay->listeners[i].fd, &ev) < 0)
			return -errno;
	}
	relay->listening = want;
	return 0;
}
