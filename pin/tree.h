/* Tree pins: an archive is unpacked (extract.c), its tree hashed the way Nix
 * hashes a path (nar.c), compared with the pin, and put in place whole. */
#ifndef PIN_TREE_H
#define PIN_TREE_H

#include <stdbool.h>

#include "extract.h"
#include "nar.h"

/* Unpacks the archive on archive_fd (from its start) into a temporary
 * directory beside dest and hashes it into got. On success *tmp_out is the
 * unpacked tree, for tree_commit(). On failure nothing is left, and detail
 * says why: -EBADMSG for an archive that is refused (naming the entry) or
 * whose tree differs from want (when want is given: both pins named);
 * another -errno for a local failure (naming the path). */
int tree_unpack(int archive_fd, const char *dest, const struct extract_limits *lim,
		const unsigned char *want, unsigned char got[NAR_DIGEST_SIZE], char **tmp_out,
		char *detail, size_t detail_len);

/* Renames the unpacked tree over dest atomically: a missing dest appears
 * whole, an existing directory is exchanged (RENAME_EXCHANGE) and the old
 * tree then removed. Anything else at dest is -EEXIST. The temporary tree is
 * removed on failure. *in_place says whether the tree got there (a failing
 * fsync of the directory afterwards is still an error). */
int tree_commit(const char *tmp, const char *dest, bool *in_place);

/* The tree pin of an archive, unpacked under $TMPDIR and removed again.
 * -EMEDIUMTYPE: not an archive; other errors as tree_unpack(). */
int tree_pin_of_archive(int archive_fd, const struct extract_limits *lim, unsigned char digest[NAR_DIGEST_SIZE],
			char *detail, size_t detail_len);

/* pinfetch --hash-tree PATH: the tree pin of a directory, or of an archive's
 * unpacked tree (unpacked under $TMPDIR and removed), printed as
 * "sha256-<base64>  PATH". Returns an exit code. */
int tree_print_local(const char *path, const struct extract_limits *lim);

#endif
