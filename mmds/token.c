/* See token.h. */
#include "token.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* OpenSSL's SHA-256 block function through its low-level API: it needs no
 * provider or configuration loading, so linked statically it costs a few
 * KiB, where the dynamic libcrypto maps about 3 MiB (see README: RSS). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/crypto.h>
#include <openssl/sha.h>

#define KEY_LEN 32
#define EXPIRY_LEN 8
#define NONCE_LEN 16
#define MAC_LEN 32
#define RAW_LEN (EXPIRY_LEN + NONCE_LEN + MAC_LEN)
#define VERIFIED_SLOTS 16

struct token_authority {
	/* HMAC (RFC 2104) with the key's inner and outer pads absorbed once. */
	SHA256_CTX inner, outer;
	uint8_t key[KEY_LEN];
	int8_t b64url_values[256];
	/* Tokens whose MAC was checked with this key, by the first byte of
	 * their nonce (random, and no secret: the MAC is). A client polls with
	 * the same token, so most checks compare 56 bytes in constant time
	 * instead of hashing two SHA-256 blocks. Dies with the key. */
	struct verified_token {
		bool used;
		uint8_t raw[RAW_LEN];
	} verified[VERIFIED_SLOTS];
};

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void b64url_encode(const uint8_t *in, size_t len, char *out)
{
	size_t o = 0, i = 0;
	for (; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = b64url[v >> 18 & 63];
		out[o++] = b64url[v >> 12 & 63];
		out[o++] = b64url[v >> 6 & 63];
		out[o++] = b64url[v & 63];
	}
	if (len - i == 1) {
		uint32_t v = (uint32_t)in[i] << 16;
		out[o++] = b64url[v >> 18 & 63];
		out[o++] = b64url[v >> 12 & 63];
	} else if (len - i == 2) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[o++] = b64url[v >> 18 & 63];
		out[o++] = b64url[v >> 12 & 63];
		out[o++] = b64url[v >> 6 & 63];
	}
	out[o] = '\0';
}

/* Each character's 6-bit value, -1 where it is not in the alphabet: one
 * load a character, where comparing ranges cost a tenth of a request. */
static void b64url_fill_table(int8_t table[256])
{
	memset(table, -1, 256);
	for (int i = 0; i < 64; i++)
		table[(unsigned char)b64url[i]] = (int8_t)i;
}

/* Decodes exactly TOKEN_LEN characters (18 groups of 4, then 3) into
 * RAW_LEN bytes (18 groups of 3, then 2). */
static int b64url_decode_token(const int8_t table[256], const char *in, uint8_t *out)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t o = 0, i = 0;

	_Static_assert(TOKEN_LEN == 18 * 4 + 3 && RAW_LEN == 18 * 3 + 2, "token layout");
	for (; i + 4 <= TOKEN_LEN; i += 4) {
		int a = table[p[i]], b = table[p[i + 1]], c = table[p[i + 2]], d = table[p[i + 3]];
		if ((a | b | c | d) < 0)
			return -EINVAL;
		uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
		out[o++] = (uint8_t)(v >> 16);
		out[o++] = (uint8_t)(v >> 8);
		out[o++] = (uint8_t)v;
	}
	int a = table[p[i]], b = table[p[i + 1]], c = table[p[i + 2]];
	/* Unused trailing bits must be zero: one token, one spelling. */
	if ((a | b | c) < 0 || (c & 3))
		return -EINVAL;
	uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6;
	out[o++] = (uint8_t)(v >> 16);
	out[o] = (uint8_t)(v >> 8);
	return 0;
}

int token_authority_new(const uint8_t *key, size_t key_len, struct token_authority **out)
{
	struct token_authority *ta = calloc(1, sizeof(*ta));
	if (!ta)
		return -ENOMEM;
	if (key) {
		if (key_len != KEY_LEN) {
			free(ta);
			return -EINVAL;
		}
		memcpy(ta->key, key, KEY_LEN);
	} else if (getrandom(ta->key, KEY_LEN, 0) != KEY_LEN) {
		int r = errno ? -errno : -EIO;
		free(ta);
		return r;
	}

	b64url_fill_table(ta->b64url_values);
	uint8_t pad[SHA256_CBLOCK];
	memset(pad, 0x36, sizeof(pad));
	for (size_t i = 0; i < KEY_LEN; i++)
		pad[i] ^= ta->key[i];
	SHA256_Init(&ta->inner);
	SHA256_Update(&ta->inner, pad, sizeof(pad));
	memset(pad, 0x5c, sizeof(pad));
	for (size_t i = 0; i < KEY_LEN; i++)
		pad[i] ^= ta->key[i];
	SHA256_Init(&ta->outer);
	SHA256_Update(&ta->outer, pad, sizeof(pad));
	OPENSSL_cleanse(pad, sizeof(pad));
	*out = ta;
	return 0;
}

void token_authority_free(struct token_authority *ta)
{
	if (!ta)
		return;
	OPENSSL_cleanse(ta, sizeof(*ta));
	free(ta);
}

static int compute_mac(struct token_authority *ta, const uint8_t *msg, size_t len, uint8_t *mac)
{
	SHA256_CTX c = ta->inner;
	uint8_t inner[SHA256_DIGEST_LENGTH];

	SHA256_Update(&c, msg, len);
	SHA256_Final(inner, &c);
	c = ta->outer;
	SHA256_Update(&c, inner, sizeof(inner));
	SHA256_Final(mac, &c);
	OPENSSL_cleanse(&c, sizeof(c));
	return 0;
}

int token_hmac_sha256(const uint8_t *key, size_t key_len, const uint8_t *msg, size_t len, uint8_t *mac)
{
	struct token_authority *ta = NULL;
	uint8_t k[KEY_LEN] = { 0 };

	/* Test hook for RFC 4231 vectors: keys up to 32 bytes, zero-padded
	 * as HMAC does up to the block size. */
	if (key_len > KEY_LEN)
		return -EINVAL;
	memcpy(k, key, key_len);
	int r = token_authority_new(k, KEY_LEN, &ta);
	if (r < 0)
		return r;
	r = compute_mac(ta, msg, len, mac);
	token_authority_free(ta);
	return r;
}

int token_issue(struct token_authority *ta, unsigned ttl_seconds, uint64_t now_ms, char *out)
{
	uint8_t raw[RAW_LEN];

	if (ttl_seconds < TOKEN_TTL_MIN || ttl_seconds > TOKEN_TTL_MAX)
		return -ERANGE;
	uint64_t expiry = now_ms + (uint64_t)ttl_seconds * 1000;
	for (int i = 0; i < EXPIRY_LEN; i++)
		raw[i] = (uint8_t)(expiry >> (56 - 8 * i));
	if (getrandom(raw + EXPIRY_LEN, NONCE_LEN, 0) != NONCE_LEN)
		return -EIO;
	int r = compute_mac(ta, raw, EXPIRY_LEN + NONCE_LEN, raw + EXPIRY_LEN + NONCE_LEN);
	if (r < 0)
		return r;
	b64url_encode(raw, RAW_LEN, out);
	return 0;
}

bool token_valid(struct token_authority *ta, const char *token, size_t len, uint64_t now_ms)
{
	uint8_t raw[RAW_LEN], mac[MAC_LEN];

	if (len != TOKEN_LEN || b64url_decode_token(ta->b64url_values, token, raw) < 0)
		return false;
	struct verified_token *seen = &ta->verified[raw[EXPIRY_LEN] % VERIFIED_SLOTS];
	if (!seen->used || CRYPTO_memcmp(seen->raw, raw, RAW_LEN) != 0) {
		if (compute_mac(ta, raw, EXPIRY_LEN + NONCE_LEN, mac) < 0)
			return false;
		if (CRYPTO_memcmp(mac, raw + EXPIRY_LEN + NONCE_LEN, MAC_LEN) != 0)
			return false;
		seen->used = true;
		memcpy(seen->raw, raw, RAW_LEN);
	}
	uint64_t expiry = 0;
	for (int i = 0; i < EXPIRY_LEN; i++)
		expiry = expiry << 8 | raw[i];
	return now_ms < expiry;
}

uint64_t token_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
