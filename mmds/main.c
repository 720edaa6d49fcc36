/* mmds-serve: a Firecracker-compatible instance-metadata service (MMDS) for
 * guests that serve their own metadata. See mmds/README.md.
 *
 * main() parses the options; run() sets up the server, its sockets and the
 * document watch, then runs the loop. Only this file writes messages about
 * setup; the loop's own events (a bad document file) are logged here too. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "api.h"
#include "cleanup.h"
#include "decimal.h"
#include "fdstore.h"
#include "import.h"
#include "listen.h"
#include "log.h"
#include "server.h"

#define DEFAULT_DOCUMENT "/run/mmds/document.json"
#define DEFAULT_LISTEN "169.254.169.254:80"

static const struct mmds_config default_config = {
	.document_path = DEFAULT_DOCUMENT,
	.empty = MMDS_EMPTY_ERROR,
	.max_size = 51200,
	.max_connections = 1024,
	.max_queued_output = 16 * 1024 * 1024,
	.idle_timeout_usec = 30 * 1000000ULL,
	.request_timeout_usec = 1000000ULL,
	.max_head = 4096,
	.max_headers = 64,
	.vsock_policy = { .cids = { VSOCK_POLICY_CID_HOST }, .n = 1 },
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: mmds-serve [options]\n"
		"Serves a Firecracker-compatible MMDS (V2 by default) on 169.254.169.254:80.\n\n"
		"  --document PATH          metadata document, watched for changes\n"
		"                           (default " DEFAULT_DOCUMENT ")\n"
		"  --import SRC             write SRC (checked as the document is, at most\n"
		"                           --max-size) to --document through a temporary\n"
		"                           name and a rename, then exit: for a source no\n"
		"                           writer renames, such as QEMU's fw_cfg entry\n"
		"  --listen ADDR:PORT       listen here when not socket-activated\n"
		"                           (default " DEFAULT_LISTEN ", IP_FREEBIND)\n"
		"  --control PATH           Unix socket speaking the host API (PUT/PATCH/GET /mmds)\n"
		"  --control-vsock-allow-cid LIST  peer CIDs that may use the host API on a\n"
		"                           passed AF_VSOCK socket, e.g. 1,2 (default 2: the host)\n"
		"  --fd-store               keep the document in systemd's fd store, so that it\n"
		"                           survives a restart (FileDescriptorStoreMax= in the unit)\n"
		"  --v1                     tokens optional (MMDS V1)\n"
		"  --empty-document MODE    answer before any document: error (503, default),\n"
		"                           null (Firecracker's empty store), object ({})\n"
		"  --max-size BYTES         document limit, compact JSON (default 51200)\n"
		"  --max-connections N      guest connections; the oldest idle is dropped\n"
		"                           beyond it (default 1024)\n"
		"  --max-queued-output BYTES  answers queued for all clients together; beyond\n"
		"                           it the clients holding the most are dropped\n"
		"                           (default 16 MiB)\n"
		"  --idle-timeout SECONDS   keep-alive idle limit (default 30)\n"
		"  --request-timeout SECONDS  a request must arrive whole within this many\n"
		"                           seconds of its first byte (default 1)\n"
		"  --max-header-bytes N     request line and headers (default 4096)\n"
		"  --max-headers N          header lines (default 64)\n"
		"  --verbose                debug logging\n"
		"  --help\n");
}

static int parse_seconds(const char *s, uint64_t *usec)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v <= 0 || v > 86400)
		return -EINVAL;
	*usec = (uint64_t)(v * 1e6);
	return 0;
}

static int parse_empty_mode(const char *s, enum mmds_empty_mode *mode)
{
	if (!strcmp(s, "error"))
		*mode = MMDS_EMPTY_ERROR;
	else if (!strcmp(s, "null"))
		*mode = MMDS_EMPTY_NULL;
	else if (!strcmp(s, "object"))
		*mode = MMDS_EMPTY_OBJECT;
	else
		return -EINVAL;
	return 0;
}

enum { O_DOCUMENT = 256, O_IMPORT, O_LISTEN, O_CONTROL, O_VSOCK_ALLOW, O_FD_STORE, O_V1, O_EMPTY, O_MAX_SIZE, O_MAX_CONNS, O_MAX_QUEUED,
       O_IDLE, O_REQUEST, O_MAX_HEAD, O_MAX_HEADERS, O_VERBOSE, O_HELP };

static const struct option options[] = {
	{ "document", required_argument, NULL, O_DOCUMENT },
	{ "import", required_argument, NULL, O_IMPORT },
	{ "listen", required_argument, NULL, O_LISTEN },
	{ "control", required_argument, NULL, O_CONTROL },
	{ "control-vsock-allow-cid", required_argument, NULL, O_VSOCK_ALLOW },
	{ "fd-store", no_argument, NULL, O_FD_STORE },
	{ "v1", no_argument, NULL, O_V1 },
	{ "empty-document", required_argument, NULL, O_EMPTY },
	{ "max-size", required_argument, NULL, O_MAX_SIZE },
	{ "max-connections", required_argument, NULL, O_MAX_CONNS },
	{ "max-queued-output", required_argument, NULL, O_MAX_QUEUED },
	{ "idle-timeout", required_argument, NULL, O_IDLE },
	{ "request-timeout", required_argument, NULL, O_REQUEST },
	{ "max-header-bytes", required_argument, NULL, O_MAX_HEAD },
	{ "max-headers", required_argument, NULL, O_MAX_HEADERS },
	{ "verbose", no_argument, NULL, O_VERBOSE },
	{ "help", no_argument, NULL, O_HELP },
	{ 0 },
};

/* One option's value into cfg: -EINVAL when it is not valid. */
static int apply_option(int opt, const char *arg, struct mmds_config *cfg)
{
	uint64_t v = 0;
	int r = 0;

	switch (opt) {
	case O_DOCUMENT: cfg->document_path = arg; break;
	case O_IMPORT: cfg->import_from = arg; break;
	case O_LISTEN: cfg->listen = arg; break;
	case O_CONTROL: cfg->control_path = arg; break;
	case O_VSOCK_ALLOW: r = vsock_policy_parse(arg, &cfg->vsock_policy); break;
	case O_FD_STORE: cfg->fd_store = true; break;
	case O_V1: cfg->v1 = true; break;
	case O_EMPTY: r = parse_empty_mode(arg, &cfg->empty); break;
	case O_MAX_SIZE:
		if ((r = parse_decimal(arg, 2, 64 * 1024 * 1024, &v)) == 0)
			cfg->max_size = v;
		break;
	case O_MAX_CONNS:
		if ((r = parse_decimal(arg, 1, 1000000, &v)) == 0)
			cfg->max_connections = (unsigned)v;
		break;
	case O_MAX_QUEUED:
		if ((r = parse_decimal(arg, 64 * 1024, 1024UL * 1024 * 1024, &v)) == 0)
			cfg->max_queued_output = v;
		break;
	case O_IDLE: r = parse_seconds(arg, &cfg->idle_timeout_usec); break;
	case O_REQUEST: r = parse_seconds(arg, &cfg->request_timeout_usec); break;
	case O_MAX_HEAD:
		if ((r = parse_decimal(arg, 64, 1024 * 1024, &v)) == 0)
			cfg->max_head = v;
		break;
	case O_MAX_HEADERS:
		if ((r = parse_decimal(arg, 1, 128, &v)) == 0)
			cfg->max_headers = (unsigned)v;
		break;
	case O_VERBOSE: log_set_max_priority(LOG_DEBUG); break;
	}
	return r;
}

/* ---- the document file ------------------------------------------------- */

/* Loads the document file and says why not, at prio. */
static int load_document(struct mmds_server *s, bool if_changed, int prio)
{
	struct mmds_load_error err;
	const char *path = s->cfg.document_path;
	int r = mmds_store_load_file(s, if_changed, &err);

	if (r == -EINVAL && err.line)
		log_msg(prio, "%s: invalid JSON at line %d, column %d: %s; keeping the last good document",
			path, err.line, err.column, err.text);
	else if (r == -EINVAL)
		log_msg(prio, "%s: %s; keeping the last good document", path, err.text);
	else if (r == -EFBIG)
		log_msg(prio, "%s: document over the %zu-byte limit (%zu raw); keeping the last good document",
			path, s->cfg.max_size, 4 * s->cfg.max_size);
	else if (r < 0 && r != -ENOENT)
		log_msg(prio, "%s: %s; keeping the last good document", path, strerror(-r));
	return r;
}

static int on_document_event(sd_event_source *es, const struct inotify_event *ev, void *userdata)
{
	struct mmds_server *s = userdata;
	const char *base = strrchr(s->cfg.document_path, '/') + 1;

	if (ev->mask & IN_Q_OVERFLOW)
		(void)load_document(s, false, LOG_WARNING);
	else if (ev->mask & IN_IGNORED)
		log_warning("%s: its directory went away; serving the last document, no longer watching",
			    s->cfg.document_path);
	else if (!ev->len || strcmp(ev->name, base) != 0)
		return 0;
	else if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO))
		(void)load_document(s, false, LOG_WARNING);
	else if (ev->mask & IN_CREATE)
		/* A writer that creates in place is not done yet: its
		 * IN_CLOSE_WRITE follows, so a partial file is only noted. */
		(void)load_document(s, false, LOG_DEBUG);
	else if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
		log_info("%s: removed; serving the last document until a new one arrives", s->cfg.document_path);
	return 0;
}

/* Watches the directory, not the file, so rename-over writers work. */
static int watch_document(struct mmds_server *s, sd_event_source **watch)
{
	_cleanup_free_ char *dir = strdup(s->cfg.document_path);
	if (!dir)
		return -ENOMEM;
	char *slash = strrchr(dir, '/');
	slash[slash == dir ? 1 : 0] = '\0';
	int r = sd_event_add_inotify(s->event, watch, dir,
				     IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR,
				     on_document_event, s);
	if (r < 0) {
		log_error("watch %s: %s", dir, strerror(-r));
		return r;
	}
	/* A document recovered from the fd store stays unless the file
	 * changed while the service was down. */
	r = load_document(s, true, LOG_WARNING);
	if (r == -ENOENT && !s->doc)
		log_info("%s: not there yet; waiting for it", s->cfg.document_path);
	else if (r == 1)
		log_info("%s: unchanged since the kept document was set; serving that", s->cfg.document_path);
	return 0;
}

/* ---- sockets ----------------------------------------------------------- */

/* A passed document from the fd store (name mmds-document-N). A bad one is
 * dropped with a message; it never stops the service. */
static void recover_document(struct mmds_server *s, int fd, const char *name, uint64_t generation)
{
	struct mmds_load_error err;
	int r = mmds_store_recover(s, fd, generation, &err);

	if (r == -EINVAL && err.text[0])
		log_warning("fd store: %s: invalid JSON (%s); ignored", name, err.text);
	else if (r < 0)
		log_warning("fd store: %s: %s; ignored", name,
			    r == -EPERM ? "not sealed" : r == -EBADMSG ? "not a stored document" : strerror(-r));
}

static void describe_vsock_listener(const struct mmds_server *s, int fd)
{
	uint32_t port = 0;
	char allowed[128];
	vsock_policy_format(&s->cfg.vsock_policy, allowed, sizeof(allowed));
	(void)vsock_local_port(fd, &port);
	log_info("host API on vsock port %" PRIu32 "; peers allowed: CID %s", port, allowed);
}

/* Socket activation: every passed fd. Sockets by family (the guest MMDS,
 * the control API on AF_UNIX or AF_VSOCK); the fd store's documents by
 * name. Counts the guest and control listeners taken. */
/* Who answers a listener's requests: the guest MMDS on the inet socket, the
 * host API on the control sockets (unix and vsock). */
static const struct mmds_api *api_for(enum mmds_listener_kind kind)
{
	return kind == MMDS_LISTEN_GUEST ? &mmds_guest_api : &mmds_control_api;
}

static int take_passed_fds(struct mmds_server *s, int *n_guest, int *n_control)
{
	char **names = NULL;
	int n = sd_listen_fds_with_names(1, &names), r = 0;
	if (n < 0) {
		log_error("sd_listen_fds: %s", strerror(-n));
		return n;
	}
	for (int i = 0; i < n && r >= 0; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		const char *name = names ? names[i] : NULL;
		enum mmds_listener_kind kind;
		uint64_t generation;

		r = mmds_fdstore_generation(name, &generation);
		if (r != -ENOENT) {
			if (r == 0)
				recover_document(s, fd, name, generation);
			else
				log_warning("fd store: %s: not a document name; ignored", name);
			if (r < 0)
				close(fd);
			r = 0;
			continue;
		}
		r = listen_kind_of(fd, &kind);
		if (r < 0) {
			log_error("passed fd %d (%s): not a listening stream socket of a known family", fd,
				  name ? name : "unnamed");
			break;
		}
		if (kind == MMDS_LISTEN_CONTROL_VSOCK)
			describe_vsock_listener(s, fd);
		r = mmds_server_add_listener(s, fd, kind, api_for(kind));
		if (r < 0)
			log_error("passed fd %d (%s): %s", fd, name ? name : "unnamed", strerror(-r));
		else
			++*(kind == MMDS_LISTEN_GUEST ? n_guest : n_control);
	}
	for (int i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
	return r < 0 ? r : 0;
}

/* The listeners systemd did not pass: the guest one always, the control
 * socket when --control names one. */
static int open_missing_sockets(struct mmds_server *s, int n_guest, int n_control)
{
	const struct mmds_config *cfg = &s->cfg;
	int fd, r;

	if (n_guest == 0) {
		const char *spec = cfg->listen ? cfg->listen : DEFAULT_LISTEN;
		fd = listen_inet(spec);
		r = fd < 0 ? fd : mmds_server_add_listener(s, fd, MMDS_LISTEN_GUEST, &mmds_guest_api);
		if (r < 0) {
			log_error("listen %s: %s", spec, r == -EINVAL ? "not ADDR:PORT" : strerror(-r));
			return r;
		}
		log_info("listening on %s", spec);
	} else if (cfg->listen) {
		log_warning("socket-activated: ignoring --listen %s", cfg->listen);
	}
	if (cfg->control_path && n_control == 0) {
		fd = listen_control(cfg->control_path);
		r = fd < 0 ? fd : mmds_server_add_listener(s, fd, MMDS_LISTEN_CONTROL, &mmds_control_api);
		if (r < 0) {
			log_error("control socket %s: %s", cfg->control_path,
				  r == -EEXIST ? "exists and is not a socket" : strerror(-r));
			return r;
		}
	}
	return 0;
}

static int setup_sockets(struct mmds_server *s)
{
	int n_guest = 0, n_control = 0;
	int r = take_passed_fds(s, &n_guest, &n_control);
	return r < 0 ? r : open_missing_sockets(s, n_guest, n_control);
}

/* ---- run --------------------------------------------------------------- */

static void raise_fd_limit(unsigned need)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= need)
		return;
	rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

static int handle_signals(sd_event *event)
{
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	int r = sd_event_add_signal(event, NULL, SIGTERM, NULL, NULL);
	return r < 0 ? r : sd_event_add_signal(event, NULL, SIGINT, NULL, NULL);
}

/* Sets up and runs the server; 0 after SIGTERM/SIGINT, -errno on a setup
 * or loop failure (already logged). */
static int run(const struct mmds_config *cfg)
{
	_cleanup_(sd_event_unrefp) sd_event *event = NULL;
	sd_event_source *watch = NULL;
	struct mmds_server s;

	raise_fd_limit(cfg->max_connections + 64);
	/* Not sd_event_default(): its thread check costs a gettid() per iteration. */
	int r = sd_event_new(&event);
	if (r < 0) {
		log_error("sd-event: %s", strerror(-r));
		return r;
	}
	r = mmds_server_init(&s, cfg, event); /* mmds_server_done() undoes a partial init */
	if (r < 0)
		log_error("setup: %s", strerror(-r));
	if (r >= 0)
		r = setup_sockets(&s);
	if (r >= 0)
		r = watch_document(&s, &watch);
	if (r >= 0 && (r = handle_signals(event)) < 0)
		log_error("signals: %s", strerror(-r));
	if (r >= 0) {
		sd_notify(0, s.doc ? "READY=1" : "READY=1\nSTATUS=Waiting for a document");
		r = sd_event_loop(event);
		sd_notify(0, "STOPPING=1");
		if (r < 0)
			log_error("event loop: %s", strerror(-r));
	}
	sd_event_source_disable_unref(watch);
	mmds_server_done(&s);
	return r < 0 ? r : 0;
}

/* --import: one document into the watched file, then exit. */
static int import(const struct mmds_config *cfg)
{
	const char *src = cfg->import_from, *dst = cfg->document_path;
	struct mmds_import_result res;
	int r = mmds_import_document(src, dst, cfg->max_size, &res);

	if (r == 0)
		log_info("%s: imported into %s (%zu bytes)", src, dst, res.written);
	else if (r == -EINVAL && res.failed_on == src)
		log_error("%s: invalid JSON at line %d, column %d: %s; %s left as it was", src, res.json.line,
			  res.json.column, res.json.text, dst);
	else if (r == -EFBIG && res.failed_on == src)
		log_error("%s: document over the %zu-byte limit (%zu raw; --max-size); %s left as it was", src,
			  cfg->max_size, 4 * cfg->max_size, dst);
	else if (r == -ENOENT && res.failed_on == dst)
		log_error("%s: its directory does not exist; create it before importing %s", dst, src);
	else if (res.failed_on == dst)
		log_error("%s: writing the document from %s: %s; %s left as it was", dst, src, strerror(-r), dst);
	else
		log_error("%s: %s; %s left as it was", src, strerror(-r), dst);
	return r;
}

int main(int argc, char **argv)
{
	struct mmds_config cfg = default_config;
	int c;

	log_init("mmds-serve");
	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		if (c == O_HELP) {
			usage(stdout);
			return 0;
		}
		if (c == '?') {
			usage(stderr);
			return 2;
		}
		if (apply_option(c, optarg, &cfg) < 0) {
			log_error("invalid value for --%s: %s", options[c - O_DOCUMENT].name, optarg);
			return 2;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument: %s", argv[optind]);
		return 2;
	}
	if (cfg.document_path[0] != '/') {
		log_error("--document must be an absolute path: %s", cfg.document_path);
		return 2;
	}
	if (cfg.import_from)
		return import(&cfg) < 0 ? 1 : 0;
	return run(&cfg) < 0 ? 1 : 0;
}
