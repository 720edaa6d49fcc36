/* The one interface conn.c dispatches requests through: each listener
 * carries the API that answers its connections' requests, chosen by main.c
 * (the guest MMDS or the host API). conn.c knows only this type; the two
 * implementations know conn.h's answering functions (respond.c). Each
 * handler answers one complete request through conn_respond*(). */
#ifndef MMDS_API_H
#define MMDS_API_H

#include <stdbool.h>

#include "conn.h"
#include "http.h"

struct mmds_api {
	/* One complete request. */
	void (*handle)(struct mmds_conn *c, const struct http_request *req);
	/* A request whose head is complete and whose body is still to come
	 * (may be NULL). */
	void (*head_ready)(struct mmds_conn *c, const struct http_request *req);
	/* A request whose Content-Length is over the limit: true if the API
	 * answered it itself; otherwise the caller answers 413 (may be NULL). */
	bool (*refuse_expectation)(struct mmds_conn *c, const struct http_request *req);
};

/* guest_api.c: Firecracker's guest MMDS (token PUT, GET, 405 otherwise). */
extern const struct mmds_api mmds_guest_api;

/* control_api.c: Firecracker's host API (PUT/PATCH/GET /mmds). Its
 * head_ready answers "Expect: 100-continue" with 100 Continue, at most once
 * per request; its refuse_expectation answers 417 to an oversized request
 * that asked "Expect: 100-continue" (the client has not sent the body). */
extern const struct mmds_api mmds_control_api;

#endif
