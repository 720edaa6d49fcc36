/* Unit tests (TAP) of hostlink/init_args.c: init/restore options, the token
 * check, the timestamp and the /init body. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "init_args.h"
#include "tap.h"

static char why[512];

static int parse(bool restore, const char *first, ...)
{
	static struct init_args a;
	char *argv[32];
	int argc = 0;
	va_list ap;

	argv[argc++] = (char *)(restore ? "restore" : "init");
	va_start(ap, first);
	for (const char *s = first; s; s = va_arg(ap, const char *))
		argv[argc++] = (char *)s;
	va_end(ap);
	argv[argc] = NULL;
	why[0] = 0;
	return init_args_parse(argc, argv, restore, &a, why, sizeof(why));
}

static bool token_is(const char *in, int want, const char *after)
{
	char buf[64];
	size_t len = strlen(in);

	memcpy(buf, in, len + 1);
	int r = init_token_check(buf, &len, why, sizeof(why));
	return r == want && (!after || (strcmp(buf, after) == 0 && len == strlen(after)));
}

int main(void)
{
	ok(parse(false, "--token-file", "t", NULL) == 0, "init: --token-file alone");
	ok(parse(false, NULL) == -EINVAL && strstr(why, "--token-file FILE (or - for stdin) is required"),
	   "init: no token file: %s", why);
	ok(parse(false, "--token-file", "t", "--env", "NOEQUALS", NULL) == -EINVAL &&
	   strstr(why, "--env 'NOEQUALS': no '='"), "env var without '=' named: %s", why);
	ok(parse(false, "--token-file", "t", "--env", "1X=a", NULL) == -EINVAL && strstr(why, "'1X' is not a variable name"),
	   "bad env name: %s", why);
	ok(parse(false, "--token-file", "t", "--env", "A=1", "--env", "A=2", NULL) == -EINVAL &&
	   strstr(why, "A given twice"), "duplicate env: %s", why);
	ok(parse(false, "--token-file", "t", "--env", "A=", "--env", "AB=x=y", NULL) == 0, "empty value and '=' in value");
	ok(parse(false, "--token-file", "t", "--workdir", "rel", NULL) == -EINVAL && strstr(why, "not an absolute path"),
	   "relative workdir: %s", why);
	ok(parse(false, "--token-file", "t", "--user", "", NULL) == -EINVAL && strstr(why, "--user: empty"),
	   "empty user: %s", why);
	ok(parse(false, "--token-file", "t", "--volume-mount", "data=x:/y", NULL) == -EINVAL &&
	   strstr(why, "expected PATH=NFS_TARGET"), "mount without absolute path: %s", why);
	ok(parse(false, "--token-file", "t", "--generation", "3", NULL) == -EINVAL && strstr(why, "belongs to restore"),
	   "init refuses --generation: %s", why);
	ok(parse(false, "--token-file", "t", "extra", NULL) == -EINVAL && strstr(why, "unexpected argument 'extra'"),
	   "stray argument: %s", why);
	ok(parse(false, "--bogus", "t", NULL) == -EINVAL && strstr(why, "unknown option"), "unknown option: %s", why);
	ok(parse(true, "--token-file", "t", "--generation", "2", NULL) == -EINVAL && strstr(why, "--document FILE are required"),
	   "restore needs a document: %s", why);
	ok(parse(true, "--token-file", "t", "--generation", "0", "--document", "d", NULL) == -EINVAL &&
	   strstr(why, "--generation '0'"), "generation 0: %s", why);
	ok(parse(true, "--generation", "2", "--document", "d", "--token-file", "-", "--user", "user", NULL) == 0,
	   "restore in full");

	ok(token_is("abc123\n", 0, "abc123"), "one trailing newline dropped");
	ok(token_is("abc123\r\n", 0, "abc123"), "CRLF dropped");
	ok(token_is("\n", -ENODATA, NULL), "a newline alone is empty");
	ok(token_is("", -ENODATA, NULL), "empty");
	ok(token_is("ab\ncd\n", -EINVAL, NULL) && strstr(why, "byte 3 is a second line"), "two lines: %s", why);
	ok(token_is("ab\"cd", -EINVAL, NULL), "a quote");
	ok(token_is("ab\\cd", -EINVAL, NULL), "a backslash");
	ok(token_is("ab cd", -EINVAL, NULL) && strstr(why, "a space"), "a space");
	ok(token_is("ab\x1b", -EINVAL, NULL), "a control character");

	char stamp[64];
	struct timespec t = { 1764867000, 5 };
	ok(init_timestamp(&t, stamp, sizeof(stamp)) == 0 && strcmp(stamp, "2025-12-04T16:50:00.000000005Z") == 0,
	   "timestamp RFC 3339 UTC with nanoseconds: %s", stamp);

	struct init_args a = { .user = "user", .workdir = "/home/user", .lifecycle_id = "life-1",
			       .env = { "A=1", "EMPTY=", "EQ=x=y" }, .n_env = 3,
			       .mounts = { "/mnt/data=nfs.example:/export" }, .n_mounts = 1 };
	char *body = NULL;
	size_t len = 0;
	int r = init_body(&a, "tok-0123", 8, "-----BEGIN CERTIFICATE-----\n", &t, &body, &len, why, sizeof(why));
	const char *want = "{\"accessToken\":\"tok-0123\",\"caBundle\":\"-----BEGIN CERTIFICATE-----\\n\","
			   "\"defaultUser\":\"user\",\"defaultWorkdir\":\"/home/user\","
			   "\"envVars\":{\"A\":\"1\",\"EMPTY\":\"\",\"EQ\":\"x=y\"},\"lifecycleID\":\"life-1\","
			   "\"timestamp\":\"2025-12-04T16:50:00.000000005Z\","
			   "\"volumeMounts\":[{\"nfs_target\":\"nfs.example:/export\",\"path\":\"/mnt/data\"}]}";
	ok(r == 0 && len == strlen(body) && strcmp(body, want) == 0, "the whole body: %s", body ? body : why);
	json_error_t err;
	json_t *parsed = body ? json_loadb(body, len, 0, &err) : NULL;
	ok(parsed && json_is_object(parsed), "it is JSON");
	json_decref(parsed);
	free(body);

	struct init_args bare = { 0 };
	r = init_body(&bare, "t", 1, NULL, &t, &body, &len, why, sizeof(why));
	ok(r == 0 && strcmp(body, "{\"accessToken\":\"t\",\"timestamp\":\"2025-12-04T16:50:00.000000005Z\"}") == 0,
	   "token and timestamp only: %s", body);
	free(body);

	struct init_args bad = { .user = "\xff\xfe" };
	ok(init_body(&bad, "t", 1, NULL, &t, &body, &len, why, sizeof(why)) == -EINVAL &&
	   strstr(why, "--user: not valid UTF-8"), "a user that is not UTF-8: %s", why);
	struct init_args badenv = { .env = { "A=\xc3" }, .n_env = 1 };
	ok(init_body(&badenv, "t", 1, NULL, &t, &body, &len, why, sizeof(why)) == -EINVAL &&
	   strstr(why, "--env A: value is not valid UTF-8"), "an env value that is not UTF-8: %s", why);
	return tap_done();
}
