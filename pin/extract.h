/* Safe unpacking of a source archive (tar in any compression libarchive
 * reads, or zip) into a fresh directory, stripping the archive's single
 * top-level directory as Nix's fetchzip does.
 *
 * Refused, each with the entry named: absolute paths, ".." components,
 * anything that would be written through a symlink (every directory is
 * opened one component at a time with O_NOFOLLOW), hardlinks whose target is
 * outside the tree or not a file unpacked before, device nodes, FIFOs,
 * sockets, setuid/setgid bits, a second entry for the same path (other than
 * a directory), more than one top-level entry, and more entries or more
 * unpacked bytes than the caps. Modes are normalised to 0755 (directories
 * and files the owner may execute) or 0644; owners and times are not kept.
 * On any failure the temporary directory is removed: nothing is left. */
#ifndef PIN_EXTRACT_H
#define PIN_EXTRACT_H

#include <stddef.h>
#include <stdint.h>

#define EXTRACT_DEFAULT_MAX_ENTRIES 1000000ULL
#define EXTRACT_DEFAULT_MAX_BYTES   (2ULL << 30)

struct extract_limits {
	uint64_t max_entries; /* headers read, directories included */
	uint64_t max_bytes;   /* sum of the files' sizes, holes included */
};

struct extract_error {
	char entry[1024]; /* the archive entry's path as stored, or "" */
	char msg[256];    /* what is wrong with it */
};

struct nar_stream;

/* Unpacks the archive read from fd into a new directory beside dest
 * (".NAME.tree-XXXXXX" in dest's directory, which must exist) and returns its
 * path in *tmp_out (malloc'ed). Every entry is also fed, as it lands on disk,
 * to stream (nar_stream.h) unless that is NULL. The caller hashes the tree,
 * then renames it into place or removes it with extract_remove_tree().
 * -EMEDIUMTYPE: not an archive at all; -EBADMSG: the archive is refused or
 * broken (err says why); other -errno: the local file system. */
int extract_archive(int fd, const char *dest, const struct extract_limits *lim, struct nar_stream *stream,
		    char **tmp_out, struct extract_error *err);

/* rm -rf that never follows a symlink; a missing path is not an error. */
int extract_remove_tree(const char *path);

/* Splits an entry's path into its top-level component and the rest, without
 * "." or empty components (the rest is "" for the top-level entry itself).
 * -EINVAL with *why set for an absolute path, a ".." component, or an empty
 * path. The hand-written parser the fuzzer exercises. */
int extract_split_path(const char *path, char *top, size_t top_size, char *rest, size_t rest_size,
		       const char **why);

#endif
