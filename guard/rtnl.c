#include "rtnl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <libmnl/libmnl.h>

#include "cleanup.h"
#include "ruleset.h"

#define NL_BUFFER 16384

static void mnl_socket_closep(struct mnl_socket **nl)
{
	if (*nl)
		mnl_socket_close(*nl);
}

static void describe(char *buf, size_t len, struct in_addr addr)
{
	char a[INET_ADDRSTRLEN] = "?";

	inet_ntop(AF_INET, &addr, a, sizeof(a));
	snprintf(buf, len, "alias %s on " GUARD_LOOPBACK, a);
}

static int open_socket(struct mnl_socket **out)
{
	struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
	int one = 1, r;

	if (!nl)
		return -errno;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		r = -errno;
		mnl_socket_close(nl);
		return r;
	}
	(void)mnl_socket_setsockopt(nl, NETLINK_CAP_ACK, &one, sizeof(one));
	*out = nl;
	return 0;
}

static int loopback_index(unsigned *index)
{
	unsigned i = if_nametoindex(GUARD_LOOPBACK);

	if (i == 0)
		return errno ? -errno : -ENODEV;
	*index = i;
	return 0;
}

struct query {
	unsigned ifindex;
	struct in_addr addr;
	struct alias_state *state;
};

static int addr_attr_cb(const struct nlattr *attr, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(attr);

	if (mnl_attr_type_valid(attr, IFA_MAX) < 0)
		return MNL_CB_OK;
	tb[type] = attr;
	return MNL_CB_OK;
}

static int addr_cb(const struct nlmsghdr *nlh, void *data)
{
	struct query *q = data;
	const struct nlattr *tb[IFA_MAX + 1] = { NULL };
	const struct ifaddrmsg *ifa;
	const struct nlattr *local;

	if (nlh->nlmsg_type != RTM_NEWADDR || nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*ifa)))
		return MNL_CB_OK;
	ifa = mnl_nlmsg_get_payload(nlh);
	if (ifa->ifa_family != AF_INET || ifa->ifa_index != q->ifindex)
		return MNL_CB_OK;
	if (mnl_attr_parse(nlh, sizeof(*ifa), addr_attr_cb, tb) < 0)
		return MNL_CB_ERROR;
	local = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
	if (!local || mnl_attr_get_payload_len(local) != sizeof(struct in_addr) ||
	    memcmp(mnl_attr_get_payload(local), &q->addr, sizeof(q->addr)) != 0)
		return MNL_CB_OK;
	/* Should the address be there twice (/32 and another prefix), the
	 * /32 is the one install manages. */
	if (q->state->present && q->state->prefixlen == GUARD_ALIAS_PREFIXLEN)
		return MNL_CB_OK;
	q->state->present = true;
	q->state->prefixlen = ifa->ifa_prefixlen;
	q->state->scope = ifa->ifa_scope;
	return MNL_CB_OK;
}

static int query(struct mnl_socket *nl, unsigned ifindex, struct in_addr addr, struct alias_state *state)
{
	char buf[NL_BUFFER] __attribute__((aligned(NLMSG_ALIGNTO)));
	uint32_t seq = (uint32_t)time(NULL), portid = mnl_socket_get_portid(nl);
	struct query q = { .ifindex = ifindex, .addr = addr, .state = state };
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifaddrmsg *ifa;
	int r;

	memset(state, 0, sizeof(*state));
	nlh->nlmsg_type = RTM_GETADDR;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = seq;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_index = ifindex;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	do {
		ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));

		if (n < 0)
			return -errno;
		r = mnl_cb_run(buf, (size_t)n, seq, portid, addr_cb, &q);
	} while (r > MNL_CB_STOP);
	return r < 0 ? -errno : 0;
}

/* One RTM_NEWADDR or RTM_DELADDR with NLM_F_ACK; returns the kernel's answer. */
static int change(struct mnl_socket *nl, uint16_t type, uint16_t flags, unsigned ifindex,
		  struct in_addr addr, unsigned prefixlen, unsigned scope)
{
	char buf[NL_BUFFER] __attribute__((aligned(NLMSG_ALIGNTO)));
	uint32_t seq = (uint32_t)time(NULL), portid = mnl_socket_get_portid(nl);
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifaddrmsg *ifa;
	ssize_t n;

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	nlh->nlmsg_seq = seq;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (unsigned char)prefixlen;
	ifa->ifa_flags = IFA_F_PERMANENT;
	ifa->ifa_scope = (unsigned char)scope;
	ifa->ifa_index = ifindex;
	mnl_attr_put(nlh, IFA_LOCAL, sizeof(addr), &addr);
	mnl_attr_put(nlh, IFA_ADDRESS, sizeof(addr), &addr);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	if (n < 0)
		return -errno;
	/* The ack: MNL_CB_STOP on success, -1 with errno from the kernel. */
	return mnl_cb_run(buf, (size_t)n, seq, portid, NULL, NULL) < 0 ? -errno : 0;
}

int rtnl_alias_query(struct in_addr addr, struct alias_state *state, struct guard_failure *failure)
{
	_cleanup_(mnl_socket_closep) struct mnl_socket *nl = NULL;
	unsigned ifindex = 0;
	char what[64];
	int r;

	describe(what, sizeof(what), addr);
	r = loopback_index(&ifindex);
	if (r == 0)
		r = open_socket(&nl);
	if (r == 0)
		r = query(nl, ifindex, addr, state);
	if (r < 0)
		guard_failure_set(failure, GUARD_SUBSYS_RTNETLINK, RTM_GETADDR, "%s", what);
	return r;
}

int rtnl_alias_install(struct in_addr addr, struct guard_failure *failure)
{
	_cleanup_(mnl_socket_closep) struct mnl_socket *nl = NULL;
	struct alias_state st;
	unsigned ifindex = 0;
	char what[64];
	int r, type = RTM_NEWADDR;

	describe(what, sizeof(what), addr);
	r = loopback_index(&ifindex);
	if (r == 0)
		r = open_socket(&nl);
	/* The common case, a fresh boot, takes one round trip. */
	if (r == 0)
		r = change(nl, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, ifindex, addr,
			   GUARD_ALIAS_PREFIXLEN, RT_SCOPE_HOST);
	if (r == -EEXIST) {
		type = RTM_GETADDR;
		r = query(nl, ifindex, addr, &st);
		if (r == 0 && st.present &&
		    (st.prefixlen != GUARD_ALIAS_PREFIXLEN || st.scope != RT_SCOPE_HOST)) {
			/* The kernel does not change the scope of an existing
			 * address: replace it. */
			type = RTM_DELADDR;
			r = change(nl, RTM_DELADDR, 0, ifindex, addr, st.prefixlen, st.scope);
			if (r == 0) {
				type = RTM_NEWADDR;
				r = change(nl, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, ifindex, addr,
					   GUARD_ALIAS_PREFIXLEN, RT_SCOPE_HOST);
			}
		} else if (r == 0 && !st.present) {
			r = -EEXIST; /* EEXIST for an address that is not there: give up */
		}
	}
	if (r < 0)
		guard_failure_set(failure, GUARD_SUBSYS_RTNETLINK, type, "%s", what);
	return r;
}

int rtnl_alias_remove(struct in_addr addr, struct guard_failure *failure)
{
	_cleanup_(mnl_socket_closep) struct mnl_socket *nl = NULL;
	struct alias_state st;
	unsigned ifindex = 0;
	char what[64];
	int r, type = RTM_GETADDR;

	describe(what, sizeof(what), addr);
	r = loopback_index(&ifindex);
	if (r == 0)
		r = open_socket(&nl);
	if (r == 0)
		r = query(nl, ifindex, addr, &st);
	if (r == 0 && st.present) {
		type = RTM_DELADDR;
		r = change(nl, RTM_DELADDR, 0, ifindex, addr, st.prefixlen, st.scope);
		if (r == -EADDRNOTAVAIL)
			r = 0; /* gone in the meantime */
	}
	if (r < 0)
		guard_failure_set(failure, GUARD_SUBSYS_RTNETLINK, type, "%s", what);
	return r;
}

const char *rtnl_scope_name(unsigned scope)
{
	switch (scope) {
	case RT_SCOPE_UNIVERSE: return "global";
	case RT_SCOPE_SITE:     return "site";
	case RT_SCOPE_LINK:     return "link";
	case RT_SCOPE_HOST:     return "host";
	case RT_SCOPE_NOWHERE:  return "nowhere";
	}
	return "other";
}
