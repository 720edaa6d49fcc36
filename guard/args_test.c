/* Unit tests for --ports / --alias / command-line parsing (TAP). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "args.h"
#include "tap.h"

static char why[256];

static int ports(const char *text, struct guard_config *c)
{
	why[0] = '\0';
	return guard_parse_ports(text, c, why, sizeof(why));
}

static int alias(const char *text, struct guard_config *c)
{
	why[0] = '\0';
	return guard_parse_alias(text, c, why, sizeof(why));
}

static int args(struct guard_args *a, int argc, ...)
{
	char *argv[16];
	va_list ap;

	va_start(ap, argc);
	for (int i = 0; i < argc; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	argv[argc] = NULL;
	why[0] = '\0';
	return guard_parse_args(argc, argv, a, why, sizeof(why));
}

static void test_ports(void)
{
	struct guard_config c = { 0 };
	char many[512] = "";

	ok(ports("49983,49999,8888", &c) == 0 && c.n_ports == 3 && c.ports[0] == 49983 &&
	   c.ports[1] == 49999 && c.ports[2] == 8888, "default list parses in order");
	ok(ports("1", &c) == 0 && c.n_ports == 1 && c.ports[0] == 1, "port 1");
	ok(ports("65535", &c) == 0 && c.ports[0] == 65535, "port 65535");

	c.n_ports = 7;
	ok(ports("", &c) == -EINVAL && strstr(why, "empty") && c.n_ports == 7,
	   "empty list rejected, config untouched: %s", why);
	ok(ports(NULL, &c) == -EINVAL, "NULL rejected");
	ok(ports("0", &c) == -EINVAL && strstr(why, "port 0 is out of range"), "0 rejected: %s", why);
	ok(ports("65536", &c) == -EINVAL && strstr(why, "65536 is out of range"), "65536 rejected: %s", why);
	ok(ports("99999999999999999999999", &c) == -EINVAL && strstr(why, "out of range"),
	   "huge number rejected without overflow: %s", why);
	ok(ports("80,abc", &c) == -EINVAL && strstr(why, "'a' is not a digit"), "non-numeric rejected: %s", why);
	ok(ports("80x", &c) == -EINVAL && strstr(why, "'x' is not a digit"), "trailing junk rejected: %s", why);
	ok(ports("-1", &c) == -EINVAL && strstr(why, "'-' is not a digit"), "negative rejected: %s", why);
	ok(ports("+80", &c) == -EINVAL, "sign rejected: %s", why);
	ok(ports(" 80", &c) == -EINVAL && ports("80 ", &c) == -EINVAL && strstr(why, "byte 0x20"),
	   "whitespace rejected: %s", why);
	ok(ports("80,,81", &c) == -EINVAL && strstr(why, "empty entry at position 4"), "empty entry rejected: %s", why);
	ok(ports(",80", &c) == -EINVAL && strstr(why, "empty entry at position 1"), "leading comma rejected: %s", why);
	ok(ports("80,", &c) == -EINVAL && strstr(why, "trailing comma"), "trailing comma rejected: %s", why);
	ok(ports("8888,80,8888", &c) == -EINVAL && strstr(why, "8888 is listed twice"), "duplicate rejected: %s", why);
	ok(ports("080", &c) == -EINVAL && strstr(why, "leading zero"), "leading zero rejected: %s", why);

	for (int i = 1; i <= GUARD_MAX_PORTS; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s%d", i > 1 ? "," : "", 1000 + i);
	ok(ports(many, &c) == 0 && c.n_ports == GUARD_MAX_PORTS, "%d ports accepted", GUARD_MAX_PORTS);
	strcat(many, ",2000");
	ok(ports(many, &c) == -EINVAL && strstr(why, "more than"), "%d ports rejected: %s", GUARD_MAX_PORTS + 1, why);
}

static void test_alias(void)
{
	struct guard_config c = { 0 };

	ok(alias("169.254.169.254", &c) == 0 && c.alias.s_addr == htonl(0xa9fea9fe), "default alias");
	ok(alias("10.0.0.1", &c) == 0 && c.alias.s_addr == htonl(0x0a000001), "other unicast");
	ok(alias("", &c) == -EINVAL && strstr(why, "empty"), "empty rejected: %s", why);
	ok(alias("169.254.169", &c) == -EINVAL && strstr(why, "dotted-quad"), "three parts rejected: %s", why);
	ok(alias("169.254.43518", &c) == -EINVAL, "inet_aton shorthand rejected");
	ok(alias("169.254.169.256", &c) == -EINVAL, "octet 256 rejected");
	ok(alias("0251.0376.0251.0376", &c) == -EINVAL, "octal rejected");
	ok(alias("0xa9.254.169.254", &c) == -EINVAL, "hex rejected");
	ok(alias("169.254.169.254 ", &c) == -EINVAL, "trailing space rejected");
	ok(alias("169.254.169.254/32", &c) == -EINVAL, "prefix rejected");
	ok(alias("fd00:ec2::254", &c) == -EINVAL && strstr(why, "IPv4"), "IPv6 rejected: %s", why);
	ok(alias("hostname", &c) == -EINVAL, "name rejected");
	ok(alias("0.0.0.0", &c) == -EINVAL && strstr(why, "0.0.0.0/8"), "unspecified rejected: %s", why);
	ok(alias("127.0.0.2", &c) == -EINVAL && strstr(why, "loopback"), "loopback rejected: %s", why);
	ok(alias("224.0.0.1", &c) == -EINVAL && strstr(why, "multicast"), "multicast rejected: %s", why);
	ok(alias("255.255.255.255", &c) == -EINVAL && strstr(why, "broadcast"), "broadcast rejected: %s", why);
}

static void test_args(void)
{
	struct guard_args a;

	ok(args(&a, 2, "envd-guard", "install") == 0 && a.command == GUARD_CMD_INSTALL &&
	   a.config.n_ports == 3 && a.config.ports[0] == 49983 && a.config.alias.s_addr == htonl(0xa9fea9fe),
	   "install with defaults");
	ok(args(&a, 4, "envd-guard", "check", "--ports", "22") == 0 && a.command == GUARD_CMD_CHECK &&
	   a.config.n_ports == 1 && a.config.ports[0] == 22, "options after the command");
	ok(args(&a, 4, "envd-guard", "--alias=10.1.2.3", "--ports=1,2", "remove") == 0 &&
	   a.command == GUARD_CMD_REMOVE && a.config.n_ports == 2 && a.config.alias.s_addr == htonl(0x0a010203),
	   "options before the command, --opt=value form");
	ok(args(&a, 1, "envd-guard") == -EINVAL && strstr(why, "missing command"), "no command: %s", why);
	ok(args(&a, 2, "envd-guard", "frobnicate") == -EINVAL && strstr(why, "unknown command 'frobnicate'"),
	   "unknown command: %s", why);
	ok(args(&a, 3, "envd-guard", "install", "--bogus") == -EINVAL && strstr(why, "unknown option '--bogus'"),
	   "unknown option: %s", why);
	ok(args(&a, 3, "envd-guard", "install", "--ports") == -EINVAL && strstr(why, "needs a value"),
	   "missing value: %s", why);
	ok(args(&a, 3, "envd-guard", "install", "extra") == -EINVAL && strstr(why, "unexpected argument 'extra'"),
	   "extra argument: %s", why);
	ok(args(&a, 4, "envd-guard", "install", "--ports", "x") == -EINVAL && strstr(why, "--ports"),
	   "bad ports reach the caller: %s", why);
	ok(args(&a, 4, "envd-guard", "install", "--alias", "1.2.3") == -EINVAL && strstr(why, "--alias"),
	   "bad alias reaches the caller: %s", why);
	ok(args(&a, 2, "envd-guard", "--help") == 0 && a.command == GUARD_CMD_HELP, "--help");
	ok(args(&a, 3, "envd-guard", "install", "-v") == 0 && a.verbose == 1, "-v");
}

int main(void)
{
	test_ports();
	test_alias();
	test_args();
	return tap_done();
}
