/* The netlink plumbing nft.c and rtnl.c share: a bound socket, and one
 * request answered by a dump or an ack. */
#ifndef GUARD_NLSOCK_H
#define GUARD_NLSOCK_H

#include <stddef.h>

#include <libmnl/libmnl.h>

/* Big enough for any dump chunk the kernel sends (it sizes them to 32 KiB
 * at most by default; libmnl suggests 8 KiB). */
#define NL_BUFFER 32768

void mnl_socket_closep(struct mnl_socket **nl);

/* A netlink socket on `bus` (NETLINK_ROUTE, NETLINK_NETFILTER), bound to
 * an automatic port id; -errno on failure. */
int nl_open(int bus, struct mnl_socket **out);

/* Sends the request at the start of buf, then reads the answers into buf
 * and runs cb over each (NULL for a bare ack) until the kernel's
 * NLMSG_DONE or ack for the request's sequence number. Returns 0, or
 * -errno: the kernel's error for a refused request, the callback's errno,
 * or -EBADMSG when the callback failed without setting errno. */
int nl_talk(struct mnl_socket *nl, void *buf, size_t size, mnl_cb_t cb, void *data);

#endif
