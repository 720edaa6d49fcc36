/* The server's clock, its one sweep timer and its accept pause: the event-loop
 * state that both a connection (conn.c) and the server around it (server.c)
 * change. It sits below both, so that calls go server.c -> conn.c -> loop.c
 * and never back up. */
#ifndef MMDS_LOOP_H
#define MMDS_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "server.h"

/* The event loop's cached CLOCK_MONOTONIC time, in microseconds. */
uint64_t loop_now_usec(struct mmds_server *s);
/* Arms the sweep for `when` unless it is already due earlier. */
void loop_schedule_sweep(struct mmds_server *s, uint64_t when);
/* Turns accepting on every listener on or off (off: out of descriptors). */
void loop_set_accepting(struct mmds_server *s, bool on);

#endif
