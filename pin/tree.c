#include "tree.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "nar_stream.h"

/* The tree's hash from the stream fed while unpacking when that completed,
 * else from a walk of the unpacked tree at tmp (*root: its fd, or -1 when
 * it could not be opened). */
static int hash_unpacked(struct nar_stream *stream, const char *tmp, unsigned char got[NAR_DIGEST_SIZE], int *root,
			 struct nar_error *nerr)
{
	const char *why = "no memory for it";

	if (stream && nar_stream_finish(stream, got, &why) == 0) {
		log_debug("%s: tree hashed while unpacking (its entries came in NAR order)", tmp);
		return 0;
	}
	log_debug("%s: tree hashed after unpacking, not while: %s", tmp, why);
	*root = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return *root < 0 ? -errno : nar_hash_dirfd(*root, got, nerr);
}

int tree_unpack(int archive_fd, const char *dest, const struct extract_limits *lim,
		const unsigned char *want, unsigned char got[NAR_DIGEST_SIZE], char **tmp_out,
		char *detail, size_t detail_len)
{
	struct extract_error xerr;
	struct nar_error nerr;
	_cleanup_free_ char *tmp = NULL;
	_cleanup_close_ int root = -1;
	_cleanup_(nar_stream_freep) struct nar_stream *stream = nar_stream_new(); /* NULL: the walk alone */
	int r;

	if (lseek(archive_fd, 0, SEEK_SET) < 0) {
		snprintf(detail, detail_len, "cannot read the archive: %s", strerror(errno));
		return -errno;
	}
	r = extract_archive(archive_fd, dest, lim, stream, &tmp, &xerr);
	if (r == -EBADMSG && xerr.entry[0])
		snprintf(detail, detail_len, "archive entry \"%s\" %s; refused", xerr.entry, xerr.msg);
	else if (r == -EBADMSG || r == -EMEDIUMTYPE)
		snprintf(detail, detail_len, "archive refused: %s", xerr.msg);
	else if (r < 0)
		snprintf(detail, detail_len, "cannot unpack beside %s: %s", dest, strerror(-r));
	if (r == 0)
		r = hash_unpacked(stream, tmp, got, &root, &nerr);
	if (r < 0 && !tmp)
		return r;
	if (r < 0) {
		snprintf(detail, detail_len, "cannot hash the unpacked tree at %s/%s: %s", tmp,
			 root < 0 ? "" : nerr.path, strerror(-r));
		extract_remove_tree(tmp);
		return r;
	}
	if (want && memcmp(want, got, NAR_DIGEST_SIZE) != 0) {
		char w[NAR_SRI_SIZE], g[NAR_SRI_SIZE];
		nar_sri(want, w);
		nar_sri(got, g);
		snprintf(detail, detail_len, "tree_sha256 mismatch: expected %s, got %s", w, g);
		extract_remove_tree(tmp);
		return -EBADMSG;
	}
	*tmp_out = TAKE_PTR(tmp);
	return 0;
}

static int fsync_parent(const char *path)
{
	_cleanup_free_ char *copy = strdup(path);
	_cleanup_close_ int fd = -1;

	if (!copy)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		return -errno;
	return 0;
}

int tree_commit(const char *tmp, const char *dest, bool *in_place)
{
	struct stat st;
	int r = 0;

	*in_place = false;
	if (rename(tmp, dest) == 0) {
		*in_place = true;
		return fsync_parent(dest);
	}
	if (errno != EEXIST && errno != ENOTEMPTY && errno != ENOTDIR && errno != EISDIR) {
		r = -errno;
	} else if (lstat(dest, &st) < 0 || !S_ISDIR(st.st_mode)) {
		r = -EEXIST;
	} else if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dest, RENAME_EXCHANGE) < 0) {
		r = -errno;
	} else {
		/* tmp now holds the old tree. */
		*in_place = true;
		r = fsync_parent(dest);
		extract_remove_tree(tmp);
		return r;
	}
	extract_remove_tree(tmp);
	return r;
}

int tree_pin_of_archive(int archive_fd, const struct extract_limits *lim, unsigned char digest[NAR_DIGEST_SIZE],
			char *detail, size_t detail_len)
{
	const char *tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	_cleanup_free_ char *holder = NULL, *dest = NULL, *tree = NULL;
	int r;

	if (asprintf(&holder, "%s/pinfetch-tree-XXXXXX", tmpdir) < 0) {
		holder = NULL;
		snprintf(detail, detail_len, "out of memory");
		return -ENOMEM;
	}
	if (!mkdtemp(holder)) {
		r = -errno;
		snprintf(detail, detail_len, "cannot make a temporary directory in %s: %s", tmpdir, strerror(errno));
		return r;
	}
	if (asprintf(&dest, "%s/tree", holder) < 0) {
		dest = NULL;
		rmdir(holder);
		snprintf(detail, detail_len, "out of memory");
		return -ENOMEM;
	}
	r = tree_unpack(archive_fd, dest, lim, NULL, digest, &tree, detail, detail_len);
	extract_remove_tree(tree);
	rmdir(holder);
	return r;
}

int tree_print_local(const char *path, const struct extract_limits *lim)
{
	unsigned char digest[NAR_DIGEST_SIZE];
	char detail[1400];
	struct stat st;
	int r;

	if (stat(path, &st) < 0) {
		log_error("%s: %s", path, strerror(errno));
		return 1;
	}
	if (S_ISDIR(st.st_mode)) {
		struct nar_error err;
		r = nar_hash_path(path, digest, &err);
		if (r < 0) {
			log_error("%s: cannot hash %s: %s", path, err.path,
				  r == -EINVAL ? "not a file, directory or symlink" : strerror(-r));
			return 1;
		}
	} else {
		_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			log_error("%s: %s", path, strerror(errno));
			return 1;
		}
		r = tree_pin_of_archive(fd, lim, digest, detail, sizeof(detail));
		if (r < 0) {
			log_error("%s: %s", path, detail);
			return 1;
		}
	}
	char sri[NAR_SRI_SIZE];
	nar_sri(digest, sri);
	printf("%s  %s\n", sri, path);
	return fflush(stdout) == 0 ? 0 : 1;
}
