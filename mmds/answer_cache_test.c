/* Unit tests (TAP) for the guest answer cache (mmds/answer_cache.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "answer_cache.h"
#include "tap.h"

static bool holds(const struct answer_cache *ac, uint64_t gen, const char *path, bool json, const char *want)
{
	const struct cached_answer *a = answer_cache_find(ac, gen, path, strlen(path), json);
	return a && a->len == strlen(want) && memcmp(a->bytes, want, a->len) == 0;
}

static void test_find_and_generation(void)
{
	struct answer_cache ac = { 0 };

	ok(!answer_cache_find(&ac, 1, "/", 1, true), "empty cache: miss");
	ok(answer_cache_put(&ac, 1, "/", 1, true, "J1", 2) == 0 && answer_cache_put(&ac, 1, "/", 1, false, "T1", 2) == 0,
	   "put JSON and text of /");
	ok(holds(&ac, 1, "/", true, "J1") && holds(&ac, 1, "/", false, "T1"), "each form its own answer");
	ok(!answer_cache_find(&ac, 1, "/a", 2, true) && !answer_cache_find(&ac, 1, "", 0, true),
	   "another path misses (no prefix match)");
	ok(!answer_cache_find(&ac, 2, "/", 1, true) && !answer_cache_find(&ac, 0, "/", 1, true),
	   "never served for another document generation");
	ok(answer_cache_put(&ac, 2, "/", 1, true, "J2", 2) == 0 && holds(&ac, 2, "/", true, "J2") &&
		   !answer_cache_find(&ac, 1, "/", 1, false) && ac.bytes == 2,
	   "an entry of a new generation drops every entry of older ones");
	ok(answer_cache_put(&ac, 2, "/", 1, true, "J2b", 3) == 0 && holds(&ac, 2, "/", true, "J2b") && ac.bytes == 3,
	   "the same key again replaces it");
	answer_cache_clear(&ac);
	ok(!answer_cache_find(&ac, 2, "/", 1, true) && ac.bytes == 0, "clear: every entry gone, no bytes held");
}

static void test_bounds(void)
{
	struct answer_cache ac = { 0 };
	static char big[ANSWER_CACHE_BYTES / 4 + 1];
	char path[ANSWER_CACHE_MAX_PATH + 1];

	memset(path, 'p', sizeof(path));
	ok(answer_cache_put(&ac, 1, path, sizeof(path), true, "x", 1) == -E2BIG && ac.bytes == 0,
	   "a path over %d bytes is not kept", ANSWER_CACHE_MAX_PATH);
	ok(answer_cache_put(&ac, 1, "/big", 4, true, big, sizeof(big)) == -E2BIG && ac.bytes == 0,
	   "an answer over a quarter of the budget is not kept");

	int all_put = 1;
	for (int i = 0; i < ANSWER_CACHE_ENTRIES + 8; i++) {
		char p[32];
		int n = snprintf(p, sizeof(p), "/k%d", i);
		all_put &= answer_cache_put(&ac, 1, p, (size_t)n, true, p, (size_t)n) == 0;
	}
	int held = 0;
	for (int i = 0; i < ANSWER_CACHE_ENTRIES + 8; i++) {
		char p[32];
		snprintf(p, sizeof(p), "/k%d", i);
		held += holds(&ac, 1, p, true, p);
	}
	ok(all_put && held == ANSWER_CACHE_ENTRIES, "at most %d entries (%d held)", ANSWER_CACHE_ENTRIES, held);
	ok(holds(&ac, 1, "/k39", true, "/k39"), "the newest is held");

	answer_cache_clear(&ac);
	int within = 1;
	for (int i = 0; i < 8; i++) { /* each a quarter of the budget */
		char p[32];
		int n = snprintf(p, sizeof(p), "/q%d", i);
		within &= answer_cache_put(&ac, 1, p, (size_t)n, true, big, sizeof(big) - 1) == 0 &&
			  ac.bytes <= ANSWER_CACHE_BYTES;
	}
	ok(within && answer_cache_find(&ac, 1, "/q7", 3, true) != NULL,
	   "bytes stay within %d (%zu held)", ANSWER_CACHE_BYTES, ac.bytes);
	answer_cache_clear(&ac);
}

int main(void)
{
	test_find_and_generation();
	test_bounds();
	return tap_done();
}
