/* e2b-clone: the clone step, resident. systemd passes it the listening
 * socket of vsock port 10053 (units/e2b-clone.socket, Accept=no) and starts
 * it at boot (units/e2b-clone.service), so a clone restored from a snapshot
 * has it running already and no clone step waits for a process to start.
 * The host sends fresh entropy, its clock, the clone's generation and
 * optionally its document after every restore; see clone/README.md.
 *
 * One connection at a time, each within CONNECTION_DEADLINE_MS; whatever
 * goes wrong with one is answered and closed, never the end of the process.
 * Every check a request needs comes first (peer, grammar, generation,
 * document, mmds-serve's control socket, /dev/urandom), so a refused request
 * changes nothing; then the steps run in the order and the answer
 * says what each did. Only this file turns -errno into messages. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cleanup.h"
#include "decimal.h"
#include "listener.h"
#include "log.h"
#include "mmds_client.h"
#include "request.h"
#include "steps.h"
#include "vsock_policy.h"

/* From the accept: the request must be in within REQUEST_TIMEOUT_MS, and
 * the whole connection, the steps and the answer included, ends by
 * CONNECTION_DEADLINE_MS. A peer that does not read its answer blocks a
 * write for ANSWER_TIMEOUT_MS at most (SO_SNDTIMEO). */
#define REQUEST_TIMEOUT_MS 5000
#define CONNECTION_DEADLINE_MS 10000
#define ANSWER_TIMEOUT_MS 1000
#define MMDS_TIMEOUT_MS 2000

struct options {
	struct vsock_policy allow;
	const char *control, *generation_file, *machine_id, *random_seed;
	size_t max_document;
};

/* One accepted connection. */
struct conn {
	int fd;
	int64_t accepted_ms, deadline_ms; /* CLOCK_MONOTONIC */
	struct timespec request_arrived;  /* the clock step adds the time since */
	char who[64];
};

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* What is left of the connection's time for a call that may take up to
 * `most` ms; at least 1, so a late call still fails by its own timeout. */
static int time_left(const struct conn *c, int most)
{
	int64_t left = c->deadline_ms - now_ms();
	return left < 1 ? 1 : left > most ? most : (int)left;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: e2b-clone [--allow-cid LIST] [--control PATH] [--generation-file PATH]\n"
		   "                 [--machine-id PATH] [--random-seed PATH] [--max-document-size BYTES]\n"
		   "Serves clone-step requests, one connection at a time, on the listening socket systemd\n"
		   "passes (LISTEN_FDS; units/e2b-clone.socket, Accept=no); see clone/README.md.\n");
}

/* One line to the peer, bounded by SO_SNDTIMEO; a peer gone is no error of
 * the service's (MSG_NOSIGNAL: no SIGPIPE). */
static void send_line(const struct conn *c, const char *line, size_t len)
{
	while (len > 0) {
		ssize_t n = send(c->fd, line, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		line += n;
		len -= (size_t)n;
	}
}

/* One answer line, then the connection is done. Every ERR goes to the
 * journal too, with the peer: no exit status says so any more. */
static void answer(const struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void answer(const struct conn *c, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	if (strncmp(line, "ERR ", 4) == 0)
		log_warning("%s: answered %.*s", c->who, n, line);
	line[n++] = '\n';
	send_line(c, line, (size_t)n);
}

/* AF_VSOCK: a CID of the policy; AF_UNIX: root (the guest's own tools and
 * tests); nothing else. */
static int check_peer(const struct options *o, struct conn *c)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	uint32_t cid;

	if (getsockname(c->fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_UNIX) {
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
			return -errno;
		snprintf(c->who, sizeof(c->who), "unix peer uid %u", (unsigned)cred.uid);
		return cred.uid == 0 ? 0 : -EPERM;
	}
	int r = vsock_peer_cid(c->fd, &cid);
	if (r < 0)
		return r;
	snprintf(c->who, sizeof(c->who), "vsock peer CID %u", cid);
	return vsock_peer_allowed(&o->allow, cid) ? 0 : -EPERM;
}

/* The whole request, within REQUEST_TIMEOUT_MS of the accept; *have is how
 * much of buf was filled (to be wiped after). */
static int read_request(struct conn *c, char *buf, size_t cap, size_t *have, struct clone_request *req, char *why,
			size_t why_len)
{
	*have = 0;
	for (;;) {
		int64_t left = c->accepted_ms + REQUEST_TIMEOUT_MS - now_ms();
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		int ready = left > 0 ? poll(&p, 1, (int)left) : 0;
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready < 0) {
			snprintf(why, why_len, "waiting for the request: %s", strerror(errno));
			return -errno;
		}
		if (ready == 0) {
			snprintf(why, why_len, "request incomplete after %d ms (%zu bytes)", REQUEST_TIMEOUT_MS, *have);
			return -ETIMEDOUT;
		}
		ssize_t n = read(c->fd, buf + *have, cap - *have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(why, why_len, "reading the request: %s", strerror(errno));
			return -errno;
		}
		/* Parse even at end of input: the client may half-close. */
		*have += (size_t)n;
		long r = *have ? clone_request_parse(buf, *have, req, why, why_len) : 0;
		if (r > 0) {
			clock_gettime(CLOCK_MONOTONIC, &c->request_arrived);
			return 0;
		}
		if (r < 0)
			return (int)r;
		if (n == 0 || *have == cap) {
			snprintf(why, why_len, "request ends after %zu bytes, before it is complete", *have);
			return -EINVAL;
		}
	}
}

/* The document: a JSON object whose compact form fits --max-document-size;
 * its "hostname", if any, a valid host name. */
static int check_document(const struct options *o, const struct clone_request *req, const char **hostname,
			  size_t *hostname_len, char *why, size_t why_len)
{
	json_error_t jerr;
	json_t *doc = json_loadb(req->document, req->document_len, JSON_REJECT_DUPLICATES, &jerr);
	int r = 0;

	*hostname = NULL;
	if (!doc || !json_is_object(doc)) {
		snprintf(why, why_len, "document: %s (line %d, column %d)", doc ? "not a JSON object" : jerr.text,
			 jerr.line, jerr.column);
		r = -EINVAL;
	} else if (json_dumpb(doc, NULL, 0, JSON_COMPACT | JSON_SORT_KEYS) > o->max_document) {
		snprintf(why, why_len, "document: over %zu bytes as compact JSON", o->max_document);
		r = -EFBIG;
	} else {
		json_t *h = json_object_get(doc, "hostname");
		if (h && (!json_is_string(h) || hostname_valid(json_string_value(h), json_string_length(h)) < 0)) {
			snprintf(why, why_len, "document: \"hostname\" is not a host name (letters, digits, '-', '.'; 1-64)");
			r = -EINVAL;
		} else if (h) {
			/* Points into req->document's copy kept by jansson: copy out. */
			static char name[65];
			memcpy(name, json_string_value(h), json_string_length(h));
			name[json_string_length(h)] = '\0';
			*hostname = name;
			*hostname_len = json_string_length(h);
		}
	}
	json_decref(doc);
	return r;
}

static void serve_prepare(const struct options *o, const struct conn *c, int mmds)
{
	char why[256];
	int status = 0;
	int seed = file_forget(o->random_seed);
	if (seed < 0) {
		answer(c, "ERR %s: %s", o->random_seed, strerror(-seed));
		return;
	}
	int r = mmds_control_call(mmds, "PUT", "/token-key", NULL, 0, time_left(c, MMDS_TIMEOUT_MS), &status, why,
				  sizeof(why));
	if (r < 0 || status != 204) {
		answer(c, "ERR mmds-serve %s: %s", o->control, r < 0 ? why : "PUT /token-key refused");
		return;
	}
	int gen = generation_clear(o->generation_file);
	if (gen < 0) {
		answer(c, "ERR %s: %s", o->generation_file, strerror(-gen));
		return;
	}
	sync();
	log_notice("prepared for a snapshot: random seed %s, token key rotated, generation %s, synced",
		   seed ? "removed" : "absent", gen ? "cleared" : "absent");
	answer(c, "OK prepared random_seed=%s token_key=rotated generation=%s synced=yes", seed ? "removed" : "absent",
	       gen ? "cleared" : "absent");
}

/* The clone step proper, every check done: see serve_request. */
static void serve_clone(const struct options *o, const struct conn *c, const struct clone_request *req,
		       uint64_t current, int mmds, int urandom, const char *hostname, size_t hostname_len)
{
	char why[256], mid[96];
	int status = 0;
	int64_t step_ms = 0;

	int r = crng_reseed(urandom, req->entropy, req->entropy_len);
	if (r < 0) {
		answer(c, "ERR /dev/urandom: RNDADDENTROPY/RNDRESEEDCRNG: %s; generation stays %llu", strerror(-r),
		       (unsigned long long)current);
		return;
	}
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t since_ns = (now.tv_sec - c->request_arrived.tv_sec) * 1000000000LL +
			   (now.tv_nsec - c->request_arrived.tv_nsec);
	int64_t host_ns = req->realtime_nsec + since_ns;
	r = clock_step(req->realtime_sec + host_ns / 1000000000LL, (long)(host_ns % 1000000000LL), &step_ms);
	if (r < 0) {
		answer(c, "ERR CLOCK_REALTIME: %s; generation stays %llu", strerror(-r), (unsigned long long)current);
		return;
	}
	r = mmds_control_call(mmds, "PUT", "/token-key", NULL, 0, time_left(c, MMDS_TIMEOUT_MS), &status, why,
			      sizeof(why));
	if (r < 0 || status != 204) {
		answer(c, "ERR mmds-serve %s: %s; generation stays %llu", o->control,
		       r < 0 ? why : "PUT /token-key refused (mmds-serve without the clone step's call?)",
		       (unsigned long long)current);
		return;
	}
	if (req->document) {
		r = mmds_control_call(mmds, "PUT", "/mmds", req->document, req->document_len,
				      time_left(c, MMDS_TIMEOUT_MS), &status, why, sizeof(why));
		if (r < 0 || status != 204) {
			if (r == 0)
				snprintf(why, sizeof(why), "PUT /mmds answered %d", status);
			answer(c, "ERR mmds-serve %s: %s; generation stays %llu", o->control, why,
			       (unsigned long long)current);
			return;
		}
	}
	if (hostname && (r = hostname_set(hostname, hostname_len)) < 0) {
		answer(c, "ERR hostname '%s': %s; generation stays %llu", hostname, strerror(-r),
		       (unsigned long long)current);
		return;
	}
	/* Renewed for whatever reads it from now on; systemd and the journal
	 * read it at boot and keep the template's (README). Not fatal: some
	 * images keep /etc read-only. */
	r = machine_id_renew(o->machine_id);
	if (r < 0)
		snprintf(mid, sizeof(mid), "kept(%s)", strerror(-r));
	else
		snprintf(mid, sizeof(mid), "renewed");
	r = generation_write(o->generation_file, req->generation);
	if (r < 0) {
		answer(c, "ERR %s: %s; generation stays %llu", o->generation_file, strerror(-r),
		       (unsigned long long)current);
		return;
	}
	log_notice("clone generation %llu: %zu bytes of host entropy credited and the CRNG reseeded, clock "
		   "stepped by %lld ms, token key rotated, document %s, machine-id %s",
		   (unsigned long long)req->generation, req->entropy_len, (long long)step_ms,
		   req->document ? "installed" : "kept", mid);
	answer(c, "OK generation=%llu entropy_bits=%zu crng=reseeded clock_step_ms=%lld token_key=rotated document=%s "
	       "hostname=%s machine_id=%s",
	       (unsigned long long)req->generation, req->entropy_len * 8, (long long)step_ms,
	       req->document ? "installed" : "none", hostname ? hostname : "unchanged", mid);
}

static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option opts[] = {
		{ "allow-cid", required_argument, NULL, 'a' },
		{ "control", required_argument, NULL, 'c' },
		{ "generation-file", required_argument, NULL, 'g' },
		{ "machine-id", required_argument, NULL, 'm' },
		{ "random-seed", required_argument, NULL, 'r' },
		{ "max-document-size", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (vsock_policy_parse(optarg, &o->allow) < 0) {
				log_error("--allow-cid '%s': expected decimal CIDs, comma-separated, e.g. 2", optarg);
				return -EINVAL;
			}
			break;
		case 'c': o->control = optarg; break;
		case 'g': o->generation_file = optarg; break;
		case 'm': o->machine_id = optarg; break;
		case 'r': o->random_seed = optarg; break;
		case 's':
			if (parse_decimal(optarg, 2, CLONE_MAX_DOCUMENT, &v) < 0) {
				log_error("--max-document-size '%s': expected 2-%u", optarg, CLONE_MAX_DOCUMENT);
				return -EINVAL;
			}
			o->max_document = (size_t)v;
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -EINVAL;
		}
	}
	if (optind != argc) {
		log_error("unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/* A whole request in: its checks, then what it asks for. */
static void serve_request(const struct options *o, const struct conn *c, const struct clone_request *req)
{
	char why[512];
	uint64_t current = 0;

	int r = generation_read(o->generation_file, &current);
	if (r < 0) {
		answer(c, "ERR %s: %s; nothing changed", o->generation_file,
		       r == -EBADMSG ? "not a generation number" : strerror(-r));
		return;
	}
	if (req->kind == CLONE_STATUS) {
		answer(c, "OK generation=%llu", (unsigned long long)current);
		return;
	}
	const char *hostname = NULL;
	size_t hostname_len = 0;
	if (req->kind == CLONE_STEP) {
		if (req->generation <= current) {
			answer(c, "ERR generation %llu is not after the clone's current generation %llu; nothing changed",
			       (unsigned long long)req->generation, (unsigned long long)current);
			return;
		}
		if (req->document && check_document(o, req, &hostname, &hostname_len, why, sizeof(why)) < 0) {
			answer(c, "ERR %s; nothing changed", why);
			return;
		}
	}
	_cleanup_close_ int mmds = mmds_control_open(o->control, time_left(c, MMDS_TIMEOUT_MS));
	if (mmds < 0) {
		answer(c, "ERR mmds-serve control socket %s: %s; nothing changed", o->control, strerror(-mmds));
		return;
	}
	if (req->kind == CLONE_PREPARE_SNAPSHOT) {
		serve_prepare(o, c, mmds);
		return;
	}
	_cleanup_close_ int urandom = open("/dev/urandom", O_RDWR | O_CLOEXEC);
	if (urandom < 0) {
		answer(c, "ERR /dev/urandom: %s; nothing changed", strerror(errno));
		return;
	}
	serve_clone(o, c, req, current, mmds, urandom, hostname, hostname_len);
}

/* One connection, from the peer check to the answer; every outcome is an
 * answer (or, for a peer gone, nothing), never the end of the process. The
 * request's buffer is wiped after: no host entropy stays in a resident
 * process, nor in a snapshot of it. */
static void serve_connection(const struct options *o, struct conn *c)
{
	static char buf[CLONE_MAX_HEAD + CLONE_MAX_DOCUMENT];
	static struct clone_request req;
	char why[512], allowed[96];
	size_t have = 0;

	int r = check_peer(o, c);
	if (r < 0) {
		vsock_policy_format(&o->allow, allowed, sizeof(allowed));
		log_warning("%s refused (allowed: vsock CID %s, or root over unix): %s; closed", c->who, allowed,
			    r == -EPERM ? "not allowed" : strerror(-r));
		/* Closed at once: the answer only if it fits the socket now. */
		char line[96];
		int n = snprintf(line, sizeof(line), "ERR %s refused\n", c->who);
		(void)send(c->fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
		return;
	}
	/* The greeting: the host reads its clock only once it is served, so
	 * the time it sends is not stale by a wait in the backlog. */
	send_line(c, CLONE_GREETING "\n", sizeof(CLONE_GREETING));
	r = read_request(c, buf, sizeof(buf), &have, &req, why, sizeof(why));
	if (r < 0)
		answer(c, "ERR %s; nothing changed", why);
	else
		serve_request(o, c, &req);
	explicit_bzero(buf, have);
	explicit_bzero(&req, sizeof(req));
}

int main(int argc, char **argv)
{
	struct options o = {
		.allow = { .cids = { VSOCK_POLICY_CID_HOST }, .n = 1 },
		.control = "/run/mmds-control/control.sock",
		.generation_file = "/run/e2b/clone-generation",
		.machine_id = "/etc/machine-id",
		.random_seed = "/var/lib/systemd/random-seed",
		.max_document = 51200,
	};
	char allowed[96];
	sigset_t waiting;
	int listener;

	log_init("e2b-clone");
	if (parse_options(argc, argv, &o) < 0)
		return 2;
	int r = listener_take(&listener);
	if (r < 0) {
		log_error("no listening socket from systemd (LISTEN_FDS): %s; start it through units/e2b-clone.socket "
			  "(or systemd-socket-activate -l ADDRESS)",
			  r == -ENOENT ? "none passed" : r == -E2BIG ? "more than one passed" : strerror(-r));
		return 2;
	}
	if ((r = listener_signals(&waiting)) < 0) {
		log_error("signal handlers: %s", strerror(-r));
		return 1;
	}
	vsock_policy_format(&o.allow, allowed, sizeof(allowed));
	log_info("serving the clone step on fd %d (vsock peers: CID %s; unix peers: root)", listener, allowed);
	while (!listener_stopping()) {
		int fd = listener_accept(listener, &waiting, ANSWER_TIMEOUT_MS);
		if (fd == -EINTR || fd == -EAGAIN || fd == -ECONNABORTED)
			continue;
		if (fd == -EMFILE || fd == -ENFILE || fd == -ENOBUFS || fd == -ENOMEM) {
			/* The connection waits in the backlog; try again in a while. */
			log_warning("accepting a connection on fd %d: %s; retrying in 1 s", listener, strerror(-fd));
			(void)poll(NULL, 0, 1000);
			continue;
		}
		if (fd < 0) {
			log_error("accepting a connection on fd %d: %s", listener, strerror(-fd));
			return 1;
		}
		struct conn c = { .fd = fd, .accepted_ms = now_ms(), .who = "peer" };
		c.deadline_ms = c.accepted_ms + CONNECTION_DEADLINE_MS;
		serve_connection(&o, &c);
		close(fd);
	}
	log_info("stopped");
	return 0;
}
