/* Test stand-in, never shipped: an LD_PRELOAD shim for envd-guard that makes
 * table inet e2b_guard appear between install's look at the kernel and its
 * create batch, the race a concurrent `nft add table` can win. When envd-guard
 * sends a batch whose first message creates the table with NLM_F_EXCL, the
 * shim first runs `$GUARD_RACE_NFT add table inet e2b_guard` and writes
 * "raced\n" to $GUARD_RACE_MARK; then it passes the batch on. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netlink.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int creates_table_exclusively(const void *buf, size_t len)
{
	const struct nlmsghdr *begin = buf, *first;

	if (len < sizeof(*begin) || begin->nlmsg_type != NFNL_MSG_BATCH_BEGIN ||
	    NLMSG_ALIGN(begin->nlmsg_len) + sizeof(*first) > len)
		return 0;
	first = (const void *)((const char *)buf + NLMSG_ALIGN(begin->nlmsg_len));
	return first->nlmsg_type == (NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_NEWTABLE) &&
	       (first->nlmsg_flags & NLM_F_EXCL);
}

static void create_table_elsewhere(void)
{
	const char *nft = getenv("GUARD_RACE_NFT"), *mark = getenv("GUARD_RACE_MARK");
	char *argv[] = { (char *)nft, "add", "table", "inet", "e2b_guard", NULL };
	char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	pid_t pid;
	int status = -1, fd;

	if (!nft || !mark || posix_spawn(&pid, nft, NULL, NULL, argv, envp) != 0 ||
	    waitpid(pid, &status, 0) < 0 || status != 0)
		abort(); /* the test cannot stage its race: fail loudly */
	fd = open(mark, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, "raced\n", 6) != 6)
		abort();
	close(fd);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *addr, socklen_t addrlen)
{
	ssize_t (*real)(int, const void *, size_t, int, const struct sockaddr *, socklen_t) =
		(ssize_t (*)(int, const void *, size_t, int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "sendto");

	if (creates_table_exclusively(buf, len))
		create_table_elsewhere();
	return real(fd, buf, len, flags, addr, addrlen);
}
