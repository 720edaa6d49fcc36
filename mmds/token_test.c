/* Unit tests (TAP) for mmds-serve's session tokens (mmds/token.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "token.h"
#include "tap.h"

static void test_tokens(void)
{
	struct token_authority *ta = NULL, *other = NULL;
	uint8_t key[32] = { 1 }, key2[32] = { 2 };
	char tok[TOKEN_LEN + 1];

	ok(token_authority_new(key, sizeof(key), &ta) == 0 && token_authority_new(key2, sizeof(key2), &other) == 0,
	   "token authorities");
	ok(token_issue(ta, 0, 1000, tok) == -ERANGE && token_issue(ta, 21601, 1000, tok) == -ERANGE, "TTL bounds");
	ok(token_issue(ta, 60, 1000, tok) == 0 && strlen(tok) == TOKEN_LEN, "issue: %s", tok);
	ok(token_valid(ta, tok, TOKEN_LEN, 1000) && token_valid(ta, tok, TOKEN_LEN, 60999), "valid until expiry");
	ok(!token_valid(ta, tok, TOKEN_LEN, 61000), "expired at expiry");
	ok(!token_valid(other, tok, TOKEN_LEN, 1000), "another key refuses it");
	ok(!token_valid(ta, tok, TOKEN_LEN - 1, 1000), "truncated refused");
	int all_refused = 1;
	for (size_t i = 0; i < TOKEN_LEN; i++) {
		char t2[TOKEN_LEN + 1];
		memcpy(t2, tok, sizeof(t2));
		t2[i] = t2[i] == 'A' ? 'B' : 'A';
		if (token_valid(ta, t2, TOKEN_LEN, 1000))
			all_refused = 0;
	}
	ok(all_refused, "every one-character change refused");
	char tok2[TOKEN_LEN + 1];
	ok(token_issue(ta, 60, 1000, tok2) == 0 && strcmp(tok, tok2) != 0, "nonces differ");
	/* More tokens than the verified-token slots, each checked twice (the
	 * second time from its slot, unless another took it), in two orders. */
	static char many[40][TOKEN_LEN + 1];
	int all_valid = 1;
	for (int i = 0; i < 40; i++)
		all_valid &= token_issue(ta, 60, 1000, many[i]) == 0;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < 40; i++)
			all_valid &= token_valid(ta, many[pass ? 39 - i : i], TOKEN_LEN, 2000) &&
				     !token_valid(ta, many[i], TOKEN_LEN, 61000) && !token_valid(other, many[i], TOKEN_LEN, 2000);
	ok(all_valid, "40 tokens, each valid until its expiry and only under its key, checked again and again");
	token_authority_free(ta);
	token_authority_free(other);
	/* RFC 4231 test cases 1 and 2 (keys within 32 bytes). */
	uint8_t mac[32], k1[20];
	memset(k1, 0x0b, sizeof(k1));
	static const uint8_t want1[32] = {
		0xb0, 0x34, 0x4c, 0x61, 0xd8, 0xdb, 0x38, 0x53, 0x5c, 0xa8, 0xaf, 0xce, 0xaf, 0x0b, 0xf1, 0x2b,
		0x88, 0x1d, 0xc2, 0x00, 0xc9, 0x83, 0x3d, 0xa7, 0x26, 0xe9, 0x37, 0x6c, 0x2e, 0x32, 0xcf, 0xf7 };
	ok(token_hmac_sha256(k1, sizeof(k1), (const uint8_t *)"Hi There", 8, mac) == 0 && !memcmp(mac, want1, 32),
	   "HMAC-SHA256: RFC 4231 case 1");
	static const uint8_t want2[32] = {
		0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7,
		0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27, 0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43 };
	const char *msg2 = "what do ya want for nothing?";
	ok(token_hmac_sha256((const uint8_t *)"Jefe", 4, (const uint8_t *)msg2, strlen(msg2), mac) == 0 &&
	   !memcmp(mac, want2, 32), "HMAC-SHA256: RFC 4231 case 2");
	ok(token_authority_new(NULL, 0, &ta) == 0, "random key");
	token_authority_free(ta);
}

int main(void)
{
	test_tokens();
	return tap_done();
}
