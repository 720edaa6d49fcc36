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
