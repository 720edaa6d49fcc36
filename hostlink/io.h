/* Small blocking-I/O helpers shared by e2b-hostlink's files. */
#ifndef HOSTLINK_IO_H
#define HOSTLINK_IO_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
int64_t io_now_ms(void);

/* The whole buffer to a blocking socket (no SIGPIPE); 0 or -errno. */
int io_send_all(int fd, const char *buf, size_t len);

#endif
