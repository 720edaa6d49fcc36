/* Unit tests (TAP) for mmds-serve's HTTP/1.x request parser (mmds/http.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "tap.h"

static const struct http_limits LIMITS = { .max_head = 256, .max_headers = 4, .max_body = 16 };

static long parse(const char *s, struct http_request *req)
{
	return http_parse_request(s, strlen(s), &LIMITS, req);
}

static void test_http(void)
{
	struct http_request req;
	long r;

	const char *get = "GET /latest/meta-data?x=1 HTTP/1.1\r\nHost: a\r\nX-Metadata-Token:  tok \r\n\r\n";
	r = parse(get, &req);
	ok(r == (long)strlen(get), "complete GET consumed whole (%ld)", r);
	ok(req.path_len == 17 && !memcmp(req.path, "/latest/meta-data", 17), "path drops the query");
	ok(req.keep_alive && req.minor_version == 1, "HTTP/1.1 keeps alive by default");
	const struct http_header *h = http_find_header(&req, "x-metadata-token");
	ok(h && h->value_len == 3 && !memcmp(h->value, "tok", 3), "header lookup is case-insensitive, value trimmed");

	for (size_t cut = 0; cut < strlen(get); cut++)
		if (http_parse_request(get, cut, &LIMITS, &req) != 0) {
			ok(0, "prefix of %zu bytes needs more", cut);
			goto prefixes_done;
		}
	ok(1, "every proper prefix needs more");
prefixes_done:

	r = parse("GET / HTTP/1.0\r\n\r\n", &req);
	ok(r > 0 && !req.keep_alive, "HTTP/1.0 closes by default");
	r = parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &req);
	ok(r > 0 && req.keep_alive, "HTTP/1.0 keep-alive on request");
	r = parse("GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n", &req);
	ok(r > 0 && !req.keep_alive, "Connection: close wins");
	r = parse("GET / HTTP/1.1\nHost: x\n\n", &req);
	ok(r > 0, "bare LF line ends accepted");

	const char *two = "PUT /latest/api/token HTTP/1.1\r\nContent-Length: 0\r\n\r\nGET / HTTP/1.1\r\n\r\n";
	r = parse(two, &req);
	ok(r == (long)(strlen(two) - strlen("GET / HTTP/1.1\r\n\r\n")), "pipelined: first request only, Content-Length: 0");

	const char *body = "PUT /mmds HTTP/1.1\r\nContent-Length: 5\r\n\r\nabc";
	r = parse(body, &req);
	ok(r == 0 && req.head_len == strlen(body) - 3, "short body: need more, head complete");
	r = parse("PUT /mmds HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET", &req);
	ok(r > 0 && req.content_length == 3 && !memcmp(req.body, "abc", 3), "body delimited by Content-Length");

	ok(parse("PUT / HTTP/1.1\r\nContent-Length: 17\r\n\r\n", &req) == -HTTP_ERR_BODY_TOO_LARGE, "body over bound: 413");
	ok(parse("PUT / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", &req) == -HTTP_ERR_BODY_TOO_LARGE, "huge Content-Length: 413");
	ok(parse("PUT / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", &req) == -HTTP_ERR_BAD_REQUEST, "conflicting Content-Length: 400");
	ok(parse("PUT / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &req) == -HTTP_ERR_BAD_REQUEST, "negative Content-Length: 400");
	ok(parse("PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &req) == -HTTP_ERR_NOT_IMPLEMENTED, "chunked: 501");
	ok(parse("GET / HTTP/1.1\r\n a: b\r\n\r\n", &req) == -HTTP_ERR_BAD_REQUEST, "obs-fold: 400");
	ok(parse("GET / HTTP/1.1\r\nA : b\r\n\r\n", &req) == -HTTP_ERR_BAD_REQUEST, "space before colon: 400");
	ok(parse("GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", &req) == -HTTP_ERR_BAD_REQUEST, "bare CR in value: 400");
	ok(parse("GET / HTTP/2.0\r\n\r\n", &req) == -HTTP_ERR_VERSION, "HTTP/2.0: 505");
	ok(parse("GET / HTTX/1.1\r\n\r\n", &req) == -HTTP_ERR_BAD_REQUEST, "bad version: 400");
	r = parse("GET http://169.254.169.254/latest?x HTTP/1.1\r\n\r\n", &req);
	ok(r > 0 && req.path_len == 7 && !memcmp(req.path, "/latest", 7), "absolute-form: path after the authority");
	r = parse("GET HTTP://h HTTP/1.1\r\n\r\n", &req);
	ok(r > 0 && req.path_len == 1 && req.path[0] == '/', "absolute-form without a path: /");
	ok(parse("GET ftp://x/ HTTP/1.1\r\n\r\n", &req) == -HTTP_ERR_BAD_REQUEST, "other targets: 400");
	ok(parse("GET  / HTTP/1.1\r\n\r\n", &req) == -HTTP_ERR_BAD_REQUEST, "double space: 400");
	ok(parse("garbage\r\n", &req) == -HTTP_ERR_BAD_REQUEST, "bad request line refused before the head ends");
	ok(parse("GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\ne: 5\r\n", &req) == -HTTP_ERR_TOO_MANY_HEADERS, "too many headers: 431 early");

	char big[400];
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET /", 5);
	ok(http_parse_request(big, sizeof(big), &LIMITS, &req) == -HTTP_ERR_HEAD_TOO_LARGE, "head over bound: 431");
	ok(http_parse_request(big, 255, &LIMITS, &req) == 0, "head under bound: need more");

	ok(http_error_status(-HTTP_ERR_HEAD_TOO_LARGE) == 431 && http_error_status(-HTTP_ERR_BODY_TOO_LARGE) == 413,
	   "error statuses");
	ok(http_list_has_token(" a ,b,, close ", 14, "close") && !http_list_has_token("closed", 6, "close"),
	   "token lists");
}

int main(void)
{
	test_http();
	return tap_done();
}
