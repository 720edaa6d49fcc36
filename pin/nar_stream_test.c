/* Unit tests for nar_stream.c: trees fed to the stream entry by entry while
 * the same entries are created on disk; a stream that completes must give
 * what nar_hash_dirfd() gives for the tree on disk (which nar_test.c and
 * tests/pin check against Nix's own nix-hash), and every order or entry the
 * stream cannot reproduce must abandon it, naming the entry. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nar.h"
#include "nar_stream.h"
#include "tap.h"

struct entry {
	const char *path;
	char type; /* 'd' directory, 'f' file, 'x' executable file, 'l' symlink */
	const char *data; /* contents or target */
};

static char root[64];

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* mkdir -p of path's parents below root. */
static void make_parents(const char *path)
{
	char buf[4096];

	snprintf(buf, sizeof(buf), "%s/%s", root, path);
	for (char *p = buf + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			perror(buf), exit(2);
		*p = '/';
	}
}

static void create(const struct entry *e)
{
	char path[4096];
	int fd;

	make_parents(e->path);
	snprintf(path, sizeof(path), "%s/%s", root, e->path);
	if (e->type == 'd') {
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			perror(path), exit(2);
	} else if (e->type == 'l') {
		if (symlink(e->data, path) < 0)
			perror(path), exit(2);
	} else {
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, e->type == 'x' ? 0755 : 0644);
		if (fd < 0 || write(fd, e->data, strlen(e->data)) != (ssize_t)strlen(e->data))
			perror(path), exit(2);
		close(fd);
	}
}

/* Feeds the entry; file data in 3-byte blocks, as an archive reader hands out blocks. */
static void feed(struct nar_stream *s, const struct entry *e)
{
	size_t len = e->data ? strlen(e->data) : 0;

	if (e->type == 'd') {
		nar_stream_directory(s, e->path);
	} else if (e->type == 'l') {
		nar_stream_symlink(s, e->path, e->data);
	} else {
		nar_stream_file(s, e->path, e->type == 'x', true, len);
		for (size_t at = 0; at < len; at += 3)
			nar_stream_data(s, at, e->data + at, len - at < 3 ? len - at : 3);
		nar_stream_file_end(s);
	}
}

/* Creates the entries in a fresh root and streams them. Returns whether the
 * stream completed; *walk is the tree's digest by the walk. */
static bool stream_tree(const struct entry *es, size_t n, unsigned char got[NAR_DIGEST_SIZE],
			unsigned char walk[NAR_DIGEST_SIZE], const char **why, struct nar_stream **keep)
{
	struct nar_stream *s = nar_stream_new();
	struct nar_error err;
	int fd, r;

	snprintf(root, sizeof(root), "/tmp/nar-stream-test-XXXXXX");
	if (!s || !mkdtemp(root))
		perror("setup"), exit(2);
	for (size_t i = 0; i < n; i++) {
		create(&es[i]);
		feed(s, &es[i]);
	}
	*why = "";
	r = nar_stream_finish(s, got, why);
	fd = open(root, O_RDONLY | O_DIRECTORY);
	if (fd < 0 || nar_hash_dirfd(fd, walk, &err) < 0)
		perror("walk"), exit(2);
	close(fd);
	nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	*keep = s; /* *why points into it */
	return r == 0;
}

static void expect_streamed(const char *what, const struct entry *es, size_t n, unsigned char out[NAR_DIGEST_SIZE])
{
	unsigned char got[NAR_DIGEST_SIZE], walk[NAR_DIGEST_SIZE];
	struct nar_stream *s;
	const char *why;
	bool done = stream_tree(es, n, got, walk, &why, &s);

	if (!ok(done, "%s: streamed to the end", what))
		printf("# abandoned: %s\n", why);
	ok(done && !memcmp(got, walk, NAR_DIGEST_SIZE), "%s: the stream's digest is the walk's", what);
	if (out)
		memcpy(out, walk, NAR_DIGEST_SIZE);
	nar_stream_free(s);
}

static void expect_abandoned(const char *what, const struct entry *es, size_t n, const char *needle,
			     unsigned char walk[NAR_DIGEST_SIZE])
{
	unsigned char got[NAR_DIGEST_SIZE], w[NAR_DIGEST_SIZE];
	struct nar_stream *s;
	const char *why;
	bool done = stream_tree(es, n, got, walk ? walk : w, &why, &s);

	ok(!done && strstr(why, needle), "%s: abandoned (%s)", what, why);
	nar_stream_free(s);
}

#define E(...) ((const struct entry[]){ __VA_ARGS__ }), sizeof((const struct entry[]){ __VA_ARGS__ }) / sizeof(struct entry)

/* The same tree in NAR order and in git's order ("foo-bar" < "foo.txt" < "foo/"). */
#define COMMON_HEAD { "dangling", 'l', "/does/not/exist" }, { "empty", 'd', NULL }
#define FOO_DIR { "foo", 'd', NULL }, { "foo/deep/er/f", 'f', "deep" }, { "foo/run", 'x', "#!/bin/sh\n" }, \
		{ "foo/up", 'l', "../foo.txt" }
#define FOO_FILES { "foo-bar", 'f', "" }, { "foo.txt", 'f', "eight by" }
#define COMMON_TAIL { "link", 'l', "foo" }, { "z\xc3\xa9", 'x', "seventeen bytes!!" }, { "\xe6\x97\xa5", 'f', "ja" }

int main(void)
{
	unsigned char sorted[NAR_DIGEST_SIZE], git[NAR_DIGEST_SIZE], got[NAR_DIGEST_SIZE];
	const char *why;
	struct nar_stream *s;

	expect_streamed("NAR order", E(COMMON_HEAD, FOO_DIR, FOO_FILES, COMMON_TAIL), sorted);
	expect_abandoned("git order", E(COMMON_HEAD, FOO_FILES, FOO_DIR, COMMON_TAIL), "entry \"foo\" is out of NAR order",
			 git);
	ok(!memcmp(sorted, git, NAR_DIGEST_SIZE), "both orders are one tree to the walk");
	expect_streamed("empty root", NULL, 0, NULL);
	expect_streamed("only implicit directories", E({ "a/b/c/d", 'f', "x" }, { "a/b/e", 'f', "y" }, { "b/f", 'f', "z" }),
			NULL);
	expect_streamed("directory entries after implicit siblings",
			E({ "a/x", 'f', "1" }, { "b", 'd', NULL }, { "b/c", 'd', NULL }, { "c", 'l', "b" }), NULL);
	expect_abandoned("an entry in a closed directory", E({ "a/x", 'f', "1" }, { "b/y", 'f', "2" }, { "a/z", 'f', "3" }),
			 "entry \"a/z\" is out of NAR order", NULL);
	expect_abandoned("a directory's entry after its contents", E({ "a/x", 'f', "1" }, { "a", 'd', NULL }),
			 "entry \"a\" names a path already written", NULL);
	expect_abandoned("a directory listed twice", E({ "a", 'd', NULL }, { "a", 'd', NULL }),
			 "entry \"a\" names a path already written", NULL);
	expect_abandoned("reverse order", E({ "b", 'f', "1" }, { "a", 'f', "2" }), "entry \"a\" is out of NAR order", NULL);
	expect_abandoned("case before byte order", E({ "a", 'f', "1" }, { "B", 'f', "2" }), "entry \"B\" is out of NAR order",
			 NULL);

	/* Entries the stream cannot reproduce byte for byte. */
	struct { const char *what, *needle; int kind; } odd[] = {
		{ "a hardlink", "entry \"h\" is a hardlink", 0 },
		{ "a hole", "entry \"f\" has holes", 1 },
		{ "a trailing hole", "entry \"f\" has less data than its size", 2 },
		{ "more data than the size", "entry \"f\" has holes or more data", 3 },
		{ "no size", "entry \"f\" has no size", 4 },
		{ "a file not ended", "entry \"z\" follows a file whose data did not end", 5 },
		{ "an empty component", "entry \"a//b\"", 6 },
	};
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		s = nar_stream_new();
		why = "";
		nar_stream_file(s, "a", false, true, 1);
		nar_stream_data(s, 0, "a", 1);
		nar_stream_file_end(s);
		switch (odd[i].kind) {
		case 0: nar_stream_abandon(s, "h", "is a hardlink"); break;
		case 1: nar_stream_file(s, "f", false, true, 10); nar_stream_data(s, 0, "abc", 3);
			nar_stream_data(s, 6, "ghij", 4); nar_stream_file_end(s); break;
		case 2: nar_stream_file(s, "f", false, true, 10); nar_stream_data(s, 0, "abc", 3); nar_stream_file_end(s); break;
		case 3: nar_stream_file(s, "f", false, true, 2); nar_stream_data(s, 0, "abc", 3); nar_stream_file_end(s); break;
		case 4: nar_stream_file(s, "f", false, false, 0); break;
		case 5: nar_stream_file(s, "f", false, true, 3); nar_stream_data(s, 0, "abc", 3); break;
		case 6: nar_stream_file(s, "a//b", false, true, 0); nar_stream_file_end(s); break;
		}
		nar_stream_file(s, "z", false, true, 0);
		nar_stream_file_end(s);
		int r = nar_stream_finish(s, got, &why);
		ok(r == -ECANCELED && strstr(why, odd[i].needle), "%s: abandoned (%s)", odd[i].what, why);
		nar_stream_free(s);
	}

	/* Deeper than the walk goes (NAR_MAX_DEPTH): abandoned, so the walk's -ELOOP decides. */
	static char deep[3 * NAR_MAX_DEPTH + 8];
	for (int i = 0; i < NAR_MAX_DEPTH + 1; i++)
		strcat(deep, i ? "/d" : "d");
	s = nar_stream_new();
	why = "";
	nar_stream_directory(s, deep);
	int r = nar_stream_finish(s, got, &why);
	ok(r == -ECANCELED && strstr(why, "too deep"), "nesting past the cap: abandoned");
	nar_stream_free(s);

	nar_stream_directory(NULL, "a"); /* no stream: nothing done, no crash */
	ok(true, "a NULL stream is ignored");
	return tap_done();
}
