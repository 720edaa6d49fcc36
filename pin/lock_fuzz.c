/* libFuzzer target for the lock-file parser. Besides memory safety it checks
 * the parser's promises: every accepted entry is valid by the same rules the
 * parser documents, and a rejected input leaves nothing allocated. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lock lock;
	struct lock_error err;

	if (lock_parse((const char *)data, size, &lock, &err) < 0) {
		if (lock.n || lock.entries || !err.msg[0])
			abort();
		return 0;
	}
	if (lock.n == 0)
		abort();
	for (size_t i = 0; i < lock.n; i++) {
		const struct lock_entry *e = &lock.entries[i];
		/* A stanza pins its bytes (sha256), its unpacked tree, or both. */
		if (!e->has_sha256 && !e->has_tree)
			abort();
		if (e->has_sha256 && !lock_valid_sha256(e->sha256, strlen(e->sha256)))
			abort();
		if (e->has_commit && !lock_valid_commit(e->commit, strlen(e->commit)))
			abort();
		if (!lock_valid_name(e->name, strlen(e->name)) || !e->version ||
		    !lock_valid_version(e->version, strlen(e->version)) || !e->url || !*e->url ||
		    strchr(e->url, ' ') || lock_find(&lock, e->name) != e || (e->has_size && e->size == 0))
			abort();
	}
	lock_free(&lock);
	return 0;
}
