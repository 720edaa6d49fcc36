/* The host's way into one guest: a transport plus the handshakes.
 *
 *   hybrid vsock (Firecracker, cloud-hypervisor): connect to the VMM's unix
 *     socket, send "CONNECT <vsock port>\n", expect "OK <n>\n";
 *   AF_VSOCK (QEMU vhost-vsock, Kata): connect to (CID, vsock port).
 *
 * Guest loopback ports: the fixed relays' ports (49983, 49999) are their own
 * vsock ports; any other port goes through the dynamic relay (vsock port
 * 10000) with its own "CONNECT <port>\n" / "OK\n" exchange.
 *
 * Every step is non-blocking: struct link_dial is the state machine an event
 * loop drives (forward), link_open*() drive it with poll() (mmds, wait). */
#ifndef HOSTLINK_LINK_H
#define HOSTLINK_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include "handshake.h"

enum link_kind { LINK_UDS, LINK_CID };

struct link {
	enum link_kind kind;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint32_t cid;
	int timeout_ms;      /* --timeout, for messages; forward: per connection */
	int64_t deadline;    /* io_now_ms() time: when link_open* give up; the whole
			      * command's end (one budget for every open and exchange);
			      * 0: timeout_ms from each dial's start (forward) */
};

/* One guest stream being opened. Fields are the machine's own. */
struct link_dial {
	const struct link *link;
	int fd;                  /* -1 between attempts */
	int phase;
	bool backlog_full;       /* a unix connect met EAGAIN (retried) */
	uint32_t vport;          /* the vsock port connected to */
	uint16_t guest_port;     /* through the dynamic relay: the loopback port; else 0 */
	int64_t deadline, retry_at;
	size_t out_off, out_len, line_len;
	char out[32];
	char line[HANDSHAKE_LINE_MAX];
};

/* When a blocking open or exchange started now must end: link->deadline,
 * or without one timeout_ms from now. */
int64_t link_end(const struct link *link);

/* "/run/fc/v.sock" or "cid 3", for messages. */
const char *link_name(const struct link *link);

/* Starts opening guest 127.0.0.1:`port` (a fixed relay's own vsock port, or
 * the dynamic relay's); nothing is done until the first step. */
void link_dial_loopback(struct link_dial *d, const struct link *link, uint16_t port);

/* Starts opening guest vsock port `vport` (the VMM's handshake only). */
void link_dial_vsock(struct link_dial *d, const struct link *link, uint32_t vport);

/* Goes as far as it can without blocking. 1: open, take d->fd (non-blocking)
 * with link_dial_take; 0: call again once d->fd is ready for *events
 * (POLLIN/POLLOUT), or, when *events is 0, at link_dial_wake_at; -errno with
 * `why` naming the port (d->fd closed). Steps after the deadline time out. */
int link_dial_step(struct link_dial *d, short *events, char *why, size_t why_len);

/* When the machine must be stepped even without an event: a retry, or its
 * deadline (io_now_ms() time). */
int64_t link_dial_wake_at(const struct link_dial *d);

/* The open stream's fd, now the caller's. */
int link_dial_take(struct link_dial *d);

/* Abandons it (closes the fd). */
void link_dial_close(struct link_dial *d);

/* The same, blocking until done or link->deadline: a connected non-blocking stream
 * to guest vsock port `vport`, handshake done. -ENOENT/-ECONNREFUSED (no such
 * socket / nobody listening at the VMM), -ECONNRESET (handshake refused: the
 * VMM closed it), -ETIMEDOUT, -EPROTO; `why` says which, naming the port. */
int link_open(const struct link *link, uint32_t vport, char *why, size_t why_len);

/* The same to guest 127.0.0.1:`port`, through a fixed relay or the dynamic
 * one. -ECONNREFUSED with the relay's own sentence when it refuses. */
int link_open_loopback(const struct link *link, uint16_t port, char *why, size_t why_len);

#endif
