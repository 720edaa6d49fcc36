#include "policy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "decimal.h"

#include "vsock_ports.h"

int relay_policy_init(struct relay_policy *policy, const char *ports, char *why, size_t why_len)
{
	uint16_t list[GUARDED_PORTS_MAX];
	size_t n = 0;
	int r = guarded_ports_parse(ports ? ports : GUARDED_PORTS_DEFAULT, list, &n, why, why_len);

	if (r < 0)
		return r;
	*policy = (struct relay_policy){ 0 };
	for (size_t i = 0; i < n; i++)
		policy->refused[policy->n_refused++] = list[i];
	policy->refused[policy->n_refused++] = GUARDED_MMDS_PORT;
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
	case GUARDED_MMDS_PORT:
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
	if (policy->ephemeral_lo && port >= policy->ephemeral_lo && port <= policy->ephemeral_hi)
		return "in the kernel's ephemeral port range (--ephemeral-ports)";
	return NULL;
}

/* One decimal port from *p up to a byte not a digit; *p moves past it. */
static int range_number(const char **p, uint16_t *out, char *why, size_t why_len)
{
	char digits[8];
	size_t n = strspn(*p, "0123456789");
	uint64_t v;

	if (n == 0 || n >= sizeof(digits)) {
		snprintf(why, why_len, "port range: expected a port (1-65535) at '%.12s'", *p);
		return -EINVAL;
	}
	memcpy(digits, *p, n);
	digits[n] = 0;
	if (parse_decimal(digits, 1, 65535, &v) < 0) {
		snprintf(why, why_len, "port range: '%s' is not a port (1-65535)", digits);
		return -EINVAL;
	}
	*p += n;
	*out = (uint16_t)v;
	return 0;
}

int relay_parse_port_range(const char *text, uint16_t *lo, uint16_t *hi, char *why, size_t why_len)
{
	const char *p = text;
	uint16_t a, b;
	int r = range_number(&p, &a, why, why_len);

	if (r < 0)
		return r;
	if (*p == '-')
		p++;
	else if (*p == ' ' || *p == '\t')
		p += strspn(p, " \t");
	else {
		snprintf(why, why_len, "port range '%.24s': expected LO-HI", text);
		return -EINVAL;
	}
	r = range_number(&p, &b, why, why_len);
	if (r < 0)
		return r;
	if (*p == '\n')
		p++;
	if (*p || a > b) {
		snprintf(why, why_len, "port range '%.24s': expected LO-HI with LO <= HI", text);
		return -EINVAL;
	}
	*lo = a;
	*hi = b;
	return 0;
}
