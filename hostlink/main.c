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
#include "cli.h"
#include "clone_cmd.h"
#include "decimal.h"
#include "envd.h"
#include "fileio.h"
#include "forward.h"
#include "http.h"
#include "io.h"
#include "link.h"
#include "log.h"
#include "restore.h"
#include "text.h"
#include "vsock_ports.h"


static void usage(FILE *f)
{
	fprintf(f,
		"usage: e2b-hostlink (--uds PATH | --cid CID) [--timeout SEC] COMMAND …\n"
		"  --uds PATH    Firecracker/cloud-hypervisor hybrid vsock: the VMM's unix socket\n"
		"  --cid CID     AF_VSOCK (QEMU vhost-vsock, Kata): the guest's context id\n"
		"  --timeout SEC the whole command's budget, every connection and exchange in it (default 5;\n"
		"                init 15; wait and restore 30); forward: each connection's opening\n"
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
		"  prepare-snapshot       before a snapshot: the guest forgets its random seed and tokens, and syncs\n"
		"  init --token-file FILE|- [--env NAME=VALUE]… [--user NAME] [--workdir DIR]\n"
		"       [--volume-mount PATH=NFS_TARGET]… [--ca-bundle FILE] [--lifecycle-id ID]\n"
		"                         envd's POST /init (guest port %u) with the token, the host's clock and\n"
		"                         these, then an authenticated call that proves envd takes the token\n"
		"  restore --generation N --document FILE --token-file FILE|- [init's options]\n"
		"                         after a restore: clone, wait for envd, init; one line per step\n",
		VSOCK_PORT_MMDS_CONTROL, VSOCK_PORT_ENVD, VSOCK_PORT_CODE_INTERPRETER, VSOCK_PORT_RELAY,
		VSOCK_PORT_ENVD, VSOCK_PORT_CLONE, VSOCK_PORT_ENVD);
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
		r = cli_read_input(path, CLI_MAX_DOCUMENT, &doc, &len);
		if (r == -EFBIG) {
			fprintf(stderr, "e2b-hostlink: %s: larger than %u bytes\n", cli_input_name(path),
				CLI_MAX_DOCUMENT);
			return 1;
		}
		if (r < 0) {
			fprintf(stderr, "e2b-hostlink: %s: %s\n", cli_input_name(path), strerror(-r));
			return 1;
		}
	}
	_cleanup_close_ int fd = link_open(link, VSOCK_PORT_MMDS_CONTROL, why, sizeof(why));
	if (fd < 0) {
		fprintf(stderr, "e2b-hostlink: %s port %u (mmds control): %s\n", link_name(link),
			VSOCK_PORT_MMDS_CONTROL, why);
		return 1;
	}
	struct http_request req = { .method = method, .path = "/mmds", .body = doc, .body_len = len };
	r = http_exchange(fd, &req, link_end(link), &resp, why, sizeof(why));
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

	if (hl == 0 || hl >= sizeof(host) || (colon && cli_parse_u32("--listen port", colon + 1, 1, 65535, &port) < 0)) {
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
			if (cli_parse_u32("--max-connections", optarg, 1, 65536, &max_conn) < 0)
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
		if (cli_parse_u32("guest port", argv[optind + i], 1, 65535, &port) < 0)
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
 * (envd's by default) every 50 ms until it answers, within --timeout. */
static int cmd_wait(const struct link *link, uint16_t port)
{
	char why[512];
	unsigned tries;

	if (envd_wait_health(link, port, &tries, why, sizeof(why)) < 0) {
		fprintf(stderr, "e2b-hostlink: %s port %u: not ready: timeout after %d ms and %u tries; last: %s\n",
			link_name(link), port, link->timeout_ms, tries, why);
		return 1;
	}
	fprintf(stderr, "e2b-hostlink: %s port %u: /health %d after %u tries\n", link_name(link), port,
		port == VSOCK_PORT_ENVD ? 204 : 200, tries);
	return 0;
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
			if (cli_parse_u32("--cid", optarg, 1, UINT32_MAX - 1, &link.cid) < 0)
				return 2;
			link.kind = LINK_CID;
			have++;
			break;
		case 't':
			if (cli_parse_u32("--timeout", optarg, 1, 3600, &v) < 0)
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
	bool waits = strcmp(cmd, "wait") == 0;
	if (link.timeout_ms < 0) /* a wait or a restore may outlast a guest's slow start */
		link.timeout_ms = waits || strcmp(cmd, "restore") == 0 ? 30000 : strcmp(cmd, "init") == 0 ? 15000 : 5000;
	/* One deadline for the whole command, every connect, handshake and
	 * exchange in it; forward's is per connection. */
	if (strcmp(cmd, "forward") != 0)
		link.deadline = io_now_ms() + link.timeout_ms;
	if (waits && argc == 3 && strcmp(argv[1], "--generation") == 0) {
		uint64_t gen;
		if (parse_decimal(argv[2], 1, INT64_MAX, &gen) < 0) {
			fprintf(stderr, "e2b-hostlink: wait --generation '%s': expected 1-%lld\n", argv[2],
				(long long)INT64_MAX);
			return 2;
		}
		return cmd_wait_generation(&link, gen);
	}
	if (waits && argc <= 2 && (argc < 2 || strncmp(argv[1], "--", 2) != 0)) {
		uint32_t port = VSOCK_PORT_ENVD;
		if (argc == 2 && cli_parse_u32("wait: guest port", argv[1], 1, 65535, &port) < 0)
			return 2;
		return cmd_wait(&link, (uint16_t)port);
	}
	if (strcmp(cmd, "mmds") == 0)
		return cmd_mmds(&link, argc - 1, argv + 1);
	if (strcmp(cmd, "forward") == 0)
		return cmd_forward(&link, argc, argv);
	if (strcmp(cmd, "clone") == 0)
		return cmd_clone(&link, argc, argv);
	if (strcmp(cmd, "init") == 0)
		return cmd_init(&link, argc, argv);
	if (strcmp(cmd, "restore") == 0)
		return cmd_restore(&link, argc, argv);
	if (strcmp(cmd, "prepare-snapshot") == 0 && argc == 1) {
		char prepare[] = "E2B-CLONE/1 prepare-snapshot\n\n", answer[CLONE_ANSWER_MAX], why[768];
		return clone_call(&link, "prepare-snapshot", clone_build_fixed, prepare, answer, sizeof(answer), true,
				  false, why, sizeof(why)) < 0;
	}
	fprintf(stderr, "e2b-hostlink: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
