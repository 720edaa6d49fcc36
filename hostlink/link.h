/* The host's way into one guest: a transport plus the handshakes.
 *
 *   hybrid vsock (Firecracker, cloud-hypervisor): connect to the VMM's unix
 *     socket, send "CONNECT <vsock port>\n", expect "OK <n>\n";
 *   AF_VSOCK (QEMU vhost-vsock, Kata): connect to (CID, vsock port).
 *
 * Guest loopback ports: the fixed relays' ports (49983, 49999) are their own
 * vsock ports; any other port goes through the dynamic relay (vsock port
 * 10000) with its own "CONNECT <port>\n" / "OK\n" exchange. */
#ifndef HOSTLINK_LINK_H
#define HOSTLINK_LINK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

enum link_kind { LINK_UDS, LINK_CID };

struct link {
	enum link_kind kind;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint32_t cid;
	int timeout_ms;      /* connect plus handshakes */
};

/* "/run/fc/v.sock" or "cid 3", for messages. */
const char *link_name(const struct link *link);

/* A connected, blocking stream to guest vsock port `vport`, handshake done.
 * -ENOENT/-ECONNREFUSED (no such socket / nobody listening at the VMM),
 * -ECONNRESET (handshake refused: the VMM closed it), -ETIMEDOUT, -EPROTO;
 * `why` says which, naming the port. */
int link_open(const struct link *link, uint32_t vport, char *why, size_t why_len);

/* The same to guest 127.0.0.1:`port`, through a fixed relay or the dynamic
 * one. -ECONNREFUSED with the relay's own sentence when it refuses. */
int link_open_loopback(const struct link *link, uint16_t port, char *why, size_t why_len);

#endif
