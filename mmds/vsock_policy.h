/* Who may use the host API over vsock: a list of peer CIDs. By default the
 * host alone (CID 2): any guest-side process connecting to the guest's own
 * CID, or to CID 1 through vsock_loopback, is refused, so code inside the
 * guest can never set the document (and with it envd's accessTokenHash). */
#ifndef MMDS_VSOCK_POLICY_H
#define MMDS_VSOCK_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MMDS_VSOCK_CID_HOST 2 /* VMADDR_CID_HOST */
#define MMDS_VSOCK_MAX_CIDS 8

struct mmds_vsock_policy {
	uint32_t cids[MMDS_VSOCK_MAX_CIDS];
	unsigned n;
};

/* "2" or "1,2": decimal CIDs, comma-separated, at least one. -EINVAL for
 * anything else (empty items, signs, over 32 bits, the wildcard -1U, more
 * than MMDS_VSOCK_MAX_CIDS). */
int mmds_vsock_policy_parse(const char *spec, struct mmds_vsock_policy *policy);

bool mmds_vsock_peer_allowed(const struct mmds_vsock_policy *policy, uint32_t cid);

/* The peer CID of an accepted AF_VSOCK connection; -errno
 * (-EAFNOSUPPORT when fd is not AF_VSOCK). */
int mmds_vsock_peer_cid(int fd, uint32_t *cid);

/* The port an AF_VSOCK socket is bound to (for messages); -errno. */
int mmds_vsock_local_port(int fd, uint32_t *port);

/* "1,2" into buf, for messages. */
void mmds_vsock_policy_format(const struct mmds_vsock_policy *policy, char *buf, size_t len);

#endif
