/* Unit tests (TAP) for the clone-step request parser (request.c) and the
 * mmds-serve answer parser (mmds_client.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mmds_client.h"
#include "request.h"
#include "tap.h"

#define HEX32 "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

static long parse(const char *s, struct clone_request *req, char *why)
{
	return clone_request_parse(s, strlen(s), req, why, 256);
}

static void test_good(void)
{
	static struct clone_request req;
	char why[256];
	const char *s = "E2B-CLONE/1 clone\ngeneration 7\nrealtime 1764600000.012345678\nentropy " HEX32 "\n\n";

	ok(parse(s, &req, why) == (long)strlen(s), "a clone step without a document");
	ok(req.kind == CLONE_STEP && req.generation == 7 && req.realtime_sec == 1764600000 &&
		   req.realtime_nsec == 12345678 && req.entropy_len == 32 && req.entropy[31] == 0x1f && !req.document,
	   "its fields");
	s = "E2B-CLONE/1 clone\ngeneration 1\nrealtime 0.000000000\nentropy " HEX32 "\ndocument 2\n\n{}";
	ok(parse(s, &req, why) == (long)strlen(s) && req.document_len == 2 && memcmp(req.document, "{}", 2) == 0,
	   "with a document");
	ok(clone_request_parse(s, strlen(s) - 1, &req, why, sizeof(why)) == 0, "a document still to come: 0");
	ok(clone_request_parse(s, 20, &req, why, sizeof(why)) == 0, "a head still to come: 0");
	ok(parse("E2B-CLONE/1 status\n\n", &req, why) == 20 && req.kind == CLONE_STATUS, "status");
	ok(parse("E2B-CLONE/1 prepare-snapshot\n\n", &req, why) > 0 && req.kind == CLONE_PREPARE_SNAPSHOT,
	   "prepare-snapshot");
}

static void test_bad(void)
{
	static struct clone_request req;
	static const struct {
		const char *in, *why;
	} cases[] = {
		{ "GET / HTTP/1.1\r\n\r\n", "not a clone-step request" },
		{ "E2B-CLONE/1 reboot\n\n", "unknown request" },
		{ "E2B-CLONE/1 clone\ngeneration 0\nrealtime 1.000000000\nentropy " HEX32 "\n\n", "generation '0'" },
		{ "E2B-CLONE/1 clone\ngeneration 9223372036854775808\nrealtime 1.000000000\nentropy " HEX32 "\n\n",
		  "generation '9223372036854775808'" },
		{ "E2B-CLONE/1 clone\ngeneration 07\nrealtime 1.000000000\nentropy " HEX32 "\n\n", "generation '07'" },
		{ "E2B-CLONE/1 clone\ngeneration 1\nrealtime 1.5\nentropy " HEX32 "\n\n", "realtime '1.5'" },
		{ "E2B-CLONE/1 clone\ngeneration 1\nrealtime -1.000000000\nentropy " HEX32 "\n\n", "realtime" },
		{ "E2B-CLONE/1 clone\ngeneration 1\nrealtime 1.000000000\nentropy 0001\n\n", "entropy: 4 hex digits" },
		{ "E2B-CLONE/1 clone\ngeneration 1\nrealtime 1.000000000\nentropy " HEX32 "0\n\n", "entropy: 65" },
		{ "E2B-CLONE/1 clone\ngeneration 1\nrealtime 1.000000000\nentropy "
		  "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1E1f\n\n",
		  "entropy: byte 30" },
		{ "E2B-CLONE/1 clone\nrealtime 1.000000000\ngeneration 1\nentropy " HEX32 "\n\n", "'generation" },
		{ "E2B-CLONE/1 clone\ngeneration 1\nrealtime 1.000000000\nentropy " HEX32 "\nhostname x\n\n",
		  "'document" },
		{ "E2B-CLONE/1 clone\ngeneration 1\nrealtime 1.000000000\nentropy " HEX32 "\ndocument 0\n\n",
		  "document length '0'" },
		{ "E2B-CLONE/1 clone\ngeneration 1\nrealtime 1.000000000\nentropy " HEX32 "\ndocument 204801\n\n",
		  "document length" },
		{ "E2B-CLONE/1 clone\ngeneration 1\nrealtime 1.000000000\nentropy " HEX32 "\ndocument 2\n\n{}x",
		  "1 bytes after the request" },
		{ "E2B-CLONE/1 status\r\n\r\n", "CR or NUL" },
		{ "E2B-CLONE/1 status\ngeneration 1\n\n", "unexpected field" },
		{ "E2B-CLONE/1 clone\ngeneration  1\nrealtime 1.000000000\nentropy " HEX32 "\n\n", "generation ' 1'" },
	};
	char why[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		why[0] = 0;
		long r = parse(cases[i].in, &req, why);
		if (!ok(r == -EINVAL && strstr(why, cases[i].why), "refused: %s", cases[i].why))
			printf("# r=%ld why=%s\n", r, why);
	}
	static char big[CLONE_MAX_HEAD + 8];
	memset(big, 'a', sizeof(big));
	memcpy(big, "E2B-CLONE/1 status\nx", 20);
	ok(clone_request_parse(big, sizeof(big), &req, why, sizeof(why)) == -EINVAL && strstr(why, "over"),
	   "an endless head is refused");
	ok(clone_request_parse("POST", 4, &req, why, sizeof(why)) == -EINVAL, "a wrong start is refused at once");
}

static void test_response(void)
{
	int status = 0;
	const char *a = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n";
	const char *b = "HTTP/1.1 400 Bad Request\r\ncontent-length: 5\r\n\r\nabcde";

	ok(mmds_response_parse(a, strlen(a), &status) == (long)strlen(a) && status == 204, "204");
	ok(mmds_response_parse(b, strlen(b), &status) == (long)strlen(b) && status == 400, "400 with a body");
	ok(mmds_response_parse(b, strlen(b) - 1, &status) == 0, "a body still to come: 0");
	ok(mmds_response_parse("HTTP/1.0 200 OK\r\n\r\n", 19, &status) == -EPROTO, "HTTP/1.0 refused");
	ok(mmds_response_parse("HTTP/1.1 2x4 No\r\n\r\n", 19, &status) == -EPROTO, "a bad status refused");
	const char *c = "HTTP/1.1 200 OK\r\nContent-Length: 99999\r\n\r\n";
	ok(mmds_response_parse(c, strlen(c), &status) == -EPROTO, "an oversized body refused");
}

int main(void)
{
	test_good();
	test_bad();
	test_response();
	return tap_done();
}
