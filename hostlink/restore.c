/* `init` (envd's /init from the host, then proof that envd takes the token)
 * and `restore` (the clone step, envd's /health, then the same), each under
 * the command's one deadline. Every input is read and checked before the
 * first connection. One line per step on stdout: "step=NAME ms=N …". */
#include "restore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "cli.h"
#include "clone_cmd.h"
#include "envd.h"
#include "init_args.h"
#include "io.h"
#include "text.h"
#include "vsock_ports.h"

#define CA_BUNDLE_MAX (1024u * 1024u)

/* What init and restore send, read before anything connects. */
struct prepared {
	char *token;
	size_t token_len;
	char *ca_bundle;
	char *document;
	size_t document_len;
};

static void prepared_free(struct prepared *p)
{
	if (p->token)
		explicit_bzero(p->token, p->token_len);
	free(p->token);
	free(p->ca_bundle);
	free(p->document);
}

/* A file (or stdin) that must not be empty; said on stderr, naming the
 * option and file. -errno, never -EINVAL (a usage error to prepare's caller). */
static int read_required(const char *option, const char *path, size_t max, char **out, size_t *len)
{
	int r = cli_read_input(path, max, out, len);

	if (r == 0 && *len == 0)
		r = -ENODATA;
	if (r == -EINVAL)
		r = -EIO;
	if (r < 0)
		fprintf(stderr, "e2b-hostlink: %s %s: %s\n", option, cli_input_name(path),
			r == -EFBIG ? "too large" : r == -ENODATA ? "empty" : strerror(-r));
	return r;
}

/* Every input read and checked; said on stderr. -EINVAL for a value envd
 * cannot take (a usage error), another -errno for a file. */
static int prepare(const struct init_args *a, struct prepared *p)
{
	char why[256];
	int r = read_required("--token-file", a->token_file, INIT_TOKEN_MAX + 2, &p->token, &p->token_len);

	if (r < 0)
		return r;
	r = init_token_check(p->token, &p->token_len, why, sizeof(why));
	if (r < 0) {
		fprintf(stderr, "e2b-hostlink: --token-file %s: %s\n", cli_input_name(a->token_file),
			r == -ENODATA ? "empty (the access token is its one line)" : why);
		return -EBADMSG;
	}
	size_t len;
	if (a->ca_bundle_file) {
		r = read_required("--ca-bundle", a->ca_bundle_file, CA_BUNDLE_MAX, &p->ca_bundle, &len);
		if (r < 0)
			return r;
	}
	if (a->document_file) {
		r = read_required("--document", a->document_file, CLI_MAX_DOCUMENT, &p->document, &p->document_len);
		if (r < 0)
			return r;
	}
	/* The body is built again, with the clock, right before it is sent;
	 * this one only finds a value envd cannot take before anything is
	 * changed in the guest (restore's clone step comes first). */
	struct timespec epoch = { 0, 0 };
	char *body = NULL;
	size_t body_len = 0;
	r = init_body(a, p->token, p->token_len, p->ca_bundle, &epoch, &body, &body_len, why, sizeof(why));
	if (body)
		explicit_bzero(body, body_len);
	free(body);
	if (r < 0)
		fprintf(stderr, "e2b-hostlink: %s: %s\n", a->generation ? "restore" : "init",
			r == -EINVAL ? why : strerror(-r));
	return r;
}

static int64_t step_done(const char *step, int64_t started, const char *detail)
{
	int64_t now = io_now_ms();

	printf("step=%s ms=%lld%s%s\n", step, (long long)(now - started), detail ? " " : "", detail ? detail : "");
	fflush(stdout);
	return now;
}

static int step_failed(const struct link *link, const char *step, const char *why)
{
	fprintf(stderr, "e2b-hostlink: %s port %u (envd): %s: %s\n", link_name(link), VSOCK_PORT_ENVD, step, why);
	return 1;
}

/* POST /init, then the authenticated call: the two steps init and restore share. */
static int init_and_check(const struct link *link, const struct init_args *a, const struct prepared *p,
			  int64_t *started)
{
	struct timespec now;
	char why[1024];
	char *body = NULL;
	size_t len = 0;

	/* The host's clock, read last before sending: envd steps the guest's to it. */
	clock_gettime(CLOCK_REALTIME, &now);
	int r = init_body(a, p->token, p->token_len, p->ca_bundle, &now, &body, &len, why, sizeof(why));
	if (r < 0) {
		fprintf(stderr, "e2b-hostlink: init: %s\n", r == -EINVAL ? why : strerror(-r));
		return r == -EINVAL ? 2 : 1;
	}
	r = envd_post_init(link, body, len, why, sizeof(why));
	explicit_bzero(body, len);
	free(body);
	if (r < 0)
		return step_failed(link, "POST /init", why);
	*started = step_done("init", *started, NULL);
	if (envd_check_token(link, p->token, why, sizeof(why)) < 0)
		return step_failed(link, "the token check (filesystem.Filesystem/Stat with X-Access-Token)", why);
	*started = step_done("check", *started, NULL);
	return 0;
}

int cmd_init(const struct link *link, int argc, char **argv)
{
	struct init_args a;
	struct prepared p = { 0 };
	char why[512];
	int64_t started = io_now_ms();

	if (init_args_parse(argc, argv, false, &a, why, sizeof(why)) < 0) {
		fprintf(stderr, "e2b-hostlink: %s\n", why);
		return 2;
	}
	int r = prepare(&a, &p);
	r = r == -EINVAL ? 2 : r < 0 ? 1 : init_and_check(link, &a, &p, &started);
	prepared_free(&p);
	return r;
}

int cmd_restore(const struct link *link, int argc, char **argv)
{
	struct init_args a;
	struct prepared p = { 0 };
	char why[768], answer[CLONE_ANSWER_MAX], shown[4 * CLONE_ANSWER_MAX];
	int64_t begun = io_now_ms(), started = begun;
	unsigned tries;
	int r;

	if (init_args_parse(argc, argv, true, &a, why, sizeof(why)) < 0) {
		fprintf(stderr, "e2b-hostlink: %s\n", why);
		return 2;
	}
	r = prepare(&a, &p);
	if (r < 0) {
		prepared_free(&p);
		return r == -EINVAL ? 2 : 1;
	}
	struct clone_step step = { .generation = a.generation, .document = p.document,
				   .document_len = p.document_len };
	r = clone_call(link, "clone", clone_build_step, &step, answer, sizeof(answer), false, false, why, sizeof(why));
	if (r < 0)
		goto out;
	/* The guest's own key=value words, escaped, after "OK ". */
	text_escape(answer + 2 + (answer[2] == ' '), strlen(answer + 2 + (answer[2] == ' ')), false, shown,
		    sizeof(shown));
	started = step_done("clone", started, shown);
	r = envd_wait_health(link, VSOCK_PORT_ENVD, &tries, why, sizeof(why));
	if (r < 0) {
		r = step_failed(link, "not ready", why);
		goto out;
	}
	snprintf(shown, sizeof(shown), "tries=%u", tries);
	started = step_done("health", started, shown);
	r = init_and_check(link, &a, &p, &started);
	if (r == 0)
		step_done("restore", begun, NULL);
out:
	prepared_free(&p);
	return r < 0 ? 1 : r;
}
