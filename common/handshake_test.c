/* Unit tests (TAP) of the handshake lines: common/handshake.c. */
#include <errno.h>
#include <string.h>

#include "handshake.h"
#include "tap.h"

static char why[128];

static int conn(const char *s, uint32_t *port)
{
	why[0] = 0;
	return handshake_parse_connect(s, strlen(s), 65535, port, why, sizeof(why));
}

static int reply(const char *s, int want, uint32_t *n)
{
	why[0] = 0;
	return handshake_parse_reply(s, strlen(s), want, n, why, sizeof(why));
}

int main(void)
{
	uint32_t p = 0, n = 0;
	char buf[32], big[HANDSHAKE_LINE_MAX + 8];

	ok(conn("CONNECT 8080\n", &p) == 13 && p == 8080, "CONNECT 8080 parses, whole line consumed");
	ok(conn("CONNECT 1\nGET /", &p) == 10 && p == 1, "bytes after the line are left alone");
	ok(conn("CONNECT 65535\n", &p) == 14 && p == 65535, "65535 is the top");
	ok(conn("CONNECT 80", &p) == 0, "no newline yet: incomplete");
	ok(conn("", &p) == 0, "nothing yet: incomplete");
	ok(conn("CONNECT 65536\n", &p) == -ERANGE && strstr(why, "65536 is out of range"), "65536: %s", why);
	ok(conn("CONNECT 0\n", &p) == -ERANGE, "port 0 refused: %s", why);
	ok(conn("CONNECT 99999999999999999999\n", &p) == -ERANGE, "huge number saturates: %s", why);
	ok(conn("CONNECT 080\n", &p) == -EINVAL && strstr(why, "leading zero"), "leading zero: %s", why);
	ok(conn("CONNECT -1\n", &p) == -EINVAL && strstr(why, "not a digit"), "sign: %s", why);
	ok(conn("CONNECT  80\n", &p) == -EINVAL, "two spaces: %s", why);
	ok(conn("CONNECT 80\r\n", &p) == -EINVAL && strstr(why, "0x0d"), "CR refused: %s", why);
	ok(conn("CONNECT \n", &p) == -EINVAL && strstr(why, "missing"), "no port: %s", why);
	ok(conn("connect 80\n", &p) == -EINVAL && strstr(why, "CONNECT"), "lower case verb: %s", why);
	ok(conn("GET / HTTP/1.1\r\n", &p) == -EINVAL, "HTTP instead: %s", why);
	ok(conn("\n", &p) == -EINVAL, "empty line: %s", why);
	memset(big, 'A', sizeof(big));
	big[sizeof(big) - 1] = 0;
	ok(conn(big, &p) == -EINVAL && strstr(why, "no newline"), "overlong line: %s", why);
	ok(handshake_parse_connect("CONNECT 4294967295\n", 19, UINT32_MAX, &p, why, sizeof(why)) == 19 &&
	   p == UINT32_MAX, "vsock ports up to 2^32-1 with max_port");

	ok(reply("OK 1073741824\n", 1, &n) == 14 && n == 1073741824u, "Firecracker's OK <port>");
	ok(reply("OK\n", 0, &n) == 3, "the relay's OK");
	ok(reply("OK\nHTTP/1.1", 0, &n) == 3, "data after OK left alone");
	ok(reply("OK\n", 1, &n) == -EPROTO, "OK without the number where one is due: %s", why);
	ok(reply("OK 5\n", 0, &n) == -EPROTO, "OK with a number from the relay: %s", why);
	ok(reply("ERR port 8888 is refused: Jupyter\n", 0, &n) == -ECONNREFUSED &&
	   strcmp(why, "port 8888 is refused: Jupyter") == 0, "ERR text returned: %s", why);
	ok(reply("ERR a\x01b\n", 0, &n) == -EPROTO, "control bytes in ERR refused");
	ok(reply("HTTP/1.1 400\r\n", 1, &n) == -EPROTO, "not a handshake: %s", why);
	ok(reply("OK 12", 1, &n) == 0, "incomplete reply");
	ok(handshake_format_connect(buf, sizeof(buf), 49983) == 14 && strcmp(buf, "CONNECT 49983\n") == 0,
	   "format CONNECT");
	ok(handshake_format_connect(buf, 8, 49983) == -ENOSPC, "format into a short buffer");
	return tap_done();
}
