/* Which loopback ports the dynamic relay refuses: every port envd-guard
 * protects (the one list, common/guarded_ports.h, unless --guarded says
 * otherwise) and the metadata alias's port (GUARDED_MMDS_PORT). Reaching them
 * through vsock would bypass the guard: Jupyter (8888) has no token at all.
 * And the kernel's ephemeral port range: a listener there is a process's
 * private port (bound to port 0: a Jupyter kernel's ZeroMQ sockets, a
 * debugger, an internal RPC), not a server the user published. */
#ifndef RELAY_POLICY_H
#define RELAY_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "guarded_ports.h"

struct relay_policy {
	uint16_t refused[GUARDED_PORTS_MAX + 1];
	size_t n_refused;
	uint16_t ephemeral_lo, ephemeral_hi; /* refused too; 0-0: none */
};

/* Where the kernel keeps the range it picks outgoing ports from. */
#define RELAY_EPHEMERAL_RANGE_FILE "/proc/sys/net/ipv4/ip_local_port_range"

/* "LO-HI", or the kernel file's "LO<tab>HI\n" (any run of blanks between,
 * one optional newline after), 1 <= LO <= HI <= 65535. */
int relay_parse_port_range(const char *text, uint16_t *lo, uint16_t *hi, char *why, size_t why_len);

/* ports: a guard --ports list ("49983,49999,8888"); NULL for the guard's default. */
int relay_policy_init(struct relay_policy *policy, const char *ports, char *why, size_t why_len);

/* NULL if the port may be relayed, else why it may not ("Jupyter, which has no token"). */
const char *relay_policy_refusal(const struct relay_policy *policy, uint32_t port);

#endif
