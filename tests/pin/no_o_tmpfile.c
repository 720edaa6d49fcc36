/* Test stand-in, never shipped: an LD_PRELOAD shim for a file system
 * without O_TMPFILE (as on some network and FUSE file systems): open(2) and
 * openat(2) with O_TMPFILE fail with EOPNOTSUPP, everything else is passed
 * through. It lets the tests cover pinfetch's named-temporary-file path with
 * the release binary as shipped, which has no test switch of its own. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/types.h>

typedef int (*openat_fn)(int, const char *, int, ...);

/* Every open goes through here: refused with O_TMPFILE, else the real
 * openat (open(p, f, m) is openat(AT_FDCWD, p, f, m)). */
static int shim_openat(int large, int dirfd, const char *path, int flags, mode_t mode)
{
	static openat_fn real[2];

	if ((flags & O_TMPFILE) == O_TMPFILE) {
		errno = EOPNOTSUPP;
		return -1;
	}
	if (!real[large])
		real[large] = (openat_fn)dlsym(RTLD_NEXT, large ? "openat64" : "openat");
	return real[large](dirfd, path, flags, mode);
}

#define MODE_ARG(flags, mode)                                                     \
	do {                                                                     \
		va_list ap;                                                      \
		va_start(ap, flags);                                             \
		mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE     \
			       ? va_arg(ap, mode_t) : 0;                         \
		va_end(ap);                                                      \
	} while (0)

int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode;
	MODE_ARG(flags, mode);
	return shim_openat(0, dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	mode_t mode;
	MODE_ARG(flags, mode);
	return shim_openat(1, dirfd, path, flags, mode);
}

int open(const char *path, int flags, ...)
{
	mode_t mode;
	MODE_ARG(flags, mode);
	return shim_openat(0, AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
	mode_t mode;
	MODE_ARG(flags, mode);
	return shim_openat(1, AT_FDCWD, path, flags, mode);
}
