/* Which loopback ports the dynamic relay refuses: every port envd-guard
 * protects (its own default list, guard/args.h, unless --guarded says
 * otherwise) and the metadata alias's port (guard/ruleset.h). Reaching them
 * through vsock would bypass the guard: Jupyter (8888) has no token at all. */
#ifndef RELAY_POLICY_H
#define RELAY_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "../guard/args.h"

struct relay_policy {
	uint16_t refused[GUARD_MAX_PORTS + 1];
	size_t n_refused;
};

/* ports: a guard --ports list ("49983,49999,8888"); NULL for the guard's default. */
int relay_policy_init(struct relay_policy *policy, const char *ports, char *why, size_t why_len);

/* NULL if the port may be relayed, else what the port is ("Jupyter (no token)"). */
const char *relay_policy_refusal(const struct relay_policy *policy, uint32_t port);

#endif
