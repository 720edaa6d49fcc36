/* The nftables layer: the guard's table read back and compared, and the
 * one transaction that creates, replaces or removes it. Returns 0 or
 * -errno; on failure `failure` names the request the kernel rejected. */
#ifndef GUARD_NFT_H
#define GUARD_NFT_H

#include "args.h"
#include "nlbatch.h"
#include "report.h"

/* What install found and did. */
enum nft_install_action {
	NFT_INSTALL_CREATED,    /* absent: created in one transaction */
	NFT_INSTALL_UNCHANGED,  /* already exactly right: nothing committed */
	NFT_INSTALL_REPLACED,   /* different (see findings): replaced atomically */
	NFT_INSTALL_RACED,      /* created by another process meanwhile: replaced */
};

/* Makes table inet e2b_guard exactly what check expects: creates it if
 * absent (no delete, which would cost the kernel an RCU grace period),
 * commits nothing if it is already right, and otherwise replaces it in one
 * transaction. `findings` receives the differences that made it replace. */
int nft_guard_install(const struct guard_config *config, struct guard_findings *findings,
		      enum nft_install_action *action, struct guard_failure *failure);

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
