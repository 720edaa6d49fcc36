/* One client connection, and what the API handlers may do with it: queue an
 * answer (respond.c). conn.c owns the state machine and dispatches each
 * request through the connection's struct mmds_api (api.h) without knowing
 * which API it is; guest_api.c and control_api.c only answer requests.
 * Calls go one way: main.c -> server.c -> conn.c -> respond.c <- the APIs. */
#ifndef MMDS_CONN_H
#define MMDS_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"
#include "server.h"

struct mmds_api;

enum mmds_conn_state {
	MMDS_CONN_ACTIVE,  /* reading and answering requests in order */
	MMDS_CONN_CLOSING, /* answer queued; close once it is written */
	MMDS_CONN_LINGER,  /* write side shut; discard input until EOF */
};

struct mmds_conn {
	struct mmds_server *s;
	int fd;
	uint32_t events; /* what it waits for in the server's conn_epoll */
	bool dead;       /* freed while a batch of events is being answered */
	enum mmds_listener_kind kind;
	bool peer_eof;
	bool head_method;   /* answering a HEAD: headers only */
	bool continue_sent; /* 100 Continue sent for the pending request */
	enum mmds_conn_state state;
	char *in;
	size_t in_len, in_cap;
	char *out;
	size_t out_len, out_off, out_cap;
	uint64_t last_activity;
	uint64_t request_start; /* first byte of the pending request, 0 if none */
	uint64_t linger_start;
	const struct mmds_api *api; /* its listener's: who answers its requests */
	struct mmds_conn *prev, *next;
};

static inline bool conn_is_control(const struct mmds_conn *c)
{
	return c->kind != MMDS_LISTEN_GUEST;
}

static inline size_t conn_out_pending(const struct mmds_conn *c)
{
	return c->out_len - c->out_off;
}

/* respond.c: the output buffer. Frees it (and its share of queued_output). */
void conn_out_release(struct mmds_conn *c);

/* respond.c: queues a whole answer. extra_headers: complete "Name: value\r\n" lines.
 * close: the connection ends after this answer. */
void conn_respond(struct mmds_conn *c, int status, const char *content_type, const char *extra_headers,
		  const char *body, size_t body_len, bool close);
void conn_respond_text(struct mmds_conn *c, int status, const char *msg, bool close);
/* A 200 answer for a keep-alive connection, whole, into *out (malloc'd):
 * what conn_respond would queue, to be cached (answer_cache.h). */
int respond_render_ok(const char *content_type, const char *body, size_t body_len, char **out, size_t *out_len);
/* Queues an answer rendered whole (a keep-alive 200 from respond_render_ok). */
void conn_respond_bytes(struct mmds_conn *c, const char *answer, size_t len);
/* An interim answer (100 Continue): a status line and nothing else. */
void conn_respond_interim(struct mmds_conn *c, int status);
/* The answer to a request that cannot be parsed (err from
 * http_parse_request), closing the connection: the stream after it cannot
 * be trusted. The connection's API may answer it itself (417). */
void conn_respond_parse_error(struct mmds_conn *c, int err, const struct http_request *req);

#endif
