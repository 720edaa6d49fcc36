#include "bridge.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Bytes read from fd[d] waiting to be written to fd[!d]. */
struct direction {
	size_t off, len;
	bool eof;      /* fd[d] said EOF */
	bool shut;     /* fd[!d] got shutdown(SHUT_WR) */
	uint64_t total;
	unsigned char *buf;
};

struct end {
	struct io_handler handler;
	struct bridge *bridge;
	int side;
	uint32_t interest;
	bool registered;
	bool hup; /* the peer is gone both ways: what is left is readable now */
};

struct bridge {
	int epfd;
	int fd[2];
	struct end end[2];
	struct direction dir[2];
	bridge_done_fn done;
	void *owner;
	struct bridge_set *set;
	struct bridge *prev, *next; /* in set->live, or next in set->retired */
	uint64_t last_active_ms;    /* a byte moved either way, or the start */
	bool ended;
};

/* Rounds per wakeup: keeps one fast stream from starving the others. */
#define PUMP_ROUNDS 8

uint64_t bridge_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void live_unlink(struct bridge *b)
{
	struct bridge_set *set = b->set;

	if (b->prev)
		b->prev->next = b->next;
	else
		set->live = b->next;
	if (b->next)
		b->next->prev = b->prev;
	else
		set->live_tail = b->prev;
	b->prev = b->next = NULL;
}

/* The most recently active bridge goes last. */
static void live_append(struct bridge *b)
{
	struct bridge_set *set = b->set;

	b->prev = set->live_tail;
	b->next = NULL;
	if (set->live_tail)
		set->live_tail->next = b;
	else
		set->live = b;
	set->live_tail = b;
}

static void bridge_release(struct bridge *b)
{
	for (int i = 0; i < 2; i++)
		free(b->dir[i].buf);
	free(b);
}

/* Closes both sides and reports; the memory waits in set->retired, since
 * the current epoll batch may still point at the other end. */
static void bridge_end(struct bridge *b, int error)
{
	struct bridge_set *set = b->set;

	for (int i = 0; i < 2; i++) {
		if (b->end[i].registered)
			epoll_ctl(b->epfd, EPOLL_CTL_DEL, b->fd[i], NULL);
		b->end[i].registered = false;
		if (b->fd[i] >= 0)
			close(b->fd[i]);
		b->fd[i] = -1;
	}
	b->ended = true;
	live_unlink(b);
	b->next = set->retired;
	set->retired = b;
	if (b->done)
		b->done(b->owner, error, b->dir[0].total, b->dir[1].total);
}

void bridge_set_reap(struct bridge_set *set)
{
	while (set->retired) {
		struct bridge *b = set->retired;
		set->retired = b->next;
		bridge_release(b);
	}
}

uint64_t bridge_set_oldest_activity_ms(const struct bridge_set *set)
{
	return set->live ? set->live->last_active_ms : UINT64_MAX;
}

bool bridge_set_evict_idle(struct bridge_set *set, uint64_t now_ms, uint64_t idle_ms)
{
	struct bridge *b = set->live;

	if (!b || now_ms < b->last_active_ms || now_ms - b->last_active_ms < idle_ms)
		return false;
	bridge_end(b, -ETIMEDOUT);
	return true;
}

void bridge_set_close(struct bridge_set *set)
{
	while (set->live) {
		set->live->done = NULL;
		bridge_end(set->live, -ECANCELED);
	}
	bridge_set_reap(set);
}

/* Moves what it can from fd[d] to fd[!d] without blocking. */
static int pump(struct bridge *b, int d)
{
	struct direction *h = &b->dir[d];
	int src = b->fd[d], dst = b->fd[!d];

	for (int round = 0; round < PUMP_ROUNDS; round++) {
		if (h->len == 0 && !h->eof) {
			ssize_t n = recv(src, h->buf, BRIDGE_BUFFER_SIZE, 0);
			if (n > 0) {
				h->off = 0;
				h->len = (size_t)n;
			} else if (n == 0) {
				h->eof = true;
			} else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
				return 0;
			} else {
				return -errno;
			}
		}
		if (h->len > 0) {
			ssize_t n = send(dst, h->buf + h->off, h->len, MSG_NOSIGNAL);
			if (n < 0) {
				if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
					return 0;
				return -errno;
			}
			h->off += (size_t)n;
			h->len -= (size_t)n;
			h->total += (uint64_t)n;
			continue;
		}
		if (h->eof) {
			if (!h->shut && shutdown(dst, SHUT_WR) < 0 && errno != ENOTCONN)
				return -errno;
			h->shut = true;
			return 0;
		}
	}
	return 0;
}

/* fd[i] is read while its buffer is empty and written while the other
 * direction has bytes for it. A side with nothing left to do leaves epoll,
 * and so does a hung-up side with nothing to do right now (its buffer waits
 * for the other side): a level-triggered EPOLLHUP would wake us for nothing.
 * It comes back as soon as it can be read or is owed bytes. */
static int update_interest(struct bridge *b)
{
	for (int i = 0; i < 2; i++) {
		struct end *e = &b->end[i];
		const struct direction *in = &b->dir[i], *out = &b->dir[!i];
		bool can_read = in->len == 0 && !in->eof;
		bool finished = (in->eof && out->shut) || (e->hup && !can_read && out->len == 0);
		uint32_t want = (can_read ? EPOLLIN : 0) | (out->len > 0 ? EPOLLOUT : 0);

		if (finished) {
			if (e->registered && epoll_ctl(b->epfd, EPOLL_CTL_DEL, b->fd[i], NULL) < 0)
				return -errno;
			e->registered = false;
			continue;
		}
		if (e->registered && want == e->interest)
			continue;
		struct epoll_event ev = { .events = want, .data.ptr = &e->handler };
		if (epoll_ctl(b->epfd, e->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, b->fd[i], &ev) < 0)
			return -errno;
		e->registered = true;
		e->interest = want;
	}
	return 0;
}

static int on_events(struct io_handler *handler, uint32_t events)
{
	struct end *e = container_of(handler, struct end, handler);
	struct bridge *b = e->bridge;
	int r = 0;

	if (b->ended) /* earlier in this batch */
		return 0;

	if (events & EPOLLERR) {
		int err = 0;
		socklen_t len = sizeof(err);
		getsockopt(b->fd[e->side], SOL_SOCKET, SO_ERROR, &err, &len);
		r = -(err ? err : EIO);
	}
	if (events & EPOLLHUP)
		e->hup = true;
	uint64_t moved = b->dir[0].total + b->dir[1].total;
	if (r == 0)
		r = pump(b, 0);
	if (r == 0)
		r = pump(b, 1);
	if (b->dir[0].total + b->dir[1].total != moved) {
		b->last_active_ms = bridge_now_ms();
		if (b->set->live_tail != b) {
			live_unlink(b);
			live_append(b);
		}
	}
	if (r == 0 && b->dir[0].shut && b->dir[1].shut) {
		bridge_end(b, 0);
		return 0;
	}
	/* Both peers gone and still not done: nothing will ever wake us. */
	if (r == 0 && b->end[0].hup && b->end[1].hup)
		r = -ECONNRESET;
	if (r == 0)
		r = update_interest(b);
	if (r < 0)
		bridge_end(b, r);
	return 0;
}

int bridge_start(int epfd, int a, int b_fd, const void *pre, size_t pre_len,
		 bridge_done_fn done, void *owner, struct bridge_set *set)
{
	struct bridge *b = calloc(1, sizeof(*b));
	int r;

	if (!b || pre_len > BRIDGE_BUFFER_SIZE) {
		free(b);
		close(a);
		close(b_fd);
		return b ? -EINVAL : -ENOMEM;
	}
	b->epfd = epfd;
	b->set = set;
	b->fd[0] = a;
	b->fd[1] = b_fd;
	b->done = done;
	b->owner = owner;
	for (int i = 0; i < 2; i++) {
		b->end[i] = (struct end){ .handler.on_events = on_events, .bridge = b, .side = i };
		b->dir[i].buf = malloc(BRIDGE_BUFFER_SIZE);
	}
	b->last_active_ms = bridge_now_ms();
	live_append(b);
	if (!b->dir[0].buf || !b->dir[1].buf) {
		b->done = NULL;
		bridge_end(b, -ENOMEM);
		return -ENOMEM;
	}
	if (pre_len) {
		memcpy(b->dir[0].buf, pre, pre_len);
		b->dir[0].len = pre_len;
	}
	r = update_interest(b);
	if (r < 0) {
		b->done = NULL;
		bridge_end(b, r);
		return r;
	}
	return 0;
}
