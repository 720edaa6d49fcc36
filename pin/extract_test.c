/* Unit tests for extract.c: archives written with libarchive in memory, one
 * good and one of each hostile kind; every refusal names the entry and leaves
 * the destination's directory empty. (tests/pin/test_tree.py does the same
 * through pinfetch with archives made by other tools.) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "extract.h"
#include "nar.h"
#include "nar_stream.h"
#include "tap.h"

struct spec {
	const char *path;
	mode_t type, mode;
	const char *data;     /* file contents or symlink target */
	const char *hardlink; /* for a hardlink */
	long long size;       /* -1: strlen(data) */
};

static char buf[1 << 20];

/* An fd holding a tar.gz of the given entries. */
static int make_archive(const struct spec *s, size_t n)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	size_t used = 0;
	int fd;

	archive_write_set_format_pax_restricted(a);
	archive_write_add_filter_gzip(a);
	archive_write_open_memory(a, buf, sizeof(buf), &used);
	for (size_t i = 0; i < n; i++) {
		archive_entry_clear(e);
		archive_entry_set_pathname(e, s[i].path);
		archive_entry_set_filetype(e, s[i].type);
		archive_entry_set_perm(e, s[i].mode);
		if (s[i].hardlink)
			archive_entry_set_hardlink(e, s[i].hardlink);
		if (s[i].type == AE_IFLNK)
			archive_entry_set_symlink(e, s[i].data);
		size_t len = s[i].type == AE_IFREG && s[i].data && !s[i].hardlink ? strlen(s[i].data) : 0;
		archive_entry_set_size(e, s[i].size >= 0 ? s[i].size : (la_int64_t)len);
		if (archive_write_header(a, e) != ARCHIVE_OK)
			fprintf(stderr, "# write_header %s: %s\n", s[i].path, archive_error_string(a));
		if (len)
			archive_write_data(a, s[i].data, len);
	}
	archive_write_close(a);
	archive_write_free(a);
	archive_entry_free(e);
	fd = memfd_create("archive", MFD_CLOEXEC);
	if (fd < 0 || write(fd, buf, used) != (ssize_t)used || lseek(fd, 0, SEEK_SET) < 0)
		perror("memfd"), exit(2);
	return fd;
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static char dir[64], dest[128];
static const struct extract_limits limits = { 100, 1 << 16 };

/* Unpacks with a stream beside: whether it completed (its reason if not in
 * why) and whether its digest is the walk's of the unpacked tree. */
static bool unpack_streamed(const struct spec *s, size_t n, bool *same, char *why, size_t why_len)
{
	struct nar_stream *stream = nar_stream_new();
	unsigned char streamed[NAR_DIGEST_SIZE], walked[NAR_DIGEST_SIZE];
	struct extract_error err;
	struct nar_error nerr;
	const char *reason = "";
	char *tmp = NULL;
	int fd = make_archive(s, n), r = extract_archive(fd, dest, &limits, stream, &tmp, &err), root;
	bool done = r == 0 && nar_stream_finish(stream, streamed, &reason) == 0;

	close(fd);
	snprintf(why, why_len, "%s", r < 0 ? err.msg : reason);
	root = tmp ? open(tmp, O_RDONLY | O_DIRECTORY) : -1;
	*same = done && root >= 0 && nar_hash_dirfd(root, walked, &nerr) == 0 && !memcmp(streamed, walked, NAR_DIGEST_SIZE);
	if (root >= 0)
		close(root);
	extract_remove_tree(tmp);
	free(tmp);
	nar_stream_free(stream);
	return done;
}

static void refused(const char *what, const struct spec *s, size_t n, const char *entry, const struct extract_limits *lim)
{
	struct extract_error err;
	char *tmp = NULL;
	int fd = make_archive(s, n);
	int r = extract_archive(fd, dest, lim ? lim : &limits, NULL, &tmp, &err);

	close(fd);
	if (!ok(r == -EBADMSG && !strcmp(err.entry, entry), "%s: refused, naming \"%s\"", what, entry))
		printf("# r=%d entry=\"%s\" msg=\"%s\"\n", r, err.entry, err.msg);
	else
		printf("# %s: %s\n", err.entry, err.msg);
	ok(count_entries(dir) == 0, "%s: nothing left behind", what);
	free(tmp);
}

#define R(...) ((const struct spec[]){ __VA_ARGS__ }), sizeof((const struct spec[]){ __VA_ARGS__ }) / sizeof(struct spec)
#define D(p) { p, AE_IFDIR, 0755, NULL, NULL, -1 }
#define F(p, d) { p, AE_IFREG, 0644, d, NULL, -1 }

int main(void)
{
	struct extract_error err;
	struct stat st;
	char *tmp = NULL, path[512], got[16] = "";
	const char *why;
	char top[256], rest[4096];

	snprintf(dir, sizeof(dir), "/tmp/extract-test-XXXXXX");
	if (!mkdtemp(dir))
		return perror("mkdtemp"), 2;
	snprintf(dest, sizeof(dest), "%s/tree", dir);

	ok(extract_split_path("./top//a/./b/", top, sizeof(top), rest, sizeof(rest), &why) == 0 &&
	   !strcmp(top, "top") && !strcmp(rest, "a/b"), "split: dots and slashes dropped (%s | %s)", top, rest);
	ok(extract_split_path("top", top, sizeof(top), rest, sizeof(rest), &why) == 0 && !rest[0], "split: the top itself");
	ok(extract_split_path("/etc/passwd", top, sizeof(top), rest, sizeof(rest), &why) == -EINVAL, "split: absolute refused");
	ok(extract_split_path("top/a/../../x", top, sizeof(top), rest, sizeof(rest), &why) == -EINVAL, "split: .. refused");
	ok(extract_split_path("./", top, sizeof(top), rest, sizeof(rest), &why) == -EINVAL, "split: empty refused");
	ok(extract_split_path("top/..a/b..", top, sizeof(top), rest, sizeof(rest), &why) == 0, "split: ..a is a name");

	/* A good archive: files (one executable), a symlink, a hardlink, an empty dir, a file before its directory. */
	int fd = make_archive(R(D("top/"), F("top/a", "hello\n"), { "top/bin", AE_IFREG, 0775, "#!/bin/sh\n", NULL, -1 },
				{ "top/l", AE_IFLNK, 0777, "a", NULL, -1 }, { "top/h", AE_IFREG, 0644, NULL, "top/a", 0 },
				D("top/empty"), F("top/deep/er/f", "x"), { "top/sparse", AE_IFREG, 0644, "", NULL, 0 }));
	int r = extract_archive(fd, dest, &limits, NULL, &tmp, &err);
	close(fd);
	if (!ok(r == 0 && tmp, "good archive unpacked"))
		printf("# r=%d %s: %s\n", r, err.entry, err.msg);
	if (tmp) {
		snprintf(path, sizeof(path), "%s/a", tmp);
		int afd = open(path, O_RDONLY);
		ok(afd >= 0 && read(afd, got, sizeof(got)) == 6 && !memcmp(got, "hello\n", 6), "top stripped, contents right");
		if (afd >= 0)
			close(afd);
		snprintf(path, sizeof(path), "%s/bin", tmp);
		ok(stat(path, &st) == 0 && (st.st_mode & 07777) == 0755, "executable file is 0755 (%o)", st.st_mode & 07777);
		snprintf(path, sizeof(path), "%s/a", tmp);
		ok(stat(path, &st) == 0 && (st.st_mode & 07777) == 0644 && st.st_nlink == 2, "plain file 0644, hardlinked");
		snprintf(path, sizeof(path), "%s/l", tmp);
		ok(lstat(path, &st) == 0 && S_ISLNK(st.st_mode), "symlink kept as a symlink");
		snprintf(path, sizeof(path), "%s/empty", tmp);
		ok(stat(path, &st) == 0 && S_ISDIR(st.st_mode), "empty directory kept");
		snprintf(path, sizeof(path), "%s/deep/er/f", tmp);
		ok(stat(path, &st) == 0 && st.st_size == 1, "parents created for a file listed before them");
		ok(extract_remove_tree(tmp) == 0 && count_entries(dir) == 0, "extract_remove_tree removes it all");
		free(tmp);
		tmp = NULL;
	}

	/* The stream fed by the unpacking: used for entries in NAR order, with
	 * multi-block files, executables, symlinks and implicit directories. */
	static char large[60000]; /* several data blocks, under the cap */
	for (size_t i = 0; i + 1 < sizeof(large); i++)
		large[i] = (char)('a' + i * 7919 % 26);
	bool same;
	char reason[1400];
	ok(unpack_streamed(R(D("top/"), D("top/empty/"), F("top/foo/deep/f", large), { "top/foo/run", AE_IFREG, 0755, "x", NULL, -1 },
			     F("top/foo-bar", ""), { "top/foo.txt", AE_IFREG, 0700, "t", NULL, -1 },
			     { "top/link", AE_IFLNK, 0777, "foo/run", NULL, -1 }), &same, reason, sizeof(reason)) && same,
	   "NAR order: hashed while unpacking, as the walk hashes it (%s)", reason);
	ok(!unpack_streamed(R(D("top/"), F("top/foo-bar", ""), F("top/foo.txt", "t"), F("top/foo/x", "x")), &same, reason,
			    sizeof(reason)) && strstr(reason, "entry \"foo/x\" is out of NAR order"),
	   "git order: the stream is abandoned (%s)", reason);
	ok(!unpack_streamed(R(D("top/"), F("top/a", "1"), { "top/b", AE_IFREG, 0644, NULL, "top/a", 0 }), &same, reason,
			    sizeof(reason)) && strstr(reason, "entry \"b\" is a hardlink"),
	   "a hardlink: the stream is abandoned (%s)", reason);

	refused("absolute path", R(D("top/"), F("/etc/evil", "x")), "/etc/evil", NULL);
	refused("dot-dot", R(D("top/"), F("top/../evil", "x")), "top/../evil", NULL);
	refused("write through a symlink", R(D("top/"), { "top/l", AE_IFLNK, 0777, "/tmp", NULL, -1 }, F("top/l/evil", "x")),
		"top/l/evil", NULL);
	refused("replace a symlink", R(D("top/"), { "top/l", AE_IFLNK, 0777, "/tmp/x", NULL, -1 }, F("top/l", "x")), "top/l", NULL);
	refused("hardlink outside", R(D("top/"), { "top/h", AE_IFREG, 0644, NULL, "/etc/passwd", 0 }), "top/h", NULL);
	refused("hardlink via ..", R(D("top/"), { "top/h", AE_IFREG, 0644, NULL, "top/../../etc/passwd", 0 }), "top/h", NULL);
	refused("hardlink to a symlink", R(D("top/"), { "top/l", AE_IFLNK, 0777, "/etc/passwd", NULL, -1 },
					   { "top/h", AE_IFREG, 0644, NULL, "top/l", 0 }), "top/h", NULL);
	refused("character device", R(D("top/"), { "top/null", AE_IFCHR, 0666, NULL, NULL, 0 }), "top/null", NULL);
	refused("block device", R(D("top/"), { "top/sda", AE_IFBLK, 0660, NULL, NULL, 0 }), "top/sda", NULL);
	refused("FIFO", R(D("top/"), { "top/fifo", AE_IFIFO, 0644, NULL, NULL, 0 }), "top/fifo", NULL);
	refused("setuid", R(D("top/"), { "top/su", AE_IFREG, 04755, "x", NULL, -1 }), "top/su", NULL);
	refused("setgid directory", R(D("top/"), { "top/sg", AE_IFDIR, 02755, NULL, NULL, -1 }), "top/sg/", NULL);
	refused("duplicate", R(D("top/"), F("top/a", "1"), F("top/a", "2")), "top/a", NULL);
	refused("two top-level entries", R(D("top/"), F("top/a", "1"), F("other/b", "2")), "other/b", NULL);
	refused("top-level file", R(F("README", "1")), "README", NULL);
	const struct extract_limits few = { 3, 1 << 16 }, small = { 100, 1000 };
	refused("entry cap", R(D("top/"), F("top/a", "1"), F("top/b", "2"), F("top/c", "3")), "top/c", &few);
	static char big[2000];
	memset(big, 'z', sizeof(big) - 1);
	refused("byte cap", R(D("top/"), F("top/a", "1"), F("top/big", big)), "top/big", &small);
	refused("byte cap, sparse size", R(D("top/"), { "top/holes", AE_IFREG, 0644, "", NULL, 1LL << 40 }), "top/holes", &small);

	/* A compressed stream cut short: the decompressing thread's error is the reason given. */
	static char noise[200000];
	srand(7);
	for (size_t i = 0; i + 1 < sizeof(noise); i++)
		noise[i] = (char)(1 + rand() % 255); /* incompressible, no NUL */
	fd = make_archive(R(D("top/"), F("top/a", noise), F("top/b", "x")));
	off_t full = lseek(fd, 0, SEEK_END);
	if (ftruncate(fd, full / 2) < 0 || lseek(fd, 0, SEEK_SET) < 0)
		return 2;
	r = extract_archive(fd, dest, &limits, NULL, &tmp, &err);
	ok(r == -EBADMSG && !strcmp(err.entry, "top/a") && strstr(err.msg, "decompressed") && count_entries(dir) == 0,
	   "truncated tar.gz: refused (%s: %s), nothing left", err.entry, err.msg);
	close(fd);

	fd = memfd_create("junk", MFD_CLOEXEC);
	if (write(fd, "not an archive at all", 21) != 21 || lseek(fd, 0, SEEK_SET) < 0)
		return 2;
	ok(extract_archive(fd, dest, &limits, NULL, &tmp, &err) == -EMEDIUMTYPE && count_entries(dir) == 0,
	   "not an archive: refused (%s), nothing left", err.msg);
	close(fd);

	rmdir(dir);
	return tap_done();
}
