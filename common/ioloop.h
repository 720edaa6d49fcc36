/* One epoll loop, many kinds of objects: every registered fd's epoll data
 * points at an io_handler embedded in its owner, and the loop just calls it.
 * (container_of recovers the owner.) */
#ifndef E2B_IOLOOP_H
#define E2B_IOLOOP_H

#include <stddef.h>
#include <stdint.h>

struct io_handler {
	/* Returns 0 or -errno; the handler may free its owner. */
	int (*on_events)(struct io_handler *self, uint32_t events);
};

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#endif
