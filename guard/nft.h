/* The nftables netlink layer: one batch to install or remove the guard's
 * table, and dumps to read it back. Returns 0 or -errno; on failure
 * `failure` names the request the kernel rejected. */
#ifndef GUARD_NFT_H
#define GUARD_NFT_H

#include "args.h"
#include "report.h"

/* guard_failure.msg_type for what is not one nftables message: the batch
 * as a whole (its begin/end markers), or no message at all (the socket).
 * Negative, since NFT_MSG_* and NFNL_MSG_BATCH_* overlap. */
#define NFT_GUARD_MSG_BATCH (-2)
#define NFT_GUARD_MSG_NONE  (-1)

/* Creates or atomically replaces table inet e2b_guard (one transaction). */
int nft_guard_install(const struct guard_config *config, struct guard_failure *failure);

/* Deletes table inet e2b_guard if it exists; nothing else. */
int nft_guard_remove(struct guard_failure *failure);

/* Compares the live table with what install creates; each difference
 * becomes one finding. Returns 0 when the comparison ran (findings or
 * not), -errno when the kernel could not be read. */
int nft_guard_check(const struct guard_config *config, struct guard_findings *findings,
		    struct guard_failure *failure);

/* Why the kernel may have answered `error` (positive errno) to `msg_type`
 * (NFT_MSG_* or NFT_GUARD_MSG_*),
 * or NULL when the errno's own text says it all. */
const char *nft_error_hint(int error, int msg_type);

#endif
