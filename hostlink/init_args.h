/* The arguments of `init` and `restore` and the body of envd's POST /init
 * (PostInitJSONBody at envd 0.6.13; hostlink/README.md, "init"). Pure: no
 * I/O, so the unit test (init_args_test.c) covers all of it. */
#ifndef HOSTLINK_INIT_ARGS_H
#define HOSTLINK_INIT_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define INIT_MAX_ENV 256
#define INIT_MAX_MOUNTS 32
/* envd's tokens are 64 hex digits; room for other schemes, not for mistakes. */
#define INIT_TOKEN_MAX 1024

struct init_args {
	const char *token_file;     /* "-": stdin */
	const char *user, *workdir, *lifecycle_id;
	const char *ca_bundle_file; /* read by the caller into the body */
	const char *env[INIT_MAX_ENV];       /* NAME=VALUE, checked */
	size_t n_env;
	const char *mounts[INIT_MAX_MOUNTS]; /* PATH=NFS_TARGET, checked */
	size_t n_mounts;
	/* restore only */
	uint64_t generation;        /* 0: not given */
	const char *document_file;
};

/* Parses `init` (restore false) or `restore` options, argv[0] being the
 * command. Every value is checked before anything connects. -EINVAL with
 * `why` naming the option and the value; pointers stay into argv. */
int init_args_parse(int argc, char **argv, bool restore, struct init_args *a, char *why, size_t why_len);

/* The token as read from its file, in place: one trailing "\n" or "\r\n"
 * dropped; then 1..INIT_TOKEN_MAX bytes of printable ASCII other than '"'
 * and '\\' (envd refuses a token with a JSON escape, and it goes into an
 * HTTP header). -ENODATA when empty, -EINVAL with `why` otherwise. */
int init_token_check(char *token, size_t *len, char *why, size_t why_len);

/* "2026-12-04T16:50:00.123456789Z": RFC 3339 in UTC with nanoseconds, which
 * Go's time.Time parses. 0, or -EOVERFLOW. */
int init_timestamp(const struct timespec *t, char *out, size_t out_len);

/* The JSON body: accessToken, timestamp, envVars, defaultUser,
 * defaultWorkdir, caBundle (the file's text, if given), lifecycleID,
 * volumeMounts. The token is written by this function alone (checked by
 * init_token_check, it needs no escape), so no JSON library holds a copy.
 * Malloc'ed, NUL-terminated; -EINVAL with `why` (a value that is not UTF-8),
 * -ENOMEM. The caller wipes and frees it. */
int init_body(const struct init_args *a, const char *token, size_t token_len, const char *ca_bundle,
	      const struct timespec *now, char **out, size_t *out_len, char *why, size_t why_len);

#endif
