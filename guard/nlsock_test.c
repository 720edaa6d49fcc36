/* Unit tests for nl_talk (TAP), against the real kernel: a dump of the
 * links of the test's own network namespace (RTM_GETLINK needs no
 * privilege), whose callback fails on purpose. A dump whose callback gave
 * up must never be reported as read in full. */
#include <errno.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "cleanup.h"
#include "nlsock.h"
#include "tap.h"

struct seen {
	int fail_errno;  /* -1: succeed; otherwise fail with errno set to this */
	unsigned links;
	bool lo;
};

static int link_cb(const struct nlmsghdr *nlh, void *data)
{
	struct seen *s = data;
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);

	if (s->fail_errno >= 0) {
		errno = s->fail_errno;
		return MNL_CB_ERROR;
	}
	s->links++;
	if (ifi->ifi_flags & IFF_LOOPBACK)
		s->lo = true;
	return MNL_CB_OK;
}

static int dump_links(struct seen *s)
{
	_cleanup_(mnl_socket_closep) struct mnl_socket *nl = NULL;
	char buf[NL_BUFFER] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nlmsghdr *nlh;
	struct rtgenmsg *g;
	int r = nl_open(NETLINK_ROUTE, &nl);

	if (r < 0)
		return r;
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_GETLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = (uint32_t)time(NULL);
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->rtgen_family = AF_UNSPEC;
	return nl_talk(nl, buf, sizeof(buf), link_cb, s);
}

int main(void)
{
	struct seen s = { .fail_errno = -1 };
	int r;

	r = dump_links(&s);
	ok(r == 0 && s.links >= 1 && s.lo, "a full dump succeeds and sees lo (r=%d, %u links)", r, s.links);

	s = (struct seen){ .fail_errno = 0 };
	r = dump_links(&s);
	ok(r == -EBADMSG, "a callback failing without errno fails the dump with EBADMSG (r=%d)", r);

	s = (struct seen){ .fail_errno = ENOMEM };
	r = dump_links(&s);
	ok(r == -ENOMEM, "a callback failing with ENOMEM fails the dump with it (r=%d)", r);

	/* A stale errno left by earlier calls must not decide either way. */
	errno = EAGAIN;
	s = (struct seen){ .fail_errno = -1 };
	r = dump_links(&s);
	ok(r == 0, "a stale errno does not fail a good dump (r=%d)", r);
	return tap_done();
}
