/* Opening and recognising listening sockets (listen.h). */
#include "listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "cleanup.h"

static int parse_port(const char *s, uint16_t *port)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

/* "a.b.c.d:port" or "[v6]:port" into ss. */
static int parse_inet(const char *spec, struct sockaddr_storage *ss, socklen_t *sl)
{
	char host[128];
	const char *colon = strrchr(spec, ':');
	uint16_t port;
	size_t hlen = colon ? (size_t)(colon - spec) : 0;

	if (!colon || hlen >= sizeof(host) || parse_port(colon + 1, &port) < 0)
		return -EINVAL;
	memcpy(host, spec, hlen);
	host[hlen] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		host[hlen - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) != 1)
			return -EINVAL;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		*sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
			return -EINVAL;
		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		*sl = sizeof(*a);
	}
	return 0;
}

int listen_inet(const char *spec)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int r = parse_inet(spec, &ss, &sl);
	if (r < 0)
		return r;

	int family = ss.ss_family;
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

static int make_parent_dir(const char *path)
{
	_cleanup_free_ char *dir = strdup(path);
	if (!dir)
		return -ENOMEM;
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int listen_control(const char *path)
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
	int r = make_parent_dir(path);
	if (r < 0)
		return r;

	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* The socket is born 0600: no window, and no chmod by a path that
	 * could be swapped for a symlink between bind and chmod. */
	mode_t old = umask(0177);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, 16) < 0)
		return -errno;
	return TAKE_FD(fd);
}

int listen_kind_of(int fd, enum mmds_listener_kind *kind)
{
	if (sd_is_socket(fd, AF_UNIX, SOCK_STREAM, 1) > 0)
		*kind = MMDS_LISTEN_CONTROL;
	else if (sd_is_socket(fd, AF_VSOCK, SOCK_STREAM, 1) > 0)
		*kind = MMDS_LISTEN_CONTROL_VSOCK;
	else if (sd_is_socket_inet(fd, 0, SOCK_STREAM, 1, 0) > 0)
		*kind = MMDS_LISTEN_GUEST;
	else
		return -ENOTSOCK;
	return 0;
}
