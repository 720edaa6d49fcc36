/* See clone.h. */
#include "clone.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "decimal.h"
#include "io.h"
#include "vsock_ports.h"

int clone_request_build(uint64_t generation, const char *document, size_t document_len, char **out, size_t *len)
{
	uint8_t seed[CLONE_ENTROPY_BYTES];
	char hex[2 * CLONE_ENTROPY_BYTES + 1], head[512];
	struct timespec now;

	/* Blocks only until the host's CRNG is initialized, which a pool host's
	 * is long before it restores a VM. */
	if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
		return -EIO;
	for (size_t i = 0; i < sizeof(seed); i++)
		snprintf(hex + 2 * i, 3, "%02x", seed[i]);
	explicit_bzero(seed, sizeof(seed));
	/* The clock last: the guest steps to it, so every step before this line
	 * would be lag. */
	clock_gettime(CLOCK_REALTIME, &now);
	int n = document ? snprintf(head, sizeof(head),
				    "E2B-CLONE/1 clone\ngeneration %llu\nrealtime %lld.%09ld\nentropy %s\ndocument %zu\n\n",
				    (unsigned long long)generation, (long long)now.tv_sec, now.tv_nsec, hex, document_len)
			 : snprintf(head, sizeof(head),
				    "E2B-CLONE/1 clone\ngeneration %llu\nrealtime %lld.%09ld\nentropy %s\n\n",
				    (unsigned long long)generation, (long long)now.tv_sec, now.tv_nsec, hex);
	explicit_bzero(hex, sizeof(hex));
	if (n < 0 || (size_t)n >= sizeof(head))
		return -EOVERFLOW;
	char *buf = malloc((size_t)n + document_len);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, head, (size_t)n);
	if (document_len)
		memcpy(buf + n, document, document_len);
	explicit_bzero(head, sizeof(head));
	*out = buf;
	*len = (size_t)n + document_len;
	return 0;
}

int clone_exchange(const struct link *link, const char *request, size_t len, char *answer, size_t answer_len,
		   char *why, size_t why_len)
{
	char inner[512];
	size_t have = 0;
	_cleanup_close_ int fd = link_open(link, VSOCK_PORT_CLONE, inner, sizeof(inner));

	if (fd < 0) {
		snprintf(why, why_len, "%s%s", inner,
			 fd == -ECONNRESET || fd == -ECONNREFUSED
				 ? "; a guest image without the clone step (e2b-clone.socket) has no listener there"
				 : "");
		return fd;
	}
	int64_t deadline = io_now_ms() + link->timeout_ms;
	int r = io_send_all(fd, request, len, deadline);
	if (r < 0) {
		snprintf(why, why_len, "vsock port %u: sending the request: %s", VSOCK_PORT_CLONE, strerror(-r));
		return r;
	}
	for (;;) {
		char *nl = memchr(answer, '\n', have);
		if (nl) {
			*nl = '\0';
			return 0;
		}
		if (have + 1 >= answer_len) {
			snprintf(why, why_len, "vsock port %u: answer line over %zu bytes", VSOCK_PORT_CLONE, answer_len);
			return -EPROTO;
		}
		r = io_wait(fd, POLLIN, deadline);
		if (r < 0) {
			snprintf(why, why_len, "vsock port %u: no answer within %d ms", VSOCK_PORT_CLONE, link->timeout_ms);
			return r;
		}
		ssize_t n = recv(fd, answer + have, answer_len - 1 - have, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			snprintf(why, why_len, "vsock port %u: the guest closed the connection without an answer",
				 VSOCK_PORT_CLONE);
			return -ECONNRESET;
		}
		have += (size_t)n;
	}
}

int clone_status_generation(const char *answer, uint64_t *generation)
{
	static const char prefix[] = "OK generation=";

	if (strncmp(answer, prefix, sizeof(prefix) - 1) != 0)
		return -EPROTO;
	return parse_decimal(answer + sizeof(prefix) - 1, 0, INT64_MAX, generation) < 0 ? -EPROTO : 0;
}
