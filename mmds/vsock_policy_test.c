/* Unit tests (TAP) for the vsock peer policy (mmds/vsock_policy.c). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tap.h"
#include "vsock_policy.h"

static void test_parse(void)
{
	struct mmds_vsock_policy p;

	ok(mmds_vsock_policy_parse("2", &p) == 0 && p.n == 1 && p.cids[0] == 2, "host alone");
	ok(mmds_vsock_policy_parse("1,2", &p) == 0 && p.n == 2 && p.cids[0] == 1 && p.cids[1] == 2, "a list");
	ok(mmds_vsock_policy_parse("4294967294", &p) == 0 && p.cids[0] == 4294967294u, "largest CID");
	static const char *const bad[] = { "", ",", "2,", ",2", "1,,2", "-1", "+2", " 2", "2 ", "x",
					   "4294967295", "4294967296", "99999999999999999999",
					   "1,2,3,4,5,6,7,8,9" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p.n = 77;
		ok(mmds_vsock_policy_parse(bad[i], &p) == -EINVAL && p.n == 77, "refused, untouched: \"%s\"", bad[i]);
	}
}

static void test_decision(void)
{
	struct mmds_vsock_policy host = { .cids = { MMDS_VSOCK_CID_HOST }, .n = 1 }, test;

	ok(mmds_vsock_peer_allowed(&host, 2), "default: the host (CID 2) may");
	ok(!mmds_vsock_peer_allowed(&host, 1), "default: CID 1 (vsock_loopback, in the guest) may not");
	ok(!mmds_vsock_peer_allowed(&host, 3), "default: the guest's own CID may not");
	ok(!mmds_vsock_peer_allowed(&host, 0) && !mmds_vsock_peer_allowed(&host, 0xffffffffu),
	   "default: the hypervisor and the wildcard may not");
	ok(mmds_vsock_policy_parse("1,2", &test) == 0 && mmds_vsock_peer_allowed(&test, 1) &&
	   mmds_vsock_peer_allowed(&test, 2) && !mmds_vsock_peer_allowed(&test, 3), "a test drop-in admits CID 1");
	struct mmds_vsock_policy none = { .n = 0 };
	ok(!mmds_vsock_peer_allowed(&none, 2), "an empty policy admits nobody");

	char buf[64];
	mmds_vsock_policy_format(&test, buf, sizeof(buf));
	ok(strcmp(buf, "1,2") == 0, "formatted: %s", buf);
}

static void test_peer_cid(void)
{
	int sv[2];
	uint32_t cid = 7;
	ok(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	ok(mmds_vsock_peer_cid(sv[0], &cid) == -EAFNOSUPPORT && cid == 7, "a non-vsock peer is no CID");
	close(sv[0]);
	close(sv[1]);
	ok(mmds_vsock_peer_cid(-1, &cid) == -EBADF, "a bad fd");
}

int main(void)
{
	test_parse();
	test_decision();
	test_peer_cid();
	return tap_done();
}
