/* Unit tests (TAP) for the vsock peer policy (common/vsock_policy.c). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tap.h"
#include "vsock_policy.h"

static void test_parse(void)
{
	struct vsock_policy p;

	ok(vsock_policy_parse("2", &p) == 0 && p.n == 1 && p.cids[0] == 2, "host alone");
	ok(vsock_policy_parse("1,2", &p) == 0 && p.n == 2 && p.cids[0] == 1 && p.cids[1] == 2, "a list");
	ok(vsock_policy_parse("4294967294", &p) == 0 && p.cids[0] == 4294967294u, "largest CID");
	static const char *const bad[] = { "", ",", "2,", ",2", "1,,2", "-1", "+2", " 2", "2 ", "x",
					   "4294967295", "4294967296", "99999999999999999999",
					   "1,2,3,4,5,6,7,8,9" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p.n = 77;
		ok(vsock_policy_parse(bad[i], &p) == -EINVAL && p.n == 77, "refused, untouched: \"%s\"", bad[i]);
	}
}

static void test_decision(void)
{
	struct vsock_policy host = { .cids = { VSOCK_POLICY_CID_HOST }, .n = 1 }, test;

	ok(vsock_peer_allowed(&host, 2), "default: the host (CID 2) may");
	ok(!vsock_peer_allowed(&host, 1), "default: CID 1 (vsock_loopback, in the guest) may not");
	ok(!vsock_peer_allowed(&host, 3), "default: the guest's own CID may not");
	ok(!vsock_peer_allowed(&host, 0) && !vsock_peer_allowed(&host, 0xffffffffu),
	   "default: the hypervisor and the wildcard may not");
	ok(vsock_policy_parse("1,2", &test) == 0 && vsock_peer_allowed(&test, 1) &&
	   vsock_peer_allowed(&test, 2) && !vsock_peer_allowed(&test, 3), "a test drop-in admits CID 1");
	struct vsock_policy none = { .n = 0 };
	ok(!vsock_peer_allowed(&none, 2), "an empty policy admits nobody");

	char buf[64];
	vsock_policy_format(&test, buf, sizeof(buf));
	ok(strcmp(buf, "1,2") == 0, "formatted: %s", buf);
}

static void test_peer_cid(void)
{
	int sv[2];
	uint32_t cid = 7;
	ok(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	ok(vsock_peer_cid(sv[0], &cid) == -EAFNOSUPPORT && cid == 7, "a non-vsock peer is no CID");
	close(sv[0]);
	close(sv[1]);
	ok(vsock_peer_cid(-1, &cid) == -EBADF, "a bad fd");
}

int main(void)
{
	test_parse();
	test_decision();
	test_peer_cid();
	return tap_done();
}
