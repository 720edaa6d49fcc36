#include "forward.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bridge.h"
#include "cleanup.h"
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

struct forwarder {
	int epfd;
	const struct link *link;
	struct listener listeners[FORWARD_MAX_PORTS];
	unsigned n_listeners;
	unsigned active, max_connections;
	int listening;
	struct bridge_set bridges;
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void update_listeners(struct forwarder *fw)
{
	int want = fw->active < fw->max_connections;

	if (want == fw->listening)
		return;
	for (unsigned i = 0; i < fw->n_listeners; i++) {
		struct epoll_event ev = { .events = want ? EPOLLIN : 0, .data.ptr = &fw->listeners[i].handler };
		epoll_ctl(fw->epfd, EPOLL_CTL_MOD, fw->listeners[i].fd, &ev);
	}
	fw->listening = want;
}

static void bridge_ended(void *owner, int error, uint64_t up, uint64_t down)
{
	struct forwarder *fw = owner;

	if (error < 0)
		log_debug("connection ended: %s", strerror(-error));
	fw->active--;
	update_listeners(fw);
}

static int set_nonblocking_nodelay(int fd)
{
	int one = 1;

	/* TCP_NODELAY only where it applies (the host side); vsock/unix ignore it. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	int flags = fcntl(fd, F_GETFL);
	return flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ? -errno : 0;
}

/* The guest side is opened synchronously, bounded by the link's timeout: a
 * local unix or vsock connect plus two short lines. */
static int on_accept(struct io_handler *handler, uint32_t events)
{
	struct listener *l = container_of(handler, struct listener, handler);
	struct forwarder *fw = l->fw;
	char why[512];

	while (fw->active < fw->max_connections && !stop_signal) {
		_cleanup_close_ int client = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (client < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return 0;
			log_warning("%s: accept: %s", l->name, strerror(errno));
			return 0;
		}
		int guest = link_open_loopback(fw->link, l->guest_port, why, sizeof(why));
		if (guest < 0) {
			log_error("%s port %u: %s", link_name(fw->link), l->guest_port, why);
			continue;
		}
		if (set_nonblocking_nodelay(guest) < 0 || set_nonblocking_nodelay(client) < 0) {
			close(guest);
			continue;
		}
		fw->active++;
		int r = bridge_start(fw->epfd, TAKE_FD(client), guest, NULL, 0, bridge_ended, fw, &fw->bridges);
		if (r < 0) {
			fw->active--;
			log_error("%s: %s", l->name, strerror(-r));
		}
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
		int got = epoll_wait(fw.epfd, events, 64, -1);
		if (got < 0 && errno != EINTR)
			r = -errno;
		for (int i = 0; i < got; i++) {
			struct io_handler *h = events[i].data.ptr;
			h->on_events(h, events[i].events);
		}
		bridge_set_reap(&fw.bridges);
	}
	bridge_set_close(&fw.bridges);
	for (unsigned i = 0; i < fw.n_listeners; i++)
		if (fw.listeners[i].fd >= 0)
			close(fw.listeners[i].fd);
	close(fw.epfd);
	return r;
}
