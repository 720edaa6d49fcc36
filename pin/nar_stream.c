#include "nar_stream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STREAM_MAX_PATH = 4000 }; /* well inside what the walk accepts */

/* The directories open in the NAR being written form one chain from the
 * root: the directory at depth i+1 is the last child written at depth i, so
 * last[] is both the chain and what the next sibling must sort after. */
struct nar_stream {
	struct nar_writer w;
	bool abandoned;
	char why[1400];
	int depth;                       /* directories open below the root */
	char last[NAR_MAX_DEPTH + 1][256]; /* the last child written at each depth, "" for none */
	bool in_file;
	uint64_t file_size, file_at;
	char file_path[STREAM_MAX_PATH + 1]; /* the file being written, for the message */
};

struct nar_stream *nar_stream_new(void)
{
	struct nar_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	if (nar_writer_start(&s->w) < 0 || nar_directory_begin(&s->w) < 0)
		nar_stream_abandon(s, ".", "cannot be hashed: the digest failed");
	return s;
}

void nar_stream_free(struct nar_stream *s)
{
	if (!s)
		return;
	nar_writer_free(&s->w);
	free(s);
}

void nar_stream_abandon(struct nar_stream *s, const char *path, const char *why)
{
	if (!s || s->abandoned)
		return;
	s->abandoned = true;
	snprintf(s->why, sizeof(s->why), "entry \"%.1024s\" %.300s", path, why);
}

/* A writer failure abandons the stream; r passes through. */
static int checked(struct nar_stream *s, const char *path, int r)
{
	if (r < 0)
		nar_stream_abandon(s, path, "cannot be hashed: the digest failed");
	return r;
}

static int close_to_depth(struct nar_stream *s, int depth, const char *path)
{
	int r = 0;

	while (r == 0 && s->depth > depth) {
		r = nar_node_end(&s->w);
		if (r == 0)
			r = nar_entry_end(&s->w);
		s->depth--;
	}
	return checked(s, path, r);
}

/* Writes the entry header for name at the current depth, if it sorts after
 * the last sibling. */
static int begin_entry(struct nar_stream *s, const char *path, const char *name)
{
	if (strcmp(name, s->last[s->depth]) <= 0) {
		nar_stream_abandon(s, path, s->last[s->depth][0] && !strcmp(name, s->last[s->depth])
					    ? "names a path already written (a second entry)"
					    : "is out of NAR order");
		return -ECANCELED;
	}
	strcpy(s->last[s->depth], name);
	return checked(s, path, nar_entry_begin(&s->w, name, strlen(name)));
}

static int open_directory(struct nar_stream *s, const char *path, const char *name)
{
	int r = begin_entry(s, path, name);

	if (r == 0)
		r = checked(s, path, nar_directory_begin(&s->w));
	if (r == 0)
		s->last[++s->depth][0] = '\0';
	return r;
}

/* Closes and opens directories so that path's parent is the innermost open
 * one, then writes the header of path's own entry. Directories without an
 * entry of their own are opened here: a NAR directory carries no mode. */
static int place(struct nar_stream *s, const char *path)
{
	char copy[STREAM_MAX_PATH + 1], *comp[NAR_MAX_DEPTH];
	size_t len = strlen(path);
	int n = 0, k = 0;

	if (s->abandoned)
		return -ECANCELED;
	if (s->in_file) {
		nar_stream_abandon(s, path, "follows a file whose data did not end");
		return -ECANCELED;
	}
	if (len == 0 || len > STREAM_MAX_PATH) {
		nar_stream_abandon(s, path, "has a path the stream does not take");
		return -ECANCELED;
	}
	memcpy(copy, path, len + 1);
	for (char *p = copy; p; n++) {
		char *slash = strchr(p, '/');
		if (slash)
			*slash = '\0';
		if (n == NAR_MAX_DEPTH - 1 || !*p || strlen(p) >= sizeof(s->last[0])) {
			nar_stream_abandon(s, path, "is nested too deep or has a name the stream does not take");
			return -ECANCELED;
		}
		comp[n] = p;
		p = slash ? slash + 1 : NULL;
	}
	while (k < n - 1 && k < s->depth && !strcmp(comp[k], s->last[k]))
		k++;
	if (close_to_depth(s, k, path) < 0)
		return -ECANCELED;
	for (int i = k; i < n - 1; i++)
		if (open_directory(s, path, comp[i]) < 0)
			return -ECANCELED;
	return begin_entry(s, path, comp[n - 1]);
}

void nar_stream_directory(struct nar_stream *s, const char *path)
{
	if (!s)
		return;
	if (place(s, path) == 0 && checked(s, path, nar_directory_begin(&s->w)) == 0)
		s->last[++s->depth][0] = '\0';
}

void nar_stream_symlink(struct nar_stream *s, const char *path, const char *target)
{
	int r;

	if (!s)
		return;
	if (place(s, path) < 0)
		return;
	r = nar_symlink_node(&s->w, target, strlen(target));
	checked(s, path, r == 0 ? nar_entry_end(&s->w) : r);
}

void nar_stream_file(struct nar_stream *s, const char *path, bool executable, bool size_known, uint64_t size)
{
	if (!s)
		return;
	if (!size_known) {
		if (!s->abandoned)
			nar_stream_abandon(s, path, "has no size in its header");
		return;
	}
	if (place(s, path) < 0 || checked(s, path, nar_regular_begin(&s->w, executable, size)) < 0)
		return;
	s->in_file = true;
	strcpy(s->file_path, path); /* place() checked its length */
	s->file_size = size;
	s->file_at = 0;
}

void nar_stream_data(struct nar_stream *s, uint64_t offset, const void *p, size_t len)
{
	if (!s)
		return;
	if (s->abandoned || !s->in_file)
		return;
	if (offset != s->file_at || len > s->file_size - s->file_at) {
		nar_stream_abandon(s, s->file_path, "has holes or more data than its size");
		return;
	}
	s->file_at += len;
	checked(s, s->file_path, nar_contents(&s->w, p, len));
}

void nar_stream_file_end(struct nar_stream *s)
{
	int r;

	if (!s)
		return;
	if (s->abandoned || !s->in_file)
		return;
	s->in_file = false;
	if (s->file_at != s->file_size) {
		nar_stream_abandon(s, s->file_path, "has less data than its size (a hole at the end)");
		return;
	}
	r = nar_regular_end(&s->w, s->file_size);
	checked(s, s->file_path, r == 0 ? nar_entry_end(&s->w) : r);
}

int nar_stream_finish(struct nar_stream *s, unsigned char digest[NAR_DIGEST_SIZE], const char **why)
{
	if (!s->abandoned && s->in_file)
		nar_stream_abandon(s, s->file_path, "is the last entry and its data did not end");
	if (!s->abandoned && close_to_depth(s, 0, ".") == 0 && checked(s, ".", nar_node_end(&s->w)) == 0 &&
	    checked(s, ".", nar_writer_finish(&s->w, digest)) == 0)
		return 0;
	*why = s->why;
	return -ECANCELED;
}
