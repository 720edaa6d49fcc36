/* e2b-hostlink: the pool host's way into a guest of this image over vsock.
 * See hostlink/README.md. Every failure names the socket or CID and the port. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "clone.h"
#include "decimal.h"
#include "fileio.h"
#include "forward.h"
#include "http.h"
#include "io.h"
#include "link.h"
#include "log.h"
#include "text.h"
#include "vsock_ports.h"

#define MAX_DOCUMENT (4u * 1024u * 1024u)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: e2b-hostlink (--uds PATH | --cid CID) [--timeout SEC] COMMAND …\n"
		"  --uds PATH    Firecracker/cloud-hypervisor hybrid vsock: the VMM's unix socket\n"
		"  --cid CID     AF_VSOCK (QEMU vhost-vsock, Kata): the guest's context id\n"
		"  --timeout SEC connect and handshakes per connection (default 5); for wait, its whole budget\n"
		"commands:\n"
		"  mmds put [FILE|-]      replace the guest's metadata document (vsock port %u)\n"
		"  mmds patch [FILE|-]    RFC 7396 merge patch of the document\n"
		"  mmds get               print the document\n"
		"  forward [--listen ADDR:PORT] [--max-connections N] GUESTPORT…\n"
		"                         local TCP (default 127.0.0.1:GUESTPORT) to guest 127.0.0.1:GUESTPORT:\n"
		"                         %u and %u through their fixed relays, any other port through the\n"
		"                         dynamic relay (vsock port %u), which refuses the guarded ones\n"
		"  wait [GUESTPORT]       until GET /health on guest 127.0.0.1:GUESTPORT (default %u, envd) answers\n"
		"                         204 (envd) or 200 (other ports); exit 0; within --timeout (default 30 s)\n"
		"  clone [--generation N] [--document FILE|-]\n"
		"                         after a restore: host entropy (getrandom), the host's clock, generation N\n"
		"                         (default: the clone's current + 1) and the clone's document to the guest's\n"
		"                         clone step (vsock port %u); prints its answer; exit 0 only if it did all\n"
		"  wait --generation N    until the clone step has taken generation N (within --timeout, default 30 s)\n"
		"  prepare-snapshot       before a snapshot: the guest forgets its random seed and tokens, and syncs\n",
		VSOCK_PORT_MMDS_CONTROL, VSOCK_PORT_ENVD, VSOCK_PORT_CODE_INTERPRETER, VSOCK_PORT_RELAY,
		VSOCK_PORT_ENVD, VSOCK_PORT_CLONE);
}

static int parse_u32(const char *what, const char *text, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;

	if (parse_decimal(text, min, max, &v) < 0) {
		fprintf(stderr, "e2b-hostlink: %s: '%s' is not a number in %u-%u\n", what, text, min, max);
		return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

/* The whole document from a file or stdin ("-" or nothing). */
static int read_document(const char *path, char **out, size_t *len)
{
	if (path && strcmp(path, "-") != 0)
		return read_small_file(path, MAX_DOCUMENT, out, len);
	return read_small_fd(STDIN_FILENO, MAX_DOCUMENT, out, len);
}

static int cmd_mmds(const struct link *link, int argc, char **argv)
{
	_cleanup_free_ char *doc = NULL;
	struct http_response resp;
	size_t len = 0;
	char why[512];
	const char *method;
	int r;

	if (argc < 1 || argc > 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[0], "put") == 0)
		method = "PUT";
	else if (strcmp(argv[0], "patch") == 0)
		method = "PATCH";
	else if (strcmp(argv[0], "get") == 0 && argc == 1)
		method = "GET";
	else {
		fprintf(stderr, "e2b-hostlink: mmds: '%s': expected put [FILE|-], patch [FILE|-] or get\n", argv[0]);
		return 2;
	}
	if (strcmp(method, "GET") != 0) {
		const char *path = argc == 2 ? argv[1] : NULL;
		r = read_document(path, &doc, &len);
		if (r == -EFBIG) {
			fprintf(stderr, "e2b-hostlink: %s: larger than %u bytes\n",
				path && strcmp(path, "-") != 0 ? path : "stdin", MAX_DOCUMENT);
			return 1;
		}
		if (r < 0) {
			fprintf(stderr, "e2b-hostlink: %s: %s\n", path && strcmp(path, "-") != 0 ? path : "stdin",
				strerror(-r));
			return 1;
		}
	}
	_cleanup_close_ int fd = link_open(link, VSOCK_PORT_MMDS_CONTROL, why, sizeof(why));
	if (fd < 0) {
		fprintf(stderr, "e2b-hostlink: %s port %u (mmds control): %s\n", link_name(link),
			VSOCK_PORT_MMDS_CONTROL, why);
		return 1;
	}
	r = http_exchange(fd, method, "/mmds", doc, len, link->timeout_ms, &resp, why, sizeof(why));
	if (r < 0) {
		fprintf(stderr, "e2b-hostlink: %s port %u (mmds control): %s /mmds: %s\n", link_name(link),
			VSOCK_PORT_MMDS_CONTROL, method, why);
		return 1;
	}
	if (resp.status / 100 != 2) {
		/* The guest's words, one line, control characters escaped. */
		fprintf(stderr, "e2b-hostlink: %s port %u (mmds control): %s /mmds: HTTP %d: ", link_name(link),
			VSOCK_PORT_MMDS_CONTROL, method, resp.status);
		text_write(stderr, resp.body ? resp.body : "", resp.body_len, false);
		fputc('\n', stderr);
		http_response_free(&resp);
		return 1;
	}
	/* The document raw to a file or a pipe (it is data); escaped on a
	 * terminal, which a guest's escape sequences could otherwise drive. */
	if (strcmp(method, "GET") == 0 && isatty(STDOUT_FILENO))
		text_write(stdout, resp.body ? resp.body : "", resp.body_len, true);
	else if (strcmp(method, "GET") == 0)
		fwrite(resp.body ? resp.body : "", 1, resp.body_len, stdout);
	if (strcmp(method, "GET") == 0)
		putchar('\n');
	http_response_free(&resp);
	return 0;
}

static int parse_listen(const char *text, uint16_t default_port, struct forward_spec *spec)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = strrchr(text, ':');
	uint32_t port = default_port;
	struct sockaddr_in *in = (struct sockaddr_in *)&spec->listen;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&spec->listen;
	size_t hl = colon ? (size_t)(colon - text) : strlen(text);

	if (hl == 0 || hl >= sizeof(host) || (colon && parse_u32("--listen port", colon + 1, 1, 65535, &port) < 0)) {
		fprintf(stderr, "e2b-hostlink: --listen '%s': expected ADDR:PORT, e.g. 127.0.0.1:49983\n", text);
		return -EINVAL;
	}
	memcpy(host, text, hl);
	host[hl] = 0;
	memset(&spec->listen, 0, sizeof(spec->listen));
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		spec->listen_len = sizeof(*in);
		return 0;
	}
	if (host[0] == '[' && host[hl - 1] == ']') {
		host[hl - 1] = 0;
		if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) == 1) {
			in6->sin6_family = AF_INET6;
			in6->sin6_port = htons((uint16_t)port);
			spec->listen_len = sizeof(*in6);
			return 0;
		}
	}
	fprintf(stderr, "e2b-hostlink: --listen '%s': '%s' is not an IPv4 or [IPv6] address\n", text, host);
	return -EINVAL;
}

static int cmd_forward(const struct link *link, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "max-connections", required_argument, NULL, 'm' },
		{ 0 },
	};
	struct forward_spec specs[FORWARD_MAX_PORTS];
	const char *listen_at = NULL;
	uint32_t max_conn = 256, port;
	char why[512];
	int c, n;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (c == 'l')
			listen_at = optarg;
		else if (c == 'm') {
			if (parse_u32("--max-connections", optarg, 1, 65536, &max_conn) < 0)
				return 2;
		} else
			return 2;
	}
	n = argc - optind;
	if (n < 1 || n > FORWARD_MAX_PORTS || (listen_at && n != 1)) {
		fprintf(stderr, "e2b-hostlink: forward: give 1-%d guest ports (--listen only with one)\n",
			FORWARD_MAX_PORTS);
		return 2;
	}
	for (int i = 0; i < n; i++) {
		if (parse_u32("guest port", argv[optind + i], 1, 65535, &port) < 0)
			return 2;
		specs[i].guest_port = (uint16_t)port;
		char def[32];
		snprintf(def, sizeof(def), "127.0.0.1:%u", port);
		if (parse_listen(listen_at ? listen_at : def, (uint16_t)port, &specs[i]) < 0)
			return 2;
	}
	if (forward_run(link, specs, (unsigned)n, max_conn, why, sizeof(why)) < 0) {
		fprintf(stderr, "e2b-hostlink: forward via %s: %s\n", link_name(link), why);
		return 1;
	}
	return 0;
}

/* The pool's warmup from the host: GET /health on a guest loopback port
 * (envd's by default) every 50 ms until it answers 204 (envd) or 200 (any
 * other port, e.g. the code interpreter's 49999), within the budget. */
static int cmd_wait(const struct link *base, int budget_ms, uint16_t port)
{
	int64_t deadline = io_now_ms() + budget_ms;
	char why[512] = "no attempt made";
	unsigned tries = 0;
	int want = port == VSOCK_PORT_ENVD ? 204 : 200;

	do {
		struct link link = *base;
		int64_t left = deadline - io_now_ms();
		bool clipped = left < 2000; /* the budget, not the guest, sets this attempt's time-out */
		char attempt[sizeof(why)];
		int r;

		link.timeout_ms = clipped ? (int)(left > 1 ? left : 1) : 2000;
		tries++;
		_cleanup_close_ int fd = link_open_loopback(&link, port, attempt, sizeof(attempt));
		r = fd;
		if (fd >= 0) {
			struct http_response resp;
			r = http_exchange(fd, "GET", "/health", NULL, 0, link.timeout_ms, &resp, attempt, sizeof(attempt));
			if (r == 0) {
				int status = resp.status;
				http_response_free(&resp);
				if (status == want) {
					fprintf(stderr, "e2b-hostlink: %s port %u: /health %d after %u tries\n",
						link_name(base), port, status, tries);
					return 0;
				}
				snprintf(attempt, sizeof(attempt), "GET /health answered %d, not %d", status, want);
			}
		}
		/* An attempt the budget cut short says nothing about the guest:
		 * the last real answer is what the user needs to read. */
		if (!(clipped && r == -ETIMEDOUT && tries > 1))
			snprintf(why, sizeof(why), "%s", attempt);
		struct timespec pause = { 0, 50 * 1000 * 1000 };
		nanosleep(&pause, NULL);
	} while (io_now_ms() < deadline);
	fprintf(stderr, "e2b-hostlink: %s port %u: not ready: timeout after %d ms and %u tries; last: %s\n",
		link_name(base), port, budget_ms, tries, why);
	return 1;
}

/* One request to the clone step; the answer line printed (escaped), to
 * stdout when it is OK (if print), to stderr when it is ERR, with the
 * socket and port. 0 on OK; -EPROTO on ERR; -errno when no answer came
 * (`why` says why; printed unless quiet). */
static int clone_call(const struct link *link, const char *what, clone_build_fn build, void *ctx, char *answer,
		      size_t answer_len, bool print, bool quiet, char *why, size_t why_len)
{
	int r = clone_exchange(link, build, ctx, answer, answer_len, why, why_len);

	if (r < 0) {
		if (!quiet)
			fprintf(stderr, "e2b-hostlink: %s port %u (clone step): %s: %s\n", link_name(link),
				VSOCK_PORT_CLONE, what, why);
		return r;
	}
	bool okay = strncmp(answer, "OK", 2) == 0 && (answer[2] == ' ' || answer[2] == '\0');
	if (okay && !print)
		return 0;
	FILE *f = okay ? stdout : stderr;
	if (!okay)
		fprintf(f, "e2b-hostlink: %s port %u (clone step): %s refused: ", link_name(link), VSOCK_PORT_CLONE, what);
	text_write(f, answer, strlen(answer), false);
	fputc('\n', f);
	return okay ? 0 : -EPROTO;
}

/* The clone's generation (status request); -errno, said why unless quiet. */
static int clone_generation_now(const struct link *link, uint64_t *generation, bool quiet, char *why,
				size_t why_len)
{
	char status[] = "E2B-CLONE/1 status\n\n", answer[CLONE_ANSWER_MAX];
	int r = clone_call(link, "status", clone_build_fixed, status, answer, sizeof(answer), false, quiet, why,
			   why_len);

	if (r < 0)
		return r;
	if (clone_status_generation(answer, generation) < 0) {
		snprintf(why, why_len, "status: unexpected answer");
		if (!quiet) {
			fprintf(stderr, "e2b-hostlink: %s port %u (clone step): status: unexpected answer: ",
				link_name(link), VSOCK_PORT_CLONE);
			text_write(stderr, answer, strlen(answer), false);
			fputc('\n', stderr);
		}
		return -EPROTO;
	}
	return 0;
}

static int cmd_clone(const struct link *link, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "generation", required_argument, NULL, 'g' },
		{ "document", required_argument, NULL, 'd' },
		{ 0 },
	};
	_cleanup_free_ char *doc = NULL;
	const char *doc_path = NULL;
	char answer[CLONE_ANSWER_MAX], why[768];
	uint64_t generation = 0;
	size_t doc_len = 0;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (c == 'g') {
			if (parse_decimal(optarg, 1, INT64_MAX, &generation) < 0) {
				fprintf(stderr, "e2b-hostlink: clone --generation '%s': expected 1-%lld\n", optarg,
					(long long)INT64_MAX);
				return 2;
			}
		} else if (c == 'd')
			doc_path = optarg;
		else
			return 2;
	}
	if (optind != argc) {
		fprintf(stderr, "e2b-hostlink: clone: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (doc_path) {
		r = read_document(doc_path, &doc, &doc_len);
		const char *name = strcmp(doc_path, "-") != 0 ? doc_path : "stdin";
		if (r < 0 || doc_len == 0) {
			fprintf(stderr, "e2b-hostlink: clone --document %s: %s\n", name,
				r == -EFBIG ? "too large" : r < 0 ? strerror(-r) : "empty");
			return 1;
		}
	}
	if (generation == 0) {
		uint64_t now;
		if (clone_generation_now(link, &now, false, why, sizeof(why)) < 0)
			return 1;
		generation = now + 1;
	}
	struct clone_step step = { .generation = generation, .document = doc, .document_len = doc_len };
	return clone_call(link, "clone", clone_build_step, &step, answer, sizeof(answer), true, false, why,
			  sizeof(why)) < 0;
}

/* The pool's warmup for a clone: ready once the clone step has taken
 * exactly this generation; a clone that was never stepped stays at the
 * snapshot's (0, prepare-snapshot clears it) and fails. */
static int cmd_wait_generation(const struct link *base, int budget_ms, uint64_t want)
{
	int64_t deadline = io_now_ms() + budget_ms;
	char why[768] = "no attempt made";
	uint64_t now = 0;
	unsigned tries = 0;

	do {
		struct link link = *base;
		int64_t left = deadline - io_now_ms();
		char attempt[sizeof(why)];
		/* The whole budget for each attempt: the guest starts a process per
		 * connection, which can take seconds on a loaded host. */
		link.timeout_ms = (int)(left > 1 ? left : 1);
		tries++;
		int r = clone_generation_now(&link, &now, true, attempt, sizeof(attempt));
		if (r == 0 && now == want) {
			fprintf(stderr, "e2b-hostlink: %s: clone generation %llu after %u tries\n", link_name(base),
				(unsigned long long)want, tries);
			return 0;
		}
		/* An attempt the budget cut short says nothing about the guest:
		 * the last real answer is what the user needs to read. */
		if (r == 0)
			snprintf(why, sizeof(why), "at generation %llu", (unsigned long long)now);
		else if (!(r == -ETIMEDOUT && tries > 1))
			snprintf(why, sizeof(why), "%s", attempt);
		struct timespec pause = { 0, 50 * 1000 * 1000 };
		nanosleep(&pause, NULL);
	} while (io_now_ms() < deadline);
	fprintf(stderr, "e2b-hostlink: %s port %u (clone step): not at generation %llu after %d ms and %u tries "
		"(last: %s): the clone step did not run for this clone\n", link_name(base), VSOCK_PORT_CLONE,
		(unsigned long long)want, budget_ms, tries, why);
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "uds", required_argument, NULL, 'u' },
		{ "cid", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct link link = { .kind = LINK_UDS, .timeout_ms = -1 };
	int have = 0, c;
	uint32_t v;

	log_init("e2b-hostlink");
	while ((c = getopt_long(argc, argv, "+vh", opts, NULL)) != -1) {
		switch (c) {
		case 'u':
			if (strlen(optarg) >= sizeof(link.path) || !*optarg) {
				fprintf(stderr, "e2b-hostlink: --uds '%s': a unix socket path is 1-%zu bytes\n", optarg,
					sizeof(link.path) - 1);
				return 2;
			}
			snprintf(link.path, sizeof(link.path), "%s", optarg);
			link.kind = LINK_UDS;
			have++;
			break;
		case 'c':
			/* 0-2 are the hypervisor, local and host; guests start at 3. */
			if (parse_u32("--cid", optarg, 1, UINT32_MAX - 1, &link.cid) < 0)
				return 2;
			link.kind = LINK_CID;
			have++;
			break;
		case 't':
			if (parse_u32("--timeout", optarg, 1, 3600, &v) < 0)
				return 2;
			link.timeout_ms = (int)v * 1000;
			break;
		case 'v':
			log_set_max_priority(LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (have != 1 || optind >= argc) {
		fprintf(stderr, "e2b-hostlink: %s\n", have != 1 ? "give exactly one of --uds PATH or --cid CID"
							     : "no command");
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[optind];
	argc -= optind;
	argv += optind;
	if (strcmp(cmd, "wait") == 0 && argc == 3 && strcmp(argv[1], "--generation") == 0) {
		uint64_t gen;
		if (parse_decimal(argv[2], 1, INT64_MAX, &gen) < 0) {
			fprintf(stderr, "e2b-hostlink: wait --generation '%s': expected 1-%lld\n", argv[2],
				(long long)INT64_MAX);
			return 2;
		}
		return cmd_wait_generation(&link, link.timeout_ms > 0 ? link.timeout_ms : 30000, gen);
	}
	if (strcmp(cmd, "wait") == 0 && argc <= 2 && (argc < 2 || strncmp(argv[1], "--", 2) != 0)) {
		uint32_t port = VSOCK_PORT_ENVD;
		if (argc == 2 && parse_u32("wait: guest port", argv[1], 1, 65535, &port) < 0)
			return 2;
		return cmd_wait(&link, link.timeout_ms > 0 ? link.timeout_ms : 30000, (uint16_t)port);
	}
	if (link.timeout_ms < 0)
		link.timeout_ms = 5000;
	if (strcmp(cmd, "mmds") == 0)
		return cmd_mmds(&link, argc - 1, argv + 1);
	if (strcmp(cmd, "forward") == 0)
		return cmd_forward(&link, argc, argv);
	if (strcmp(cmd, "clone") == 0)
		return cmd_clone(&link, argc, argv);
	if (strcmp(cmd, "prepare-snapshot") == 0 && argc == 1) {
		char prepare[] = "E2B-CLONE/1 prepare-snapshot\n\n", answer[CLONE_ANSWER_MAX], why[768];
		return clone_call(&link, "prepare-snapshot", clone_build_fixed, prepare, answer, sizeof(answer), true,
				  false, why, sizeof(why)) < 0;
	}
	fprintf(stderr, "e2b-hostlink: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
