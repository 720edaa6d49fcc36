/* vsock-relay: the dynamic relay's listener and sessions (see relay/README.md). */
#ifndef RELAY_RELAY_H
#define RELAY_RELAY_H

#include <netinet/in.h>
#include <stdint.h>

#include "bridge.h"
#include "ioloop.h"
#include "policy.h"

/* Every refusal on the dynamic relay, whatever the reason (a guarded or
 * ephemeral port, a closed one, a failed or slow connect, a malformed line):
 * one line, so the host cannot tell a closed port from a guarded one. The
 * reason goes to the journal. */
#define RELAY_ERR_LINE_TEXT "ERR not relayed (the guest's journal says why)"

/* How long the listeners rest after accept fails for want of fds or memory. */
#define RELAY_ACCEPT_PAUSE_MS 100u

struct session;
struct relay;

struct relay_listener {
	struct io_handler handler;
	struct relay *relay;
	int fd;
};

struct relay {
	int epfd;
	struct relay_policy policy;
	struct in_addr target;           /* where loopback ports live: 127.0.0.1 */
	unsigned max_connections;
	unsigned active;                 /* handshaking, connecting or bridged */
	unsigned handshake_timeout_ms;
	uint64_t idle_evict_ms;          /* at the limit, a bridge idle this long may go; 0: never */
	uint16_t fixed_port;             /* --to-port: no CONNECT line, always this port */
	struct session *pending;         /* handshaking or connecting, oldest first */
	struct relay_listener *listeners;
	unsigned n_listeners;
	int listening;                   /* 1 while accepting (under the limit) */
	uint64_t accept_paused_until;    /* after EMFILE and the like: not before this */
	struct bridge_set bridges;       /* relayed connections */
};

/* Accepts what is waiting on listener fd (non-blocking) and starts sessions. */
int relay_accept(struct relay *relay, int listener);

/* Closes handshakes older than the timeout and updates the listeners;
 * *timeout_ms: ms until the next deadline (a handshake's, or a full relay's
 * longest-idle bridge becoming evictable), -1 if none. 0 or -errno. */
int relay_expire(struct relay *relay, uint64_t now_ms, int *timeout_ms);

/* Accepts while under the limit, or at it while the longest-idle bridge may
 * be evicted; stops reading the listeners otherwise. */
int relay_update_listeners(struct relay *relay);

uint64_t relay_now_ms(void);

#endif
