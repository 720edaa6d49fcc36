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

static int refused(int flags)
{
	if ((flags & O_TMPFILE) != O_TMPFILE)
		return 0;
	errno = EOPNOTSUPP;
	return 1;
}

static mode_t mode_arg(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

#define PASS_OPENAT(name)                                                           \
	int name(int dirfd, const char *path, int flags, ...)                      \
	{                                                                          \
		static int (*real)(int, const char *, int, ...);                   \
		va_list ap;                                                        \
		mode_t mode;                                                       \
		va_start(ap, flags);                                               \
		mode = mode_arg(flags, ap);                                        \
		va_end(ap);                                                        \
		if (refused(flags))                                                \
			return -1;                                                 \
		if (!real)                                                         \
			real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, #name); \
		return real(dirfd, path, flags, mode);                             \
	}

#define PASS_OPEN(name)                                                             \
	int name(const char *path, int flags, ...)                                 \
	{                                                                          \
		static int (*real)(const char *, int, ...);                        \
		va_list ap;                                                        \
		mode_t mode;                                                       \
		va_start(ap, flags);                                               \
		mode = mode_arg(flags, ap);                                        \
		va_end(ap);                                                        \
		if (refused(flags))                                                \
			return -1;                                                 \
		if (!real)                                                         \
			real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, #name); \
		return real(path, flags, mode);                                    \
	}

PASS_OPENAT(openat)
PASS_OPENAT(openat64)
PASS_OPEN(open)
PASS_OPEN(open64)
