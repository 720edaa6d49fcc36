/* Calls on mmds-serve's root-only control socket (its host API): the clone
 * step rotates the token key (PUT /token-key) and installs the document (PUT
 * /mmds) there, so mmds-serve, which faces the guest on 169.254.169.254,
 * needs no privilege for either. */
#ifndef CLONE_MMDS_CLIENT_H
#define CLONE_MMDS_CLIENT_H

#include <stddef.h>

/* A connected stream to the unix socket at path; its connect and every
 * send on it give up after timeout_ms (-EAGAIN). -errno. */
int mmds_control_open(const char *path, int timeout_ms);

/* One request on the kept-alive connection fd; *status is the answer's HTTP
 * status, `why` the reason of a failure (-ETIMEDOUT, -ECONNRESET, -EPROTO). */
int mmds_control_call(int fd, const char *method, const char *target, const char *body, size_t len,
		      int timeout_ms, int *status, char *why, size_t why_len);

/* Pure, fuzzed: an HTTP/1.1 answer at buf. Its total length (head and
 * Content-Length body) when complete, 0 when more is needed, -EPROTO when
 * it is no such answer. */
long mmds_response_parse(const char *buf, size_t len, int *status);

#endif
