/* The nfnetlink batch: messages sent in one sendmsg between
 * NFNL_MSG_BATCH_BEGIN and NFNL_MSG_BATCH_END, which the kernel applies as
 * one transaction. Every message asks for an acknowledgement and is filed
 * under the object it is about, so a refusal names that object. */
#ifndef GUARD_NLBATCH_H
#define GUARD_NLBATCH_H

#include <stdint.h>

#include <libmnl/libmnl.h>

#include "report.h"

/* guard_failure.msg_type for what is not one nftables message: the batch
 * as a whole (its begin/end markers), or no message at all (the socket).
 * Negative, since NFT_MSG_* and NFNL_MSG_BATCH_* overlap. */
#define NFT_GUARD_MSG_BATCH (-2)
#define NFT_GUARD_MSG_NONE  (-1)

struct nl_batch;

/* An empty batch for nfnetlink subsystem `subsys` (NFNL_SUBSYS_NFTABLES);
 * -ENOMEM on failure. */
int nl_batch_new(uint16_t subsys, struct nl_batch **out);
void nl_batch_freep(struct nl_batch **b);

/* Appends a message of `type` (the subsystem's, e.g. NFT_MSG_NEWTABLE) for
 * `family` with NLM_F_ACK | `flags`, about the object `fmt` names. Returns
 * its header for the caller to add the payload to, or NULL when the batch is
 * full (nl_batch_talk then fails with -E2BIG). */
struct nlmsghdr *nl_batch_add(struct nl_batch *b, uint16_t type, uint8_t family, uint16_t flags,
			      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Sends the batch in one sendmsg and waits until every message has its
 * acknowledgement or the kernel aborted the transaction. Returns 0, or the
 * error of the first refused message in batch order (later ones follow from
 * the abort), which `failure` then names. */
int nl_batch_talk(struct mnl_socket *nl, struct nl_batch *b, struct guard_failure *failure);

#endif
