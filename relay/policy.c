#include "policy.h"

#include <errno.h>

#include "../guard/ruleset.h"
#include "vsock_ports.h"

int relay_policy_init(struct relay_policy *policy, const char *ports, char *why, size_t why_len)
{
	struct guard_config config = { 0 };
	int r = guard_parse_ports(ports ? ports : GUARD_DEFAULT_PORTS, &config, why, why_len);

	if (r < 0)
		return r;
	*policy = (struct relay_policy){ 0 };
	for (size_t i = 0; i < config.n_ports; i++)
		policy->refused[policy->n_refused++] = config.ports[i];
	policy->refused[policy->n_refused++] = GUARD_MMDS_PORT;
	return 0;
}

static const char *port_role(uint32_t port)
{
	switch (port) {
	case 8888:
		return "Jupyter, which has no token";
	case VSOCK_PORT_ENVD:
		return "envd (use vsock port 49983)";
	case VSOCK_PORT_CODE_INTERPRETER:
		return "the code interpreter (use vsock port 49999)";
	case GUARD_MMDS_PORT:
		return "the metadata service's port";
	default:
		return "guarded by envd-guard";
	}
}

const char *relay_policy_refusal(const struct relay_policy *policy, uint32_t port)
{
	for (size_t i = 0; i < policy->n_refused; i++)
		if (policy->refused[i] == port)
			return port_role(port);
	return NULL;
}
