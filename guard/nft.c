#include "nft.h"

#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/gen.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>

#include "cleanup.h"
#include "nlbatch.h"
#include "nlsock.h"
#include "ruleset.h"

#define MAX_RULES      128
#define MAX_CHAINS     16
#define DUMP_RETRIES   3

static void nftnl_table_freep(struct nftnl_table **t)
{
	if (*t)
		nftnl_table_free(*t);
}

static void nftnl_chain_freep(struct nftnl_chain **c)
{
	if (*c)
		nftnl_chain_free(*c);
}

static void nftnl_rule_freep(struct nftnl_rule **r)
{
	if (*r)
		nftnl_rule_free(*r);
}

static void nftnl_gen_freep(struct nftnl_gen **g)
{
	if (*g)
		nftnl_gen_free(*g);
}

#define _cleanup_table_ _cleanup_(nftnl_table_freep)
#define _cleanup_chain_ _cleanup_(nftnl_chain_freep)
#define _cleanup_rule_  _cleanup_(nftnl_rule_freep)

static int open_socket(struct mnl_socket **out, struct guard_failure *failure)
{
	int r = nl_open(NETLINK_NETFILTER, out);

	if (r < 0)
		guard_failure_set(failure, GUARD_SUBSYS_NFTABLES, NFT_GUARD_MSG_NONE, "nfnetlink socket");
	return r;
}

/* ---- batches -------------------------------------------------------- */

#define TABLE_OBJECT "table " GUARD_FAMILY_NAME " " GUARD_TABLE
#define CHAIN_OBJECT "chain " GUARD_FAMILY_NAME " " GUARD_TABLE " " GUARD_CHAIN

static int put_table(struct nl_batch *b, uint16_t type, uint16_t flags, const struct nftnl_table *t)
{
	struct nlmsghdr *nlh = nl_batch_add(b, type, NFPROTO_INET, flags, TABLE_OBJECT);

	if (!nlh)
		return -E2BIG;
	nftnl_table_nlmsg_build_payload(nlh, t);
	return 0;
}

/* The table (NLM_F_EXCL: it must not exist at this point of the
 * transaction), its chain and every rule. */
static int put_guard(struct nl_batch *b, const struct guard_config *config, const struct nftnl_table *t)
{
	_cleanup_chain_ struct nftnl_chain *c = guard_chain_new();
	struct nlmsghdr *nlh;
	int r;

	if (!c)
		return -ENOMEM;
	r = put_table(b, NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL, t);
	if (r < 0)
		return r;
	nlh = nl_batch_add(b, NFT_MSG_NEWCHAIN, NFPROTO_INET, NLM_F_CREATE | NLM_F_EXCL, CHAIN_OBJECT);
	if (!nlh)
		return -E2BIG;
	nftnl_chain_nlmsg_build_payload(nlh, c);
	for (size_t i = 0; i < guard_rule_count(config); i++) {
		_cleanup_rule_ struct nftnl_rule *rule = guard_rule_new(config, i);
		char name[128];

		if (!rule)
			return -errno;
		r = guard_rule_name(config, i, name, sizeof(name));
		if (r < 0)
			return r;
		nlh = nl_batch_add(b, NFT_MSG_NEWRULE, NFPROTO_INET, NLM_F_CREATE | NLM_F_APPEND | NLM_F_EXCL,
				   "rule '%s'", name);
		if (!nlh)
			return -E2BIG;
		nftnl_rule_nlmsg_build_payload(nlh, rule);
	}
	return 0;
}

enum commit_mode {
	COMMIT_CREATE,   /* the table is absent: create it, failing if it exists */
	COMMIT_REPLACE,  /* delete whatever table is there, create ours afresh */
	COMMIT_REMOVE,   /* delete whatever table is there */
};

/* One transaction: the kernel applies all of it or nothing. The delete is
 * preceded by a create-if-absent, so it cannot fail; it costs the kernel an
 * RCU grace period, which is why a first install uses COMMIT_CREATE. */
static int commit(enum commit_mode mode, const struct guard_config *config, struct guard_failure *failure)
{
	_cleanup_(mnl_socket_closep) struct mnl_socket *nl = NULL;
	_cleanup_(nl_batch_freep) struct nl_batch *b = NULL;
	_cleanup_table_ struct nftnl_table *t = guard_table_new();
	int r;

	r = t ? nl_batch_new(NFNL_SUBSYS_NFTABLES, &b) : -ENOMEM;
	if (r == 0 && mode != COMMIT_CREATE) {
		r = put_table(b, NFT_MSG_NEWTABLE, NLM_F_CREATE, t);
		if (r == 0)
			r = put_table(b, NFT_MSG_DELTABLE, 0, t);
	}
	if (r == 0 && mode != COMMIT_REMOVE)
		r = put_guard(b, config, t);
	if (r < 0) {
		guard_failure_set(failure, GUARD_SUBSYS_NFTABLES, NFT_GUARD_MSG_NONE,
				  r == -E2BIG ? "nftables batch: too large" : "nftables batch");
		return r;
	}
	r = open_socket(&nl, failure);
	if (r == 0)
		r = nl_batch_talk(nl, b, failure);
	return r;
}

int nft_guard_remove(struct guard_failure *failure)
{
	return commit(COMMIT_REMOVE, NULL, failure);
}

/* ---- dumps ---------------------------------------------------------- */

struct live_state {
	bool table_found;
	uint32_t table_flags;
	uint32_t table_use;
	struct nftnl_chain *chain;          /* ours, if present */
	char extra_chain[MAX_CHAINS][64];
	size_t n_extra_chains;
	struct nftnl_rule *rule[MAX_RULES]; /* in the kernel's order */
	size_t n_rules;
	size_t n_rules_dropped;
};

/* Frees what a dump collected and empties `s`; also its cleanup. */
static void live_state_clear(struct live_state *s)
{
	if (s->chain)
		nftnl_chain_free(s->chain);
	for (size_t i = 0; i < s->n_rules; i++)
		nftnl_rule_free(s->rule[i]);
	memset(s, 0, sizeof(*s));
}

static bool is_ours(const char *table)
{
	return table && strcmp(table, GUARD_TABLE) == 0;
}

static int table_cb(const struct nlmsghdr *nlh, void *data)
{
	struct live_state *s = data;
	_cleanup_table_ struct nftnl_table *t = nftnl_table_alloc();

	if (!t || nftnl_table_nlmsg_parse(nlh, t) < 0)
		return MNL_CB_ERROR;
	if (nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY) == NFPROTO_INET &&
	    is_ours(nftnl_table_get_str(t, NFTNL_TABLE_NAME))) {
		s->table_found = true;
		s->table_flags = nftnl_table_get_u32(t, NFTNL_TABLE_FLAGS);
		s->table_use = nftnl_table_get_u32(t, NFTNL_TABLE_USE);
	}
	return MNL_CB_OK;
}

static int chain_cb(const struct nlmsghdr *nlh, void *data)
{
	struct live_state *s = data;
	_cleanup_chain_ struct nftnl_chain *c = nftnl_chain_alloc();
	const char *name;

	if (!c || nftnl_chain_nlmsg_parse(nlh, c) < 0)
		return MNL_CB_ERROR;
	if (nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY) != NFPROTO_INET ||
	    !is_ours(nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE)))
		return MNL_CB_OK;
	name = nftnl_chain_get_str(c, NFTNL_CHAIN_NAME);
	if (name && strcmp(name, GUARD_CHAIN) == 0 && !s->chain)
		s->chain = TAKE_PTR(c);
	else if (s->n_extra_chains < MAX_CHAINS)
		snprintf(s->extra_chain[s->n_extra_chains++], sizeof(s->extra_chain[0]), "%s", name ? name : "?");
	return MNL_CB_OK;
}

static int rule_cb(const struct nlmsghdr *nlh, void *data)
{
	struct live_state *s = data;
	_cleanup_rule_ struct nftnl_rule *r = nftnl_rule_alloc();
	const char *chain;

	if (!r || nftnl_rule_nlmsg_parse(nlh, r) < 0)
		return MNL_CB_ERROR;
	chain = nftnl_rule_get_str(r, NFTNL_RULE_CHAIN);
	if (nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY) != NFPROTO_INET ||
	    !is_ours(nftnl_rule_get_str(r, NFTNL_RULE_TABLE)) || !chain || strcmp(chain, GUARD_CHAIN) != 0)
		return MNL_CB_OK; /* rules of extra chains: the chain is reported */
	if (s->n_rules < MAX_RULES)
		s->rule[s->n_rules++] = TAKE_PTR(r);
	else
		s->n_rules_dropped++;
	return MNL_CB_OK;
}

/* One NLM_F_DUMP request of `type` for the inet family. A dump the kernel
 * marks as interrupted (the ruleset changed meanwhile) fails with -EINTR. */
static int dump(struct mnl_socket *nl, uint16_t type, uint32_t seq, mnl_cb_t cb, struct live_state *s)
{
	char buf[NL_BUFFER] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, type, NFPROTO_INET, NLM_F_DUMP, seq);

	if (type == NFT_MSG_GETRULE) {
		/* Ask the kernel for our table's rules only. */
		_cleanup_rule_ struct nftnl_rule *filter = nftnl_rule_alloc();

		if (!filter)
			return -ENOMEM;
		nftnl_rule_set_str(filter, NFTNL_RULE_TABLE, GUARD_TABLE);
		nftnl_rule_nlmsg_build_payload(nlh, filter);
	}
	return nl_talk(nl, buf, sizeof(buf), cb, s);
}

static int gen_cb(const struct nlmsghdr *nlh, void *data)
{
	_cleanup_(nftnl_gen_freep) struct nftnl_gen *gen = nftnl_gen_alloc();
	uint32_t *id = data;

	if (!gen || nftnl_gen_nlmsg_parse(nlh, gen) < 0)
		return MNL_CB_ERROR;
	*id = nftnl_gen_get_u32(gen, NFTNL_GEN_ID);
	return MNL_CB_OK;
}

/* The ruleset's generation: it changes with every committed transaction. */
static int generation(struct mnl_socket *nl, uint32_t seq, uint32_t *id)
{
	char buf[NL_BUFFER] __attribute__((aligned(NLMSG_ALIGNTO)));

	nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETGEN, NFPROTO_UNSPEC, NLM_F_ACK, seq);
	return nl_talk(nl, buf, sizeof(buf), gen_cb, id);
}

/* Table, chains and rules from one generation of the ruleset: the three
 * dumps are retried if a transaction committed in between. */
static int read_live_state(struct live_state *s, struct guard_failure *failure)
{
	static const struct {
		uint16_t type;
		mnl_cb_t cb;
		const char *what;
	} dumps[] = {
		{ NFT_MSG_GETTABLE, table_cb, "nftables table dump" },
		{ NFT_MSG_GETCHAIN, chain_cb, "nftables chain dump" },
		{ NFT_MSG_GETRULE,  rule_cb,  "nftables rule dump" },
	};
	uint32_t seq = (uint32_t)time(NULL);
	int r;

	for (int attempt = 0;; attempt++) {
		/* A fresh socket per attempt: an interrupted dump leaves the rest
		 * of its messages queued on the old one. */
		_cleanup_(mnl_socket_closep) struct mnl_socket *nl = NULL;

		uint32_t gen_before = 0, gen_after = 0;

		live_state_clear(s);
		r = open_socket(&nl, failure);
		if (r == 0 && (r = generation(nl, seq++, &gen_before)) < 0)
			guard_failure_set(failure, GUARD_SUBSYS_NFTABLES, NFT_MSG_GETGEN, "nftables generation");
		for (size_t i = 0; r == 0 && i < sizeof(dumps) / sizeof(dumps[0]); i++) {
			r = dump(nl, dumps[i].type, seq++, dumps[i].cb, s);
			if (r < 0)
				guard_failure_set(failure, GUARD_SUBSYS_NFTABLES, dumps[i].type, "%s", dumps[i].what);
		}
		if (r == 0 && (r = generation(nl, seq++, &gen_after)) < 0)
			guard_failure_set(failure, GUARD_SUBSYS_NFTABLES, NFT_MSG_GETGEN, "nftables generation");
		if (r == 0 && gen_after != gen_before)
			r = -EINTR;
		if (r != -EINTR || attempt == DUMP_RETRIES) {
			if (r == -EINTR)
				guard_failure_set(failure, GUARD_SUBSYS_NFTABLES, NFT_MSG_GETGEN,
						  "nftables ruleset (it kept changing while being read)");
			return r;
		}
	}
}

/* ---- check ---------------------------------------------------------- */

static void check_chain(const struct nftnl_chain *live, struct guard_findings *f)
{
	_cleanup_chain_ struct nftnl_chain *want = guard_chain_new();
	const char *want_type, *live_type;
	const char *name = CHAIN_OBJECT;

	if (!want) {
		guard_finding(f, "%s: cannot build the expected chain: out of memory", name);
		return;
	}
	want_type = nftnl_chain_get_str(want, NFTNL_CHAIN_TYPE);
	live_type = nftnl_chain_is_set(live, NFTNL_CHAIN_TYPE) ? nftnl_chain_get_str(live, NFTNL_CHAIN_TYPE) : NULL;
	if (!live_type || strcmp(live_type, want_type) != 0)
		guard_finding(f, "%s: type is %s, expected %s", name, live_type ? live_type : "(none)", want_type);
	if (!nftnl_chain_is_set(live, NFTNL_CHAIN_HOOKNUM)) {
		guard_finding(f, "%s: is not a base chain (no hook), expected hook input", name);
		return;
	}
	if (nftnl_chain_get_u32(live, NFTNL_CHAIN_HOOKNUM) != nftnl_chain_get_u32(want, NFTNL_CHAIN_HOOKNUM))
		guard_finding(f, "%s: hook is %u, expected %u (input)", name,
			      nftnl_chain_get_u32(live, NFTNL_CHAIN_HOOKNUM), nftnl_chain_get_u32(want, NFTNL_CHAIN_HOOKNUM));
	if (nftnl_chain_get_s32(live, NFTNL_CHAIN_PRIO) != nftnl_chain_get_s32(want, NFTNL_CHAIN_PRIO))
		guard_finding(f, "%s: priority is %d, expected %d", name,
			      nftnl_chain_get_s32(live, NFTNL_CHAIN_PRIO), nftnl_chain_get_s32(want, NFTNL_CHAIN_PRIO));
	if (!nftnl_chain_is_set(live, NFTNL_CHAIN_POLICY) ||
	    nftnl_chain_get_u32(live, NFTNL_CHAIN_POLICY) != nftnl_chain_get_u32(want, NFTNL_CHAIN_POLICY))
		guard_finding(f, "%s: policy is %s, expected accept", name,
			      nftnl_chain_get_u32(live, NFTNL_CHAIN_POLICY) == NF_DROP ? "drop" : "not accept");
	if (nftnl_chain_is_set(live, NFTNL_CHAIN_FLAGS) &&
	    (nftnl_chain_get_u32(live, NFTNL_CHAIN_FLAGS) & ~(uint32_t)NFT_CHAIN_BASE) != 0)
		guard_finding(f, "%s: has flags 0x%x", name, nftnl_chain_get_u32(live, NFTNL_CHAIN_FLAGS));
}

static void check_rules(const struct guard_config *config, struct live_state *s, struct guard_findings *f)
{
	size_t want_n = guard_rule_count(config);
	bool matched[MAX_RULES] = { false };
	size_t first_match[GUARD_MAX_PORTS + 1];
	bool in_order = true;
	char want[2048], live[2048], name[128];

	for (size_t i = 0; i < want_n; i++) {
		_cleanup_rule_ struct nftnl_rule *r = guard_rule_new(config, i);

		first_match[i] = SIZE_MAX;
		if (guard_rule_name(config, i, name, sizeof(name)) < 0)
			snprintf(name, sizeof(name), "#%zu", i + 1);
		if (!r || guard_rule_expressions(r, want, sizeof(want)) < 0) {
			guard_finding(f, "rule '%s': cannot build the expected rule", name);
			continue;
		}
		for (size_t j = 0; j < s->n_rules; j++) {
			if (matched[j] || guard_rule_expressions(s->rule[j], live, sizeof(live)) < 0)
				continue;
			if (strcmp(want, live) == 0) {
				matched[j] = true;
				first_match[i] = j;
				break;
			}
		}
		if (first_match[i] == SIZE_MAX)
			guard_finding(f, "rule '%s' is missing", name);
		else if (first_match[i] != i)
			in_order = false;
	}
	for (size_t j = 0; j < s->n_rules; j++) {
		if (matched[j])
			continue;
		if (guard_rule_expressions(s->rule[j], live, sizeof(live)) < 0)
			snprintf(live, sizeof(live), "(unprintable)");
		guard_finding(f, "unexpected rule (handle %llu) in chain " GUARD_TABLE " " GUARD_CHAIN ": %.400s",
			      (unsigned long long)nftnl_rule_get_u64(s->rule[j], NFTNL_RULE_HANDLE), live);
	}
	if (s->n_rules_dropped)
		guard_finding(f, "%zu more unexpected rules in chain " GUARD_TABLE " " GUARD_CHAIN, s->n_rules_dropped);
	if (!in_order && f->n == 0)
		guard_finding(f, "rules in chain " GUARD_TABLE " " GUARD_CHAIN " are not in install's order");
}

/* Reads the kernel's state and files every difference from what install
 * creates under `findings`; *found tells whether the table exists at all. */
static int compare(const struct guard_config *config, struct guard_findings *findings, bool *found,
		   struct guard_failure *failure)
{
	_cleanup_table_ struct nftnl_table *want_table = guard_table_new();
	_cleanup_(live_state_clear) struct live_state s = { 0 };
	size_t objects;
	int r;

	if (!want_table)
		return -ENOMEM;
	r = read_live_state(&s, failure);
	if (r < 0)
		return r;
	*found = s.table_found;
	if (!s.table_found)
		return 0;
	if (s.table_flags != nftnl_table_get_u32(want_table, NFTNL_TABLE_FLAGS))
		guard_finding(findings, TABLE_OBJECT " has flags 0x%x%s, expected none",
			      s.table_flags, s.table_flags & NFT_TABLE_F_DORMANT ? " (dormant: the guard is off)" : "");
	for (size_t i = 0; i < s.n_extra_chains; i++)
		guard_finding(findings, "unexpected chain '%s' in " TABLE_OBJECT, s.extra_chain[i]);
	/* The table's use count covers chains, sets, maps and stateful objects;
	 * anything beyond the chains we saw is something install never adds. */
	objects = (s.chain ? 1 : 0) + s.n_extra_chains;
	if (s.table_use > objects)
		guard_finding(findings, TABLE_OBJECT " holds %zu object(s) (sets, maps, ...) install does not create",
			      (size_t)s.table_use - objects);
	if (!s.chain) {
		guard_finding(findings, CHAIN_OBJECT " is missing");
	} else {
		check_chain(s.chain, findings);
		check_rules(config, &s, findings);
	}
	return 0;
}

int nft_guard_check(const struct guard_config *config, struct guard_findings *findings,
		    struct guard_failure *failure)
{
	bool found = false;
	int r = compare(config, findings, &found, failure);

	if (r == 0 && !found)
		guard_finding(findings, TABLE_OBJECT " is missing");
	return r;
}

int nft_guard_install(const struct guard_config *config, struct guard_findings *findings,
		      enum nft_install_action *action, struct guard_failure *failure)
{
	struct guard_failure create_failure = { 0 };
	bool found = false;
	int r;

	r = compare(config, findings, &found, failure);
	if (r < 0)
		return r;
	if (found && findings->n == 0 && findings->dropped == 0) {
		*action = NFT_INSTALL_UNCHANGED;
		return 0;
	}
	if (!found) {
		*action = NFT_INSTALL_CREATED;
		r = commit(COMMIT_CREATE, config, &create_failure);
		if (r != -EEXIST || create_failure.msg_type != NFT_MSG_NEWTABLE) {
			if (r < 0 && failure)
				*failure = create_failure;
			return r;
		}
		/* Another process created the table since we looked. */
		*action = NFT_INSTALL_RACED;
	} else {
		*action = NFT_INSTALL_REPLACED;
	}
	return commit(COMMIT_REPLACE, config, failure);
}

const char *nft_error_hint(int error, int msg_type)
{
	switch (error) {
	case EPERM:
	case EACCES:
		return "needs CAP_NET_ADMIN";
	case EPROTONOSUPPORT:
		return "the kernel has no nfnetlink (CONFIG_NETFILTER_NETLINK)";
	case EOPNOTSUPP:
		if (msg_type == NFT_GUARD_MSG_BATCH || msg_type == NFT_GUARD_MSG_NONE || msg_type == NFT_MSG_GETGEN ||
		    msg_type == NFT_MSG_GETTABLE)
			return "the kernel has no nf_tables (CONFIG_NF_TABLES, module nf_tables)";
		return "the kernel does not support this nf_tables request";
	case EAFNOSUPPORT:
		return "the kernel's nf_tables lacks the inet family (CONFIG_NF_TABLES_INET)";
	case ENOENT:
		switch (msg_type) {
		case NFT_GUARD_MSG_BATCH:
		case NFT_MSG_GETGEN:
		case NFT_GUARD_MSG_NONE:
			return "the kernel has no nf_tables (CONFIG_NF_TABLES, module nf_tables)";
		case NFT_MSG_NEWCHAIN:
			return "the kernel lacks the inet filter chain type (CONFIG_NF_TABLES_INET)";
		case NFT_MSG_NEWRULE:
			return "the kernel lacks an nf_tables expression this rule needs "
			       "(meta, cmp, payload, immediate: CONFIG_NF_TABLES, module nft_meta ...)";
		}
		return NULL;
	case EBUSY:
		return "another process owns table " GUARD_TABLE " (NFT_TABLE_F_OWNER)";
	}
	return NULL;
}
