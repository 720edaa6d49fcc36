/* The document store: one whole document, swapped atomically (the loop is
 * single-threaded, so every answer is built from the old or the new), and
 * its sources: the watched file and the control API. */
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
#include "log.h"
#include "server.h"

int mmds_store_set(struct mmds_server *s, json_t *doc, const char *origin)
{
	char *text = NULL;
	size_t len = 0;
	int r = doc_dump(doc, &text, &len);
	if (r < 0) {
		json_decref(doc);
		return r;
	}
	json_decref(s->doc);
	free(s->doc_json);
	s->doc = doc;
	s->doc_json = text;
	s->doc_json_len = len;
	s->doc_generation++;
	log_info("document %" PRIu64 " from %s: %zu bytes", s->doc_generation, origin, len);
	sd_notifyf(0, "STATUS=Serving document %" PRIu64 " (%zu bytes, from %s)", s->doc_generation, len,
		   origin);
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
static int read_bounded(int fd, size_t max, char **out, size_t *out_len)
{
	_cleanup_free_ char *buf = malloc(max + 1);
	size_t len = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + len, max + 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max)
			return -EFBIG;
	}
	*out = TAKE_PTR(buf);
	*out_len = len;
	return 0;
}

/* Parses a document read from fd; the raw text may be pretty-printed, up to
 * 4x the limit of its compact form. */
static int parse_fd(struct mmds_server *s, int fd, json_t **doc, struct mmds_load_error *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	json_error_t jerr;

	int r = read_bounded(fd, 4 * s->cfg.max_size, &buf, &len);
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

int mmds_store_load_file(struct mmds_server *s, struct mmds_load_error *err)
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
	int r = parse_fd(s, fd, &doc, err);
	if (r < 0)
		return r;
	r = mmds_store_set(s, doc, path);
	if (r == 0)
		s->file_stamp = stamp_of(&st);
	return r;
}
