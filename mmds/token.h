/* MMDS session tokens: base64url(expiry || nonce || HMAC-SHA256(key, expiry
 * || nonce)). The key is random per start, so tokens are unforgeable and
 * die with the process; expiry is milliseconds of CLOCK_BOOTTIME. The
 * expiry is authenticated, not hidden (it is no secret). */
#ifndef MMDS_TOKEN_H
#define MMDS_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOKEN_TTL_MIN 1
#define TOKEN_TTL_MAX 21600
#define TOKEN_LEN 75 /* base64url of 8 + 16 + 32 bytes, unpadded */

struct token_authority;

/* key may be NULL: a random key from getrandom(). */
int token_authority_new(const uint8_t *key, size_t key_len, struct token_authority **out);
void token_authority_free(struct token_authority *ta);

/* out must hold TOKEN_LEN + 1 bytes. */
int token_issue(struct token_authority *ta, unsigned ttl_seconds, uint64_t now_ms, char *out);
bool token_valid(struct token_authority *ta, const char *token, size_t len, uint64_t now_ms);

uint64_t token_now_ms(void);

/* HMAC-SHA256 with the same code, for known-answer tests. */
int token_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *msg, size_t len, uint8_t *mac);

#endif
