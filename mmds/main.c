/* mmds-serve: a Firecracker-compatible instance-metadata service (MMDS) for
 * guests that serve their own metadata. See mmds/README.md. */
#include <errno.h>
#include <getopt.h>
#include <arpa/inet.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "cleanup.h"
#include "log.h"
#include "server.h"

#define DEFAULT_DOCUMENT "/run/mmds/document.json"
#define DEFAULT_LISTEN "169.254.169.254:80"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: mmds-serve [options]\n"
		"Serves a Firecracker-compatible MMDS (V2 by default) on 169.254.169.254:80.\n\n"
		"  --document PATH          metadata document, watched for changes\n"
		"                           (default " DEFAULT_DOCUMENT ")\n"
		"  --listen ADDR:PORT       listen here when not socket-activated\n"
		"                           (default " DEFAULT_LISTEN ", IP_FREEBIND)\n"
		"  --control PATH           Unix socket speaking the host API (PUT/PATCH/GET /mmds)\n"
		"  --v1                     tokens optional (MMDS V1)\n"
		"  --empty-document MODE    answer before any document: error (503, default),\n"
		"                           null (Firecracker's empty store), object ({})\n"
		"  --max-size BYTES         document limit, compact JSON (default 51200)\n"
		"  --max-connections N      guest connections; the oldest idle is dropped\n"
		"                           beyond it (default 1024)\n"
		"  --idle-timeout SECONDS   keep-alive idle limit (default 30)\n"
		"  --request-timeout SECONDS  a request must arrive whole within this many\n"
		"                           seconds of its first byte (default 1)\n"
		"  --max-header-bytes N     request line and headers (default 4096)\n"
		"  --max-headers N          header lines (default 64)\n"
		"  --verbose                debug logging\n"
		"  --help\n");
}

static int parse_seconds(const char *s, uint64_t *usec)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v <= 0 || v > 86400)
		return -EINVAL;
	*usec = (uint64_t)(v * 1e6);
	return 0;
}

static int parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int listen_inet(const char *spec)
{
	char host[128];
	const char *colon = strrchr(spec, ':');
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	unsigned long port;

	if (!colon || (size_t)(colon - spec) >= sizeof(host) || parse_uint(colon + 1, 0, 65535, &port) < 0)
		return -EINVAL;
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';

	int family;
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		host[strlen(host) - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) != 1)
			return -EINVAL;
		a->sin6_family = family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
			return -EINVAL;
		a->sin_family = family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		sl = sizeof(*a);
	}

	_cleanup_close_ int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	/* FREEBIND: the guard may add 169.254.169.254 to lo after we start. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
		       family == AF_INET ? IP_FREEBIND : IPV6_FREEBIND, &one, sizeof(one)) < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, SOMAXCONN) < 0)
		return -errno;
	return TAKE_FD(fd);
}

/* Root-only control: the directory is made 0700 if missing, the socket is
 * 0600; an existing non-socket at PATH is never replaced. */
static int listen_control(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);

	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		if (unlink(path) < 0)
			return -errno;
	} else if (errno != ENOENT) {
		return -errno;
	}
	_cleanup_free_ char *dir = strdup(path);
	if (!dir)
		return -ENOMEM;
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return -errno;
	}

	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	mode_t old = umask(0177);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || chmod(path, 0600) < 0 || listen(fd, 16) < 0)
		return -errno;
	return TAKE_FD(fd);
}

static int on_document_event(sd_event_source *es, const struct inotify_event *ev, void *userdata)
{
	struct server *s = userdata;
	const char *base = strrchr(s->cfg.document_path, '/');
	base = base ? base + 1 : s->cfg.document_path;

	if (ev->mask & IN_Q_OVERFLOW) {
		(void)server_load_document_file(s, LOG_WARNING);
		return 0;
	}
	if (ev->mask & IN_IGNORED) {
		log_warning("%s: its directory went away; serving the last document, no longer watching",
			    s->cfg.document_path);
		return 0;
	}
	if (!ev->len || strcmp(ev->name, base) != 0)
		return 0;
	if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO))
		(void)server_load_document_file(s, LOG_WARNING);
	else if (ev->mask & IN_CREATE)
		/* A writer that creates in place is not done yet: its
		 * IN_CLOSE_WRITE follows, so a partial file is only noted. */
		(void)server_load_document_file(s, LOG_DEBUG);
	else if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
		log_info("%s: removed; serving the last document until a new one arrives",
			 s->cfg.document_path);
	return 0;
}

static void raise_fd_limit(unsigned need)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= need)
		return;
	rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

/* Everything after option parsing; every exit path frees what it made. */
static int run(const struct config *cfg)
{
	sd_event *event = NULL;
	sd_event_source *watch = NULL;
	struct server s;
	bool server_ready = false;
	char *dir = NULL;
	int ret = 1, r;

	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);

	r = sd_event_default(&event);
	if (r < 0) {
		log_error("sd-event: %s", strerror(-r));
		goto out;
	}
	r = server_init(&s, cfg, event);
	server_ready = true; /* server_done() also undoes a partial init */
	if (r < 0) {
		log_error("setup: %s", strerror(-r));
		goto out;
	}

	/* Socket activation: AF_UNIX is the control socket, inet the MMDS. */
	int n = sd_listen_fds(1), n_guest = 0, n_control = 0;
	if (n < 0) {
		log_error("sd_listen_fds: %s", strerror(-n));
		goto out;
	}
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		bool control = sd_is_socket(fd, AF_UNIX, SOCK_STREAM, 1) > 0;
		if (!control && sd_is_socket_inet(fd, 0, SOCK_STREAM, 1, 0) <= 0) {
			log_error("passed fd %d is not a listening stream socket", fd);
			goto out;
		}
		r = server_add_listener(&s, fd, control);
		if (r < 0) {
			log_error("passed fd %d: %s", fd, strerror(-r));
			goto out;
		}
		control ? n_control++ : n_guest++;
	}
	if (n_guest == 0) {
		const char *spec = cfg->listen ? cfg->listen : DEFAULT_LISTEN;
		int fd = listen_inet(spec);
		if (fd < 0) {
			log_error("listen %s: %s", spec, strerror(-fd));
			goto out;
		}
		r = server_add_listener(&s, fd, false);
		if (r < 0) {
			log_error("listen %s: %s", spec, strerror(-r));
			goto out;
		}
		log_info("listening on %s", spec);
	} else if (cfg->listen) {
		log_warning("socket-activated: ignoring --listen %s", cfg->listen);
	}
	if (cfg->control_path && n_control == 0) {
		int fd = listen_control(cfg->control_path);
		if (fd < 0) {
			log_error("control socket %s: %s", cfg->control_path,
				  fd == -EEXIST ? "exists and is not a socket" : strerror(-fd));
			goto out;
		}
		r = server_add_listener(&s, fd, true);
		if (r < 0) {
			log_error("control socket %s: %s", cfg->control_path, strerror(-r));
			goto out;
		}
	}

	/* Watch the directory, not the file, so rename-over writers work. */
	dir = strdup(cfg->document_path);
	if (!dir)
		goto out;
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	r = sd_event_add_inotify(event, &watch, dir,
				 IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
					 IN_ONLYDIR,
				 on_document_event, &s);
	if (r < 0) {
		log_error("watch %s: %s", dir, strerror(-r));
		goto out;
	}
	r = server_load_document_file(&s, LOG_WARNING);
	if (r == -ENOENT)
		log_info("%s: not there yet; waiting for it", cfg->document_path);

	sd_event_add_signal(event, NULL, SIGTERM, NULL, NULL);
	sd_event_add_signal(event, NULL, SIGINT, NULL, NULL);

	if (!s.doc)
		sd_notify(0, "READY=1\nSTATUS=Waiting for a document");
	else
		sd_notify(0, "READY=1");
	r = sd_event_loop(event);
	sd_notify(0, "STOPPING=1");
	if (r < 0)
		log_error("event loop: %s", strerror(-r));
	else
		ret = 0;
out:
	sd_event_source_disable_unref(watch);
	if (server_ready)
		server_done(&s);
	sd_event_unref(event);
	free(dir);
	return ret;
}

int main(int argc, char **argv)
{
	enum { O_DOCUMENT = 256, O_LISTEN, O_CONTROL, O_V1, O_EMPTY, O_MAX_SIZE, O_MAX_CONNS,
	       O_IDLE, O_REQUEST, O_MAX_HEAD, O_MAX_HEADERS, O_VERBOSE, O_HELP };
	static const struct option opts[] = {
		{ "document", required_argument, NULL, O_DOCUMENT },
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "control", required_argument, NULL, O_CONTROL },
		{ "v1", no_argument, NULL, O_V1 },
		{ "empty-document", required_argument, NULL, O_EMPTY },
		{ "max-size", required_argument, NULL, O_MAX_SIZE },
		{ "max-connections", required_argument, NULL, O_MAX_CONNS },
		{ "idle-timeout", required_argument, NULL, O_IDLE },
		{ "request-timeout", required_argument, NULL, O_REQUEST },
		{ "max-header-bytes", required_argument, NULL, O_MAX_HEAD },
		{ "max-headers", required_argument, NULL, O_MAX_HEADERS },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "help", no_argument, NULL, O_HELP },
		{ 0 },
	};
	struct config cfg = {
		.document_path = DEFAULT_DOCUMENT,
		.empty = EMPTY_ERROR,
		.max_size = 51200,
		.max_connections = 1024,
		.idle_timeout_usec = 30 * 1000000ULL,
		.request_timeout_usec = 1000000ULL,
		.max_head = 4096,
		.max_headers = 64,
	};
	unsigned long v;
	int c;

	log_init("mmds-serve");
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_DOCUMENT: cfg.document_path = optarg; break;
		case O_LISTEN: cfg.listen = optarg; break;
		case O_CONTROL: cfg.control_path = optarg; break;
		case O_V1: cfg.v1 = true; break;
		case O_EMPTY:
			if (!strcmp(optarg, "error"))
				cfg.empty = EMPTY_ERROR;
			else if (!strcmp(optarg, "null"))
				cfg.empty = EMPTY_NULL;
			else if (!strcmp(optarg, "object"))
				cfg.empty = EMPTY_OBJECT;
			else
				goto bad;
			break;
		case O_MAX_SIZE:
			if (parse_uint(optarg, 2, 64 * 1024 * 1024, &v) < 0)
				goto bad;
			cfg.max_size = v;
			break;
		case O_MAX_CONNS:
			if (parse_uint(optarg, 1, 1000000, &v) < 0)
				goto bad;
			cfg.max_connections = (unsigned)v;
			break;
		case O_IDLE:
			if (parse_seconds(optarg, &cfg.idle_timeout_usec) < 0)
				goto bad;
			break;
		case O_REQUEST:
			if (parse_seconds(optarg, &cfg.request_timeout_usec) < 0)
				goto bad;
			break;
		case O_MAX_HEAD:
			if (parse_uint(optarg, 64, 1024 * 1024, &v) < 0)
				goto bad;
			cfg.max_head = v;
			break;
		case O_MAX_HEADERS:
			if (parse_uint(optarg, 1, 128, &v) < 0)
				goto bad;
			cfg.max_headers = (unsigned)v;
			break;
		case O_VERBOSE: log_set_max_priority(LOG_DEBUG); break;
		case O_HELP: usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		continue;
bad:
		log_error("invalid value for --%s: %s", opts[c - O_DOCUMENT].name, optarg);
		return 2;
	}
	if (optind < argc) {
		log_error("unexpected argument: %s", argv[optind]);
		return 2;
	}
	if (cfg.document_path[0] != '/') {
		log_error("--document must be an absolute path: %s", cfg.document_path);
		return 2;
	}

	raise_fd_limit(cfg.max_connections + 64);

	return run(&cfg);
}
