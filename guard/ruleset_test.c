/* Unit tests for the ruleset description (TAP): the rules' names and their
 * expressions, compared with what `nft --debug=netlink` prints for the
 * same lines of rules.nft (nftables 1.0.6), and the error hints. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netlink.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdlib.h>
#include <string.h>

#include <libnftnl/chain.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>

#include "args.h"
#include "nft.h"
#include "ruleset.h"
#include "tap.h"

/* nft --debug=netlink for `iifname != "lo" tcp dport 49983 drop`, one
 * expression per bracket. */
static const char *const want_port_49983 =
	"[ meta load iifname => reg 1 ] "
	"[ cmp neq reg 1 0x00006f6c 0x00000000 0x00000000 0x00000000 ] "
	"[ meta load l4proto => reg 1 ] "
	"[ cmp eq reg 1 0x00000006 ] "
	"[ payload load 2b @ transport header + 2 => reg 1 ] "
	"[ cmp eq reg 1 0x00003fc3 ] "
	"[ immediate reg 0 drop ]";

/* ... and for `iifname != "lo" ip daddr 169.254.169.254 tcp dport 80 drop`. */
static const char *const want_alias =
	"[ meta load iifname => reg 1 ] "
	"[ cmp neq reg 1 0x00006f6c 0x00000000 0x00000000 0x00000000 ] "
	"[ meta load nfproto => reg 1 ] "
	"[ cmp eq reg 1 0x00000002 ] "
	"[ payload load 4b @ network header + 16 => reg 1 ] "
	"[ cmp eq reg 1 0xfea9fea9 ] "
	"[ meta load l4proto => reg 1 ] "
	"[ cmp eq reg 1 0x00000006 ] "
	"[ payload load 2b @ transport header + 2 => reg 1 ] "
	"[ cmp eq reg 1 0x00005000 ] "
	"[ immediate reg 0 drop ]";

static void expressions(const struct nftnl_rule *r, char *out, size_t len)
{
	if (!r || guard_rule_expressions(r, out, len) < 0)
		snprintf(out, len, "(error)");
}

int main(void)
{
	struct guard_config c = { 0 };
	struct nftnl_rule *r;
	struct nftnl_chain *ch;
	struct nftnl_table *t;
	char name[128], got[2048], a[2048], b[2048];

	c.ports[0] = 49983, c.ports[1] = 49999, c.ports[2] = 8888, c.n_ports = 3;
	inet_pton(AF_INET, "169.254.169.254", &c.alias);

	ok(guard_rule_count(&c) == 4, "one rule per port plus the alias rule");
	ok(guard_rule_name(&c, 0, name, sizeof(name)) == 0 &&
	   strcmp(name, "drop tcp dport 49983 iifname != lo") == 0, "port rule name: %s", name);
	ok(guard_rule_name(&c, 3, name, sizeof(name)) == 0 &&
	   strcmp(name, "drop tcp to 169.254.169.254:80 iifname != lo") == 0, "alias rule name: %s", name);
	ok(guard_rule_name(&c, 4, name, sizeof(name)) == -EINVAL, "no rule past the alias rule");
	ok(guard_rule_name(&c, 0, name, 8) == -ENOBUFS, "short buffer reported");

	r = guard_rule_new(&c, 0);
	expressions(r, got, sizeof(got));
	ok(r && strcmp(got, want_port_49983) == 0, "port rule matches nft's bytecode\n# got:  %s\n# want: %s",
	   got, want_port_49983);
	ok(r && strcmp(nftnl_rule_get_str(r, NFTNL_RULE_TABLE), GUARD_TABLE) == 0 &&
	   strcmp(nftnl_rule_get_str(r, NFTNL_RULE_CHAIN), GUARD_CHAIN) == 0 &&
	   nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY) == NFPROTO_INET, "port rule belongs to inet e2b_guard input");
	nftnl_rule_free(r);

	r = guard_rule_new(&c, 3);
	expressions(r, got, sizeof(got));
	ok(r && strcmp(got, want_alias) == 0, "alias rule matches nft's bytecode\n# got:  %s\n# want: %s",
	   got, want_alias);
	nftnl_rule_free(r);

	errno = 0;
	ok(guard_rule_new(&c, 4) == NULL && errno == EINVAL, "no rule object past the alias rule");

	/* Distinct rules must compare distinct, equal ones equal. */
	{
		struct nftnl_rule *r1 = guard_rule_new(&c, 1), *r2 = guard_rule_new(&c, 2), *r1b = guard_rule_new(&c, 1);
		int ea = guard_rule_expressions(r1, a, sizeof(a));
		int eb = guard_rule_expressions(r2, b, sizeof(b));

		ok(ea == 0 && eb == 0 && strcmp(a, b) != 0, "rules for 49999 and 8888 differ");
		ok(guard_rule_expressions(r1b, b, sizeof(b)) == 0 && strcmp(a, b) == 0, "the same rule built twice is equal");
		ok(guard_rule_expressions(r1, a, 16) == -ENOBUFS, "expression text overflow reported");
		nftnl_rule_set_data(r1b, NFTNL_RULE_USERDATA, "x", 1);
		ok(guard_rule_expressions(r1b, b, sizeof(b)) == 0 && strcmp(a, b) != 0 && strstr(b, "userdata"),
		   "a comment makes a rule differ");
		nftnl_rule_free(r1), nftnl_rule_free(r2), nftnl_rule_free(r1b);
	}

	ch = guard_chain_new();
	ok(ch && strcmp(nftnl_chain_get_str(ch, NFTNL_CHAIN_TYPE), "filter") == 0 &&
	   nftnl_chain_get_u32(ch, NFTNL_CHAIN_HOOKNUM) == 1 /* NF_INET_LOCAL_IN */ &&
	   nftnl_chain_get_s32(ch, NFTNL_CHAIN_PRIO) == -300 &&
	   nftnl_chain_get_u32(ch, NFTNL_CHAIN_POLICY) == 1 /* NF_ACCEPT */,
	   "chain: filter, hook input, priority raw (-300), policy accept");
	nftnl_chain_free(ch);
	t = guard_table_new();
	ok(t && strcmp(nftnl_table_get_str(t, NFTNL_TABLE_NAME), "e2b_guard") == 0 &&
	   nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY) == NFPROTO_INET && nftnl_table_get_u32(t, NFTNL_TABLE_FLAGS) == 0,
	   "table inet e2b_guard, no flags");
	nftnl_table_free(t);

	ok(strstr(nft_error_hint(EPERM, NFT_MSG_NEWTABLE), "CAP_NET_ADMIN") != NULL, "EPERM hint");
	ok(strstr(nft_error_hint(ENOENT, NFT_MSG_NEWRULE), "expression") != NULL, "missing expression hint");
	ok(strstr(nft_error_hint(EPROTONOSUPPORT, NFT_GUARD_MSG_NONE), "nfnetlink") != NULL, "no nfnetlink hint");
	ok(strstr(nft_error_hint(EOPNOTSUPP, NFT_GUARD_MSG_BATCH), "no nf_tables") != NULL, "no nf_tables hint");
	ok(strstr(nft_error_hint(EAFNOSUPPORT, NFT_MSG_NEWTABLE), "inet") != NULL, "no inet family hint");
	ok(strstr(nft_error_hint(ENOENT, NFT_MSG_GETGEN), "no nf_tables") != NULL, "no nf_tables hint on read");
	ok(strstr(nft_error_hint(ENOENT, NFT_MSG_NEWCHAIN), "chain type") != NULL, "missing chain type hint");
	ok(nft_error_hint(EINVAL, NFT_MSG_NEWRULE) == NULL, "no hint where strerror says it all");
	return tap_done();
}
