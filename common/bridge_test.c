/* Unit tests (TAP) of common/bridge.c with real socketpairs and epoll. */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bridge.h"
#include "tap.h"

struct outcome {
	int calls, error;
	uint64_t ab, ba;
};

static void done(void *owner, int error, uint64_t ab, uint64_t ba)
{
	struct outcome *o = owner;

	o->calls++;
	o->error = error;
	o->ab = ab;
	o->ba = ba;
}

/* One epoll_wait and every event dispatched, as relay/ and hostlink/ do. */
static int dispatch_batch(int epfd, struct bridge_set *set)
{
	struct epoll_event ev[8];
	int n = epoll_wait(epfd, ev, 8, 1000);

	for (int i = 0; i < n; i++) {
		struct io_handler *h = ev[i].data.ptr;
		h->on_events(h, ev[i].events);
	}
	bridge_set_reap(set);
	return n;
}

/* Both peers close before the loop wakes: one batch holds both ends, and
 * the first one handled ends the bridge. The second must not touch freed
 * memory (ASan reports it in the san build). */
static void both_ends_in_one_batch(void)
{
	struct bridge_set set = { 0 };
	struct outcome o = { 0 };
	int a[2], b[2], epfd = epoll_create1(EPOLL_CLOEXEC);

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, a);
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b);
	ok(bridge_start(epfd, a[0], b[0], NULL, 0, done, &o, &set) == 0, "bridge started");
	ok(write(a[1], "ping", 4) == 4 && write(b[1], "pong!", 5) == 5, "both peers wrote");
	close(a[1]);
	close(b[1]);
	int n = dispatch_batch(epfd, &set);
	ok(n == 2, "one batch held both ends (%d events)", n);
	ok(o.calls == 1 && o.error < 0, "ended once: error %d (%s)", o.error, strerror(-o.error));
	ok(!set.live && !set.retired, "nothing left in the set");
	close(epfd);
}

/* An orderly end reports the byte counts, and a half-closed direction still
 * delivers what the other side writes after it. */
static void half_close_then_answer(void)
{
	struct bridge_set set = { 0 };
	struct outcome o = { 0 };
	int a[2], b[2], epfd = epoll_create1(EPOLL_CLOEXEC);
	char buf[16] = { 0 };

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, a);
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b);
	ok(bridge_start(epfd, a[0], b[0], "pre:", 4, done, &o, &set) == 0, "bridge with bytes already read");
	ok(write(a[1], "hello", 5) == 5, "a wrote");
	shutdown(a[1], SHUT_WR);
	for (int i = 0; i < 4 && o.calls == 0; i++)
		dispatch_batch(epfd, &set);
	ssize_t got = read(b[1], buf, sizeof(buf) - 1);
	ok(got == 9 && strcmp(buf, "pre:hello") == 0, "b got \"%s\"", buf);
	ok(read(b[1], buf, sizeof(buf)) == 0, "then EOF: the half-close went through");
	ok(write(b[1], "answer", 6) == 6, "b answers after EOF");
	shutdown(b[1], SHUT_WR);
	for (int i = 0; i < 4 && o.calls == 0; i++)
		dispatch_batch(epfd, &set);
	memset(buf, 0, sizeof(buf));
	ok(read(a[1], buf, sizeof(buf) - 1) == 6 && strcmp(buf, "answer") == 0, "a got \"%s\"", buf);
	ok(o.calls == 1 && o.error == 0 && o.ab == 9 && o.ba == 6, "orderly end: error %d, %llu and %llu bytes",
	   o.error, (unsigned long long)o.ab, (unsigned long long)o.ba);
	close(a[1]);
	close(b[1]);
	close(epfd);
}

/* The owner stops with bridges open: all closed and freed, no done call. */
static void close_set_with_live_bridges(void)
{
	struct bridge_set set = { 0 };
	struct outcome o = { 0 };
	int peers[3], epfd = epoll_create1(EPOLL_CLOEXEC);
	char c;

	for (int i = 0; i < 3; i++) {
		int a[2], b[2];
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, a);
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b);
		bridge_start(epfd, a[0], b[0], NULL, 0, done, &o, &set);
		peers[i] = a[1];
		close(b[1]);
	}
	bridge_set_close(&set);
	ok(!set.live && !set.retired && o.calls == 0, "all closed, none reported");
	int eof = 0;
	for (int i = 0; i < 3; i++) {
		eof += read(peers[i], &c, 1) == 0;
		close(peers[i]);
	}
	ok(eof == 3, "every client side sees EOF (%d of 3)", eof);
	close(epfd);
}

/* Eviction picks the bridge that moved a byte the longest ago, and only
 * once it has been idle for the time asked. */
static void evict_the_longest_idle(void)
{
	struct bridge_set set = { 0 };
	struct outcome first = { 0 }, second = { 0 };
	int a[2], b[2], c[2], d[2], epfd = epoll_create1(EPOLL_CLOEXEC);
	char buf[8];

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, a);
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b);
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, c);
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, d);
	ok(bridge_start(epfd, a[0], b[0], NULL, 0, done, &first, &set) == 0 &&
	   bridge_start(epfd, c[0], d[0], NULL, 0, done, &second, &set) == 0, "two bridges, first started first");
	ok(write(a[1], "x", 1) == 1, "a byte through the first");
	dispatch_batch(epfd, &set);
	ok(read(b[1], buf, sizeof(buf)) == 1, "it arrived");
	uint64_t now = bridge_now_ms();
	ok(bridge_set_oldest_activity_ms(&set) <= now, "oldest activity is not in the future");
	ok(!bridge_set_evict_idle(&set, now, 60000), "nothing idle for a minute: nothing evicted");
	ok(first.calls == 0 && second.calls == 0, "both still live");
	ok(bridge_set_evict_idle(&set, now + 1, 0), "idle 0 ms: one evicted");
	ok(second.calls == 1 && second.error == -ETIMEDOUT && first.calls == 0,
	   "the one idle the longest (the second) ended with ETIMEDOUT (%d)", second.error);
	ok(read(c[1], buf, sizeof(buf)) == 0 && read(d[1], buf, sizeof(buf)) == 0, "both its peers see EOF");
	bridge_set_reap(&set);
	ok(set.live && set.live == set.live_tail, "one bridge left");
	bridge_set_close(&set);
	ok(!bridge_set_evict_idle(&set, now, 0) && bridge_set_oldest_activity_ms(&set) == UINT64_MAX,
	   "an empty set evicts nothing");
	close(a[1]);
	close(b[1]);
	close(c[1]);
	close(d[1]);
	close(epfd);
}

int main(void)
{
	both_ends_in_one_batch();
	half_close_then_answer();
	close_set_with_live_bridges();
	evict_the_longest_idle();
	return tap_done();
}
