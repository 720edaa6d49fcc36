/* Whole-buffer reads and writes on file descriptors, retrying EINTR and short
 * transfers. */
#ifndef E2B_FILEIO_H
#define E2B_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

/* write(2) the whole buffer; -errno (or -EIO on a zero-byte write). */
int write_all(int fd, const void *buf, size_t len);
/* Reads fd to its end into a malloc'ed, NUL-terminated buffer; -EFBIG when it
 * holds more than max bytes. */
int read_small_fd(int fd, size_t max, char **out, size_t *len);
/* The same for a path, opened read-only. */
int read_small_file(const char *path, size_t max, char **out, size_t *len);

/* Replaces path with buf as a file of the given mode: written to a unique
 * hidden name beside it (".<name>.XXXXXX", so the rename stays on one file
 * system and a directory watcher filtering on the name sees only the
 * rename), then renamed over. -errno; on any error path is as it was and no
 * temporary file is left. */
int write_file_replacing(const char *path, const void *buf, size_t len, mode_t mode);

#endif
