/* The vsock peer policy (vsock_policy.h). */
#include "vsock_policy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/vm_sockets.h>

int vsock_policy_parse(const char *spec, struct vsock_policy *policy)
{
	struct vsock_policy p = { .n = 0 };
	const char *s = spec;

	for (;;) {
		uint64_t v = 0;
		const char *start = s;
		while (*s >= '0' && *s <= '9') {
			v = v * 10 + (uint64_t)(*s++ - '0');
			if (v >= UINT32_MAX) /* VMADDR_CID_ANY is no peer */
				return -EINVAL;
		}
		if (s == start || p.n == VSOCK_POLICY_MAX_CIDS)
			return -EINVAL;
		p.cids[p.n++] = (uint32_t)v;
		if (*s == '\0')
			break;
		if (*s++ != ',')
			return -EINVAL;
	}
	*policy = p;
	return 0;
}

bool vsock_peer_allowed(const struct vsock_policy *policy, uint32_t cid)
{
	for (unsigned i = 0; i < policy->n; i++)
		if (policy->cids[i] == cid)
			return true;
	return false;
}

/* fd's own vsock address, or its peer's. */
static int vsock_address(int fd, bool peer, struct sockaddr_vm *sa)
{
	socklen_t len = sizeof(*sa);
	int r = peer ? getpeername(fd, (struct sockaddr *)sa, &len) : getsockname(fd, (struct sockaddr *)sa, &len);

	if (r < 0)
		return -errno;
	return sa->svm_family == AF_VSOCK ? 0 : -EAFNOSUPPORT;
}

int vsock_peer_cid(int fd, uint32_t *cid)
{
	struct sockaddr_vm sa;
	int r = vsock_address(fd, true, &sa);
	if (r == 0)
		*cid = sa.svm_cid;
	return r;
}

int vsock_local_port(int fd, uint32_t *port)
{
	struct sockaddr_vm sa;
	int r = vsock_address(fd, false, &sa);
	if (r == 0)
		*port = sa.svm_port;
	return r;
}

void vsock_policy_format(const struct vsock_policy *policy, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < policy->n && off < len; i++) {
		int n = snprintf(buf + off, len - off, "%s%u", i ? "," : "", policy->cids[i]);
		if (n < 0)
			break;
		off += (size_t)n;
	}
}
