/* e2b-clone: the clone step, run by systemd for each connection on vsock
 * port 10053 (units/e2b-clone.socket, Accept=yes), the connection on fd 0.
 * The host sends fresh entropy, its clock, the clone's generation and
 * optionally its document after every restore; see clone/README.md.
 *
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
#include "fileio.h"
#include "log.h"
#include "mmds_client.h"
#include "request.h"
#include "steps.h"
#include "vsock_policy.h"

#define REQUEST_TIMEOUT_MS 5000
#define MMDS_TIMEOUT_MS 2000

struct options {
	struct vsock_policy allow;
	const char *control, *generation_file, *machine_id, *random_seed;
	size_t max_document;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: e2b-clone [--allow-cid LIST] [--control PATH] [--generation-file PATH]\n"
		   "                 [--machine-id PATH] [--random-seed PATH] [--max-document-size BYTES]\n"
		   "Serves one clone-step request on fd 0 (systemd Accept=yes socket); see clone/README.md.\n");
}

/* One answer line, then the connection is done. */
static void answer(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void answer(const char *fmt, ...)
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
	line[n++] = '\n';
	(void)write_all(STDIN_FILENO, line, (size_t)n);
}

/* AF_VSOCK: a CID of the policy; AF_UNIX: root (the guest's own tools and
 * tests); nothing else. */
static int check_peer(const struct options *o, char *who, size_t who_len)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	uint32_t cid;

	if (getsockname(STDIN_FILENO, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_UNIX) {
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		if (getsockopt(STDIN_FILENO, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
			return -errno;
		snprintf(who, who_len, "unix peer uid %u", (unsigned)cred.uid);
		return cred.uid == 0 ? 0 : -EPERM;
	}
	int r = vsock_peer_cid(STDIN_FILENO, &cid);
	if (r < 0)
		return r;
	snprintf(who, who_len, "vsock peer CID %u", cid);
	return vsock_peer_allowed(&o->allow, cid) ? 0 : -EPERM;
}

/* When the whole request was in: the clock step adds the time spent since
 * (the checks) to the host's time. */
static struct timespec request_arrived;

/* The whole request, within REQUEST_TIMEOUT_MS. */
static int read_request(char *buf, size_t cap, struct clone_request *req, char *why, size_t why_len)
{
	struct timespec t0, t;
	size_t have = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		long left = REQUEST_TIMEOUT_MS - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			snprintf(why, why_len, "request incomplete after %d ms (%zu bytes)", REQUEST_TIMEOUT_MS, have);
			return -ETIMEDOUT;
		}
		ssize_t n = read(STDIN_FILENO, buf + have, cap - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(why, why_len, "reading the request: %s", strerror(errno));
			return -errno;
		}
		/* Parse even at end of input: the client may half-close. */
		have += (size_t)n;
		long r = have ? clone_request_parse(buf, have, req, why, why_len) : 0;
		if (r > 0) {
			clock_gettime(CLOCK_MONOTONIC, &request_arrived);
			return 0;
		}
		if (r < 0)
			return (int)r;
		if (n == 0 || have == cap) {
			snprintf(why, why_len, "request ends after %zu bytes, before it is complete", have);
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

static int serve_prepare(const struct options *o, int mmds)
{
	char why[256];
	int status = 0;
	int seed = file_forget(o->random_seed);
	if (seed < 0) {
		answer("ERR %s: %s", o->random_seed, strerror(-seed));
		return 1;
	}
	int r = mmds_control_call(mmds, "PUT", "/token-key", NULL, 0, MMDS_TIMEOUT_MS, &status, why, sizeof(why));
	if (r < 0 || status != 204) {
		answer("ERR mmds-serve %s: %s", o->control, r < 0 ? why : "PUT /token-key refused");
		return 1;
	}
	int gen = generation_clear(o->generation_file);
	if (gen < 0) {
		answer("ERR %s: %s", o->generation_file, strerror(-gen));
		return 1;
	}
	sync();
	log_notice("prepared for a snapshot: random seed %s, token key rotated, generation %s, synced",
		   seed ? "removed" : "absent", gen ? "cleared" : "absent");
	answer("OK prepared random_seed=%s token_key=rotated generation=%s synced=yes", seed ? "removed" : "absent",
	       gen ? "cleared" : "absent");
	return 0;
}

/* The clone step proper, all checks done but the ones that need the
 * request: see main. */
static int serve_clone(const struct options *o, const struct clone_request *req, uint64_t current, int mmds,
		       int urandom, const char *hostname, size_t hostname_len)
{
	char why[256], mid[96];
	int status = 0;
	int64_t step_ms = 0;

	int r = crng_reseed(urandom, req->entropy, req->entropy_len);
	if (r < 0) {
		answer("ERR /dev/urandom: RNDADDENTROPY/RNDRESEEDCRNG: %s; generation stays %llu", strerror(-r),
		       (unsigned long long)current);
		return 1;
	}
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t since_ns = (now.tv_sec - request_arrived.tv_sec) * 1000000000LL + (now.tv_nsec - request_arrived.tv_nsec);
	int64_t host_ns = req->realtime_nsec + since_ns;
	r = clock_step(req->realtime_sec + host_ns / 1000000000LL, (long)(host_ns % 1000000000LL), &step_ms);
	if (r < 0) {
		answer("ERR CLOCK_REALTIME: %s; generation stays %llu", strerror(-r), (unsigned long long)current);
		return 1;
	}
	r = mmds_control_call(mmds, "PUT", "/token-key", NULL, 0, MMDS_TIMEOUT_MS, &status, why, sizeof(why));
	if (r < 0 || status != 204) {
		answer("ERR mmds-serve %s: %s; generation stays %llu", o->control,
		       r < 0 ? why : "PUT /token-key refused (mmds-serve without the clone step's call?)",
		       (unsigned long long)current);
		return 1;
	}
	if (req->document) {
		r = mmds_control_call(mmds, "PUT", "/mmds", req->document, req->document_len, MMDS_TIMEOUT_MS,
				      &status, why, sizeof(why));
		if (r < 0 || status != 204) {
			if (r == 0)
				snprintf(why, sizeof(why), "PUT /mmds answered %d", status);
			answer("ERR mmds-serve %s: %s; generation stays %llu", o->control, why,
			       (unsigned long long)current);
			return 1;
		}
	}
	if (hostname && (r = hostname_set(hostname, hostname_len)) < 0) {
		answer("ERR hostname '%s': %s; generation stays %llu", hostname, strerror(-r),
		       (unsigned long long)current);
		return 1;
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
		answer("ERR %s: %s; generation stays %llu", o->generation_file, strerror(-r),
		       (unsigned long long)current);
		return 1;
	}
	log_notice("clone generation %llu: %zu bytes of host entropy credited and the CRNG reseeded, clock "
		   "stepped by %lld ms, token key rotated, document %s, machine-id %s",
		   (unsigned long long)req->generation, req->entropy_len, (long long)step_ms,
		   req->document ? "installed" : "kept", mid);
	answer("OK generation=%llu entropy_bits=%zu crng=reseeded clock_step_ms=%lld token_key=rotated document=%s "
	       "hostname=%s machine_id=%s",
	       (unsigned long long)req->generation, req->entropy_len * 8, (long long)step_ms,
	       req->document ? "installed" : "none", hostname ? hostname : "unchanged", mid);
	return 0;
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
	static char buf[CLONE_MAX_HEAD + CLONE_MAX_DOCUMENT];
	static struct clone_request req;
	char why[512], who[64] = "peer", allowed[96];
	uint64_t current = 0;

	log_init("e2b-clone");
	if (parse_options(argc, argv, &o) < 0)
		return 2;
	int r = check_peer(&o, who, sizeof(who));
	if (r < 0) {
		vsock_policy_format(&o.allow, allowed, sizeof(allowed));
		log_warning("%s refused (allowed: vsock CID %s, or root over unix): %s; closed", who, allowed,
			    r == -EPERM ? "not allowed" : strerror(-r));
		answer("ERR %s refused", who);
		return 1;
	}
	/* The greeting: the host reads its clock only once this process runs,
	 * so the time it sends is not stale by systemd's start of it. */
	(void)write_all(STDIN_FILENO, CLONE_GREETING "\n", sizeof(CLONE_GREETING));
	if ((r = read_request(buf, sizeof(buf), &req, why, sizeof(why))) < 0) {
		log_warning("%s: %s; nothing changed", who, why);
		answer("ERR %s; nothing changed", why);
		return 1;
	}
	r = generation_read(o.generation_file, &current);
	if (r < 0) {
		answer("ERR %s: %s; nothing changed", o.generation_file,
		       r == -EBADMSG ? "not a generation number" : strerror(-r));
		return 1;
	}
	if (req.kind == CLONE_STATUS) {
		answer("OK generation=%llu", (unsigned long long)current);
		return 0;
	}
	const char *hostname = NULL;
	size_t hostname_len = 0;
	if (req.kind == CLONE_STEP) {
		if (req.generation <= current) {
			log_warning("%s: generation %llu is not after the current %llu; refused, nothing changed", who,
				    (unsigned long long)req.generation, (unsigned long long)current);
			answer("ERR generation %llu is not after the clone's current generation %llu; nothing changed",
			       (unsigned long long)req.generation, (unsigned long long)current);
			return 1;
		}
		if (req.document && check_document(&o, &req, &hostname, &hostname_len, why, sizeof(why)) < 0) {
			answer("ERR %s; nothing changed", why);
			return 1;
		}
	}
	_cleanup_close_ int mmds = mmds_control_open(o.control);
	if (mmds < 0) {
		answer("ERR mmds-serve control socket %s: %s; nothing changed", o.control, strerror(-mmds));
		return 1;
	}
	if (req.kind == CLONE_PREPARE_SNAPSHOT)
		return serve_prepare(&o, mmds);
	_cleanup_close_ int urandom = open("/dev/urandom", O_RDWR | O_CLOEXEC);
	if (urandom < 0) {
		answer("ERR /dev/urandom: %s; nothing changed", strerror(errno));
		return 1;
	}
	return serve_clone(&o, &req, current, mmds, urandom, hostname, hostname_len);
}
