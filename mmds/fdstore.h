/* The document in systemd's file-descriptor store (fdstore.c). */
#ifndef MMDS_FDSTORE_H
#define MMDS_FDSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "server.h"

#define MMDS_FDSTORE_PREFIX "mmds-document-"

struct mmds_fdstore_entry {
	uint64_t generation; /* from the name, > 0 */
	struct mmds_file_stamp stamp;
	const char *json;
	size_t json_len;
};

/* The generation in a passed fd's name: -ENOENT when the name is not ours,
 * -EINVAL when it is ours but malformed. */
int mmds_fdstore_generation(const char *name, uint64_t *generation);

/* Hands a sealed memfd holding e to systemd, then removes the entry of
 * generation `previous` (0: none). -ENOTCONN without a NOTIFY_SOCKET. */
int mmds_fdstore_save(const struct mmds_fdstore_entry *e, uint64_t previous);

/* Removes a stored entry (one superseded by a newer one). */
int mmds_fdstore_drop(uint64_t generation);

/* Reads a passed entry: e->json points into *buf (malloc'd, the caller
 * frees it). -EPERM when the memfd is not sealed, -EBADMSG when it is not
 * an entry, -EFBIG when over max_json. */
int mmds_fdstore_read(int fd, size_t max_json, struct mmds_fdstore_entry *e, char **buf);

#endif
