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

#include "atomicfile.h"
#include "cache.h"
#include "cleanup.h"
#include "fetch.h"
#include "lock.h"
#include "log.h"
#include "sha256.h"
#include "tree.h"

#define EXIT_FETCH 1
#define EXIT_USAGE 2

#define DEFAULT_CACHE    "out/cache/pinfetch"
#define DEFAULT_TIMEOUT  30L
#define DEFAULT_MAX_SIZE (4ULL << 30)
#define MAX_MIRRORS      16

struct artifact {
	char *name;
	char *version; /* may be NULL outside lock mode */
	char *url;
	char sha256[SHA256_HEX_SIZE];
	bool has_size;
	uint64_t size;
};

struct options {
	const char *lock, *name, *output, *url, *sha256, *size, *print_pin, *version, *hash_file;
	const char *cache;
	bool no_cache, offline, allow_http, quiet, verbose;
	const char *mirrors[MAX_MIRRORS];
	int n_mirrors;
	mode_t mode;
	long timeout;
	uint64_t max_size;
	const char *ca_file;
	const char *hash_tree;
	struct extract_limits limits;
};

static void on_signal(int sig)
{
	fetch_interrupted = sig;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage:\n"
		"  pinfetch --lock FILE --name NAME --output PATH [options]\n"
		"  pinfetch --url URL --sha256 HEX [--size N] [--name NAME] --output PATH [options]\n"
		"  pinfetch --print-pin URL [--name NAME] [--version V] [options]\n"
		"  pinfetch --hash FILE\n"
		"  pinfetch --hash-tree DIR|ARCHIVE\n"
		"\n"
		"Options:\n"
		"  --cache DIR       content-addressed cache (default " DEFAULT_CACHE ")\n"
		"  --no-cache        neither read nor fill a cache\n"
		"  --mirror PREFIX   try PREFIX/sha256/<hex> first (repeatable, in order)\n"
		"  --offline         use only the cache and file:// mirrors\n"
		"  --allow-http      allow plain http:// to hosts other than loopback\n"
		"  --ca-file FILE    trust these CA certificates instead of the system's\n"
		"  --mode OCTAL      mode of the output file (default 0644)\n"
		"  --timeout SEC     connect timeout and stall limit (default %ld)\n"
		"  --max-size BYTES  refuse bodies larger than this (default %llu)\n"
		"  --max-entries N   refuse archives with more entries (default %llu)\n"
		"  --max-unpacked BYTES  refuse archives that unpack larger (default %llu)\n"
		"  --quiet, --verbose\n"
		"Exit: 0 ok, 1 fetch or verification failure, 2 usage or lock-file error.\n",
		DEFAULT_TIMEOUT, DEFAULT_MAX_SIZE, EXTRACT_DEFAULT_MAX_ENTRIES, EXTRACT_DEFAULT_MAX_BYTES);
}

static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int read_small_file(const char *path, size_t max, char **out, size_t *len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *buf = NULL;
	size_t have = 0;

	if (fd < 0)
		return -errno;
	buf = malloc(max + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + have, max + 1 - have);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		have += (size_t)n;
		if (have > max)
			return -EFBIG;
	}
	buf[have] = '\0';
	*len = have;
	*out = TAKE_PTR(buf);
	return 0;
}

static void artifact_free(struct artifact *a)
{
	free(a->name);
	free(a->version);
	free(a->url);
}

/* The last path segment of a URL, if it makes a valid artifact name. */
static char *name_from_url(const char *url)
{
	const char *end = url + strcspn(url, "?#"), *start = end;

	while (start > url && start[-1] != '/')
		start--;
	if (lock_valid_name(start, (size_t)(end - start)))
		return strndup(start, (size_t)(end - start));
	return strdup("artifact");
}

/* A path segment like "v0.8.0" or "1.2.3" in a release URL, without the "v". */
static char *version_from_url(const char *url)
{
	const char *p = strstr(url, "://");
	const char *end = url + strcspn(url, "?#");

	p = p ? strchr(p + 3, '/') : NULL;
	while (p && p < end) {
		const char *seg = p + 1, *seg_end = seg + strcspn(seg, "/?#");
		size_t len;
		bool dot = false, ok = true;

		if (seg_end > seg && *seg == 'v')
			seg++;
		len = (size_t)(seg_end - seg);
		if (len > 0 && len <= LOCK_MAX_VERSION && *seg >= '0' && *seg <= '9') {
			for (const char *c = seg; c < seg_end; c++) {
				if (*c == '.')
					dot = true;
				else if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
					   *c == '-' || *c == '+' || *c == '_' || *c == '~'))
					ok = false;
			}
			if (ok && dot && seg_end < end)
				return strndup(seg, len);
		}
		p = *seg_end == '/' ? seg_end : NULL;
	}
	return NULL;
}

static int artifact_from_lock(const struct options *o, struct artifact *a)
{
	_cleanup_free_ char *buf = NULL;
	struct lock lock;
	struct lock_error err;
	size_t len = 0;
	int r;

	r = read_small_file(o->lock, LOCK_MAX_BYTES, &buf, &len);
	if (r < 0) {
		log_error("%s: cannot read the lock file: %s", o->lock,
			  r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
		return -EINVAL;
	}
	r = lock_parse(buf, len, &lock, &err);
	if (r < 0) {
		if (err.line)
			log_error("%s:%u: %s", o->lock, err.line, err.msg);
		else
			log_error("%s: %s", o->lock, err.msg);
		return -EINVAL;
	}
	const struct lock_entry *e = lock_find(&lock, o->name);
	if (!e) {
		char names[256] = "";
		for (size_t i = 0; i < lock.n; i++) {
			if (i)
				strncat(names, ", ", sizeof(names) - strlen(names) - 1);
			strncat(names, lock.entries[i].name, sizeof(names) - strlen(names) - 1);
		}
		log_error("%s: no [%s] stanza (it has: %s)", o->lock, o->name, names);
		lock_free(&lock);
		return -EINVAL;
	}
	a->name = strdup(e->name);
	a->version = strdup(e->version);
	a->url = strdup(e->url);
	memcpy(a->sha256, e->sha256, SHA256_HEX_SIZE);
	a->has_size = e->has_size;
	a->size = e->size;
	lock_free(&lock);
	return a->name && a->version && a->url ? 0 : -ENOMEM;
}

static int artifact_from_args(const struct options *o, struct artifact *a)
{
	if (!lock_valid_sha256(o->sha256, strlen(o->sha256))) {
		log_error("--sha256 must be 64 lowercase hex digits");
		return -EINVAL;
	}
	memcpy(a->sha256, o->sha256, SHA256_HEX_SIZE);
	if (o->size) {
		if (lock_parse_size(o->size, strlen(o->size), &a->size) < 0) {
			log_error("--size must be a decimal byte count");
			return -EINVAL;
		}
		a->has_size = true;
	}
	if (o->name && !lock_valid_name(o->name, strlen(o->name))) {
		log_error("--name: invalid artifact name \"%s\"", o->name);
		return -EINVAL;
	}
	a->name = o->name ? strdup(o->name) : name_from_url(o->url);
	a->url = strdup(o->url);
	return a->name && a->url ? 0 : -ENOMEM;
}

struct run {
	const struct options *o;
	const struct artifact *a;
	struct fetch_opts fopts;
	struct cache cache;
	bool use_cache;
	struct atomic_file dest;
};

enum { DELIVER_OK = 0 };

/* Copies the cache entry into the destination's temporary file, hashing as it
 * goes. -ENOENT: no entry; -EBADMSG: the entry is corrupt (got filled);
 * anything else: the destination could not be written. */
static int deliver_from_cache(struct run *run, char got[SHA256_HEX_SIZE], unsigned long long *bytes)
{
	const struct artifact *a = run->a;
	_cleanup_close_ int fd = cache_open_entry(&run->cache, a->sha256);
	int read_failed = 0, r;

	if (fd < 0)
		return fd == -ENOENT ? -ENOENT : -EBADMSG;
	if ((r = atomic_file_reset(&run->dest)) < 0)
		return r;
	r = sha256_fd(fd, run->dest.fd, a->has_size ? a->size : run->o->max_size, got, bytes, &read_failed);
	if (r == -EFBIG || (r < 0 && read_failed)) {
		snprintf(got, SHA256_HEX_SIZE, "%s", r == -EFBIG ? "(oversized)" : "(unreadable)");
		return -EBADMSG;
	}
	if (r < 0)
		return r;
	if (strcmp(got, a->sha256) != 0 || (a->has_size && *bytes != a->size))
		return -EBADMSG;
	return 0;
}

static int commit_dest(struct run *run, const char *from)
{
	int r;

	if (fetch_interrupted) {
		log_error("%s: interrupted by signal %d; %s left as it was", run->a->name, (int)fetch_interrupted,
			  run->o->output);
		return EXIT_FETCH;
	}
	r = atomic_file_commit(&run->dest);

	if (r < 0) {
		log_error("%s: cannot put %s in place: %s", run->a->name, run->o->output, strerror(-r));
		return EXIT_FETCH;
	}
	log_info("%s: %s verified (sha256 %s), from %s", run->a->name, run->o->output, run->a->sha256, from);
	return 0;
}

static const char *hint_for(enum fetch_failure f)
{
	switch (f) {
	case FETCH_POLICY:
		return "use an https URL, or --allow-http for a trusted network";
	case FETCH_TOO_BIG:
		return "check the URL; raise --max-size only if the artifact really is this large";
	case FETCH_LOCAL:
		return "free space or fix permissions where the file is written";
	default:
		return "check the URL and the network, or add a --mirror";
	}
}

/* One source into `target` (the cache's temporary file, or the destination's).
 * Returns 0 when the body matches the pin, -EBADMSG on a mismatch (detail
 * filled), or the fetch layer's error with res->failure set. */
static int fetch_one(struct run *run, const char *url, enum fetch_source source, int target,
		     struct fetch_result *res, char *detail, size_t detail_len)
{
	const struct artifact *a = run->a;
	int r = fetch_url(url, source, target, &run->fopts, res);

	if (r < 0) {
		snprintf(detail, detail_len, "%s", res->detail);
		return r;
	}
	if (a->has_size && res->bytes != a->size) {
		snprintf(detail, detail_len, "size mismatch: expected %llu bytes, got %llu",
			 (unsigned long long)a->size, (unsigned long long)res->bytes);
		return -EBADMSG;
	}
	if (strcmp(res->sha256, a->sha256) != 0) {
		snprintf(detail, detail_len, "sha256 mismatch: expected %s, got %s", a->sha256, res->sha256);
		return -EBADMSG;
	}
	return 0;
}

static int run_fetch(struct run *run)
{
	const struct options *o = run->o;
	const struct artifact *a = run->a;
	_cleanup_close_ int lock_fd = -1;
	char got[SHA256_HEX_SIZE], why[256], detail[600] = "";
	const char *sources[MAX_MIRRORS + 1];
	char *owned[MAX_MIRRORS] = { NULL };
	enum fetch_source kinds[MAX_MIRRORS + 1];
	enum fetch_failure last_failure = FETCH_REMOTE;
	const char *last_url = NULL;
	unsigned long long bytes = 0;
	int n = 0, failed_mirrors = 0, ret = EXIT_FETCH, r;

	r = atomic_file_open(&run->dest, o->output, o->mode);
	if (r < 0) {
		log_error("%s: cannot create a temporary file beside %s: %s; %s", a->name, o->output, strerror(-r),
			  hint_for(FETCH_LOCAL));
		return EXIT_FETCH;
	}

	if (run->use_cache) {
		r = cache_open(&run->cache, o->cache);
		if (r < 0) {
			log_error("%s: cannot use the cache %s: %s; pass --no-cache or another --cache", a->name,
				  o->cache, strerror(-r));
			return EXIT_FETCH;
		}
		lock_fd = cache_lock_entry(&run->cache, a->sha256);
		if (lock_fd == -EINTR) {
			log_error("%s: interrupted by signal %d while waiting for the cache entry", a->name,
				  (int)fetch_interrupted);
			return EXIT_FETCH;
		}
		if (lock_fd < 0) {
			log_error("%s: cannot lock the cache entry in %s: %s", a->name, o->cache, strerror(-lock_fd));
			return EXIT_FETCH;
		}
		r = deliver_from_cache(run, got, &bytes);
		if (r == 0)
			return commit_dest(run, "the cache");
		if (r == -EBADMSG) {
			log_warning("%s: cache entry %s/sha256/%s is corrupted (got %s, %llu bytes); dropped it, fetching again",
				    a->name, o->cache, a->sha256, got, bytes);
			r = cache_drop_entry(&run->cache, a->sha256);
			if (r < 0) {
				log_error("%s: cannot drop the corrupted cache entry in %s: %s", a->name, o->cache,
					  strerror(-r));
				return EXIT_FETCH;
			}
		} else if (r != -ENOENT) {
			log_error("%s: cannot write %s: %s; %s", a->name, o->output, strerror(-r), hint_for(FETCH_LOCAL));
			return EXIT_FETCH;
		}
	}

	for (int i = 0; i < o->n_mirrors; i++) {
		size_t plen = strlen(o->mirrors[i]);
		while (plen > 0 && o->mirrors[i][plen - 1] == '/')
			plen--;
		if (o->offline && strncmp(o->mirrors[i], "file://", 7) != 0)
			continue;
		if (asprintf(&owned[i], "%.*s/sha256/%s", (int)plen, o->mirrors[i], a->sha256) < 0) {
			owned[i] = NULL;
			goto out;
		}
		sources[n] = owned[i];
		kinds[n++] = SOURCE_MIRROR;
	}
	if (!o->offline) {
		sources[n] = a->url;
		kinds[n++] = SOURCE_CANONICAL;
	}
	if (n == 0) {
		log_error("%s: offline, and it is neither in the cache %s nor on a file:// mirror; run once online "
			  "or pass --mirror file://DIR",
			  a->name, run->use_cache ? o->cache : "(disabled)");
		goto out;
	}

	for (int i = 0; i < n; i++) {
		struct atomic_file cache_tmp = ATOMIC_FILE_INIT;
		struct fetch_result res;
		int target = run->dest.fd;

		if (fetch_url_allowed(sources[i], kinds[i], o->allow_http, NULL, why, sizeof(why)) < 0) {
			snprintf(detail, sizeof(detail), "%s", why);
			r = -EPERM;
			res.failure = FETCH_POLICY;
		} else {
			if (run->use_cache) {
				_cleanup_free_ char *path = cache_entry_path(&run->cache, a->sha256);
				r = path ? atomic_file_open(&cache_tmp, path, 0644) : -ENOMEM;
				if (r < 0) {
					log_error("%s: cannot create a temporary file in %s: %s", a->name,
						  run->cache.entries, strerror(-r));
					goto out;
				}
				target = cache_tmp.fd;
			} else if ((r = atomic_file_reset(&run->dest)) < 0) {
				log_error("%s: cannot write %s: %s", a->name, o->output, strerror(-r));
				goto out;
			}
			log_debug("%s: trying %s", a->name, sources[i]);
			r = fetch_one(run, sources[i], kinds[i], target, &res, detail, sizeof(detail));
		}
		if (r == 0 && run->use_cache) {
			r = atomic_file_commit(&cache_tmp);
			atomic_file_abort(&cache_tmp);
			if (r < 0) {
				log_error("%s: cannot store the download in %s: %s", a->name, o->cache, strerror(-r));
				goto out;
			}
			r = deliver_from_cache(run, got, &bytes);
			if (r < 0) {
				log_error("%s: cannot copy the verified download from %s to %s: %s", a->name, o->cache,
					  o->output, r == -EBADMSG ? "the cache entry changed under us" : strerror(-r));
				goto out;
			}
		}
		atomic_file_abort(&cache_tmp);
		if (r == 0) {
			ret = commit_dest(run, sources[i]);
			goto out;
		}

		if (fetch_interrupted) {
			log_error("%s: interrupted by signal %d; %s left as it was", a->name, (int)fetch_interrupted,
				  o->output);
			goto out;
		}
		last_url = sources[i];
		last_failure = r == -EBADMSG ? FETCH_REMOTE : res.failure;
		if (r != -EBADMSG && res.failure == FETCH_LOCAL)
			break; /* another source cannot fix a full disk */
		if (i < n - 1) {
			failed_mirrors++;
			if (r == -EBADMSG)
				log_warning("%s: mirror %s: %s; trying the next source", a->name, sources[i], detail);
			else
				log_notice("%s: mirror %s: %s; trying the next source", a->name, sources[i], detail);
		}
	}

	if (last_url && strncmp(detail, "sha256 mismatch", 15) == 0)
		log_error("%s: %s, from %s; the artifact changed or was tampered with: do not use it, and check the "
			  "upstream release before touching the pin",
			  a->name, detail, last_url);
	else if (last_url && last_failure == FETCH_LOCAL)
		log_error("%s: %s, in %s, fetching %s; %s", a->name, detail,
			  run->use_cache ? run->cache.entries : o->output, last_url, hint_for(last_failure));
	else if (last_url)
		log_error("%s: %s, from %s; %s%s", a->name, detail, last_url, hint_for(last_failure),
			  failed_mirrors ? " (earlier mirrors failed too: --verbose shows why)" : "");
out:
	for (int i = 0; i < MAX_MIRRORS; i++)
		free(owned[i]);
	return ret;
}

static int run_print_pin(const struct options *o)
{
	struct fetch_opts fopts = {
		.allow_http = o->allow_http, .timeout = o->timeout, .max_size = o->max_size, .ca_file = o->ca_file,
		.progress = !o->quiet && isatty(STDERR_FILENO), .label = "print-pin",
	};
	struct fetch_result res;
	_cleanup_free_ char *name = NULL, *version = NULL;
	char why[256];

	if (fetch_url_allowed(o->print_pin, SOURCE_CANONICAL, o->allow_http, NULL, why, sizeof(why)) < 0) {
		log_error("%s: %s", o->print_pin, why);
		return EXIT_USAGE;
	}
	if (strncmp(o->print_pin, "https://", 8) != 0 && strncmp(o->print_pin, "http://", 7) != 0) {
		log_error("%s: a pin's url must be https:// or http://", o->print_pin);
		return EXIT_USAGE;
	}
	for (const char *c = o->print_pin; *c; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f) {
			log_error("the URL contains a blank or a non-ASCII byte; percent-encode it");
			return EXIT_USAGE;
		}
	if (o->name && !lock_valid_name(o->name, strlen(o->name))) {
		log_error("--name: invalid artifact name \"%s\"", o->name);
		return EXIT_USAGE;
	}
	name = o->name ? strdup(o->name) : name_from_url(o->print_pin);
	version = o->version ? strdup(o->version) : version_from_url(o->print_pin);
	if (!version) {
		log_error("%s: cannot tell the version from the URL; pass --version", o->print_pin);
		return EXIT_USAGE;
	}
	for (const char *c = version; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || strchr(".-_+~", *c)) ||
		    strlen(version) > LOCK_MAX_VERSION) {
			log_error("--version: invalid version \"%s\"", version);
			return EXIT_USAGE;
		}
	if (fetch_url(o->print_pin, SOURCE_CANONICAL, -1, &fopts, &res) < 0) {
		log_error("%s: %s, from %s; %s", name, res.detail, o->print_pin, hint_for(res.failure));
		return EXIT_FETCH;
	}
	printf("[%s]\nversion = %s\nurl = %s\nsha256 = %s\nsize = %llu\n", name, version, o->print_pin, res.sha256,
	       (unsigned long long)res.bytes);
	if (fflush(stdout) != 0) {
		log_error("writing the stanza to stdout: %s", strerror(errno));
		return EXIT_FETCH;
	}
	return 0;
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
	OPT_CA_FILE, OPT_QUIET, OPT_VERBOSE, OPT_HASH, OPT_HELP, OPT_HASH_TREE, OPT_MAX_ENTRIES, OPT_MAX_UNPACKED,
};

static int parse_args(int argc, char **argv, struct options *o)
{
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
		{ "help", no_argument, NULL, OPT_HELP },
		{ "hash-tree", required_argument, NULL, OPT_HASH_TREE },
		{ "max-entries", required_argument, NULL, OPT_MAX_ENTRIES },
		{ "max-unpacked", required_argument, NULL, OPT_MAX_UNPACKED },
		{ NULL, 0, NULL, 0 },
	};
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
			if (parse_u64(optarg, 1, 86400, &v) < 0) {
				log_error("--timeout must be 1 to 86400 seconds");
				return -EINVAL;
			}
			o->timeout = (long)v;
			break;
		case OPT_MAX_SIZE:
			if (parse_u64(optarg, 1, INT64_MAX, &v) < 0) {
				log_error("--max-size must be a positive byte count");
				return -EINVAL;
			}
			o->max_size = v;
			break;
		case OPT_CA_FILE: o->ca_file = optarg; break;
		case OPT_QUIET: o->quiet = true; break;
		case OPT_VERBOSE: o->verbose = true; break;
		case OPT_HASH: o->hash_file = optarg; break;
		case OPT_HELP: usage(stdout); exit(0);
		case OPT_HASH_TREE: o->hash_tree = optarg; break;
		case OPT_MAX_ENTRIES:
		case OPT_MAX_UNPACKED:
			if (parse_u64(optarg, 1, INT64_MAX, &v) < 0) {
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

	int modes = !!o->lock + !!o->url + !!o->print_pin + !!o->hash_file + !!o->hash_tree;
	if (modes != 1) {
		log_error("give exactly one of --lock, --url, --print-pin, --hash or --hash-tree; see --help");
		return -EINVAL;
	}
	if (o->lock && (!o->name || !o->output || o->sha256 || o->size)) {
		log_error("--lock needs --name and --output (and takes the sha256 and size from the lock)");
		return -EINVAL;
	}
	if (o->url && (!o->sha256 || !o->output)) {
		log_error("--url needs --sha256 and --output");
		return -EINVAL;
	}
	if ((o->print_pin || o->hash_file || o->hash_tree) && (o->output || o->sha256 || o->size)) {
		log_error("--print-pin and --hash print to stdout and take no --output, --sha256 or --size");
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

int main(int argc, char **argv)
{
	struct options o;
	struct artifact a = { 0 };
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
	if (fetch_global_init() < 0) {
		log_error("cannot initialise libcurl");
		return EXIT_FETCH;
	}
	if (o.print_pin) {
		ret = run_print_pin(&o);
		goto out;
	}

	ret = EXIT_USAGE;
	if ((o.lock ? artifact_from_lock(&o, &a) : artifact_from_args(&o, &a)) < 0)
		goto out;
	if (a.has_size && a.size > o.max_size) {
		log_error("%s: the pinned size %llu is over --max-size %llu", a.name, (unsigned long long)a.size,
			  (unsigned long long)o.max_size);
		goto out;
	}
	{
		char why[256];
		if (fetch_url_allowed(a.url, SOURCE_CANONICAL, o.allow_http, NULL, why, sizeof(why)) < 0) {
			log_error("%s: %s: %s", a.name, a.url, why);
			goto out;
		}
		for (int i = 0; i < o.n_mirrors; i++)
			if (fetch_url_allowed(o.mirrors[i], SOURCE_MIRROR, o.allow_http, NULL, why, sizeof(why)) < 0) {
				log_error("--mirror %s: %s", o.mirrors[i], why);
				goto out;
			}
	}

	struct run run = {
		.o = &o, .a = &a, .use_cache = !o.no_cache, .cache = CACHE_INIT, .dest = ATOMIC_FILE_INIT,
		.fopts = {
			.allow_http = o.allow_http, .timeout = o.timeout, .max_size = o.max_size,
			.has_size = a.has_size, .size = a.size, .ca_file = o.ca_file,
			.progress = !o.quiet && isatty(STDERR_FILENO), .label = a.name,
		},
	};
	ret = run_fetch(&run);
	atomic_file_abort(&run.dest);
	cache_close(&run.cache);
out:
	artifact_free(&a);
	fetch_global_cleanup();
	return ret;
}
