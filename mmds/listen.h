/* The listening sockets: those systemd passes (socket activation), told
 * apart by family, and the ones mmds-serve opens itself when run alone. */
#ifndef MMDS_LISTEN_H
#define MMDS_LISTEN_H

#include "server.h"

/* An IPv4 "a.b.c.d:port" or "[v6]:port" TCP listener with IP_FREEBIND.
 * -EINVAL for a malformed spec. */
int listen_inet(const char *spec);

/* A root-only Unix listener: the parent directory is made 0700 if missing,
 * the socket is 0600 (by the umask at bind, never chmod by path). A stale
 * socket is replaced; any other file there gives -EEXIST. */
int listen_control(const char *path);

/* What a passed fd is, by family: inet is the guest MMDS, AF_UNIX the
 * control API, AF_VSOCK the control API for the host. -ENOTSOCK when it is
 * no listening stream socket of these. */
int listen_kind_of(int fd, enum mmds_listener_kind *kind);

#endif
