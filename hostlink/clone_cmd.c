/* The clone step's commands (clone, wait --generation, prepare-snapshot)
 * and the call restore makes: clone.c's exchange, with every answer and
 * failure said on the host's terminal (guest bytes escaped). */
#include "clone_cmd.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "cli.h"
#include "decimal.h"
#include "io.h"
#include "text.h"
#include "vsock_ports.h"

int clone_call(const struct link *link, const char *what, clone_build_fn build, void *ctx, char *answer,
	       size_t answer_len, bool print, bool quiet, char *why, size_t why_len)
{
	int r = clone_exchange(link, build, ctx, answer, answer_len, why, why_len);

	if (r < 0) {
		if (!quiet)
			fprintf(stderr, "e2b-hostlink: %s port %u (clone step): %s: %s\n", link_name(link),
				VSOCK_PORT_CLONE, what, why);
		return r;
	}
	bool okay = strncmp(answer, "OK", 2) == 0 && (answer[2] == ' ' || answer[2] == '\0');
	if (okay && !print)
		return 0;
	FILE *f = okay ? stdout : stderr;
	if (!okay)
		fprintf(f, "e2b-hostlink: %s port %u (clone step): %s refused: ", link_name(link), VSOCK_PORT_CLONE, what);
	text_write(f, answer, strlen(answer), false);
	fputc('\n', f);
	return okay ? 0 : -EPROTO;
}

/* The clone's generation (status request); -errno, said why unless quiet. */
static int clone_generation_now(const struct link *link, uint64_t *generation, bool quiet, char *why,
				size_t why_len)
{
	char status[] = "E2B-CLONE/1 status\n\n", answer[CLONE_ANSWER_MAX];
	int r = clone_call(link, "status", clone_build_fixed, status, answer, sizeof(answer), false, quiet, why,
			   why_len);

	if (r < 0)
		return r;
	if (clone_status_generation(answer, generation) < 0) {
		snprintf(why, why_len, "status: unexpected answer");
		if (!quiet) {
			fprintf(stderr, "e2b-hostlink: %s port %u (clone step): status: unexpected answer: ",
				link_name(link), VSOCK_PORT_CLONE);
			text_write(stderr, answer, strlen(answer), false);
			fputc('\n', stderr);
		}
		return -EPROTO;
	}
	return 0;
}

int cmd_clone(const struct link *link, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "generation", required_argument, NULL, 'g' },
		{ "document", required_argument, NULL, 'd' },
		{ 0 },
	};
	_cleanup_free_ char *doc = NULL;
	const char *doc_path = NULL;
	char answer[CLONE_ANSWER_MAX], why[768];
	uint64_t generation = 0;
	size_t doc_len = 0;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (c == 'g') {
			if (parse_decimal(optarg, 1, INT64_MAX, &generation) < 0) {
				fprintf(stderr, "e2b-hostlink: clone --generation '%s': expected 1-%lld\n", optarg,
					(long long)INT64_MAX);
				return 2;
			}
		} else if (c == 'd')
			doc_path = optarg;
		else
			return 2;
	}
	if (optind != argc) {
		fprintf(stderr, "e2b-hostlink: clone: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (doc_path) {
		r = cli_read_input(doc_path, CLI_MAX_DOCUMENT, &doc, &doc_len);
		const char *name = cli_input_name(doc_path);
		if (r < 0 || doc_len == 0) {
			fprintf(stderr, "e2b-hostlink: clone --document %s: %s\n", name,
				r == -EFBIG ? "too large" : r < 0 ? strerror(-r) : "empty");
			return 1;
		}
	}
	if (generation == 0) {
		uint64_t now;
		if (clone_generation_now(link, &now, false, why, sizeof(why)) < 0)
			return 1;
		generation = now + 1;
	}
	struct clone_step step = { .generation = generation, .document = doc, .document_len = doc_len };
	return clone_call(link, "clone", clone_build_step, &step, answer, sizeof(answer), true, false, why,
			  sizeof(why)) < 0;
}

/* The pool's warmup for a clone: ready once the clone step has taken
 * exactly this generation; a clone that was never stepped stays at the
 * snapshot's (0, prepare-snapshot clears it) and fails. */
int cmd_wait_generation(const struct link *base, uint64_t want)
{
	int64_t deadline = link_end(base);
	int budget_ms = base->timeout_ms;
	char why[768] = "no attempt made";
	uint64_t now = 0;
	unsigned tries = 0;

	do {
		struct link link = *base;
		char attempt[sizeof(why)];
		/* What is left of the budget for each attempt: the guest starts a
		 * process per connection, which can take seconds on a loaded host. */
		link.deadline = deadline;
		tries++;
		int r = clone_generation_now(&link, &now, true, attempt, sizeof(attempt));
		if (r == 0 && now == want) {
			fprintf(stderr, "e2b-hostlink: %s: clone generation %llu after %u tries\n", link_name(base),
				(unsigned long long)want, tries);
			return 0;
		}
		/* An attempt the budget cut short says nothing about the guest:
		 * the last real answer is what the user needs to read. */
		if (r == 0)
			snprintf(why, sizeof(why), "at generation %llu", (unsigned long long)now);
		else if (!(r == -ETIMEDOUT && tries > 1))
			snprintf(why, sizeof(why), "%s", attempt);
		struct timespec pause = { 0, 50 * 1000 * 1000 };
		nanosleep(&pause, NULL);
	} while (io_now_ms() < deadline);
	fprintf(stderr, "e2b-hostlink: %s port %u (clone step): not at generation %llu after %d ms and %u tries "
		"(last: %s): the clone step did not run for this clone\n", link_name(base), VSOCK_PORT_CLONE,
		(unsigned long long)want, budget_ms, tries, why);
	return 1;
}
