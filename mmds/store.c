/* The document store: one whole document, swapped atomically (the loop is
 * single-threaded, so every answer is built from the old or the new), and
 * its sources: the watched file, the control API, and the copy an earlier
 * run left in systemd's fd store (fdstore.c). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "cleanup.h"
#include "document.h"
#include "fileio.h"
#include "fdstore.h"
#include "log.h"
#include "server.h"

/* One thread: no request sees anything but the old or the new. */
static void swap_in(struct mmds_server *s, json_t *doc, char *text, size_t len, const char *origin)
{
	json_decref(s->doc);
	free(s->doc_json);
	s->doc = doc;
	s->doc_json = text;
	s->doc_json_len = len;
	s->doc_generation++;
	answer_cache_clear(&s->answers); /* rendered from the old one */
	log_info("document %" PRIu64 " from %s: %zu bytes", s->doc_generation, origin, len);
	sd_notifyf(0, "STATUS=Serving document %" PRIu64 " (%zu bytes, from %s)", s->doc_generation, len,
		   origin);
}

/* A copy in systemd's fd store, for the next start. A failure costs only
 * that copy: it is logged, the document is served all the same. */
static void keep_in_fdstore(struct mmds_server *s)
{
	struct mmds_fdstore_entry e = {
		.generation = s->fdstore_generation + 1,
		.stamp = s->file_stamp,
		.json = s->doc_json,
		.json_len = s->doc_json_len,
	};
	int r = mmds_fdstore_save(&e, s->fdstore_generation);
	if (r < 0) {
		log_warning("fd store: document %" PRIu64 " not kept (%s); a restart would lose it",
			    s->doc_generation, strerror(-r));
		return;
	}
	s->fdstore_generation = e.generation;
}

int mmds_store_set(struct mmds_server *s, json_t *doc, const char *origin)
{
	char *text = NULL;
	size_t len = 0;
	int r = doc_dump(doc, &text, &len);
	if (r < 0) {
		json_decref(doc);
		return r;
	}
	swap_in(s, doc, text, len, origin);
	if (s->cfg.fd_store)
		keep_in_fdstore(s);
	return 0;
}

static struct mmds_file_stamp stamp_of(const struct stat *st)
{
	return (struct mmds_file_stamp){
		.dev = st->st_dev,
		.ino = st->st_ino,
		.size = (uint64_t)st->st_size,
		.mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec,
	};
}

/* Reads all of fd, at most max bytes: -EFBIG beyond. *out is malloc'd. */
/* Parses a document read from fd; the raw text may be pretty-printed, up to
 * 4x the limit of its compact form. */
static int parse_fd(struct mmds_server *s, int fd, json_t **doc, struct mmds_load_error *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	json_error_t jerr;

	int r = read_small_fd(fd, 4 * s->cfg.max_size, &buf, &len);
	if (r < 0)
		return r;
	r = doc_parse(buf, len, s->cfg.max_size, doc, &jerr);
	if (r == -EINVAL) {
		err->line = jerr.line;
		err->column = jerr.column;
		snprintf(err->text, sizeof(err->text), "%s", jerr.text);
	}
	return r;
}

static bool same_stamp(const struct mmds_file_stamp *a, const struct mmds_file_stamp *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns;
}

int mmds_store_load_file(struct mmds_server *s, bool if_changed, struct mmds_load_error *err)
{
	const char *path = s->cfg.document_path;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	json_t *doc = NULL;

	*err = (struct mmds_load_error){ 0 };
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		snprintf(err->text, sizeof(err->text), "not a regular file");
		return -EINVAL;
	}
	struct mmds_file_stamp stamp = stamp_of(&st), old = s->file_stamp;
	if (if_changed && s->doc && same_stamp(&stamp, &old))
		return 1;
	int r = parse_fd(s, fd, &doc, err);
	if (r < 0)
		return r;
	s->file_stamp = stamp; /* before the swap: the fd store keeps it */
	r = mmds_store_set(s, doc, path);
	if (r < 0)
		s->file_stamp = old;
	return r;
}

int mmds_store_recover(struct mmds_server *s, int fd, uint64_t generation, struct mmds_load_error *err)
{
	_cleanup_close_ int fd_ = fd;
	_cleanup_free_ char *buf = NULL;
	struct mmds_fdstore_entry e;
	json_t *doc = NULL;
	json_error_t jerr;

	*err = (struct mmds_load_error){ 0 };
	if (generation <= s->fdstore_generation) { /* superseded by one already taken */
		(void)mmds_fdstore_drop(generation);
		return 0;
	}
	int r = mmds_fdstore_read(fd, 4 * s->cfg.max_size, &e, &buf);
	if (r < 0)
		return r;
	r = doc_parse(e.json, e.json_len, s->cfg.max_size, &doc, &jerr);
	if (r == -EINVAL)
		snprintf(err->text, sizeof(err->text), "%s", jerr.text);
	if (r < 0)
		return r;
	char *text = NULL;
	size_t len = 0;
	r = doc_dump(doc, &text, &len);
	if (r < 0) {
		json_decref(doc);
		return r;
	}
	if (s->fdstore_generation)
		(void)mmds_fdstore_drop(s->fdstore_generation);
	s->fdstore_generation = generation;
	s->file_stamp = e.stamp;
	swap_in(s, doc, text, len, "the fd store (kept across a restart)");
	return 1;
}
