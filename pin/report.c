/* The diagnosis of a fetch: one line that names the artifact, what failed, on
 * which file or source, and what to do; and the exit code. */
#include <errno.h>
#include <string.h>

#include "log.h"
#include "pinfetch.h"

const char *fetch_hint(enum fetch_failure f)
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

static void report_success(const struct run *run)
{
	const struct options *o = run->o;
	const struct artifact *a = run->a;

	if (run->out.dir_sync_failed)
		log_warning("%s: %s is in place and verified (sha256 %s), but syncing its directory failed: %s; "
			    "it may not survive a crash of this machine",
			    a->name, o->output, a->sha256, strerror(-run->out.err));
	else
		log_info("%s: %s verified (sha256 %s), from %s", a->name, o->output, a->sha256, run->out.from);
}

static void report_sources(const struct run *run)
{
	const struct run_outcome *out = &run->out;
	const struct options *o = run->o;
	const char *name = run->a->name;

	if (strncmp(out->detail, "sha256 mismatch", 15) == 0)
		log_error("%s: %s, from %s; the artifact changed or was tampered with: do not use it, and check the "
			  "upstream release before touching the pin",
			  name, out->detail, out->url);
	else if (out->kind == FETCH_LOCAL)
		log_error("%s: %s, in %s, fetching %s; %s", name, out->detail,
			  run->use_cache ? run->cache.entries : o->output, out->url, fetch_hint(out->kind));
	else
		log_error("%s: %s, from %s; %s%s", name, out->detail, out->url, fetch_hint(out->kind),
			  out->failed_mirrors ? " (earlier mirrors failed too: --verbose shows why)" : "");
}

int run_report(const struct run *run, int r)
{
	const struct run_outcome *out = &run->out;
	const struct options *o = run->o;
	const char *name = run->a->name, *err = strerror(-out->err);

	if (r == 0) {
		report_success(run);
		return 0;
	}
	switch (out->stage) {
	case STAGE_DEST_OPEN:
		log_error("%s: cannot create a temporary file beside %s: %s; %s", name, o->output, err,
			  fetch_hint(FETCH_LOCAL));
		break;
	case STAGE_CACHE_OPEN:
		log_error("%s: cannot use the cache %s: %s; pass --no-cache or another --cache", name, o->cache, err);
		break;
	case STAGE_CACHE_LOCK:
		log_error("%s: cannot lock the cache entry in %s: %s", name, o->cache, err);
		break;
	case STAGE_CACHE_DROP:
		log_error("%s: cannot drop the corrupted cache entry in %s: %s", name, o->cache, err);
		break;
	case STAGE_DEST_WRITE:
		log_error("%s: cannot write %s: %s; %s", name, o->output, err, fetch_hint(FETCH_LOCAL));
		break;
	case STAGE_NO_SOURCE:
		log_error("%s: offline, and it is neither in the cache %s nor on a file:// mirror; run once online "
			  "or pass --mirror file://DIR",
			  name, run->use_cache ? o->cache : "(disabled)");
		break;
	case STAGE_CACHE_TMP:
		log_error("%s: cannot create a temporary file in %s: %s", name, run->cache.entries, err);
		break;
	case STAGE_CACHE_STORE:
		log_error("%s: cannot store the download in %s: %s", name, o->cache, err);
		break;
	case STAGE_CACHE_COPY:
		log_error("%s: cannot copy the verified download from %s to %s: %s", name, o->cache, o->output,
			  out->err == -EBADMSG ? "the cache entry changed under us" : err);
		break;
	case STAGE_INTERRUPTED:
		log_error("%s: interrupted by signal %d; %s left as it was", name, (int)fetch_interrupted, o->output);
		break;
	case STAGE_COMMIT:
		log_error("%s: cannot put %s in place: %s", name, o->output,
			  out->err == -ESTALE ? "its temporary file was replaced by another file while it downloaded"
					      : err);
		break;
	case STAGE_SOURCES:
		report_sources(run);
		break;
	case STAGE_NONE:
		log_error("%s: failed: %s", name, strerror(-r));
		break;
	}
	return EXIT_FETCH;
}
