/* A file that appears at its final path complete or not at all.
 *
 * The data goes to an unnamed O_TMPFILE in the destination's directory (or, on
 * file systems without O_TMPFILE, a hidden random name there) with mode 0600;
 * only atomic_file_commit() gives it its final mode, fsyncs it, links it in
 * with renameat(2) relative to the directory's fd, after checking that the
 * name still holds this very file, and fsyncs the directory. atomic_file_abort() leaves nothing behind, and an
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
	mode_t mode;    /* given at commit */
	bool in_place;  /* the rename happened: the file is at its final path */
};

#define ATOMIC_FILE_INIT { .fd = -1, .dirfd = -1 }

int atomic_file_open(struct atomic_file *af, const char *path, mode_t mode);
/* Empties the temporary file so a new attempt can start over. */
int atomic_file_reset(struct atomic_file *af);
/* Final mode, fsync, rename over the destination, fsync the directory. The
 * file stays open (af->fd) until atomic_file_abort()/close; calling abort
 * after a successful commit only closes. -ESTALE: the temporary name no longer
 * holds this file (someone replaced it), nothing was put in place. On an error
 * with af->in_place set, the file IS in place and only the directory's fsync
 * failed. */
int atomic_file_commit(struct atomic_file *af);
void atomic_file_abort(struct atomic_file *af);

#endif
