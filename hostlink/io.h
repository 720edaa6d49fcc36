/* Small I/O helpers shared by e2b-hostlink's files: every wait has a deadline. */
#ifndef HOSTLINK_IO_H
#define HOSTLINK_IO_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
int64_t io_now_ms(void);

/* Until fd is ready for `events` (POLLIN/POLLOUT): 0, -ETIMEDOUT once the
 * deadline (io_now_ms() time) has passed, or -errno. */
int io_wait(int fd, short events, int64_t deadline);

/* The whole buffer to a non-blocking socket (no SIGPIPE) before the
 * deadline; 0, -ETIMEDOUT or -errno. */
int io_send_all(int fd, const char *buf, size_t len, int64_t deadline);

#endif
