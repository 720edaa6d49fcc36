#include "args.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "why.h"

/* The list's syntax and checks are common/guarded_ports.c's (shared with
 * vsock-relay, which refuses the same ports). */
int guard_parse_ports(const char *text, struct guard_config *config, char *why, size_t why_len)
{
	return guarded_ports_parse(text, config->ports, &config->n_ports, why, why_len);
}

/* An IPv4 unicast address in dotted-quad form. inet_pton() rejects the
 * shorthand and octal forms inet_aton() would take ("169.254.43518", "0251..."). */
int guard_parse_alias(const char *text, struct guard_config *config, char *why, size_t why_len)
{
	struct in_addr a;
	uint32_t h;

	if (!text || !*text)
		return why_invalid(why, why_len, "--alias: the address is empty");
	if (strlen(text) > 15 || inet_pton(AF_INET, text, &a) != 1)
		return why_invalid(why, why_len, "--alias: '%.64s' is not an IPv4 address in dotted-quad form (e.g. 169.254.169.254)",
			    text);
	h = ntohl(a.s_addr);
	if ((h >> 24) == 0)
		return why_invalid(why, why_len, "--alias: %s is in 0.0.0.0/8, not a usable unicast address", text);
	if ((h >> 24) == 127)
		return why_invalid(why, why_len, "--alias: %s is a loopback address; lo already has 127.0.0.0/8", text);
	if ((h >> 28) == 0xe)
		return why_invalid(why, why_len, "--alias: %s is a multicast address", text);
	if ((h >> 28) == 0xf)
		return why_invalid(why, why_len, "--alias: %s is reserved or broadcast (240.0.0.0/4)", text);
	config->alias = a;
	return 0;
}

static const struct option options[] = {
	{ "ports",   required_argument, NULL, 'p' },
	{ "alias",   required_argument, NULL, 'a' },
	{ "verbose", no_argument,       NULL, 'v' },
	{ "help",    no_argument,       NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Options up to the next non-option word. Returns 1 to go on, 0 when help
 * was asked for, -EINVAL on a bad option. */
static int parse_options(int argc, char **argv, struct guard_args *args,
			 const char **ports, const char **alias, char *why, size_t why_len)
{
	int c;

	while ((c = getopt_long(argc, argv, "+:p:a:vh", options, NULL)) != -1) {
		switch (c) {
		case 'p': *ports = optarg; break;
		case 'a': *alias = optarg; break;
		case 'v': args->verbose = 1; break;
		case 'h': args->command = GUARD_CMD_HELP; return 0;
		case ':':
			return why_invalid(why, why_len, "option '%.64s' needs a value", argv[optind - 1]);
		default:
			if (optopt)
				return why_invalid(why, why_len, "unknown option '-%c'", optopt);
			return why_invalid(why, why_len, "unknown option '%.64s'", argv[optind - 1]);
		}
	}
	return 1;
}

int guard_parse_args(int argc, char **argv, struct guard_args *args, char *why, size_t why_len)
{
	const char *ports = GUARD_DEFAULT_PORTS, *alias = GUARD_DEFAULT_ALIAS;
	int r;

	memset(args, 0, sizeof(*args));
	optind = 0; /* GNU: full reinitialisation, so the parser can run twice */
	opterr = 0;
	r = parse_options(argc, argv, args, &ports, &alias, why, why_len);
	if (r <= 0)
		return r;
	if (optind >= argc)
		return why_invalid(why, why_len, "missing command: install, check or remove");
	if (strcmp(argv[optind], "install") == 0)
		args->command = GUARD_CMD_INSTALL;
	else if (strcmp(argv[optind], "check") == 0)
		args->command = GUARD_CMD_CHECK;
	else if (strcmp(argv[optind], "remove") == 0)
		args->command = GUARD_CMD_REMOVE;
	else if (strcmp(argv[optind], "help") == 0)
		args->command = GUARD_CMD_HELP;
	else
		return why_invalid(why, why_len, "unknown command '%.64s': expected install, check or remove", argv[optind]);
	optind++;

	/* Options may also follow the command: envd-guard install --ports 1,2 */
	r = parse_options(argc, argv, args, &ports, &alias, why, why_len);
	if (r <= 0)
		return r;
	if (optind < argc)
		return why_invalid(why, why_len, "unexpected argument '%.64s'", argv[optind]);

	r = guard_parse_ports(ports, &args->config, why, why_len);
	if (r < 0)
		return r;
	return guard_parse_alias(alias, &args->config, why, why_len);
}
