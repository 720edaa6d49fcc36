/* Whole guest answers (status line, headers and body) for the paths that
 * are asked for, rendered once per document version and then served as
 * bytes: a GET of a cached path costs a lookup and a copy instead of a
 * JSON Pointer walk, a serialization and a printf. Each entry records the
 * document generation it was rendered from; a lookup for another
 * generation misses, and store.c clears the cache on every document
 * change, so an answer is never served for a document it did not come
 * from. Bounded in entries and bytes (paths are the client's choice).
 * Pure: no sockets, no document, so the unit test reaches all of it. */
#ifndef MMDS_ANSWER_CACHE_H
#define MMDS_ANSWER_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ANSWER_CACHE_ENTRIES 32
#define ANSWER_CACHE_MAX_PATH 256         /* longer paths are rendered each time */
#define ANSWER_CACHE_BYTES (512 * 1024)   /* all answers together */

struct cached_answer {
	uint64_t generation;
	bool json; /* Accept: application/json, else IMDS text */
	size_t path_len;
	char path[ANSWER_CACHE_MAX_PATH];
	char *bytes; /* NULL: the slot is free */
	size_t len;
};

struct answer_cache {
	struct cached_answer slots[ANSWER_CACHE_ENTRIES];
	size_t bytes;      /* held by every entry together */
	unsigned next_out; /* the slot replaced next when all are taken */
};

/* The answer to path (as the request spelled it, query stripped) in that
 * form, rendered from document `generation`; NULL when none is held. */
const struct cached_answer *answer_cache_find(const struct answer_cache *ac, uint64_t generation, const char *path,
					      size_t path_len, bool json);

/* Keeps a copy of answer. -E2BIG when it cannot be held (a path over
 * ANSWER_CACHE_MAX_PATH, an answer over a quarter of ANSWER_CACHE_BYTES),
 * -ENOMEM; the cache is unchanged then. Older entries make room. */
int answer_cache_put(struct answer_cache *ac, uint64_t generation, const char *path, size_t path_len, bool json,
		     const char *answer, size_t len);

/* Drops every entry (a document change); also the teardown. */
void answer_cache_clear(struct answer_cache *ac);

#endif
