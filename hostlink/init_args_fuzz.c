/* libFuzzer: hostlink/init_args.c's token check (hand-written, on a file's
 * bytes) and the /init body around it. Input: a token file's bytes, then
 * after the first NUL (if any) an --env value. A token the check accepts is
 * printable ASCII without '"' or '\\', and the body built with it is JSON
 * whose accessToken is exactly that token; an env value is in the body
 * exactly, or refused as not UTF-8. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "init_args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t token_len = nul ? (size_t)(nul - data) : size;
	size_t value_len = nul ? size - token_len - 1 : 0;
	char *token = malloc(token_len + 1), *env = malloc(value_len + 3), why[256];

	if (!token || !env)
		goto out;
	memcpy(token, data, token_len);
	token[token_len] = 0;
	memcpy(env, "V=", 2);
	memcpy(env + 2, nul ? nul + 1 : data, value_len);
	env[2 + value_len] = 0;
	size_t len = token_len;
	if (init_token_check(token, &len, why, sizeof(why)) < 0)
		goto out;
	for (size_t i = 0; i < len; i++)
		if (token[i] < 0x21 || token[i] > 0x7e || token[i] == '"' || token[i] == '\\')
			__builtin_trap();
	struct init_args a = { .env = { env }, .n_env = 1 };
	struct timespec now = { 1764867000, 123456789 };
	char *body = NULL;
	size_t body_len = 0;
	if (init_body(&a, token, len, NULL, &now, &body, &body_len, why, sizeof(why)) < 0)
		goto out; /* the value is not UTF-8 (or has a NUL, cut here) */
	json_error_t err;
	json_t *parsed = json_loadb(body, body_len, 0, &err);
	const char *got = parsed ? json_string_value(json_object_get(parsed, "accessToken")) : NULL;
	const char *value = parsed ? json_string_value(json_object_get(json_object_get(parsed, "envVars"), "V")) : NULL;
	if (!got || strcmp(got, token) != 0 || !value || strcmp(value, env + 2) != 0)
		__builtin_trap();
	json_decref(parsed);
	free(body);
out:
	free(token);
	free(env);
	return 0;
}
