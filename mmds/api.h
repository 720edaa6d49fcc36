/* The two request handlers conn.c dispatches to, by listener kind. Each
 * answers one complete request through conn_respond*(). */
#ifndef MMDS_API_H
#define MMDS_API_H

#include "conn.h"
#include "http.h"

/* guest_api.c: Firecracker's guest MMDS (token PUT, GET, 405 otherwise). */
void guest_api_handle(struct mmds_conn *c, const struct http_request *req);

/* control_api.c: Firecracker's host API (PUT/PATCH/GET /mmds). */
void control_api_handle(struct mmds_conn *c, const struct http_request *req);

/* control_api.c: a control request whose head is complete and whose body is
 * still to come. Answers "Expect: 100-continue" with 100 Continue, at most
 * once per request. */
void control_api_head_ready(struct mmds_conn *c, const struct http_request *req);

/* control_api.c: a request whose Content-Length is over the limit (req's
 * head is parsed). If it asked "Expect: 100-continue", answers 417 (the
 * client has not sent the body) and returns true; else the caller answers
 * 413. */
bool control_api_refuse_expectation(struct mmds_conn *c, const struct http_request *req);

#endif
