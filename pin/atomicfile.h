/* A file that appears at its final path complete or not at all.
 *
 * The data goes to an unnamed O_TMPFILE in the destination's directory (or, on
 * file systems without O_TMPFILE, a hidden mkstemp name there), gets an explicit
 * mode and an fsync, and only atomic_file_commit() links it in with rename(2)
 * and fsyncs the directory. atomic_file_abort() leaves nothing behind, and an
 * existing file at the destination stays as it was until the rename. */
#ifndef PIN_ATOMICFILE_H
#define PIN_ATOMICFILE_H

#include <stdbool.h>
#include <sys/types.h>

struct atomic_file {
	int fd;         /* the temporary file, open for reading and writing */
	int dirfd;      /* the destination's directory */
	char *base;     /* the destination's name in dirfd */
	char *tmpname;  /* NULL for an O_TMPFILE, else the hidden name in dirfd */
	mode_t mode;
};

#define ATOMIC_FILE_INIT { .fd = -1, .dirfd = -1 }

int atomic_file_open(struct atomic_file *af, const char *path, mode_t mode);
/* Empties the temporary file so a new attempt can start over. */
int atomic_file_reset(struct atomic_file *af);
/* fsync, rename over the destination, fsync the directory. The file stays
 * open (af->fd) until atomic_file_abort()/close; calling abort after a
 * successful commit only closes. */
int atomic_file_commit(struct atomic_file *af);
void atomic_file_abort(struct atomic_file *af);

/* write(2) the whole buffer, retrying on EINTR and short writes. */
int write_all(int fd, const void *buf, size_t len);

#endif
