/* One artifact into its destination: the cache first, then each mirror and
 * the canonical URL, and the verified file put in place. Failures return
 * -errno with run->out saying where; report.c turns that into words. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "pinfetch.h"

static int fail(struct run *run, enum run_stage stage, int err)
{
	run->out.stage = stage;
	run->out.err = err;
	return err;
}

/* Copies the cache entry into the destination's temporary file, hashing as it
 * goes. -ENOENT: no entry; -EBADMSG: the entry is corrupt (out.got filled);
 * anything else: the destination could not be written. */
static int deliver_from_cache(struct run *run)
{
	const struct artifact *a = run->a;
	_cleanup_close_ int fd = cache_open_entry(&run->cache, a->sha256);
	int read_failed = 0, r;

	if (fd < 0)
		return fd == -ENOENT ? -ENOENT : -EBADMSG;
	if ((r = atomic_file_reset(&run->dest)) < 0)
		return r;
	r = sha256_fd(fd, run->dest.fd, a->has_size ? a->size : run->o->max_size, run->out.got,
		      &run->out.got_bytes, &read_failed);
	if (r == -EFBIG || (r < 0 && read_failed)) {
		snprintf(run->out.got, SHA256_HEX_SIZE, "%s", r == -EFBIG ? "(oversized)" : "(unreadable)");
		return -EBADMSG;
	}
	if (r < 0)
		return r;
	if (strcmp(run->out.got, a->sha256) != 0 || (a->has_size && run->out.got_bytes != a->size))
		return -EBADMSG;
	return 0;
}

static int commit_dest(struct run *run, const char *from)
{
	int r;

	if (fetch_interrupted)
		return fail(run, STAGE_INTERRUPTED, -EINTR);
	r = atomic_file_commit(&run->dest);
	if (r < 0 && run->dest.in_place) {
		/* Verified and at its path; only its durability is in doubt. */
		run->out.dir_sync_failed = true;
		run->out.err = r;
	} else if (r < 0) {
		return fail(run, STAGE_COMMIT, r);
	}
	run->out.from = from;
	return 0;
}

/* Owns the lock on the entry (kept in *lock_fd), and delivers from it when it
 * is good: 0 delivered, -ENOENT to fetch, another -errno on failure. */
static int try_cache(struct run *run, int *lock_fd)
{
	int r;

	r = cache_open(&run->cache, run->o->cache);
	if (r < 0)
		return fail(run, STAGE_CACHE_OPEN, r);
	*lock_fd = cache_lock_entry(&run->cache, run->a->sha256);
	if (*lock_fd < 0)
		return fail(run, *lock_fd == -EINTR ? STAGE_INTERRUPTED : STAGE_CACHE_LOCK, *lock_fd);
	r = deliver_from_cache(run);
	if (r == 0)
		return commit_dest(run, "the cache");
	if (r == -EBADMSG) {
		run->out.cache_corrupt = true;
		log_warning("%s: cache entry %s/sha256/%s is corrupted (got %s, %llu bytes); dropped it, fetching again",
			    run->a->name, run->o->cache, run->a->sha256, run->out.got, run->out.got_bytes);
		r = cache_drop_entry(&run->cache, run->a->sha256);
		return r < 0 ? fail(run, STAGE_CACHE_DROP, r) : -ENOENT;
	}
	return r == -ENOENT ? r : fail(run, STAGE_DEST_WRITE, r);
}

/* PREFIX/sha256/<hex> for each usable mirror, in order, then the canonical URL. */
static int list_sources(struct run *run, struct run_sources *s)
{
	const struct options *o = run->o;

	for (int i = 0; i < o->n_mirrors; i++) {
		size_t plen = strlen(o->mirrors[i]);
		while (plen > 0 && o->mirrors[i][plen - 1] == '/')
			plen--;
		if (o->offline && strncmp(o->mirrors[i], "file://", 7) != 0)
			continue;
		if (asprintf(&s->owned[i], "%.*s/sha256/%s", (int)plen, o->mirrors[i], run->a->sha256) < 0) {
			s->owned[i] = NULL;
			return -ENOMEM;
		}
		s->url[s->n] = s->owned[i];
		s->kind[s->n++] = SOURCE_MIRROR;
	}
	if (!o->offline) {
		s->url[s->n] = run->a->url;
		s->kind[s->n++] = SOURCE_CANONICAL;
	}
	return s->n ? 0 : fail(run, STAGE_NO_SOURCE, -ENOENT);
}

/* One source into `target`. 0 when the body matches the pin, -EBADMSG on a
 * mismatch, or the fetch layer's error; out.kind and out.detail say why. */
static int fetch_one(struct run *run, const char *url, enum fetch_source source, int target)
{
	const struct artifact *a = run->a;
	struct fetch_result res;
	int r;

	if (fetch_url_allowed(url, source, run->o->allow_http, NULL, run->out.detail, sizeof(run->out.detail)) < 0) {
		run->out.kind = FETCH_POLICY;
		return -EPERM;
	}
	log_debug("%s: trying %s", a->name, url);
	r = fetch_url(url, source, target, &run->fopts, &res);
	run->out.kind = r < 0 ? res.failure : FETCH_REMOTE;
	if (r < 0)
		snprintf(run->out.detail, sizeof(run->out.detail), "%s", res.detail);
	else if (a->has_size && res.bytes != a->size)
		snprintf(run->out.detail, sizeof(run->out.detail), "size mismatch: expected %llu bytes, got %llu",
			 (unsigned long long)a->size, (unsigned long long)res.bytes);
	else if (strcmp(res.sha256, a->sha256) != 0)
		snprintf(run->out.detail, sizeof(run->out.detail), "sha256 mismatch: expected %s, got %s",
			 a->sha256, res.sha256);
	else
		return 0;
	return r < 0 ? r : -EBADMSG;
}

/* One attempt: through a cache temporary file when caching (stored, then
 * copied out and hashed again), else straight into the destination.
 * 0: verified in the destination's temporary file; -EAGAIN: this source
 * failed (out says how); another -errno: a local failure, stop. */
static int attempt(struct run *run, const char *url, enum fetch_source kind)
{
	struct atomic_file cache_tmp = ATOMIC_FILE_INIT;
	int target = run->dest.fd, r;

	if (run->use_cache) {
		_cleanup_free_ char *path = cache_entry_path(&run->cache, run->a->sha256);
		r = path ? atomic_file_open(&cache_tmp, path, 0644) : -ENOMEM;
		if (r < 0)
			return fail(run, STAGE_CACHE_TMP, r);
		target = cache_tmp.fd;
	} else if ((r = atomic_file_reset(&run->dest)) < 0) {
		return fail(run, STAGE_DEST_WRITE, r);
	}
	r = fetch_one(run, url, kind, target);
	run->out.mismatch = r == -EBADMSG;
	if (r == 0 && run->use_cache) {
		r = atomic_file_commit(&cache_tmp);
		if (r < 0 && cache_tmp.in_place)
			r = 0; /* stored; the output's own commit reports its durability */
		atomic_file_abort(&cache_tmp);
		if (r < 0)
			return fail(run, STAGE_CACHE_STORE, r);
		r = deliver_from_cache(run);
		if (r < 0)
			return fail(run, STAGE_CACHE_COPY, r);
	}
	atomic_file_abort(&cache_tmp);
	if (r == 0)
		return 0;
	if (fetch_interrupted)
		return fail(run, STAGE_INTERRUPTED, -EINTR);
	if (r == -EBADMSG)
		run->out.kind = FETCH_REMOTE;
	run->out.url = url;
	return fail(run, STAGE_SOURCES, run->out.kind == FETCH_LOCAL ? r : -EAGAIN);
}

static int try_sources(struct run *run)
{
	struct run_sources *s = &run->sources;
	int r = list_sources(run, s);

	for (int i = 0; r == 0 && i < s->n; i++) {
		r = attempt(run, s->url[i], s->kind[i]);
		if (r == 0)
			return commit_dest(run, s->url[i]);
		if (r != -EAGAIN || i == s->n - 1)
			break; /* another source cannot fix a full disk */
		run->out.failed_mirrors++;
		log_msg(run->out.mismatch ? LOG_WARNING : LOG_NOTICE, "%s: mirror %s: %s; trying the next source",
			run->a->name, s->url[i], run->out.detail);
		r = 0;
	}
	return r;
}

int run_fetch(struct run *run)
{
	_cleanup_close_ int lock_fd = -1;
	int r;

	run->out = (struct run_outcome){ .stage = STAGE_NONE };
	r = atomic_file_open(&run->dest, run->o->output, run->o->mode);
	if (r < 0)
		return fail(run, STAGE_DEST_OPEN, r);
	if (run->use_cache) {
		r = try_cache(run, &lock_fd);
		if (r != -ENOENT)
			return r;
	}
	return try_sources(run);
}

void run_free(struct run *run)
{
	atomic_file_abort(&run->dest);
	cache_close(&run->cache);
	for (int i = 0; i < MAX_MIRRORS; i++) {
		free(run->sources.owned[i]);
		run->sources.owned[i] = NULL;
	}
}
