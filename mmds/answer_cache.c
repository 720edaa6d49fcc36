/* See answer_cache.h. A linear scan: 32 entries, compared by length
 * first, cost less than any hashing of the path would. */
#include "answer_cache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool slot_matches(const struct cached_answer *a, uint64_t generation, const char *path, size_t path_len,
			 bool json)
{
	return a->bytes && a->generation == generation && a->json == json && a->path_len == path_len &&
	       memcmp(a->path, path, path_len) == 0;
}

const struct cached_answer *answer_cache_find(const struct answer_cache *ac, uint64_t generation, const char *path,
					      size_t path_len, bool json)
{
	for (unsigned i = 0; i < ANSWER_CACHE_ENTRIES; i++)
		if (slot_matches(&ac->slots[i], generation, path, path_len, json))
			return &ac->slots[i];
	return NULL;
}

static void slot_free(struct answer_cache *ac, struct cached_answer *a)
{
	ac->bytes -= a->len;
	free(a->bytes);
	*a = (struct cached_answer){ 0 };
}

/* A free slot, or the next one in turn emptied for the new entry. */
static struct cached_answer *slot_for_new(struct answer_cache *ac)
{
	for (unsigned i = 0; i < ANSWER_CACHE_ENTRIES; i++)
		if (!ac->slots[i].bytes)
			return &ac->slots[i];
	struct cached_answer *a = &ac->slots[ac->next_out];
	ac->next_out = (ac->next_out + 1) % ANSWER_CACHE_ENTRIES;
	slot_free(ac, a);
	return a;
}

int answer_cache_put(struct answer_cache *ac, uint64_t generation, const char *path, size_t path_len, bool json,
		     const char *answer, size_t len)
{
	if (path_len > ANSWER_CACHE_MAX_PATH || len > ANSWER_CACHE_BYTES / 4)
		return -E2BIG;
	char *copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, answer, len);
	for (unsigned i = 0; i < ANSWER_CACHE_ENTRIES; i++) /* a stale twin, or an older generation's */
		if (ac->slots[i].bytes && (ac->slots[i].generation != generation ||
					   slot_matches(&ac->slots[i], generation, path, path_len, json)))
			slot_free(ac, &ac->slots[i]);
	for (unsigned i = 0; ac->bytes + len > ANSWER_CACHE_BYTES && i < ANSWER_CACHE_ENTRIES; i++)
		if (ac->slots[i].bytes)
			slot_free(ac, &ac->slots[i]);
	struct cached_answer *a = slot_for_new(ac);
	*a = (struct cached_answer){ .generation = generation, .json = json, .path_len = path_len, .bytes = copy,
				     .len = len };
	memcpy(a->path, path, path_len);
	ac->bytes += len;
	return 0;
}

void answer_cache_clear(struct answer_cache *ac)
{
	for (unsigned i = 0; i < ANSWER_CACHE_ENTRIES; i++)
		if (ac->slots[i].bytes)
			slot_free(ac, &ac->slots[i]);
	ac->next_out = 0;
}
