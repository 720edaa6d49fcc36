/* Unit tests for mmds-serve's pure parts (TAP): the HTTP request parser,
 * JSON Pointer lookup, RFC 7396 merge patch, IMDS text, tokens. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "document.h"
#include "http.h"
#include "token.h"

static int n_test, n_failed;

static void ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ok(int cond, const char *fmt, ...)
{
	va_list ap;
	printf("%s %d - ", cond ? "ok" : "not ok", ++n_test);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond)
		n_failed++;
}

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

static json_t *load(const char *s)
{
	json_t *v = NULL;
	if (doc_parse(s, strlen(s), 1 << 20, &v, NULL) < 0)
		abort();
	return v;
}

static int dumps_as(const json_t *v, const char *want)
{
	char *s = NULL;
	size_t n;
	int eq = doc_dump(v, &s, &n) == 0 && strcmp(s, want) == 0;
	if (!eq)
		fprintf(stderr, "# got %s, want %s\n", s ? s : "(null)", want);
	free(s);
	return eq;
}

static void test_document(void)
{
	json_t *doc = load("{\"a\":{\"b\":\"c\",\"x/y\":\"slash\",\"t~\":\"tilde\"},\"arr\":[\"z\",{\"k\":\"v\"}],\"n\":1}");
	ok(doc_lookup(doc, "/", 1) == doc && doc_lookup(doc, "", 0) == doc && doc_lookup(doc, "//", 2) == doc, "root paths");
	json_t *v = doc_lookup(doc, "/a/b", 4);
	ok(v && !strcmp(json_string_value(v), "c"), "/a/b");
	ok(doc_lookup(doc, "//a///b/", 8) == v, "slashes collapse, trailing slash tolerated");
	v = doc_lookup(doc, "/a/x~1y", 7);
	ok(v && !strcmp(json_string_value(v), "slash"), "~1 is /");
	v = doc_lookup(doc, "/a/t~0", 6);
	ok(v && !strcmp(json_string_value(v), "tilde"), "~0 is ~");
	v = doc_lookup(doc, "/arr/1/k", 8);
	ok(v && !strcmp(json_string_value(v), "v"), "array index");
	ok(!doc_lookup(doc, "/arr/01", 7) && !doc_lookup(doc, "/arr/2", 6) && !doc_lookup(doc, "/arr/-", 6), "bad indices");
	ok(!doc_lookup(doc, "/a/b/c", 6) && !doc_lookup(doc, "/nope", 5), "missing paths");

	char *out = NULL;
	size_t len;
	ok(doc_render_imds(doc, &out, &len) == 0 && !strcmp(out, "a/\narr\nn"), "IMDS object listing");
	free(out);
	ok(doc_render_imds(doc_lookup(doc, "/a/b", 4), &out, &len) == 0 && !strcmp(out, "c"), "IMDS string raw");
	free(out);
	ok(doc_render_imds(doc_lookup(doc, "/n", 2), &out, &len) == -EOPNOTSUPP, "IMDS number: unsupported");
	ok(doc_render_imds(doc_lookup(doc, "/arr", 4), &out, &len) == -EOPNOTSUPP, "IMDS array: unsupported");
	ok(doc_render_imds(json_null(), &out, &len) == -EOPNOTSUPP, "IMDS null: unsupported");
	json_t *empty = json_object();
	ok(doc_render_imds(empty, &out, &len) == 0 && len == 0, "IMDS empty object: empty body");
	free(out);
	json_decref(empty);
	json_decref(doc);

	json_t *x = NULL;
	ok(doc_parse("{", 1, 100, &x, NULL) == -EINVAL, "invalid JSON refused");
	ok(doc_parse("{\"a\": \"0123456789\"}", 19, 10, &x, NULL) == -EFBIG, "over the size limit refused");
	ok(doc_parse("{\"a\":   \"b\"}", 12, 9, &x, NULL) == 0, "limit applies to the compact form");
	json_decref(x);

	/* RFC 7396 appendix A. */
	static const char *const cases[][3] = {
		{ "{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}" },
		{ "{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}" },
		{ "{\"a\":\"b\"}", "{\"a\":null}", "{}" },
		{ "{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}" },
		{ "{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}" },
		{ "{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}" },
		{ "{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}" },
		{ "{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}" },
		{ "[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]" },
		{ "{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]" },
		{ "{\"a\":\"foo\"}", "null", "null" },
		{ "{\"a\":\"foo\"}", "\"bar\"", "\"bar\"" },
		{ "{\"e\":null}", "{\"a\":1}", "{\"a\":1,\"e\":null}" },
		{ "[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}" },
		{ "{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *t = load(cases[i][0]), *p = load(cases[i][1]);
		json_t *m = doc_merge_patch(t, p);
		ok(m && dumps_as(m, cases[i][2]), "merge patch: %s + %s", cases[i][0], cases[i][1]);
		char *before = NULL;
		size_t blen;
		json_t *again = load(cases[i][0]);
		ok(doc_dump(again, &before, &blen) == 0 && dumps_as(t, before), "merge patch leaves the target alone");
		free(before);
		json_decref(again);
		json_decref(t);
		json_decref(p);
		json_decref(m);
	}
}

static void test_tokens(void)
{
	struct token_authority *ta = NULL, *other = NULL;
	uint8_t key[32] = { 1 }, key2[32] = { 2 };
	char tok[TOKEN_LEN + 1];

	ok(token_authority_new(key, sizeof(key), &ta) == 0 && token_authority_new(key2, sizeof(key2), &other) == 0,
	   "token authorities");
	ok(token_issue(ta, 0, 1000, tok) == -ERANGE && token_issue(ta, 21601, 1000, tok) == -ERANGE, "TTL bounds");
	ok(token_issue(ta, 60, 1000, tok) == 0 && strlen(tok) == TOKEN_LEN, "issue: %s", tok);
	ok(token_valid(ta, tok, TOKEN_LEN, 1000) && token_valid(ta, tok, TOKEN_LEN, 60999), "valid until expiry");
	ok(!token_valid(ta, tok, TOKEN_LEN, 61000), "expired at expiry");
	ok(!token_valid(other, tok, TOKEN_LEN, 1000), "another key refuses it");
	ok(!token_valid(ta, tok, TOKEN_LEN - 1, 1000), "truncated refused");
	int all_refused = 1;
	for (size_t i = 0; i < TOKEN_LEN; i++) {
		char t2[TOKEN_LEN + 1];
		memcpy(t2, tok, sizeof(t2));
		t2[i] = t2[i] == 'A' ? 'B' : 'A';
		if (token_valid(ta, t2, TOKEN_LEN, 1000))
			all_refused = 0;
	}
	ok(all_refused, "every one-character change refused");
	char tok2[TOKEN_LEN + 1];
	ok(token_issue(ta, 60, 1000, tok2) == 0 && strcmp(tok, tok2) != 0, "nonces differ");
	token_authority_free(ta);
	token_authority_free(other);
	/* RFC 4231 test cases 1 and 2 (keys within 32 bytes). */
	uint8_t mac[32], k1[20];
	memset(k1, 0x0b, sizeof(k1));
	static const uint8_t want1[32] = {
		0xb0, 0x34, 0x4c, 0x61, 0xd8, 0xdb, 0x38, 0x53, 0x5c, 0xa8, 0xaf, 0xce, 0xaf, 0x0b, 0xf1, 0x2b,
		0x88, 0x1d, 0xc2, 0x00, 0xc9, 0x83, 0x3d, 0xa7, 0x26, 0xe9, 0x37, 0x6c, 0x2e, 0x32, 0xcf, 0xf7 };
	ok(token_hmac_sha256(k1, sizeof(k1), (const uint8_t *)"Hi There", 8, mac) == 0 && !memcmp(mac, want1, 32),
	   "HMAC-SHA256: RFC 4231 case 1");
	static const uint8_t want2[32] = {
		0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7,
		0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27, 0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43 };
	const char *msg2 = "what do ya want for nothing?";
	ok(token_hmac_sha256((const uint8_t *)"Jefe", 4, (const uint8_t *)msg2, strlen(msg2), mac) == 0 &&
	   !memcmp(mac, want2, 32), "HMAC-SHA256: RFC 4231 case 2");
	ok(token_authority_new(NULL, 0, &ta) == 0, "random key");
	token_authority_free(ta);
}

int main(void)
{
	test_http();
	test_document();
	test_tokens();
	printf("1..%d\n", n_test);
	return n_failed ? 1 : 0;
}
