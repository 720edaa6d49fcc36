/* vsock-relay: the guest's relays into loopback (see relay/README.md).
 *
 *   vsock-relay [--guarded PORTS] [--ephemeral-ports auto|off|LO-HI] [--max-connections N]
 *               [--idle-evict-after SEC] [--handshake-timeout MS]
 *   vsock-relay --to-port PORT [--max-connections N] [--idle-evict-after SEC]
 *
 * Socket-activated (LISTEN_FDS): systemd listens on vsock port 10000
 * (units/vsock-relay.socket) and passes the socket; the code itself is
 * transport-agnostic, so the tests pass it a TCP or unix listener. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <fcntl.h>

#include "cleanup.h"
#include "decimal.h"
#include "fileio.h"
#include "log.h"
#include "relay.h"
#include "vsock_ports.h"

#define SD_LISTEN_FDS_START 3
#define MAX_LISTENERS 16

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vsock-relay [--guarded PORTS] [--ephemeral-ports auto|off|LO-HI] [--max-connections N]\n"
		"                   [--idle-evict-after SEC] [--handshake-timeout MS] [-v]\n"
		"       vsock-relay --to-port PORT [--fixed-relays-only] [--max-connections N] [--idle-evict-after SEC] [-v]\n"
		"  Socket-activated (LISTEN_FDS). Each connection's first line is \"CONNECT <port>\\n\";\n"
		"  the relay answers \"OK\\n\" and bridges to 127.0.0.1:<port>, or \"" RELAY_ERR_LINE_TEXT "\\n\"\n"
		"  and closes, whatever the reason (it is logged).\n"
		"  --to-port PORT           a fixed relay: every connection to 127.0.0.1:PORT, no line, no policy;\n"
		"                           a guarded port without a fixed relay (8888, 80) is refused\n"
		"  --fixed-relays-only      with --to-port: refuse any PORT but the fixed relays' (%u, %u)\n"
		"  --guarded PORTS          ports to refuse besides 80 (default: envd-guard's " GUARDED_PORTS_DEFAULT ")\n"
		"  --ephemeral-ports R      refuse these too: auto (default: the kernel's range, from\n"
		"                           " RELAY_EPHEMERAL_RANGE_FILE " at start), off, or LO-HI\n"
		"  --max-connections N      concurrent connections, handshakes included (default 256)\n"
		"  --idle-evict-after SEC   at the limit, a new connection closes the relayed connection idle\n"
		"                           the longest if no byte moved for SEC seconds (default 30; 0: never)\n"
		"  --handshake-timeout MS   time for the CONNECT line and the loopback connect (default 10000)\n",
		VSOCK_PORT_ENVD, VSOCK_PORT_CODE_INTERPRETER);
}

static int parse_uint(const char *name, const char *text, unsigned min, unsigned max, unsigned *out)
{
	uint64_t v;

	if (parse_decimal(text, min, max, &v) < 0) {
		fprintf(stderr, "vsock-relay: %s: '%s' is not a number in %u-%u\n", name, text, min, max);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

/* The sockets systemd passed, checked to be listening stream sockets. */
static int listen_fds(int *fds, unsigned *n)
{
	const char *pid = getenv("LISTEN_PID"), *count = getenv("LISTEN_FDS");
	unsigned c;

	if (!pid || !count || strtol(pid, NULL, 10) != getpid())
		return -ENOENT;
	if (parse_uint("LISTEN_FDS", count, 1, MAX_LISTENERS, &c) < 0)
		return -EINVAL;
	for (unsigned i = 0; i < c; i++) {
		int fd = SD_LISTEN_FDS_START + (int)i, type = 0, acc = 0;
		socklen_t l = sizeof(int);
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_STREAM ||
		    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) < 0 || !acc)
			return -ENOTSOCK;
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0 ||
		    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
			return -errno;
		fds[i] = fd;
	}
	*n = c;
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return 0;
}

/* --to-port never opens a guarded port that has no fixed relay of its own
 * (8888: Jupyter has no token; 80: the metadata alias): a fixed relay has
 * no policy, so vsock-proxy@8888 would bypass the guard. With
 * --fixed-relays-only (what vsock-proxy@.service runs) only the fixed
 * relays' ports are accepted at all. */
static int check_fixed_port(uint16_t port, bool fixed_only, const struct relay_policy *policy)
{
	bool fixed = port == VSOCK_PORT_ENVD || port == VSOCK_PORT_CODE_INTERPRETER;
	const char *role = relay_policy_refusal(policy, port);

	if (fixed)
		return 0;
	if (role) {
		fprintf(stderr, "vsock-relay: --to-port %u: refused: %s, and it has no fixed relay (only %u and %u do)\n",
			port, role, VSOCK_PORT_ENVD, VSOCK_PORT_CODE_INTERPRETER);
		return -EPERM;
	}
	if (fixed_only) {
		fprintf(stderr, "vsock-relay: --to-port %u: not a fixed relay's port (--fixed-relays-only: %u or %u)\n",
			port, VSOCK_PORT_ENVD, VSOCK_PORT_CODE_INTERPRETER);
		return -EPERM;
	}
	return 0;
}

/* --ephemeral-ports: "auto" (the default: the kernel's range, read once at
 * start), "off", or LO-HI. */
static int ephemeral_range(const char *spec, struct relay_policy *policy)
{
	_cleanup_free_ char *text = NULL;
	char why[128];
	size_t len;
	int r;

	if (spec && strcmp(spec, "off") == 0)
		return 0;
	if (spec && strcmp(spec, "auto") != 0) {
		r = relay_parse_port_range(spec, &policy->ephemeral_lo, &policy->ephemeral_hi, why, sizeof(why));
		if (r < 0)
			fprintf(stderr, "vsock-relay: --ephemeral-ports: %s (or auto, off)\n", why);
		return r;
	}
	r = read_small_file(RELAY_EPHEMERAL_RANGE_FILE, 64, &text, &len);
	if (r == 0)
		r = relay_parse_port_range(text, &policy->ephemeral_lo, &policy->ephemeral_hi, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "%s", strerror(-r));
	if (r < 0) {
		log_error("%s: cannot read the ephemeral port range: %s (give --ephemeral-ports LO-HI or off)",
			  RELAY_EPHEMERAL_RANGE_FILE, why);
		return -EIO;
	}
	log_debug("refusing the ephemeral port range %u-%u (%s)", policy->ephemeral_lo, policy->ephemeral_hi,
		  RELAY_EPHEMERAL_RANGE_FILE);
	return 0;
}

/* Each connection holds 2 fds (the host's and loopback's); the rest are
 * stdio, the listeners, epoll and a little slack. --max-connections beyond
 * what RLIMIT_NOFILE allows would end in EMFILE, so it is lowered to fit. */
#define RESERVED_FDS 16u

static int bound_by_fd_limit(struct relay *relay)
{
	struct rlimit rl;
	uint64_t fit;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		log_error("getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
		return -errno;
	}
	if (rl.rlim_cur == RLIM_INFINITY)
		return 0;
	fit = rl.rlim_cur > RESERVED_FDS + relay->n_listeners ? (rl.rlim_cur - RESERVED_FDS - relay->n_listeners) / 2 : 0;
	if (fit == 0) {
		log_error("RLIMIT_NOFILE is %llu: no room for a single connection (2 fds each, %u reserved)",
			  (unsigned long long)rl.rlim_cur, RESERVED_FDS + relay->n_listeners);
		return -EMFILE;
	}
	if (relay->max_connections > fit) {
		log_warning("--max-connections %u: RLIMIT_NOFILE %llu fits %llu connections (2 fds each); using %llu",
			    relay->max_connections, (unsigned long long)rl.rlim_cur, (unsigned long long)fit,
			    (unsigned long long)fit);
		relay->max_connections = (unsigned)fit;
	}
	return 0;
}

static int on_listener(struct io_handler *handler, uint32_t events)
{
	struct relay_listener *l = container_of(handler, struct relay_listener, handler);

	return relay_accept(l->relay, l->fd);
}

static int run(struct relay *relay)
{
	struct epoll_event events[64];

	for (;;) {
		int timeout, r = relay_expire(relay, relay_now_ms(), &timeout);
		if (r < 0)
			return r;
		int n = epoll_wait(relay->epfd, events, 64, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (int i = 0; i < n; i++) {
			struct io_handler *h = events[i].data.ptr;
			r = h->on_events(h, events[i].events);
			if (r < 0)
				return r;
		}
		bridge_set_reap(&relay->bridges);
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "guarded", required_argument, NULL, 'g' },
		{ "max-connections", required_argument, NULL, 'm' },
		{ "handshake-timeout", required_argument, NULL, 't' },
		{ "to-port", required_argument, NULL, 'p' },
		{ "fixed-relays-only", no_argument, NULL, 'f' },
		{ "idle-evict-after", required_argument, NULL, 'i' },
		{ "ephemeral-ports", required_argument, NULL, 'e' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct relay relay = { .max_connections = 256, .handshake_timeout_ms = 10000, .idle_evict_ms = 30000 };
	struct relay_listener listeners[MAX_LISTENERS];
	const char *guarded = NULL, *ephemeral = NULL;
	bool fixed_only = false;
	int fds[MAX_LISTENERS];
	char why[256];
	int c, r;

	log_init("vsock-relay");
	while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (c) {
		case 'g':
			guarded = optarg;
			break;
		case 'm':
			if (parse_uint("--max-connections", optarg, 1, 65536, &relay.max_connections) < 0)
				return 2;
			break;
		case 't':
			if (parse_uint("--handshake-timeout", optarg, 1, 3600000, &relay.handshake_timeout_ms) < 0)
				return 2;
			break;
		case 'p': {
			unsigned port;
			if (parse_uint("--to-port", optarg, 1, 65535, &port) < 0)
				return 2;
			relay.fixed_port = (uint16_t)port;
			break;
		}
		case 'i': {
			unsigned sec;
			if (parse_uint("--idle-evict-after", optarg, 0, 86400, &sec) < 0)
				return 2;
			relay.idle_evict_ms = (uint64_t)sec * 1000u;
			break;
		}
		case 'e':
			ephemeral = optarg;
			break;
		case 'f':
			fixed_only = true;
			break;
		case 'v':
			log_set_max_priority(LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "vsock-relay: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (relay.fixed_port && (guarded || ephemeral)) {
		fprintf(stderr, "vsock-relay: %s applies to the CONNECT relay, not to --to-port\n",
			guarded ? "--guarded" : "--ephemeral-ports");
		return 2;
	}
	if (relay_policy_init(&relay.policy, guarded, why, sizeof(why)) < 0) {
		log_error("%s", why);
		return 2;
	}
	if (relay.fixed_port) {
		r = check_fixed_port(relay.fixed_port, fixed_only, &relay.policy);
		if (r < 0)
			return 2;
	} else if (fixed_only) {
		fprintf(stderr, "vsock-relay: --fixed-relays-only goes with --to-port\n");
		return 2;
	} else {
		r = ephemeral_range(ephemeral, &relay.policy);
		if (r < 0)
			return r == -EINVAL ? 2 : 1;
	}
	inet_pton(AF_INET, "127.0.0.1", &relay.target);
	r = listen_fds(fds, &relay.n_listeners);
	if (r < 0) {
		log_error("no listening socket from systemd (LISTEN_FDS): %s; start it through "
			  "vsock-relay.socket or systemd-socket-activate", r == -ENOENT ? "not set" : strerror(-r));
		return 1;
	}
	r = bound_by_fd_limit(&relay);
	if (r < 0)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	relay.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (relay.epfd < 0) {
		log_error("epoll_create1: %s", strerror(errno));
		return 1;
	}
	relay.listeners = listeners;
	for (unsigned i = 0; i < relay.n_listeners; i++) {
		listeners[i] = (struct relay_listener){ .handler.on_events = on_listener, .relay = &relay,
							.fd = fds[i] };
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &listeners[i].handler };
		if (epoll_ctl(relay.epfd, EPOLL_CTL_ADD, fds[i], &ev) < 0) {
			log_error("epoll: listener %d: %s", fds[i], strerror(errno));
			return 1;
		}
	}
	relay.listening = 1;
	r = run(&relay);
	log_error("event loop: %s", strerror(-r));
	return 1;
}
