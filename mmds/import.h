/* One document into the file mmds-serve watches, from a file another writer
 * cannot rename over it (QEMU's fw_cfg entry): checked as mmds-serve checks
 * the file it serves, then written as every writer must (mmds/README.md), a
 * unique temporary name in the same directory renamed over the target. */
#ifndef MMDS_IMPORT_H
#define MMDS_IMPORT_H

#include <stddef.h>
#include <jansson.h>

struct mmds_import_result {
	size_t written;        /* bytes written to dst */
	const char *failed_on; /* src or dst: the file an error came from */
	json_error_t json;     /* where src is not JSON */
};

/* Reads src (at most 4 * max_size raw bytes), parses it (its compact form at
 * most max_size bytes) and writes that compact form to dst, mode 0644.
 * Returns 0, or -errno: -EINVAL when src is not JSON, -EFBIG over the
 * limits, anything else from reading src or writing dst (res->failed_on
 * says which). On any error dst is as it was and no temporary file is left. */
int mmds_import_document(const char *src, const char *dst, size_t max_size, struct mmds_import_result *res);

#endif
