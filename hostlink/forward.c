#include "forward.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bridge.h"
#include "io.h"
#include "ioloop.h"
#include "log.h"

struct forwarder;

struct listener {
	struct io_handler handler;
	struct forwarder *fw;
	int fd;
	uint16_t guest_port;
	char name[64];
};

/* A client whose guest side is still being opened (connect and handshakes,
 * driven by the event loop, each with its own deadline). Its client fd is
 * not read until then: what it sends waits in the socket. */
struct pending {
	struct io_handler handler;
	struct forwarder *fw;
	struct listener *l;
	struct pending *next, **pprev;
	int client;
	bool watched;            /* dial.fd is in epoll */
	struct link_dial dial;
};

struct forwarder {
	int epfd;
	const struct link *link;
	struct listener listeners[FORWARD_MAX_PORTS];
	unsigned n_listeners;
	unsigned active, max_connections; /* pending and bridged */
	int listening;
	int64_t accept_paused_until;      /* after EMFILE and the like: not before this */
	struct pending *pending;
	struct bridge_set bridges;
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* How long the listeners rest after accept fails for want of fds or memory:
 * the listener stays readable, so polling it at once would spin. */
#define ACCEPT_PAUSE_MS 100

static void update_listeners(struct forwarder *fw)
{
	int want = fw->active < fw->max_connections && io_now_ms() >= fw->accept_paused_until;

	if (want == fw->listening)
		return;
	for (unsigned i = 0; i < fw->n_listeners; i++) {
		struct epoll_event ev = { .events = want ? EPOLLIN : 0, .data.ptr = &fw->listeners[i].handler };
		epoll_ctl(fw->epfd, EPOLL_CTL_MOD, fw->listeners[i].fd, &ev);
	}
	fw->listening = want;
}

static void connection_ended(struct forwarder *fw);

static void bridge_ended(void *owner, int error, uint64_t up, uint64_t down)
{
	struct forwarder *fw = owner;

	if (error < 0)
		log_debug("connection ended: %s", strerror(-error));
	connection_ended(fw);
}

static int set_nonblocking_nodelay(int fd)
{
	int one = 1;

	/* TCP_NODELAY only where it applies (the host side); vsock/unix ignore it. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	int flags = fcntl(fd, F_GETFL);
	return flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ? -errno : 0;
}

static void connection_ended(struct forwarder *fw)
{
	fw->active--;
	update_listeners(fw);
}

static void pending_free(struct pending *p)
{
	if (p->watched)
		epoll_ctl(p->fw->epfd, EPOLL_CTL_DEL, p->dial.fd, NULL);
	link_dial_close(&p->dial);
	if (p->client >= 0)
		close(p->client);
	*p->pprev = p->next;
	if (p->next)
		p->next->pprev = p->pprev;
	connection_ended(p->fw);
	free(p);
}

/* The guest side is open: hand both to the bridge. */
static void pending_done(struct pending *p)
{
	struct forwarder *fw = p->fw;
	int guest = link_dial_take(&p->dial), client = p->client;

	p->client = -1;
	*p->pprev = p->next;
	if (p->next)
		p->next->pprev = p->pprev;
	if (set_nonblocking_nodelay(guest) < 0 || set_nonblocking_nodelay(client) < 0) {
		log_error("%s: %s", p->l->name, strerror(errno));
		close(guest);
		close(client);
		connection_ended(fw);
	} else {
		/* The connection stays counted until the bridge reports its end. */
		int r = bridge_start(fw->epfd, client, guest, NULL, 0, bridge_ended, fw, &fw->bridges);
		if (r < 0) {
			log_error("%s: %s", p->l->name, strerror(-r));
			connection_ended(fw);
		}
	}
	free(p);
}

/* One step of the guest side's opening; the pending connection is freed
 * when it ends either way. */
static void pending_step(struct pending *p)
{
	struct forwarder *fw = p->fw;
	char why[512];
	short events;

	/* The machine may replace its socket (a retry after a full backlog):
	 * watch whatever fd it has after the step, and only that. */
	if (p->watched)
		epoll_ctl(fw->epfd, EPOLL_CTL_DEL, p->dial.fd, NULL);
	p->watched = false;
	int r = link_dial_step(&p->dial, &events, why, sizeof(why));
	if (r > 0) {
		pending_done(p);
		return;
	}
	if (r < 0) {
		log_error("%s port %u: %s", link_name(fw->link), p->l->guest_port, why);
		pending_free(p);
		return;
	}
	if (!events)
		return; /* a timer: forward_run's sweep steps it at link_dial_wake_at */
	struct epoll_event ev = { .events = (events & POLLIN ? EPOLLIN : 0) | (events & POLLOUT ? EPOLLOUT : 0),
				  .data.ptr = &p->handler };
	if (epoll_ctl(fw->epfd, EPOLL_CTL_ADD, p->dial.fd, &ev) < 0) {
		log_error("%s port %u: epoll: %s", link_name(fw->link), p->l->guest_port, strerror(errno));
		pending_free(p);
		return;
	}
	p->watched = true;
}

static int on_pending(struct io_handler *handler, uint32_t events)
{
	pending_step(container_of(handler, struct pending, handler));
	return 0;
}

/* Steps every opening whose retry time or deadline has come; the time in
 * ms until the next one (-1: none). */
static int sweep_pending(struct forwarder *fw)
{
	int64_t now = io_now_ms(), next = INT64_MAX;

	for (struct pending *p = fw->pending, *n; p; p = n) {
		n = p->next;
		if (link_dial_wake_at(&p->dial) <= now)
			pending_step(p);
	}
	/* A step may free any entry but only its own, so read the list anew. */
	for (struct pending *p = fw->pending; p; p = p->next)
		if (link_dial_wake_at(&p->dial) < next)
			next = link_dial_wake_at(&p->dial);
	if (next == INT64_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now > INT32_MAX ? INT32_MAX : next - now);
}

/* Each client gets a pending entry; its guest side is opened in the event
 * loop, so one unanswered handshake never stalls the others. */
static int on_accept(struct io_handler *handler, uint32_t events)
{
	struct listener *l = container_of(handler, struct listener, handler);
	struct forwarder *fw = l->fw;

	while (fw->active < fw->max_connections && !stop_signal) {
		int client = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (client < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				break;
			log_warning("%s: accept: %s: not accepting for %d ms", l->name, strerror(errno), ACCEPT_PAUSE_MS);
			fw->accept_paused_until = io_now_ms() + ACCEPT_PAUSE_MS;
			break;
		}
		struct pending *p = calloc(1, sizeof(*p));
		if (!p) {
			log_error("%s: %s", l->name, strerror(ENOMEM));
			close(client);
			break;
		}
		*p = (struct pending){ .handler.on_events = on_pending, .fw = fw, .l = l, .client = client };
		link_dial_loopback(&p->dial, fw->link, l->guest_port);
		p->next = fw->pending;
		if (p->next)
			p->next->pprev = &p->next;
		p->pprev = &fw->pending;
		fw->pending = p;
		fw->active++;
		pending_step(p);
	}
	update_listeners(fw);
	return 0;
}

static int open_listener(struct listener *l, const struct forward_spec *spec, char *why, size_t why_len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	int one = 1;
	const struct sockaddr_in *in = (const struct sockaddr_in *)&spec->listen;
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&spec->listen;

	if (spec->listen.ss_family == AF_INET)
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
	else
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
	snprintf(l->name, sizeof(l->name), spec->listen.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host,
		 ntohs(spec->listen.ss_family == AF_INET ? in->sin_port : in6->sin6_port));
	l->fd = socket(spec->listen.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0 || setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(l->fd, (const struct sockaddr *)&spec->listen, spec->listen_len) < 0 || listen(l->fd, 128) < 0) {
		int r = -errno;
		snprintf(why, why_len, "listen on %s (for guest port %u): %s", l->name, spec->guest_port, strerror(errno));
		return r;
	}
	l->guest_port = spec->guest_port;
	return 0;
}

int forward_run(const struct link *link, const struct forward_spec *specs, unsigned n,
		unsigned max_connections, char *why, size_t why_len)
{
	struct forwarder fw = { .link = link, .max_connections = max_connections, .listening = 1 };
	struct epoll_event events[64];
	struct sigaction sa = { .sa_handler = on_signal };
	int r = 0;

	if (n > FORWARD_MAX_PORTS)
		return -E2BIG;
	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	fw.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (fw.epfd < 0)
		return -errno;
	for (unsigned i = 0; i < n && r == 0; i++) {
		struct listener *l = &fw.listeners[i];
		*l = (struct listener){ .handler.on_events = on_accept, .fw = &fw, .fd = -1 };
		fw.n_listeners++;
		r = open_listener(l, &specs[i], why, why_len);
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &l->handler };
		if (r == 0 && epoll_ctl(fw.epfd, EPOLL_CTL_ADD, l->fd, &ev) < 0)
			r = -errno;
		if (r == 0)
			log_info("%s -> %s, guest 127.0.0.1:%u", l->name, link_name(link), l->guest_port);
	}
	while (r == 0 && !stop_signal) {
		int timeout = sweep_pending(&fw);
		update_listeners(&fw);
		if (!fw.listening && fw.accept_paused_until > io_now_ms()) {
			int pause = (int)(fw.accept_paused_until - io_now_ms());
			timeout = timeout < 0 || pause < timeout ? pause : timeout;
		}
		int got = epoll_wait(fw.epfd, events, 64, timeout);
		if (got < 0 && errno != EINTR)
			r = -errno;
		for (int i = 0; i < got; i++) {
			struct io_handler *h = events[i].data.ptr;
			h->on_events(h, events[i].events);
		}
		bridge_set_reap(&fw.bridges);
	}
	bridge_set_close(&fw.bridges);
	while (fw.pending)
		pending_free(fw.pending);
	for (unsigned i = 0; i < fw.n_listeners; i++)
		if (fw.listeners[i].fd >= 0)
			close(fw.listeners[i].fd);
	close(fw.epfd);
	return r;
}
