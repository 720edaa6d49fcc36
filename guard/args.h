/* Command line of envd-guard: the command and the --ports / --alias values.
 *
 * Parsers return 0 or -errno and, on failure, write one human sentence into
 * `why` (which names the offending value); they never print. */
#ifndef GUARD_ARGS_H
#define GUARD_ARGS_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "guarded_ports.h"

#define GUARD_MAX_PORTS GUARDED_PORTS_MAX
#define GUARD_DEFAULT_PORTS GUARDED_PORTS_DEFAULT
#define GUARD_DEFAULT_ALIAS "169.254.169.254"

enum guard_command {
	GUARD_CMD_NONE,
	GUARD_CMD_INSTALL,
	GUARD_CMD_CHECK,
	GUARD_CMD_REMOVE,
	GUARD_CMD_HELP,
};

/* What install creates, check expects and remove takes out. */
struct guard_config {
	uint16_t ports[GUARD_MAX_PORTS]; /* host order, in the order given */
	size_t n_ports;
	struct in_addr alias;            /* network order */
};

struct guard_args {
	enum guard_command command;
	struct guard_config config;
	int verbose;
};

int guard_parse_ports(const char *text, struct guard_config *config, char *why, size_t why_len);
int guard_parse_alias(const char *text, struct guard_config *config, char *why, size_t why_len);
int guard_parse_args(int argc, char **argv, struct guard_args *args, char *why, size_t why_len);

#endif
