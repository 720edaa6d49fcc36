/* Unit tests (TAP) of e2b-hostlink's HTTP response head parser: hostlink/http.c. */
#include <errno.h>
#include <string.h>

#include "http.h"
#include "tap.h"

static long head(const char *s, int *status, long long *clen)
{
	*status = 0;
	*clen = -2;
	return http_parse_head(s, strlen(s), status, clen);
}

int main(void)
{
	int st;
	long long cl;
	const char *ok204 = "HTTP/1.1 204 No Content\r\nDate: x\r\n\r\n";

	ok(head(ok204, &st, &cl) == (long)strlen(ok204) && st == 204 && cl == -1, "204 without a body");
	ok(head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", &st, &cl) == 38 && st == 200 && cl == 5,
	   "200 with Content-Length 5");
	ok(head("HTTP/1.0 400 Bad\r\ncontent-length:  12 \r\n\r\n", &st, &cl) > 0 && st == 400 && cl == 12,
	   "HTTP/1.0, lower case name, spaces around the value");
	ok(head("HTTP/1.1 200\r\n\r\n", &st, &cl) > 0 && st == 200, "status line without a reason");
	ok(head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", &st, &cl) == 0, "incomplete head");
	ok(head("HTTP/2 200\r\n\r\n", &st, &cl) == -EPROTO, "HTTP/2 refused");
	ok(head("OK 1234\n\r\n\r\n", &st, &cl) == -EPROTO, "a handshake line is not HTTP");
	ok(head("HTTP/1.1 20x OK\r\n\r\n", &st, &cl) == -EPROTO, "non-digit status");
	ok(head("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", &st, &cl) == -EPROTO, "bad Content-Length");
	ok(head("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", &st, &cl) == -EPROTO,
	   "conflicting Content-Length");
	ok(head("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", &st, &cl) == -EPROTO, "header without a colon");
	ok(head("HTTP/1.1 200 OK\nX: y\r\n\r\n", &st, &cl) == -EPROTO, "bare LF in the head");
	ok(head("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999\r\n\r\n", &st, &cl) == -EPROTO,
	   "Content-Length beyond the limit");
	return tap_done();
}
