/* The resident service's side of systemd's socket activation: the one
 * listening socket it passes (units/e2b-clone.socket, Accept=no), and the
 * wait for the next connection, which SIGTERM and SIGINT end. Returns
 * -errno; main.c says what failed. */
#ifndef CLONE_LISTENER_H
#define CLONE_LISTENER_H

#include <signal.h>
#include <stdbool.h>

/* The one listening stream socket of LISTEN_FDS, made non-blocking (the
 * wait polls it, and accept() must not block on a connection its peer
 * already reset). -ENOENT: none passed; -E2BIG: more than one. */
int listener_take(int *fd);

/* SIGTERM and SIGINT are blocked from now on but while listener_accept
 * waits, so a connection being served is finished before the process stops;
 * SIGPIPE is ignored (a peer gone is no reason to stop). *waiting is the
 * mask to wait with. */
int listener_signals(sigset_t *waiting);
/* True once SIGTERM or SIGINT came. */
bool listener_stopping(void);

/* The next connection (SOCK_CLOEXEC, sends bounded by send_timeout_ms).
 * -EINTR when a signal ended the wait, -EAGAIN or -ECONNABORTED when the
 * connection was gone by the accept, other -errno from accept4(). */
int listener_accept(int fd, const sigset_t *waiting, int send_timeout_ms);

#endif
