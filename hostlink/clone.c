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

int clone_build_step(void *ctx, char **out, size_t *len)
{
	const struct clone_step *step = ctx;
	uint64_t generation = step->generation;
	const char *document = step->document;
	size_t document_len = step->document ? step->document_len : 0;
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

int clone_build_fixed(void *ctx, char **out, size_t *len)
{
	*out = strdup(ctx);
	*len = strlen(ctx);
	return *out ? 0 : -ENOMEM;
}

/* One line into line[0..cap) (without its '\n', NUL-terminated) before the
 * deadline. */
static int read_line(int fd, int64_t deadline, char *line, size_t cap, char *why, size_t why_len)
{
	size_t have = 0;

	for (;;) {
		char *nl = memchr(line, '\n', have);
		if (nl) {
			*nl = '\0';
			return 0;
		}
		if (have + 1 >= cap) {
			snprintf(why, why_len, "vsock port %u: a line over %zu bytes", VSOCK_PORT_CLONE, cap);
			return -EPROTO;
		}
		int r = io_wait(fd, POLLIN, deadline);
		if (r < 0) {
			snprintf(why, why_len, "vsock port %u: no answer in time", VSOCK_PORT_CLONE);
			return r;
		}
		/* One byte at a time: nothing after the line is taken from the socket. */
		ssize_t n = recv(fd, line + have, 1, 0);
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

int clone_exchange(const struct link *link, clone_build_fn build, void *ctx, char *answer, size_t answer_len,
		   char *why, size_t why_len)
{
	char inner[512];
	_cleanup_free_ char *request = NULL;
	size_t len = 0;
	int64_t deadline = link_end(link); /* one budget: the open, the greeting, the answer */
	struct link bounded = *link;
	bounded.deadline = deadline;
	_cleanup_close_ int fd = link_open(&bounded, VSOCK_PORT_CLONE, inner, sizeof(inner));

	if (fd < 0) {
		snprintf(why, why_len, "%s%s", inner,
			 fd == -ECONNRESET || fd == -ECONNREFUSED
				 ? "; a guest image without the clone step (e2b-clone.socket) has no listener there"
				 : "");
		return fd;
	}
	int r = read_line(fd, deadline, answer, answer_len, why, why_len);
	if (r < 0 || strcmp(answer, CLONE_GREETING) != 0)
		return r; /* a refusal instead of the greeting is the answer */
	r = build(ctx, &request, &len);
	if (r < 0) {
		snprintf(why, why_len, "building the request: %s", strerror(-r));
		return r;
	}
	r = io_send_all(fd, request, len, deadline);
	explicit_bzero(request, len);
	if (r < 0) {
		snprintf(why, why_len, "vsock port %u: sending the request: %s", VSOCK_PORT_CLONE, strerror(-r));
		return r;
	}
	return read_line(fd, deadline, answer, answer_len, why, why_len);
}

int clone_status_generation(const char *answer, uint64_t *generation)
{
	static const char prefix[] = "OK generation=";

	if (strncmp(answer, prefix, sizeof(prefix) - 1) != 0)
		return -EPROTO;
	return parse_decimal(answer + sizeof(prefix) - 1, 0, INT64_MAX, generation) < 0 ? -EPROTO : 0;
}
