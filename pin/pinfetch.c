/* pinfetch: fetch a pinned artifact, verify its SHA-256 while it downloads,
 * and put it in place only if it matches. See pin/README.md. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "decimal.h"
#include "log.h"
#include "pinfetch.h"

static void on_signal(int sig)
{
	fetch_interrupted = sig;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage:\n"
		"  pinfetch --lock FILE --name NAME --output PATH [options]\n"
		"  pinfetch --lock FILE --name NAME --json | --field KEY\n"
		"  pinfetch --url URL --sha256 HEX|--tree-sha256 SRI [--size N] [--name NAME] --output PATH [options]\n"
		"  pinfetch --print-pin URL [--name NAME] [--version V] [options]\n"
		"  pinfetch --hash FILE\n"
		"  pinfetch --hash-tree DIR|ARCHIVE\n"
		"\n"
		"Options:\n"
		"  --cache DIR       content-addressed cache (default " DEFAULT_CACHE ")\n"
		"  --no-cache        neither read nor fill a cache\n"
		"  --mirror PREFIX   try PREFIX/sha256/<hex> (a tree pin: PREFIX/tree/<hex>) first\n"
		"                    (repeatable, in order)\n"
		"  --offline         use only the cache and file:// mirrors\n"
		"  --allow-http      allow plain http:// to hosts other than loopback\n"
		"  --ca-file FILE    trust these CA certificates instead of the system's\n"
		"  --mode OCTAL      mode of the output file (default 0644)\n"
		"  --timeout SEC     connect timeout and stall limit (default %ld)\n"
		"  --max-size BYTES  refuse bodies larger than this (default %llu)\n"
		"  --max-entries N   refuse archives with more entries (default %llu)\n"
		"  --max-unpacked B  refuse archives that unpack to more bytes (default %llu)\n"
		"  --quiet, --verbose\n"
		"  --json            print the stanza as one JSON object (name, version, url, sha256[, size])\n"
		"  --field KEY       print one value: name, version, url, sha256 or size\n"
		"Exit: 0 ok, 1 fetch or verification failure, 2 usage or lock-file error.\n",
		DEFAULT_TIMEOUT, DEFAULT_MAX_SIZE, EXTRACT_DEFAULT_MAX_ENTRIES, EXTRACT_DEFAULT_MAX_BYTES);
}

static int run_hash(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	char hex[SHA256_HEX_SIZE];
	unsigned long long bytes;
	int read_failed, r;

	if (fd < 0) {
		log_error("%s: %s", path, strerror(errno));
		return EXIT_FETCH;
	}
	r = sha256_fd(fd, -1, ULLONG_MAX, hex, &bytes, &read_failed);
	if (r < 0) {
		log_error("%s: %s", path, strerror(-r));
		return EXIT_FETCH;
	}
	printf("%s  %s\n", hex, path);
	return fflush(stdout) == 0 ? 0 : EXIT_FETCH;
}

enum {
	OPT_LOCK = 0x100, OPT_NAME, OPT_OUTPUT, OPT_URL, OPT_SHA256, OPT_SIZE, OPT_PRINT_PIN, OPT_VERSION,
	OPT_CACHE, OPT_NO_CACHE, OPT_MIRROR, OPT_OFFLINE, OPT_ALLOW_HTTP, OPT_MODE, OPT_TIMEOUT, OPT_MAX_SIZE,
	OPT_CA_FILE, OPT_QUIET, OPT_VERBOSE, OPT_HASH, OPT_JSON, OPT_FIELD, OPT_HELP, OPT_TREE_SHA256, OPT_HASH_TREE,
	OPT_MAX_ENTRIES, OPT_MAX_UNPACKED,
};

static const struct option longopts[] = {
	{ "lock", required_argument, NULL, OPT_LOCK },
	{ "name", required_argument, NULL, OPT_NAME },
	{ "output", required_argument, NULL, OPT_OUTPUT },
	{ "url", required_argument, NULL, OPT_URL },
	{ "sha256", required_argument, NULL, OPT_SHA256 },
	{ "size", required_argument, NULL, OPT_SIZE },
	{ "print-pin", required_argument, NULL, OPT_PRINT_PIN },
	{ "version", required_argument, NULL, OPT_VERSION },
	{ "cache", required_argument, NULL, OPT_CACHE },
	{ "no-cache", no_argument, NULL, OPT_NO_CACHE },
	{ "mirror", required_argument, NULL, OPT_MIRROR },
	{ "offline", no_argument, NULL, OPT_OFFLINE },
	{ "allow-http", no_argument, NULL, OPT_ALLOW_HTTP },
	{ "mode", required_argument, NULL, OPT_MODE },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "max-size", required_argument, NULL, OPT_MAX_SIZE },
	{ "ca-file", required_argument, NULL, OPT_CA_FILE },
	{ "quiet", no_argument, NULL, OPT_QUIET },
	{ "verbose", no_argument, NULL, OPT_VERBOSE },
	{ "hash", required_argument, NULL, OPT_HASH },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "field", required_argument, NULL, OPT_FIELD },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "tree-sha256", required_argument, NULL, OPT_TREE_SHA256 },
	{ "hash-tree", required_argument, NULL, OPT_HASH_TREE },
	{ "max-entries", required_argument, NULL, OPT_MAX_ENTRIES },
	{ "max-unpacked", required_argument, NULL, OPT_MAX_UNPACKED },
	{ NULL, 0, NULL, 0 },
};

static int check_options(const struct options *o);

static int parse_args(int argc, char **argv, struct options *o)
{
	uint64_t v;
	int c;

	*o = (struct options){ .cache = DEFAULT_CACHE, .mode = 0644, .timeout = DEFAULT_TIMEOUT,
			       .max_size = DEFAULT_MAX_SIZE,
			       .limits = { EXTRACT_DEFAULT_MAX_ENTRIES, EXTRACT_DEFAULT_MAX_BYTES } };
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_LOCK: o->lock = optarg; break;
		case OPT_NAME: o->name = optarg; break;
		case OPT_OUTPUT: o->output = optarg; break;
		case OPT_URL: o->url = optarg; break;
		case OPT_SHA256: o->sha256 = optarg; break;
		case OPT_SIZE: o->size = optarg; break;
		case OPT_PRINT_PIN: o->print_pin = optarg; break;
		case OPT_VERSION: o->version = optarg; break;
		case OPT_CACHE: o->cache = optarg; break;
		case OPT_NO_CACHE: o->no_cache = true; break;
		case OPT_MIRROR:
			if (o->n_mirrors == MAX_MIRRORS) {
				log_error("at most %d --mirror options", MAX_MIRRORS);
				return -EINVAL;
			}
			o->mirrors[o->n_mirrors++] = optarg;
			break;
		case OPT_OFFLINE: o->offline = true; break;
		case OPT_ALLOW_HTTP: o->allow_http = true; break;
		case OPT_MODE: {
			char *end;
			errno = 0;
			long m = strtol(optarg, &end, 8);
			if (errno || !*optarg || *end || m < 0 || m > 0777) {
				log_error("--mode must be octal permission bits, 0 to 0777");
				return -EINVAL;
			}
			o->mode = (mode_t)m;
			break;
		}
		case OPT_TIMEOUT:
			if (parse_decimal(optarg, 1, 86400, &v) < 0) {
				log_error("--timeout must be 1 to 86400 seconds");
				return -EINVAL;
			}
			o->timeout = (long)v;
			break;
		case OPT_MAX_SIZE:
			if (parse_decimal(optarg, 1, INT64_MAX, &v) < 0) {
				log_error("--max-size must be a positive byte count");
				return -EINVAL;
			}
			o->max_size = v;
			break;
		case OPT_CA_FILE: o->ca_file = optarg; break;
		case OPT_QUIET: o->quiet = true; break;
		case OPT_VERBOSE: o->verbose = true; break;
		case OPT_HASH: o->hash_file = optarg; break;
		case OPT_JSON: o->json = true; break;
		case OPT_FIELD: o->field = optarg; break;
		case OPT_HELP: usage(stdout); exit(0);
		case OPT_TREE_SHA256: o->tree_sha256 = optarg; break;
		case OPT_HASH_TREE: o->hash_tree = optarg; break;
		case OPT_MAX_ENTRIES:
		case OPT_MAX_UNPACKED:
			if (parse_decimal(optarg, 1, INT64_MAX, &v) < 0) {
				log_error("%s must be a positive count", argv[optind - 1]);
				return -EINVAL;
			}
			*(c == OPT_MAX_ENTRIES ? &o->limits.max_entries : &o->limits.max_bytes) = v;
			break;
		default:
			log_error("unknown or incomplete option %s; see --help", argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument \"%s\"; see --help", argv[optind]);
		return -EINVAL;
	}
	return check_options(o);
}

/* The combinations: exactly one mode, and only the options it takes. */
static int check_options(const struct options *o)
{
	int modes = !!o->lock + !!o->url + !!o->print_pin + !!o->hash_file + !!o->hash_tree;
	if (modes != 1) {
		log_error("give exactly one of --lock, --url, --print-pin, --hash or --hash-tree; see --help");
		return -EINVAL;
	}
	if (o->lock && (!o->name || !!o->output + o->json + !!o->field != 1 || o->sha256 || o->tree_sha256 || o->size)) {
		log_error("--lock needs --name and one of --output, --json or --field (and takes the sha256 and size "
			  "from the lock)");
		return -EINVAL;
	}
	if ((o->json || o->field) && !o->lock) {
		log_error("--json and --field read a lock: they need --lock and --name");
		return -EINVAL;
	}
	if (o->url && ((!o->sha256 && !o->tree_sha256) || !o->output)) {
		log_error("--url needs --sha256, --tree-sha256 or both, and --output");
		return -EINVAL;
	}
	if ((o->print_pin || o->hash_file || o->hash_tree) && (o->output || o->sha256 || o->tree_sha256 || o->size)) {
		log_error("--print-pin, --hash and --hash-tree print to stdout and take no --output, --sha256, "
			  "--tree-sha256 or --size");
		return -EINVAL;
	}
	if (o->version && !o->print_pin) {
		log_error("--version only goes with --print-pin");
		return -EINVAL;
	}
	if (o->quiet && o->verbose) {
		log_error("--quiet and --verbose contradict each other");
		return -EINVAL;
	}
	if (o->ca_file && access(o->ca_file, R_OK) < 0) {
		log_error("--ca-file %s: %s", o->ca_file, strerror(errno));
		return -EINVAL;
	}
	return 0;
}

/* --lock FILE --name NAME --json | --field KEY */
static int print_stanza(const struct options *o)
{
	struct artifact a = { 0 };
	char why[700];
	int r;

	r = artifact_from_lock(o->lock, o->name, &a, why, sizeof(why));
	if (r == 0)
		r = o->json ? stanza_print_json(&a) : stanza_print_field(&a, o->field, why, sizeof(why));
	if (r == -EIO || (r < 0 && o->json && r != -EINVAL))
		snprintf(why, sizeof(why), "writing the stanza to stdout: %s", strerror(-r));
	if (r < 0 && a.name)
		log_error("%s: %s", o->lock, why);
	else if (r < 0)
		log_error("%s", why);
	artifact_free(&a);
	return r < 0 ? EXIT_USAGE : 0;
}

static int print_pin(const struct options *o)
{
	char why[900];
	bool usage_error;
	int r = stanza_print_pin(o, why, sizeof(why), &usage_error);

	if (r < 0)
		log_error("%s", why);
	return r == 0 ? 0 : usage_error ? EXIT_USAGE : EXIT_FETCH;
}

/* The pin's own limits, before any byte moves. */
static int check_artifact(const struct options *o, const struct artifact *a)
{
	char why[256];

	if (a->has_size && a->size > o->max_size) {
		log_error("%s: the pinned size %llu is over --max-size %llu", a->name, (unsigned long long)a->size,
			  (unsigned long long)o->max_size);
		return -EINVAL;
	}
	if (fetch_url_allowed(a->url, SOURCE_CANONICAL, o->allow_http, NULL, why, sizeof(why)) < 0) {
		log_error("%s: %s: %s", a->name, a->url, why);
		return -EINVAL;
	}
	for (int i = 0; i < o->n_mirrors; i++)
		if (fetch_url_allowed(o->mirrors[i], SOURCE_MIRROR, o->allow_http, NULL, why, sizeof(why)) < 0) {
			log_error("--mirror %s: %s", o->mirrors[i], why);
			return -EINVAL;
		}
	return 0;
}

static int fetch_artifact(const struct options *o)
{
	struct artifact a = { 0 };
	char why[700];
	int r, ret;

	r = o->lock ? artifact_from_lock(o->lock, o->name, &a, why, sizeof(why))
		    : artifact_from_args(o, &a, why, sizeof(why));
	if (r < 0)
		log_error("%s", why);
	if (r < 0 || check_artifact(o, &a) < 0) {
		artifact_free(&a);
		return EXIT_USAGE;
	}
	struct run run = {
		.o = o, .a = &a, .use_cache = !o->no_cache, .cache = CACHE_INIT, .dest = ATOMIC_FILE_INIT,
		.fopts = {
			.allow_http = o->allow_http, .timeout = o->timeout, .max_size = o->max_size,
			.has_size = a.has_size, .size = a.size, .ca_file = o->ca_file,
			.progress = !o->quiet && isatty(STDERR_FILENO), .label = a.name,
		},
	};
	ret = run_report(&run, run_fetch(&run));
	run_free(&run);
	artifact_free(&a);
	return ret;
}

int main(int argc, char **argv)
{
	struct options o;
	int ret;

	log_init(argv[0]);
	log_set_max_priority(LOG_WARNING);
	signal(SIGPIPE, SIG_IGN);
	/* No SA_RESTART: a signal breaks a blocking flock() or read(), the
	 * transfer notices the flag, and the normal failure path cleans up. */
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (parse_args(argc, argv, &o) < 0)
		return EXIT_USAGE;
	log_set_max_priority(o.quiet ? LOG_ERR : o.verbose ? LOG_DEBUG : LOG_WARNING);

	if (o.hash_file)
		return run_hash(o.hash_file);
	if (o.hash_tree)
		return tree_print_local(o.hash_tree, &o.limits);
	if (o.json || o.field)
		return print_stanza(&o);
	if (fetch_global_init() < 0) {
		log_error("cannot initialise libcurl");
		return EXIT_FETCH;
	}
	ret = o.print_pin ? print_pin(&o) : fetch_artifact(&o);
	fetch_global_cleanup();
	return ret;
}
