/* pinfetch's parts (see pin/README.md, "Files"): the command line (pinfetch.c),
 * the artifact from a lock or the arguments (artifact.c), the fetch itself
 * (run.c), its diagnosis (report.c) and the stanza printers (stanza.c).
 * Every function returns 0 or -errno; only main() turns them into messages
 * and exit codes. */
#ifndef PIN_PINFETCH_H
#define PIN_PINFETCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "atomicfile.h"
#include "cache.h"
#include "fetch.h"
#include "sha256.h"
#include "tree.h"
#include "lock.h"

#define EXIT_FETCH 1
#define EXIT_USAGE 2

#define DEFAULT_CACHE    "out/cache/pinfetch"
#define DEFAULT_TIMEOUT  30L
#define DEFAULT_MAX_SIZE (4ULL << 30)
#define MAX_MIRRORS      16

struct options {
	const char *lock, *name, *output, *url, *sha256, *size, *print_pin, *version, *hash_file, *field;
	const char *cache;
	bool no_cache, offline, allow_http, quiet, verbose, json;
	const char *mirrors[MAX_MIRRORS];
	int n_mirrors;
	mode_t mode;
	long timeout;
	uint64_t max_size;
	const char *ca_file;
	const char *tree_sha256, *hash_tree;
	struct extract_limits limits;
};

struct artifact {
	char *name;
	char *version; /* may be NULL outside lock mode */
	char *url;
	char sha256[SHA256_HEX_SIZE];                 /* when has_sha256 */
	unsigned char tree_sha256[NAR_DIGEST_SIZE];   /* when has_tree: the unpacked tree's NAR hash */
	char key[NAR_HEX_SIZE];                       /* the cache and mirror key: the tree pin, else sha256 */
	char commit[LOCK_COMMIT_MAX + 1];             /* when has_commit: recorded, not verified */
	bool has_size, has_sha256, has_tree, has_commit;
	uint64_t size;
};

/* artifact.c. On -EINVAL, why says what is wrong (naming file, line, stanza). */
int artifact_from_lock(const char *path, const char *name, struct artifact *a, char *why, size_t why_len);
int artifact_from_args(const struct options *o, struct artifact *a, char *why, size_t why_len);
void artifact_free(struct artifact *a);
void artifact_set_key(struct artifact *a);
char *artifact_name_from_url(const char *url);
char *artifact_version_from_url(const char *url);

/* stanza.c: --json and --field print one stanza of a lock; --print-pin
 * fetches a URL and prints the stanza that pins it. */
int stanza_print_json(const struct artifact *a);
int stanza_print_field(const struct artifact *a, const char *key, char *why, size_t why_len);
int stanza_print_pin(const struct options *o, char *why, size_t why_len, bool *usage);

/* run.c: one artifact into o->output, through the cache, the mirrors and the
 * canonical URL. */
enum run_stage {
	STAGE_NONE,
	STAGE_DEST_OPEN,     /* the temporary file beside the output */
	STAGE_CACHE_OPEN,
	STAGE_CACHE_LOCK,
	STAGE_CACHE_DROP,    /* a corrupt entry could not be removed */
	STAGE_DEST_WRITE,
	STAGE_NO_SOURCE,     /* offline, and no file:// mirror */
	STAGE_CACHE_TMP,
	STAGE_CACHE_STORE,
	STAGE_CACHE_COPY,
	STAGE_INTERRUPTED,
	STAGE_COMMIT,
	STAGE_SOURCES,       /* every source failed: see kind, url, detail */
};

struct run_outcome {
	enum run_stage stage;  /* where it failed; STAGE_NONE on success */
	int err;               /* -errno of that step */
	const char *from;      /* the source that delivered, on success */
	bool dir_sync_failed;  /* in place and verified, but the directory's fsync failed */
	bool cache_corrupt;    /* a corrupt entry was dropped on the way */
	char got[SHA256_HEX_SIZE];
	unsigned long long got_bytes;
	const char *url;       /* STAGE_SOURCES: the last source tried */
	enum fetch_failure kind;
	bool mismatch;         /* the last source's body did not match the pin */
	int failed_mirrors;
	char detail[600];
};

struct run_sources {
	int n;
	const char *url[MAX_MIRRORS + 1];
	enum fetch_source kind[MAX_MIRRORS + 1];
	char *owned[MAX_MIRRORS];
};

struct run {
	const struct options *o;
	const struct artifact *a;
	struct fetch_opts fopts;
	struct cache cache;
	bool use_cache;
	struct atomic_file dest;
	struct run_sources sources;
	struct run_outcome out;
	char *tree_tmp;          /* a tree pin's verified tree, until it is renamed into place */
};

int run_fetch(struct run *run);
void run_free(struct run *run);

/* report.c: the messages for an outcome of run_fetch; returns the exit code. */
int run_report(const struct run *run, int r);
const char *fetch_hint(enum fetch_failure f);

#endif
