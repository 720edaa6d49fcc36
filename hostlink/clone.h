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
#define CLONE_GREETING "E2B-CLONE/1 ready" /* clone/request.h */

/* What a clone step sends besides the entropy and the clock. */
struct clone_step {
	uint64_t generation;
	const char *document; /* NULL: none */
	size_t document_len;
};

/* clone_build_fn for a clone step (ctx: struct clone_step): "E2B-CLONE/1
 * clone\n..." with CLONE_ENTROPY_BYTES from getrandom() and CLOCK_REALTIME
 * read last. */
int clone_build_step(void *ctx, char **out, size_t *len);

/* A request built once the guest has greeted (for a clone step: its clock
 * read then); the malloc'ed request out, or -errno. */
typedef int (*clone_build_fn)(void *ctx, char **out, size_t *len);

/* Opens vsock port 10053, reads the guest's greeting ("E2B-CLONE/1 ready"),
 * builds the request, sends it, reads the answer line into answer
 * (NUL-terminated, without its '\n'). 0 with the answer (OK or ERR: the
 * caller reads it; a refused peer's ERR comes instead of the greeting),
 * -errno with `why` naming the port: no such socket, nothing listens on
 * vsock port 10053 (a guest without the clone step), closed without an
 * answer, timeout (link_end(link) for the whole exchange,
 * the open included). */
int clone_exchange(const struct link *link, clone_build_fn build, void *ctx, char *answer, size_t answer_len,
		   char *why, size_t why_len);

/* The build function for a fixed request (status, prepare-snapshot): ctx is
 * its NUL-terminated text. */
int clone_build_fixed(void *ctx, char **out, size_t *len);

/* The generation in a status answer "OK generation=N"; -EPROTO otherwise. */
int clone_status_generation(const char *answer, uint64_t *generation);

#endif
