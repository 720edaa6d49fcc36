/* The host side of the guest's clone step (e2b-clone, vsock port 10053;
 * clone/README.md has the protocol): one request per connection, one answer
 * line ("OK ..." or "ERR ..."). */
#ifndef HOSTLINK_CLONE_H
#define HOSTLINK_CLONE_H

#include <stddef.h>
#include <stdint.h>

#include "link.h"

#define CLONE_ENTROPY_BYTES 32
#define CLONE_ANSWER_MAX 1024

/* "E2B-CLONE/1 clone\n..." with CLONE_ENTROPY_BYTES from getrandom() and
 * CLOCK_REALTIME read last, into a malloc'ed buffer; -errno. */
int clone_request_build(uint64_t generation, const char *document, size_t document_len, char **out,
			size_t *len);

/* Sends request, reads the answer line into answer (NUL-terminated, without
 * its '\n'). 0 with the answer (OK or ERR: the caller reads it), -errno
 * with `why` naming the port: no such socket, nothing listens on vsock port
 * 10053 (a guest without the clone step), closed without an answer (a
 * refused peer is told why in an ERR line first), timeout. */
int clone_exchange(const struct link *link, const char *request, size_t len, char *answer, size_t answer_len,
		   char *why, size_t why_len);

/* The generation in a status answer "OK generation=N"; -EPROTO otherwise. */
int clone_status_generation(const char *answer, uint64_t *generation);

#endif
