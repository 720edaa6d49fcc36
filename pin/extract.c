#include "extract.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "fileio.h"
#include "cleanup.h"
#include "nar_stream.h"

struct unpack {
	struct archive *a;
	int root;                   /* the temporary directory */
	const struct extract_limits *lim;
	struct extract_error *err;
	char top[256];              /* the archive's top-level directory */
	bool have_top;
	uint64_t entries, bytes;
	char parent_path[4096];     /* the last parent directory opened, relative to root */
	int parent_fd;
	struct nar_stream *stream;  /* fed the entries as they land, or NULL */
};

static int refuse(struct unpack *u, const char *entry, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(struct unpack *u, const char *entry, const char *fmt, ...)
{
	va_list ap;

	snprintf(u->err->entry, sizeof(u->err->entry), "%s", entry ? entry : "");
	va_start(ap, fmt);
	vsnprintf(u->err->msg, sizeof(u->err->msg), fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

int extract_split_path(const char *path, char *top, size_t top_size, char *rest, size_t rest_size,
		       const char **why)
{
	size_t rest_len = 0;
	bool first = true;

	if (!path || !*path) {
		*why = "has an empty path";
		return -EINVAL;
	}
	if (path[0] == '/') {
		*why = "is an absolute path";
		return -EINVAL;
	}
	rest[0] = '\0';
	for (const char *p = path; *p;) {
		size_t len = strcspn(p, "/");
		if (len == 2 && p[0] == '.' && p[1] == '.') {
			*why = "has a \"..\" component";
			return -EINVAL;
		}
		if (len > 0 && !(len == 1 && p[0] == '.')) {
			if (first) {
				if (len >= top_size) {
					*why = "has a top-level name that is too long";
					return -EINVAL;
				}
				memcpy(top, p, len);
				top[len] = '\0';
				first = false;
			} else {
				if (rest_len + len + 2 > rest_size) {
					*why = "has a path that is too long";
					return -EINVAL;
				}
				if (rest_len)
					rest[rest_len++] = '/';
				memcpy(rest + rest_len, p, len);
				rest_len += len;
				rest[rest_len] = '\0';
			}
		}
		p += len;
		while (*p == '/')
			p++;
	}
	if (first) {
		*why = "has an empty path";
		return -EINVAL;
	}
	return 0;
}

/* Opens (creating as needed) the directory `dir` (relative to root, "" for
 * root) one component at a time, never through a symlink. */
static int open_dir_beneath(struct unpack *u, const char *entry, const char *dir, int *out)
{
	_cleanup_close_ int cur = -1;
	char comp[4096];

	if (u->parent_fd >= 0 && strcmp(dir, u->parent_path) == 0) {
		*out = u->parent_fd;
		return 0;
	}
	cur = fcntl(u->root, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return -errno;
	for (const char *p = dir; *p;) {
		size_t len = strcspn(p, "/");
		int next;
		memcpy(comp, p, len);
		comp[len] = '\0';
		p += len + (p[len] == '/');
		next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT) {
			if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST)
				return -errno;
			next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (next < 0 && (errno == ELOOP || errno == ENOTDIR)) {
			struct stat st;
			bool link = fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
			return refuse(u, entry, "would be written through %s \"%.*s\"", link ? "the symlink" : "the non-directory",
				      (int)(p - dir - (p[-1] == '/')), dir);
		}
		if (next < 0)
			return -errno;
		close(cur);
		cur = next;
	}
	if (u->parent_fd >= 0)
		close(u->parent_fd);
	u->parent_fd = TAKE_FD(cur);
	snprintf(u->parent_path, sizeof(u->parent_path), "%s", dir);
	*out = u->parent_fd;
	return 0;
}

/* rest = "a/b/c": *dir = "a/b", *leaf = "c" (in a copy owned by the caller). */
static void split_leaf(char *rest, const char **dir, const char **leaf)
{
	char *slash = strrchr(rest, '/');

	if (slash) {
		*slash = '\0';
		*dir = rest;
		*leaf = slash + 1;
	} else {
		*dir = "";
		*leaf = rest;
	}
}

static int count_bytes(struct unpack *u, const char *entry, uint64_t add)
{
	if (add > u->lim->max_bytes - u->bytes)
		return refuse(u, entry, "takes the unpacked size over the cap of %llu bytes (an archive bomb?)",
			      (unsigned long long)u->lim->max_bytes);
	u->bytes += add;
	return 0;
}

static int write_file(struct unpack *u, struct archive_entry *e, const char *entry, int dirfd, const char *leaf,
		      bool exec)
{
	_cleanup_close_ int fd = openat(dirfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	uint64_t end = 0, declared = archive_entry_size_is_set(e) ? (uint64_t)archive_entry_size(e) : 0;
	const void *block;
	size_t len;
	la_int64_t offset;
	int r;

	if (fd < 0)
		return errno == EEXIST ? refuse(u, entry, "appears twice in the archive") : -errno;
	if ((r = count_bytes(u, entry, declared)) < 0)
		return r;
	while ((r = archive_read_data_block(u->a, &block, &len, &offset)) == ARCHIVE_OK) {
		uint64_t block_end = (uint64_t)offset + len;
		if (offset < 0)
			return refuse(u, entry, "has a negative data offset");
		if (block_end > end) {
			/* Only what goes past the declared size is new. */
			uint64_t before = end > declared ? end : declared;
			if (block_end > before && (r = count_bytes(u, entry, block_end - before)) < 0)
				return r;
			end = block_end;
		}
		nar_stream_data(u->stream, (uint64_t)offset, block, len);
		const char *p = block;
		while (len > 0) {
			ssize_t n = pwrite(fd, p, len, offset);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return -errno;
			p += n;
			len -= (size_t)n;
			offset += n;
		}
	}
	if (r != ARCHIVE_EOF)
		return refuse(u, entry, "cannot be read: %s", archive_error_string(u->a));
	nar_stream_file_end(u->stream);
	if (declared > end && ftruncate(fd, (off_t)declared) < 0) /* a trailing hole */
		return -errno;
	if (fchmod(fd, exec ? 0755 : 0644) < 0)
		return -errno;
	return 0;
}

static int make_dir(struct unpack *u, const char *entry, char *rest)
{
	int fd;

	return open_dir_beneath(u, entry, rest, &fd);
}

static int make_hardlink(struct unpack *u, struct archive_entry *e, const char *entry, int dirfd, const char *leaf)
{
	char top[256], target[4096];
	const char *why, *tdir, *tleaf;
	struct stat st;
	int tdirfd, r;

	if (extract_split_path(archive_entry_hardlink(e), top, sizeof(top), target, sizeof(target), &why) < 0 ||
	    strcmp(top, u->top) != 0 || !target[0])
		return refuse(u, entry, "is a hardlink to \"%s\", outside the tree", archive_entry_hardlink(e));
	/* dirfd may be the cached parent; keep it open while the target's is looked up. */
	_cleanup_close_ int keep = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (keep < 0)
		return -errno;
	split_leaf(target, &tdir, &tleaf);
	if ((r = open_dir_beneath(u, entry, tdir, &tdirfd)) < 0)
		return r;
	if (fstatat(tdirfd, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return refuse(u, entry, "is a hardlink to \"%s\", which is not a file unpacked before it",
			      archive_entry_hardlink(e));
	if ((r = count_bytes(u, entry, (uint64_t)st.st_size)) < 0)
		return r;
	if (linkat(tdirfd, tleaf, keep, leaf, 0) < 0)
		return errno == EEXIST ? refuse(u, entry, "appears twice in the archive") : -errno;
	return 0;
}

static int unpack_entry(struct unpack *u, struct archive_entry *e)
{
	const char *entry = archive_entry_pathname(e), *why, *dir, *leaf;
	char top[256], rest[4096];
	mode_t type = archive_entry_filetype(e);
	int dirfd, r;

	if (!entry)
		entry = archive_entry_pathname_utf8(e);
	if (++u->entries > u->lim->max_entries)
		return refuse(u, entry, "is past the cap of %llu entries (an archive bomb?)",
			      (unsigned long long)u->lim->max_entries);
	if (extract_split_path(entry, top, sizeof(top), rest, sizeof(rest), &why) < 0)
		return refuse(u, entry, "%s", why);
	if (archive_entry_mode(e) & (S_ISUID | S_ISGID))
		return refuse(u, entry, "has the setuid or setgid bit");
	if (!u->have_top) {
		memcpy(u->top, top, sizeof(u->top));
		u->have_top = true;
	} else if (strcmp(top, u->top) != 0) {
		return refuse(u, entry, "is a second top-level entry besides \"%s\"; expected one top-level directory",
			      u->top);
	}
	if (!rest[0]) {
		if (type != AE_IFDIR || archive_entry_hardlink(e))
			return refuse(u, entry, "is a top-level entry that is not a directory; expected one top-level directory");
		return 0;
	}
	if (archive_entry_hardlink(e) || type == AE_IFREG || type == AE_IFLNK) {
		/* On disk a file is 0755 when its owner may execute it, else 0644:
		 * the walk and the stream see the same bit. */
		bool exec = archive_entry_mode(e) & S_IXUSR;
		const char *target = archive_entry_symlink(e) ? archive_entry_symlink(e) : "";
		if (archive_entry_hardlink(e))
			nar_stream_abandon(u->stream, rest, "is a hardlink");
		else if (type == AE_IFREG)
			nar_stream_file(u->stream, rest, exec, archive_entry_size_is_set(e),
					(uint64_t)archive_entry_size(e));
		else
			nar_stream_symlink(u->stream, rest, target);
		split_leaf(rest, &dir, &leaf);
		if ((r = open_dir_beneath(u, entry, dir, &dirfd)) < 0)
			return r;
		if (archive_entry_hardlink(e))
			return make_hardlink(u, e, entry, dirfd, leaf);
		if (type == AE_IFREG)
			return write_file(u, e, entry, dirfd, leaf, exec);
		if (symlinkat(target, dirfd, leaf) < 0)
			return errno == EEXIST ? refuse(u, entry, "appears twice in the archive")
			     : errno == ENOENT ? refuse(u, entry, "is a symlink with an empty target") : -errno;
		return 0;
	}
	switch (type) {
	case AE_IFDIR:
		nar_stream_directory(u->stream, rest);
		return make_dir(u, entry, rest);
	case AE_IFCHR:
	case AE_IFBLK:
		return refuse(u, entry, "is a device node");
	case AE_IFIFO:
		return refuse(u, entry, "is a FIFO");
	case AE_IFSOCK:
		return refuse(u, entry, "is a socket");
	default:
		return refuse(u, entry, "has an unsupported type (0%o)", (unsigned)type);
	}
}

static int unpack_all(struct unpack *u)
{
	struct archive_entry *e;
	int r;

	for (;;) {
		r = archive_read_next_header(u->a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN && !u->entries) {
			refuse(u, NULL, "not a readable archive: %s", archive_error_string(u->a));
			return -EMEDIUMTYPE;
		}
		if (r < ARCHIVE_WARN)
			return refuse(u, u->err->entry, "is followed by an unreadable header: %s",
				      archive_error_string(u->a));
		if ((r = unpack_entry(u, e)) < 0)
			return r;
		/* Remember the last entry, to name where a later read fails. */
		snprintf(u->err->entry, sizeof(u->err->entry), "%s", archive_entry_pathname(e) ? archive_entry_pathname(e) : "");
	}
	if (!u->have_top)
		return refuse(u, NULL, "the archive is empty");
	return 0;
}

static int temp_dir_beside(const char *dest, char **out)
{
	_cleanup_free_ char *d1 = strdup(dest), *d2 = strdup(dest);
	char *path;

	if (!d1 || !d2)
		return -ENOMEM;
	if (asprintf(&path, "%s/.%s.tree-XXXXXX", dirname(d1), basename(d2)) < 0)
		return -ENOMEM;
	if (!mkdtemp(path)) {
		int r = -errno;
		free(path);
		return r;
	}
	*out = path;
	return 0;
}

/* A compressed archive is decompressed in a second thread and read through a
 * pipe, as `tar -xz` runs gzip beside tar: the inflating and the unpacking
 * (file creation, writes) overlap. The thread reads the outer compression
 * only (libarchive's "raw" format); a stop by the reader (EPIPE) is normal. */
struct inflater {
	struct archive *raw;
	int out;      /* the pipe's write end; the thread closes it */
	pthread_t thread;
	bool running;
	char error[200]; /* the decompressor's complaint, if it had one */
};

static void *inflate_main(void *arg)
{
	struct inflater *inf = arg;
	sigset_t pipe_sig;
	const void *block;
	size_t len;
	la_int64_t offset;
	int r;

	/* A write to a closed pipe must return EPIPE, not kill the process. */
	sigemptyset(&pipe_sig);
	sigaddset(&pipe_sig, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_sig, NULL);
	while ((r = archive_read_data_block(inf->raw, &block, &len, &offset)) == ARCHIVE_OK)
		if (write_all(inf->out, block, len) < 0)
			break; /* the reader stopped: done */
	if (r < ARCHIVE_WARN)
		snprintf(inf->error, sizeof(inf->error), "%s", archive_error_string(inf->raw));
	close(inf->out);
	return NULL;
}

/* Starts the thread when fd holds a compressed stream; *in is then the pipe
 * to read, else fd itself (rewound). */
static int inflater_start(struct inflater *inf, int fd, int *in)
{
	struct archive_entry *e;
	int p[2];

	*in = fd;
	inf->raw = archive_read_new();
	if (!inf->raw)
		return -ENOMEM;
	archive_read_support_filter_all(inf->raw);
	archive_read_support_format_raw(inf->raw);
	if (archive_read_open_fd(inf->raw, fd, 1 << 17) != ARCHIVE_OK ||
	    archive_read_next_header(inf->raw, &e) != ARCHIVE_OK || archive_filter_count(inf->raw) < 2) {
		archive_read_free(inf->raw);
		inf->raw = NULL;
		return lseek(fd, 0, SEEK_SET) < 0 ? -errno : 0; /* not compressed: read it directly */
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	fcntl(p[1], F_SETPIPE_SZ, 1 << 20); /* fewer wake-ups; a smaller pipe only costs speed */
	inf->out = p[1];
	if (pthread_create(&inf->thread, NULL, inflate_main, inf) != 0) {
		close(p[0]);
		close(p[1]);
		return -EAGAIN;
	}
	inf->running = true;
	*in = p[0];
	return 0;
}

static void inflater_stop(struct inflater *inf, int in)
{
	if (inf->running) {
		close(in); /* unblocks the thread's write with EPIPE */
		pthread_join(inf->thread, NULL);
	}
	if (inf->raw)
		archive_read_free(inf->raw);
}

int extract_archive(int fd, const char *dest, const struct extract_limits *lim, struct nar_stream *stream,
		    char **tmp_out, struct extract_error *err)
{
	struct unpack u = { .lim = lim, .err = err, .root = -1, .parent_fd = -1, .stream = stream };
	struct inflater inf = { .out = -1 };
	_cleanup_free_ char *tmp = NULL;
	int in = -1, r;

	err->entry[0] = err->msg[0] = '\0';
	r = temp_dir_beside(dest, &tmp);
	if (r < 0)
		return r;
	if (chmod(tmp, 0755) < 0 || (u.root = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		r = -errno;
		goto out;
	}
	if ((r = inflater_start(&inf, fd, &in)) < 0)
		goto out;
	u.a = archive_read_new();
	if (!u.a) {
		r = -ENOMEM;
		goto out;
	}
	archive_read_support_filter_all(u.a);
	archive_read_support_format_tar(u.a);
	archive_read_support_format_gnutar(u.a);
	archive_read_support_format_zip(u.a);
	if (archive_read_open_fd(u.a, in, 1 << 17) != ARCHIVE_OK) {
		refuse(&u, NULL, "not a readable archive: %s", archive_error_string(u.a));
		r = -EMEDIUMTYPE;
		goto out;
	}
	r = unpack_all(&u);
out:
	if (u.a)
		archive_read_free(u.a);
	inflater_stop(&inf, in);
	if (r < 0 && inf.error[0] && r != -EMEDIUMTYPE) /* the real cause of a truncated stream */
		snprintf(err->msg, sizeof(err->msg), "cannot be decompressed: %s", inf.error);
	if (u.parent_fd >= 0)
		close(u.parent_fd);
	if (u.root >= 0)
		close(u.root);
	if (r < 0) {
		extract_remove_tree(tmp);
		return r;
	}
	*tmp_out = TAKE_PTR(tmp);
	return 0;
}

static int remove_at(int parent, const char *name, int depth)
{
	struct stat st;

	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISDIR(st.st_mode)) {
		int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *d;
		struct dirent *de;
		int r = 0;
		if (fd < 0)
			return -errno;
		if (depth > 4096 || !(d = fdopendir(fd))) {
			close(fd);
			return depth > 4096 ? -ELOOP : -errno;
		}
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
				int q = remove_at(dirfd(d), de->d_name, depth + 1);
				if (q < 0 && r == 0)
					r = q;
			}
		closedir(d);
		if (r < 0)
			return r;
		return unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
	}
	return unlinkat(parent, name, 0) < 0 && errno != ENOENT ? -errno : 0;
}

int extract_remove_tree(const char *path)
{
	return path ? remove_at(AT_FDCWD, path, 0) : 0;
}
