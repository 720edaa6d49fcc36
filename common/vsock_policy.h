/* Which vsock peers a host-only guest service admits: a list of peer CIDs.
 * By default the host alone (CID 2): any guest-side process connecting to the
 * guest's own CID, or to CID 1 through vsock_loopback, is refused. Shared by
 * mmds-serve's host API and the clone step (e2b-clone). */
#ifndef E2B_VSOCK_POLICY_H
#define E2B_VSOCK_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VSOCK_POLICY_CID_HOST 2 /* VMADDR_CID_HOST */
#define VSOCK_POLICY_MAX_CIDS 8

struct vsock_policy {
	uint32_t cids[VSOCK_POLICY_MAX_CIDS];
	unsigned n;
};

/* "2" or "1,2": decimal CIDs, comma-separated, at least one. -EINVAL for
 * anything else (empty items, signs, over 32 bits, the wildcard -1U, more
 * than VSOCK_POLICY_MAX_CIDS). */
int vsock_policy_parse(const char *spec, struct vsock_policy *policy);

bool vsock_peer_allowed(const struct vsock_policy *policy, uint32_t cid);

/* The peer CID of an accepted AF_VSOCK connection; -errno
 * (-EAFNOSUPPORT when fd is not AF_VSOCK). */
int vsock_peer_cid(int fd, uint32_t *cid);

/* The port an AF_VSOCK socket is bound to (for messages); -errno. */
int vsock_local_port(int fd, uint32_t *port);

/* "1,2" into buf, for messages. */
void vsock_policy_format(const struct vsock_policy *policy, char *buf, size_t len);

#endif
