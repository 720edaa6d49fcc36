/* A bidirectional byte bridge between two non-blocking stream sockets, driven
 * by a level-triggered epoll loop (common/ioloop.h).
 *
 * - Backpressure: one fixed buffer per direction; a side is read only while
 *   its buffer is empty, so a slow reader stops the writer (no unbounded
 *   buffering), and epoll interest follows the buffers (zero CPU when idle).
 * - Half-close: EOF read on one side becomes shutdown(SHUT_WR) on the other
 *   once everything before it was written; the bridge ends when both
 *   directions have ended, or at the first error (then both fds are closed).
 * - Used by vsock-relay (guest) and e2b-hostlink forward (host). */
#ifndef E2B_BRIDGE_H
#define E2B_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ioloop.h"

struct bridge;

/* An owner's bridges. A bridge that ends mid-batch is only retired: the
 * rest of the epoll batch may still hold its other end, so the memory stays
 * until the owner calls bridge_set_reap() after the batch. `live` is in
 * order of last activity (a byte moved either way), the longest idle first.
 * Zero-initialise. */
struct bridge_set {
	struct bridge *live, *live_tail, *retired;
};

/* What the owner learns when a bridge ends (after both fds are closed).
 * `error` is 0 for an orderly end (both directions finished) or -errno. */
typedef void (*bridge_done_fn)(void *owner, int error, uint64_t bytes_ab, uint64_t bytes_ba);

/* Takes ownership of fds a and b (closed on failure too) and registers them
 * with epfd. `pre`/`pre_len`: bytes already read from a that must reach b
 * first (at most the buffer size). */
int bridge_start(int epfd, int a, int b, const void *pre, size_t pre_len,
		 bridge_done_fn done, void *owner, struct bridge_set *set);

/* CLOCK_MONOTONIC in milliseconds: the clock of the activity times below. */
uint64_t bridge_now_ms(void);

/* When the longest-idle live bridge last moved a byte (or started);
 * UINT64_MAX when there is none. */
uint64_t bridge_set_oldest_activity_ms(const struct bridge_set *set);

/* Ends the longest-idle live bridge if no byte has moved through it, either
 * way, for at least idle_ms (done is called with -ETIMEDOUT); true if it did. */
bool bridge_set_evict_idle(struct bridge_set *set, uint64_t now_ms, uint64_t idle_ms);

/* Frees the bridges that ended; call it after each epoll batch. */
void bridge_set_reap(struct bridge_set *set);

/* Ends every live bridge without calling its done function (the owner is
 * stopping), then frees them all. */
void bridge_set_close(struct bridge_set *set);

#define BRIDGE_BUFFER_SIZE (64u * 1024u)

#endif
