#include "nar.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "cleanup.h"

struct nar {
	struct nar_writer w;
	struct nar_error *err;
	char path[4096]; /* the node being hashed, relative to the root */
	size_t path_len;
	unsigned char *buf;
};

enum { NAR_BUF = 1 << 17 };

static int nar_bytes(struct nar_writer *w, const void *p, size_t len)
{
	return EVP_DigestUpdate(w->md, p, len) == 1 ? 0 : -EIO;
}

static int nar_u64(struct nar_writer *w, uint64_t v)
{
	unsigned char le[8];

	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(v >> (8 * i));
	return nar_bytes(w, le, 8);
}

static int nar_pad(struct nar_writer *w, uint64_t len)
{
	static const unsigned char zero[8];

	return len % 8 ? nar_bytes(w, zero, 8 - len % 8) : 0;
}

static int nar_str_len(struct nar_writer *w, const char *s, size_t len)
{
	int r = nar_u64(w, len);

	if (r == 0)
		r = nar_bytes(w, s, len);
	return r == 0 ? nar_pad(w, len) : r;
}

/* A run of literal tokens, NULL-terminated. */
static int nar_tokens(struct nar_writer *w, ...)
{
	va_list ap;
	const char *s;
	int r = 0;

	va_start(ap, w);
	while (r == 0 && (s = va_arg(ap, const char *)))
		r = nar_str_len(w, s, strlen(s));
	va_end(ap);
	return r;
}

int nar_writer_start(struct nar_writer *w)
{
	w->md = EVP_MD_CTX_new();
	if (!w->md)
		return -ENOMEM;
	if (EVP_DigestInit_ex(w->md, EVP_sha256(), NULL) != 1)
		return -EIO;
	return nar_tokens(w, "nix-archive-1", NULL);
}

int nar_writer_finish(struct nar_writer *w, unsigned char digest[NAR_DIGEST_SIZE])
{
	unsigned int len = 0;

	if (EVP_DigestFinal_ex(w->md, digest, &len) != 1 || len != NAR_DIGEST_SIZE)
		return -EIO;
	return 0;
}

void nar_writer_free(struct nar_writer *w)
{
	EVP_MD_CTX_free(w->md);
	w->md = NULL;
}

int nar_entry_begin(struct nar_writer *w, const char *name, size_t len)
{
	int r = nar_tokens(w, "entry", "(", "name", NULL);

	if (r == 0)
		r = nar_str_len(w, name, len);
	return r == 0 ? nar_tokens(w, "node", NULL) : r;
}

int nar_entry_end(struct nar_writer *w)
{
	return nar_tokens(w, ")", NULL);
}

int nar_node_end(struct nar_writer *w)
{
	return nar_tokens(w, ")", NULL);
}

int nar_directory_begin(struct nar_writer *w)
{
	return nar_tokens(w, "(", "type", "directory", NULL);
}

int nar_regular_begin(struct nar_writer *w, int executable, uint64_t size)
{
	int r = nar_tokens(w, "(", "type", "regular", NULL);

	if (r == 0 && executable)
		r = nar_tokens(w, "executable", "", NULL);
	if (r == 0)
		r = nar_tokens(w, "contents", NULL);
	return r == 0 ? nar_u64(w, size) : r;
}

int nar_contents(struct nar_writer *w, const void *p, size_t len)
{
	return nar_bytes(w, p, len);
}

int nar_regular_end(struct nar_writer *w, uint64_t size)
{
	int r = nar_pad(w, size);

	return r == 0 ? nar_node_end(w) : r;
}

int nar_symlink_node(struct nar_writer *w, const char *target, size_t len)
{
	int r = nar_tokens(w, "(", "type", "symlink", "target", NULL);

	if (r == 0)
		r = nar_str_len(w, target, len);
	return r == 0 ? nar_node_end(w) : r;
}

/* Records the failing node's path for the message and passes r through. */
static int nar_fail(struct nar *n, int r)
{
	if (n->err && !n->err->path[0])
		snprintf(n->err->path, sizeof(n->err->path), "%s", n->path_len ? n->path : ".");
	return r;
}

static int nar_regular(struct nar *n, int fd, const struct stat *st)
{
	uint64_t left = (uint64_t)st->st_size;
	int r = nar_regular_begin(&n->w, (st->st_mode & S_IXUSR) != 0, left);

	while (r == 0 && left > 0) {
		ssize_t got = read(fd, n->buf, left < NAR_BUF ? (size_t)left : NAR_BUF);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) /* an error, or the file shrank under us */
			return nar_fail(n, got < 0 ? -errno : -ESTALE);
		r = nar_contents(&n->w, n->buf, (size_t)got);
		left -= (uint64_t)got;
	}
	return r == 0 ? nar_regular_end(&n->w, (uint64_t)st->st_size) : r;
}

static int nar_symlink(struct nar *n, int parent, const char *name, const struct stat *st)
{
	_cleanup_free_ char *target = NULL;
	size_t cap = st->st_size > 0 ? (size_t)st->st_size + 1 : 256;
	ssize_t len;

	for (;;) {
		free(target);
		target = malloc(cap);
		if (!target)
			return -ENOMEM;
		len = readlinkat(parent, name, target, cap);
		if (len < 0)
			return nar_fail(n, -errno);
		if ((size_t)len < cap)
			break;
		cap *= 2;
	}
	return nar_symlink_node(&n->w, target, (size_t)len);
}

static int cmp_names(const void *a, const void *b)
{
	/* strcmp compares as unsigned char: byte order, as Nix sorts. */
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t count)
{
	for (size_t i = 0; i < count; i++)
		free(names[i]);
	free(names);
}

/* The directory's entry names, sorted. Takes ownership of fd. */
static int list_sorted(int fd, char ***out, size_t *count)
{
	DIR *d = fdopendir(fd);
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	if (!d) {
		close(fd);
		return -errno;
	}
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			char **grown = realloc(names, (cap = cap ? 2 * cap : 32) * sizeof(*names));
			if (!grown)
				goto nomem;
			names = grown;
		}
		if (!(names[n] = strdup(de->d_name)))
			goto nomem;
		n++;
		errno = 0;
	}
	if (errno) {
		int r = -errno;
		closedir(d);
		free_names(names, n);
		return r;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	*out = names;
	*count = n;
	return 0;
nomem:
	closedir(d);
	free_names(names, n);
	return -ENOMEM;
}

static int nar_node(struct nar *n, int parent, const char *name, int depth);

static int nar_directory(struct nar *n, int fd, int depth)
{
	char **names = NULL;
	size_t count = 0, base = n->path_len;
	int r, dup_fd = dup(fd);

	if (dup_fd < 0)
		return nar_fail(n, -errno);
	r = list_sorted(dup_fd, &names, &count);
	if (r < 0)
		return nar_fail(n, r);
	r = nar_directory_begin(&n->w);
	for (size_t i = 0; r == 0 && i < count; i++) {
		size_t len = strlen(names[i]);
		if (base + len + 2 > sizeof(n->path)) {
			r = nar_fail(n, -ENAMETOOLONG);
			break;
		}
		n->path_len = base + (base ? 1 : 0) + len;
		snprintf(n->path + base, sizeof(n->path) - base, "%s%s", base ? "/" : "", names[i]);
		r = nar_entry_begin(&n->w, names[i], len);
		if (r == 0)
			r = nar_node(n, fd, names[i], depth + 1);
		if (r == 0)
			r = nar_entry_end(&n->w);
		n->path_len = base;
		n->path[base] = '\0';
	}
	free_names(names, count);
	return r == 0 ? nar_node_end(&n->w) : r;
}

/* One node. name is relative to parent; "." for the root. */
static int nar_node(struct nar *n, int parent, const char *name, int depth)
{
	struct stat st;

	if (depth > NAR_MAX_DEPTH)
		return nar_fail(n, -ELOOP);
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return nar_fail(n, -errno);
	if (S_ISLNK(st.st_mode))
		return nar_symlink(n, parent, name, &st);
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return nar_fail(n, -EINVAL); /* device, FIFO, socket: not in a NAR */
	int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0);
	_cleanup_close_ int fd = openat(parent, name, flags);
	struct stat again;
	if (fd < 0)
		return nar_fail(n, -errno);
	/* The node must still be what fstatat saw (no swap in between). */
	if (fstat(fd, &again) < 0 || again.st_ino != st.st_ino || again.st_dev != st.st_dev)
		return nar_fail(n, -ESTALE);
	return S_ISDIR(st.st_mode) ? nar_directory(n, fd, depth) : nar_regular(n, fd, &again);
}

static int nar_hash_at(int parent, const char *name, unsigned char digest[NAR_DIGEST_SIZE], struct nar_error *err)
{
	struct nar n = { .err = err };
	int r;

	if (err)
		err->path[0] = '\0';
	n.buf = malloc(NAR_BUF);
	r = n.buf ? nar_writer_start(&n.w) : -ENOMEM;
	if (r == 0)
		r = nar_node(&n, parent, name, 0);
	if (r == 0)
		r = nar_writer_finish(&n.w, digest);
	nar_writer_free(&n.w);
	free(n.buf);
	return r;
}

int nar_hash_dirfd(int dirfd, unsigned char digest[NAR_DIGEST_SIZE], struct nar_error *err)
{
	return nar_hash_at(dirfd, ".", digest, err);
}

int nar_hash_path(const char *path, unsigned char digest[NAR_DIGEST_SIZE], struct nar_error *err)
{
	return nar_hash_at(AT_FDCWD, path, digest, err);
}

void nar_hex(const unsigned char digest[NAR_DIGEST_SIZE], char out[NAR_HEX_SIZE])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < NAR_DIGEST_SIZE; i++) {
		out[2 * i] = digits[digest[i] >> 4];
		out[2 * i + 1] = digits[digest[i] & 15];
	}
	out[64] = '\0';
}

void nar_sri(const unsigned char digest[NAR_DIGEST_SIZE], char out[NAR_SRI_SIZE])
{
	memcpy(out, "sha256-", 7);
	EVP_EncodeBlock((unsigned char *)out + 7, digest, NAR_DIGEST_SIZE); /* 44 chars + NUL */
}

/* Nix's base-32 (no e, o, u, t), read from the last 5-bit group to the first. */
void nar_nix32(const unsigned char digest[NAR_DIGEST_SIZE], char out[NAR_NIX32_SIZE])
{
	static const char alphabet[] = "0123456789abcdfghijklmnpqrsvwxyz";
	const int len = (NAR_DIGEST_SIZE * 8 - 1) / 5 + 1;

	for (int k = len - 1; k >= 0; k--) {
		int bit = k * 5, i = bit / 8, j = bit % 8;
		unsigned c = (unsigned)(digest[i] >> j);
		if (i + 1 < NAR_DIGEST_SIZE)
			c |= (unsigned)digest[i + 1] << (8 - j);
		out[len - 1 - k] = alphabet[c & 0x1f];
	}
	out[len] = '\0';
}
