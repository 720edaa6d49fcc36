/* The rtnetlink layer: the MMDS alias address on lo. Returns 0 or -errno;
 * on failure `failure` names the request. */
#ifndef GUARD_RTNL_H
#define GUARD_RTNL_H

#include <netinet/in.h>
#include <stdbool.h>

#include "report.h"

/* The alias as install puts it: <addr>/32 on lo, scope host (never chosen
 * as the source of a packet leaving through another interface). */
#define GUARD_ALIAS_PREFIXLEN 32

struct alias_state {
	bool present;          /* <addr> is an address of lo */
	unsigned prefixlen;
	unsigned scope;        /* RT_SCOPE_* */
};

int rtnl_alias_query(struct in_addr addr, struct alias_state *state, struct guard_failure *failure);

/* Adds <addr>/32 scope host to lo; an existing <addr> on lo with another
 * prefix length or scope is replaced. Doing nothing is success. */
int rtnl_alias_install(struct in_addr addr, struct guard_failure *failure);

/* Deletes <addr> from lo if it is there. */
int rtnl_alias_remove(struct in_addr addr, struct guard_failure *failure);

/* "scope host" etc., for messages. */
const char *rtnl_scope_name(unsigned scope);

#endif
