/* Test stand-in, never shipped: an LD_PRELOAD shim whose fsync(2) fails with
 * EIO on directories (and works on everything else), so a test can see what
 * pinfetch says when the file is in place but its directory cannot be synced. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/stat.h>

int fsync(int fd)
{
	static int (*real_fsync)(int);
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		errno = EIO;
		return -1;
	}
	if (!real_fsync)
		real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
	return real_fsync(fd);
}
