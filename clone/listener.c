/* See listener.h. */
#include "listener.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

int listener_take(int *fd)
{
	int n = sd_listen_fds(1);
	if (n < 0)
		return n;
	if (n != 1)
		return n == 0 ? -ENOENT : -E2BIG;
	if (sd_is_socket(SD_LISTEN_FDS_START, AF_UNSPEC, SOCK_STREAM, 1) <= 0)
		return -ENOTSOCK;
	int flags = fcntl(SD_LISTEN_FDS_START, F_GETFL);
	if (flags < 0 || fcntl(SD_LISTEN_FDS_START, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	*fd = SD_LISTEN_FDS_START;
	return 0;
}

static volatile sig_atomic_t stopping;

static void on_stop(int sig)
{
	(void)sig;
	stopping = 1;
}

int listener_signals(sigset_t *waiting)
{
	struct sigaction stop = { .sa_handler = on_stop }, ignore = { .sa_handler = SIG_IGN };
	sigset_t block;

	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	if (sigprocmask(SIG_BLOCK, &block, waiting) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
	    sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGPIPE, &ignore, NULL) < 0)
		return -errno;
	sigdelset(waiting, SIGTERM);
	sigdelset(waiting, SIGINT);
	return 0;
}

bool listener_stopping(void)
{
	return stopping;
}

int listener_accept(int fd, const sigset_t *waiting, int send_timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct timeval snd = { .tv_sec = send_timeout_ms / 1000, .tv_usec = send_timeout_ms % 1000 * 1000 };

	if (ppoll(&p, 1, NULL, waiting) < 0)
		return -errno;
	int conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
	if (conn < 0)
		return -errno;
	if (setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof(snd)) < 0) {
		int r = -errno;
		close(conn);
		return r;
	}
	return conn;
}
