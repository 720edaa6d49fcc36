/* e2b-hostlink forward: local TCP listeners, each bridged per connection to
 * one guest loopback port (see link.h for how a port is reached). */
#ifndef HOSTLINK_FORWARD_H
#define HOSTLINK_FORWARD_H

#include <netinet/in.h>
#include <stdint.h>

#include "link.h"

#define FORWARD_MAX_PORTS 16

struct forward_spec {
	struct sockaddr_storage listen;   /* where the host's clients connect */
	socklen_t listen_len;
	uint16_t guest_port;
};

/* Runs until a signal ends it; -errno (with `why`) if it cannot start. */
int forward_run(const struct link *link, const struct forward_spec *specs, unsigned n,
		unsigned max_connections, char *why, size_t why_len);

#endif
