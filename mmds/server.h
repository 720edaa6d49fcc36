/* mmds-serve's server: its configuration, its state, and what main() calls.
 * The work is split by responsibility:
 *   server.c       listeners, admission (bounds, eviction, vsock peers), the sweep
 *   conn.c         one connection: read, answer in order, deadline, shed output
 *   loop.c         the clock, the sweep timer and the accept pause
 *   guest_api.c    the guest MMDS protocol (token PUT, GET)
 *   control_api.c  the host API (PUT/PATCH/GET /mmds)
 *   store.c        the document: swap, file, recovery from the fd store
 *   fdstore.c      the document's copy in systemd's fd store
 *   common/vsock_policy.c which vsock peers may use the host API */
#ifndef MMDS_SERVER_H
#define MMDS_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>
#include <systemd/sd-event.h>

#include "answer_cache.h"
#include "vsock_policy.h"

enum mmds_empty_mode {
	MMDS_EMPTY_ERROR,  /* 503, non-JSON: a booting envd keeps polling */
	MMDS_EMPTY_NULL,   /* Firecracker's own answer: the store is JSON null */
	MMDS_EMPTY_OBJECT, /* {} */
};

/* What a listening socket speaks, and to whom. */
enum mmds_listener_kind {
	MMDS_LISTEN_GUEST,         /* MMDS on 169.254.169.254:80 */
	MMDS_LISTEN_CONTROL,       /* host API on a root-only Unix socket */
	MMDS_LISTEN_CONTROL_VSOCK, /* host API over AF_VSOCK, peers by CID policy */
};

struct mmds_config {
	const char *document_path;
	const char *import_from; /* --import: write it to document_path and exit */
	const char *control_path;
	const char *listen;
	bool v1;
	enum mmds_empty_mode empty;
	size_t max_size;
	unsigned max_connections;
	size_t max_queued_output; /* all connections together */
	uint64_t idle_timeout_usec;
	uint64_t request_timeout_usec;
	size_t max_head;
	unsigned max_headers;
	struct vsock_policy vsock_policy; /* who may use the vsock control */
	bool fd_store; /* keep the document in systemd's fd store */
};

/* The file the document was last read from, to tell whether it changed
 * while the service was down. All zero: never read. */
struct mmds_file_stamp {
	uint64_t dev, ino, size;
	int64_t mtime_ns;
};

struct mmds_conn;
struct token_authority;

struct mmds_api;

struct mmds_listener {
	struct mmds_server *s;
	enum mmds_listener_kind kind;
	const struct mmds_api *api; /* answers its connections' requests (api.h) */
	sd_event_source *source;
};

#define MMDS_MAX_LISTENERS 16

struct mmds_server {
	struct mmds_config cfg;
	sd_event *event;
	struct token_authority *tokens;

	json_t *doc;        /* NULL until the first document */
	char *doc_json;     /* compact serialization of doc, served for GET / */
	size_t doc_json_len;
	uint64_t doc_generation;
	struct answer_cache answers; /* guest answers rendered from doc (generation doc_generation) */
	struct mmds_file_stamp file_stamp;
	uint64_t fdstore_generation; /* of the copy in systemd's fd store, 0: none */

	/* Connections, least recently active first. */
	struct mmds_conn *lru_head, *lru_tail;
	unsigned n_guest, n_control;
	size_t queued_output; /* bytes held in every connection's output buffer */
	int conn_epoll;                 /* every connection's fd (conn.c) */
	sd_event_source *conn_ready;    /* conn_epoll in the loop */
	bool dispatching;               /* answering a batch of conn_epoll's events */
	struct mmds_conn *dead;         /* freed during the batch, released after it */
	sd_event_source *sweep;
	uint64_t sweep_at;
	struct mmds_listener listeners[MMDS_MAX_LISTENERS];
	int n_listeners;
	bool accept_paused;

	char *scratch; /* one read buffer shared by every connection */
	size_t scratch_len;
};

int mmds_server_init(struct mmds_server *s, const struct mmds_config *cfg, sd_event *event);
void mmds_server_done(struct mmds_server *s);

/* Takes fd (a listening stream socket) in every case; api answers the
 * requests of its connections (api.h). */
int mmds_server_add_listener(struct mmds_server *s, int fd, enum mmds_listener_kind kind,
			     const struct mmds_api *api);

/* ---- store.c ---------------------------------------------------------- */

/* Why a document was not taken; filled by the loaders for main's message. */
struct mmds_load_error {
	int line, column; /* of invalid JSON */
	char text[160];
};

/* Takes the reference. Re-renders the cached JSON, the sd_notify status and,
 * with cfg.fd_store, the copy kept in systemd's fd store. */
int mmds_store_set(struct mmds_server *s, json_t *doc, const char *origin);

/* Reads and swaps in the document file; the old one stays on error:
 * -ENOENT, -EINVAL (invalid JSON, or not a regular file: err says which),
 * -EFBIG (over the limit), another -errno from open or read. if_changed:
 * returns 1 and keeps the document when the file is the one it came from
 * (same device, inode, size and mtime), e.g. after recovering from the fd
 * store. */
int mmds_store_load_file(struct mmds_server *s, bool if_changed, struct mmds_load_error *err);

/* A document kept by an earlier run in systemd's fd store (a sealed memfd
 * passed as fd, named mmds-document-<generation>): takes fd. The highest
 * generation wins; a superseded one is removed from the store. Returns 1
 * when taken, 0 when superseded, -errno (-EPERM unsealed, -EBADMSG not an
 * entry, -EINVAL invalid JSON: err says where). */
int mmds_store_recover(struct mmds_server *s, int fd, uint64_t generation, struct mmds_load_error *err);

#endif
