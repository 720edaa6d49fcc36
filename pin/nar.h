/* The Nix archive (NAR) hash of a directory tree: what `nix hash path` and
 * `nix-hash --type sha256` print. A tree pin (lock key tree_sha256) is this
 * hash of an archive's unpacked tree, so it does not depend on how the
 * archive was compressed or in which order its entries were stored.
 *
 * NAR, as Nix writes it: every string is a little-endian u64 length, the
 * bytes, and zero padding to a multiple of 8. A node is
 *   "(" "type" "regular" ["executable" ""] "contents" <bytes> ")"
 *   "(" "type" "symlink" "target" <target> ")"
 *   "(" "type" "directory" { "entry" "(" "name" <n> "node" <node> ")" } ")"
 * with directory entries sorted by name, byte by byte; the whole starts with
 * "nix-archive-1". A file is executable when its owner may execute it. Only
 * regular files, directories and symlinks exist in a NAR; symlinks are never
 * followed. */
#ifndef PIN_NAR_H
#define PIN_NAR_H

#include <stddef.h>
#include <stdint.h>

#define NAR_DIGEST_SIZE 32
#define NAR_HEX_SIZE    65 /* 64 hex digits and a NUL */
#define NAR_SRI_SIZE    52 /* "sha256-" + 44 base64 characters and a NUL */
#define NAR_NIX32_SIZE  53 /* Nix's base-32: 52 characters and a NUL */
#define NAR_MAX_DEPTH   256

/* What went wrong, for the message: the path (relative to the root) of the
 * node that could not be hashed. */
struct nar_error {
	char path[4096];
};

/* The one NAR serializer, hashing as it writes: the walk of a finished tree
 * below and the stream fed while unpacking (nar_stream.c) both emit their
 * nodes through these calls, so the format exists once. A node is written
 * as its _begin call, its children or contents, and nar_node_end(); a
 * directory entry wraps its node in nar_entry_begin()/nar_entry_end().
 * Every call returns 0 or -EIO (the digest failed). */
struct nar_writer {
	void *md; /* EVP_MD_CTX */
};

int nar_writer_start(struct nar_writer *w);  /* -ENOMEM, -EIO; "nix-archive-1" written */
int nar_writer_finish(struct nar_writer *w, unsigned char digest[NAR_DIGEST_SIZE]);
void nar_writer_free(struct nar_writer *w);  /* safe on a zeroed or finished writer */
int nar_entry_begin(struct nar_writer *w, const char *name, size_t len);
int nar_entry_end(struct nar_writer *w);
int nar_directory_begin(struct nar_writer *w);
int nar_regular_begin(struct nar_writer *w, int executable, uint64_t size);
int nar_contents(struct nar_writer *w, const void *p, size_t len);
int nar_regular_end(struct nar_writer *w, uint64_t size); /* the padding, then the node's end */
int nar_symlink_node(struct nar_writer *w, const char *target, size_t len); /* a whole node */
int nar_node_end(struct nar_writer *w);

/* Hashes the tree rooted at dirfd (which the call does not close).
 * -ELOOP: nesting deeper than NAR_MAX_DEPTH; -EINVAL: a node that is not a
 * file, directory or symlink (err->path names it); other -errno from reading. */
int nar_hash_dirfd(int dirfd, unsigned char digest[NAR_DIGEST_SIZE], struct nar_error *err);
/* The same for a path; a path that is itself a file or symlink is hashed as
 * that node, as Nix does. */
int nar_hash_path(const char *path, unsigned char digest[NAR_DIGEST_SIZE], struct nar_error *err);

void nar_hex(const unsigned char digest[NAR_DIGEST_SIZE], char out[NAR_HEX_SIZE]);
void nar_sri(const unsigned char digest[NAR_DIGEST_SIZE], char out[NAR_SRI_SIZE]);
void nar_nix32(const unsigned char digest[NAR_DIGEST_SIZE], char out[NAR_NIX32_SIZE]);

#endif
