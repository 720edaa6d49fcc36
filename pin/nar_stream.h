/* The NAR hash of a tree computed while it is unpacked, from the archive's
 * entries as they arrive, so the finished tree need not be read back.
 *
 * It works only when the entries come in NAR order (each name after its
 * previous sibling byte by byte, every directory's entries together), as
 * `git archive` of a tree without names like "foo" beside "foo.txt" and
 * `tar --sort=name` write them. The first entry that breaks that order, or
 * that the stream cannot reproduce exactly (a hardlink, a file with holes or
 * of unknown size, a second entry for a path already written), abandons the
 * stream: the caller then hashes the finished tree with nar_hash_dirfd().
 * A stream that completes gives the digest the walk would give. */
#ifndef PIN_NAR_STREAM_H
#define PIN_NAR_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nar.h"

struct nar_stream;

/* NULL when out of memory: the caller then simply walks the tree. */
struct nar_stream *nar_stream_new(void);
void nar_stream_free(struct nar_stream *s);
static inline void nar_stream_freep(struct nar_stream **s)
{
	nar_stream_free(*s);
}

/* Every call below does nothing when s is NULL (no stream wanted).
 * path: the entry's path below the stripped top-level directory, as it is
 * created on disk ("a/b/c", never empty). */
void nar_stream_directory(struct nar_stream *s, const char *path);
void nar_stream_symlink(struct nar_stream *s, const char *path, const char *target);
/* A regular file of `size` bytes; its data follows in nar_stream_data()
 * calls (offset: where the block goes in the file), then nar_stream_file_end(). */
void nar_stream_file(struct nar_stream *s, const char *path, bool executable, bool size_known, uint64_t size);
void nar_stream_data(struct nar_stream *s, uint64_t offset, const void *p, size_t len);
void nar_stream_file_end(struct nar_stream *s);
/* Anything else: the entry cannot be streamed (why says what it is). */
void nar_stream_abandon(struct nar_stream *s, const char *path, const char *why);

/* After the last entry: 0 and the digest, or -ECANCELED when the stream was
 * abandoned (*why says at which entry and why; -EIO: the digest failed). */
int nar_stream_finish(struct nar_stream *s, unsigned char digest[NAR_DIGEST_SIZE], const char **why);

#endif
