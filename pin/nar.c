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
	EVP_MD_CTX *md;
	struct nar_error *err;
	char path[4096]; /* the node being hashed, relative to the root */
	size_t path_len;
	unsigned char *buf;
};

enum { NAR_BUF = 1 << 17 };

static int nar_bytes(struct nar *n, const void *p, size_t len)
{
	return EVP_DigestUpdate(n->md, p, len) == 1 ? 0 : -EIO;
}

static int nar_u64(struct nar *n, uint64_t v)
{
	unsigned char le[8];

	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(v >> (8 * i));
	return nar_bytes(n, le, 8);
}

static int nar_pad(struct nar *n, uint64_t len)
{
	static const unsigned char zero[8];

	return len % 8 ? nar_bytes(n, zero, 8 - len % 8) : 0;
}

static int nar_str_len(struct nar *n, const char *s, size_t len)
{
	int r = nar_u64(n, len);

	if (r == 0)
		r = nar_bytes(n, s, len);
	return r == 0 ? nar_pad(n, len) : r;
}

/* A run of literal tokens, NULL-terminated. */
static int nar_tokens(struct nar *n, ...)
{
	va_list ap;
	const char *s;
	int r = 0;

	va_start(ap, n);
	while (r == 0 && (s = va_arg(ap, const char *)))
		r = nar_str_len(n, s, strlen(s));
	va_end(ap);
	return r;
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
	int r;

	r = nar_tokens(n, "type", "regular", NULL);
	if (r == 0 && (st->st_mode & S_IXUSR))
		r = nar_tokens(n, "executable", "", NULL);
	if (r == 0)
		r = nar_tokens(n, "contents", NULL);
	if (r == 0)
		r = nar_u64(n, left);
	while (r == 0 && left > 0) {
		ssize_t got = read(fd, n->buf, left < NAR_BUF ? (size_t)left : NAR_BUF);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) /* an error, or the file shrank under us */
			return nar_fail(n, got < 0 ? -errno : -ESTALE);
		r = nar_bytes(n, n->buf, (size_t)got);
		left -= (uint64_t)got;
	}
	return r == 0 ? nar_pad(n, (uint64_t)st->st_size) : r;
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
	int r = nar_tokens(n, "type", "symlink", "target", NULL);
	return r == 0 ? nar_str_len(n, target, (size_t)len) : r;
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
	r = nar_tokens(n, "type", "directory", NULL);
	for (size_t i = 0; r == 0 && i < count; i++) {
		size_t len = strlen(names[i]);
		if (base + len + 2 > sizeof(n->path)) {
			r = nar_fail(n, -ENAMETOOLONG);
			break;
		}
		n->path_len = base + (base ? 1 : 0) + len;
		snprintf(n->path + base, sizeof(n->path) - base, "%s%s", base ? "/" : "", names[i]);
		r = nar_tokens(n, "entry", "(", "name", NULL);
		if (r == 0)
			r = nar_str_len(n, names[i], len);
		if (r == 0)
			r = nar_tokens(n, "node", NULL);
		if (r == 0)
			r = nar_node(n, fd, names[i], depth + 1);
		if (r == 0)
			r = nar_tokens(n, ")", NULL);
		n->path_len = base;
		n->path[base] = '\0';
	}
	free_names(names, count);
	return r;
}

/* One node: "(" type-specific ")" . name is relative to parent; "." for the root. */
static int nar_node(struct nar *n, int parent, const char *name, int depth)
{
	struct stat st;
	int r;

	if (depth > NAR_MAX_DEPTH)
		return nar_fail(n, -ELOOP);
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return nar_fail(n, -errno);
	r = nar_tokens(n, "(", NULL);
	if (r < 0)
		return r;
	if (S_ISLNK(st.st_mode)) {
		r = nar_symlink(n, parent, name, &st);
	} else if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
		int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0);
		_cleanup_close_ int fd = openat(parent, name, flags);
		struct stat again;
		if (fd < 0)
			return nar_fail(n, -errno);
		/* The node must still be what fstatat saw (no swap in between). */
		if (fstat(fd, &again) < 0 || again.st_ino != st.st_ino || again.st_dev != st.st_dev)
			return nar_fail(n, -ESTALE);
		r = S_ISDIR(st.st_mode) ? nar_directory(n, fd, depth) : nar_regular(n, fd, &again);
	} else {
		return nar_fail(n, -EINVAL); /* device, FIFO, socket: not in a NAR */
	}
	return r == 0 ? nar_tokens(n, ")", NULL) : r;
}

static int nar_hash_at(int parent, const char *name, unsigned char digest[NAR_DIGEST_SIZE], struct nar_error *err)
{
	struct nar n = { .err = err };
	unsigned int len = 0;
	int r;

	if (err)
		err->path[0] = '\0';
	n.md = EVP_MD_CTX_new();
	n.buf = malloc(NAR_BUF);
	if (!n.md || !n.buf) {
		r = -ENOMEM;
		goto out;
	}
	r = EVP_DigestInit_ex(n.md, EVP_sha256(), NULL) == 1 ? 0 : -EIO;
	if (r == 0)
		r = nar_tokens(&n, "nix-archive-1", NULL);
	if (r == 0)
		r = nar_node(&n, parent, name, 0);
	if (r == 0 && (EVP_DigestFinal_ex(n.md, digest, &len) != 1 || len != NAR_DIGEST_SIZE))
		r = -EIO;
out:
	EVP_MD_CTX_free(n.md);
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
