/* The guard's ruleset: the one description both `install` (which turns it
 * into a netlink batch) and `check` (which compares the kernel's state
 * with it) are built from.
 *
 *   table inet e2b_guard {
 *     chain input {
 *       type filter hook input priority raw; policy accept;
 *       iifname != "lo" tcp dport <port> drop          # one per guarded port
 *       iifname != "lo" ip daddr <alias> tcp dport 80 drop
 *     }
 *   }
 *
 * The expressions are exactly the ones the nft CLI generates for those
 * lines, so `nft list ruleset` prints them back as written above. */
#ifndef GUARD_RULESET_H
#define GUARD_RULESET_H

#include <stddef.h>
#include <stdint.h>

#include "args.h"

struct nftnl_table;
struct nftnl_chain;
struct nftnl_rule;

#define GUARD_FAMILY_NAME "inet"
#define GUARD_TABLE       "e2b_guard"
#define GUARD_CHAIN       "input"
#define GUARD_CHAIN_TYPE  "filter"
/* NF_IP_PRI_RAW: ahead of the distro's and Docker's filter chains (0),
 * mangle (-150) and anything that could queue the packet to userspace
 * first. A drop is final in every base chain, so the priority is about
 * being first, not about winning. */
#define GUARD_PRIORITY    (-300)
#define GUARD_MMDS_PORT   GUARDED_MMDS_PORT
#define GUARD_LOOPBACK    "lo"

/* Rules in order: one per guarded port, then the alias rule. */
size_t guard_rule_count(const struct guard_config *config);

/* The rule's name in messages, e.g. "drop tcp dport 49983 iifname != lo". */
int guard_rule_name(const struct guard_config *config, size_t index, char *buf, size_t len);

/* New libnftnl objects (NULL and errno set on failure); the caller frees. */
struct nftnl_table *guard_table_new(void);
struct nftnl_chain *guard_chain_new(void);
struct nftnl_rule *guard_rule_new(const struct guard_config *config, size_t index);

/* The rule's expressions in a canonical text form, one "[ name body ]" per
 * expression, independent of handle and position. Rules dumped from the
 * kernel and rules built here compare equal exactly when they match. */
int guard_rule_expressions(const struct nftnl_rule *rule, char *buf, size_t len);

#endif
