#include "ruleset.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>

/* Offsets the nft CLI uses: tcp dport, ip daddr. */
#define TCP_DPORT_OFFSET 2
#define IPV4_DADDR_OFFSET 16

size_t guard_rule_count(const struct guard_config *config)
{
	return config->n_ports + 1;
}

int guard_rule_name(const struct guard_config *config, size_t index, char *buf, size_t len)
{
	char addr[INET_ADDRSTRLEN];
	int n;

	if (index < config->n_ports)
		n = snprintf(buf, len, "drop tcp dport %u iifname != " GUARD_LOOPBACK,
			     (unsigned)config->ports[index]);
	else if (index == config->n_ports) {
		if (!inet_ntop(AF_INET, &config->alias, addr, sizeof(addr)))
			return -errno;
		n = snprintf(buf, len, "drop tcp to %s:%u iifname != " GUARD_LOOPBACK, addr, GUARD_MMDS_PORT);
	} else
		return -EINVAL;
	return n < 0 || (size_t)n >= len ? -ENOBUFS : 0;
}

struct nftnl_table *guard_table_new(void)
{
	struct nftnl_table *t = nftnl_table_alloc();

	if (!t)
		return NULL;
	nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, GUARD_TABLE);
	nftnl_table_set_u32(t, NFTNL_TABLE_FLAGS, 0);
	return t;
}

struct nftnl_chain *guard_chain_new(void)
{
	struct nftnl_chain *c = nftnl_chain_alloc();

	if (!c)
		return NULL;
	nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, GUARD_TABLE);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, GUARD_CHAIN);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, GUARD_CHAIN_TYPE);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, NF_INET_LOCAL_IN);
	nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, GUARD_PRIORITY);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	return c;
}

/* Each helper appends one expression; any allocation failure is reported
 * once, by guard_rule_new, through the `ok` flag. */
static void add_expr(struct nftnl_rule *r, struct nftnl_expr *e, int *ok)
{
	if (!e) {
		*ok = 0;
		return;
	}
	nftnl_rule_add_expr(r, e);
}

static void meta_load(struct nftnl_rule *r, uint32_t key, int *ok)
{
	struct nftnl_expr *e = nftnl_expr_alloc("meta");

	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
	}
	add_expr(r, e, ok);
}

static void payload_load(struct nftnl_rule *r, uint32_t base, uint32_t offset, uint32_t len, int *ok)
{
	struct nftnl_expr *e = nftnl_expr_alloc("payload");

	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	}
	add_expr(r, e, ok);
}

static void cmp(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len, int *ok)
{
	struct nftnl_expr *e = nftnl_expr_alloc("cmp");

	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
		nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
	}
	add_expr(r, e, ok);
}

static void verdict_drop(struct nftnl_rule *r, int *ok)
{
	struct nftnl_expr *e = nftnl_expr_alloc("immediate");

	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, NF_DROP);
	}
	add_expr(r, e, ok);
}

/* iifname != "lo": the name padded to IFNAMSIZ, as nft compares it. */
static void not_from_loopback(struct nftnl_rule *r, int *ok)
{
	char name[IFNAMSIZ] = GUARD_LOOPBACK;

	meta_load(r, NFT_META_IIFNAME, ok);
	cmp(r, NFT_CMP_NEQ, name, sizeof(name), ok);
}

static void tcp_dport(struct nftnl_rule *r, uint16_t port, int *ok)
{
	uint8_t proto = IPPROTO_TCP;
	uint16_t be = htons(port);

	meta_load(r, NFT_META_L4PROTO, ok);
	cmp(r, NFT_CMP_EQ, &proto, sizeof(proto), ok);
	payload_load(r, NFT_PAYLOAD_TRANSPORT_HEADER, TCP_DPORT_OFFSET, sizeof(be), ok);
	cmp(r, NFT_CMP_EQ, &be, sizeof(be), ok);
}

static void ipv4_daddr(struct nftnl_rule *r, struct in_addr addr, int *ok)
{
	uint8_t family = NFPROTO_IPV4;

	meta_load(r, NFT_META_NFPROTO, ok);
	cmp(r, NFT_CMP_EQ, &family, sizeof(family), ok);
	payload_load(r, NFT_PAYLOAD_NETWORK_HEADER, IPV4_DADDR_OFFSET, sizeof(addr.s_addr), ok);
	cmp(r, NFT_CMP_EQ, &addr.s_addr, sizeof(addr.s_addr), ok);
}

struct nftnl_rule *guard_rule_new(const struct guard_config *config, size_t index)
{
	struct nftnl_rule *r;
	int ok = 1;

	if (index > config->n_ports) {
		errno = EINVAL;
		return NULL;
	}
	r = nftnl_rule_alloc();
	if (!r)
		return NULL;
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, GUARD_TABLE);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, GUARD_CHAIN);

	not_from_loopback(r, &ok);
	if (index < config->n_ports) {
		tcp_dport(r, config->ports[index], &ok);
	} else {
		ipv4_daddr(r, config->alias, &ok);
		tcp_dport(r, GUARD_MMDS_PORT, &ok);
	}
	verdict_drop(r, &ok);

	if (!ok) {
		nftnl_rule_free(r);
		errno = ENOMEM;
		return NULL;
	}
	return r;
}

int guard_rule_expressions(const struct nftnl_rule *rule, char *buf, size_t len)
{
	struct nftnl_expr_iter *it;
	struct nftnl_expr *e;
	size_t used = 0;
	int r = 0;

	if (!len)
		return -ENOBUFS;
	buf[0] = '\0';
	it = nftnl_expr_iter_create(rule);
	if (!it)
		return -ENOMEM;
	while ((e = nftnl_expr_iter_next(it))) {
		const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
		char body[512];
		int n;

		if (nftnl_expr_snprintf(body, sizeof(body), e, NFTNL_OUTPUT_DEFAULT, 0) < 0) {
			r = -EINVAL;
			break;
		}
		for (size_t k = strlen(body); k > 0 && body[k - 1] == ' '; k--)
			body[k - 1] = '\0';
		n = snprintf(buf + used, len - used, "%s[ %s %s ]", used ? " " : "", name ? name : "?", body);
		if (n < 0 || (size_t)n >= len - used) {
			r = -ENOBUFS;
			break;
		}
		used += (size_t)n;
	}
	nftnl_expr_iter_destroy(it);
	/* A comment or other user data makes a rule differ from ours. */
	if (r == 0 && nftnl_rule_is_set(rule, NFTNL_RULE_USERDATA)) {
		int n = snprintf(buf + used, len - used, " [ userdata ]");
		if (n < 0 || (size_t)n >= len - used)
			r = -ENOBUFS;
	}
	return r;
}
