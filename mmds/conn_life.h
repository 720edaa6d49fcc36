/* A connection's life as server.c drives it: created on accept, ended by
 * the sweep at its deadline, evicted or freed. The APIs see a connection
 * only through conn.h; this header is for server.c. */
#ifndef MMDS_CONN_LIFE_H
#define MMDS_CONN_LIFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "server.h"

/* The epoll set every connection waits in, and its one sd-event source. */
int conn_poll_open(struct mmds_server *s);
void conn_poll_close(struct mmds_server *s);
/* A connection for an accepted socket (fd is closed on failure). */
int conn_new(struct mmds_server *s, int fd, const struct mmds_listener *l);
void conn_free(struct mmds_conn *c);
/* Between requests, with nothing pending either way: the first to evict. */
bool conn_idle(const struct mmds_conn *c);
/* When the connection must end unless something happens first. */
uint64_t conn_deadline(const struct mmds_conn *c);
/* Past its deadline: answers a pending request if it can (408 or 400), frees it. */
void conn_timeout(struct mmds_conn *c);
/* The most input one connection of any kind may hold: the shared read buffer's size. */
size_t conn_max_input(const struct mmds_config *cfg);

#endif
