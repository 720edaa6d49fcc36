/* The clone step's commands; see clone_cmd.c. Each uses link_end(link) as
 * its one deadline, every exchange included. */
#ifndef HOSTLINK_CLONE_CMD_H
#define HOSTLINK_CLONE_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clone.h"
#include "link.h"

/* One request to the clone step; the answer line printed (escaped), to
 * stdout when it is OK (if print), to stderr when it is ERR, with the
 * socket and port. 0 on OK; -EPROTO on ERR; -errno when no answer came
 * (`why` says why; printed unless quiet). */
int clone_call(const struct link *link, const char *what, clone_build_fn build, void *ctx, char *answer,
	       size_t answer_len, bool print, bool quiet, char *why, size_t why_len);

/* `clone [--generation N] [--document FILE|-]`; argv[0] is "clone". Exit code. */
int cmd_clone(const struct link *link, int argc, char **argv);

/* `wait --generation N`: status every 50 ms until the clone is at `want`. Exit code. */
int cmd_wait_generation(const struct link *base, uint64_t want);

#endif
