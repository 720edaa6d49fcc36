/* Unit tests for pinfetch's transport policy (fetch_url_allowed in pin/fetch.c). */
#include <string.h>

#include "fetch.h"
#include "tap.h"

struct policy_case {
	const char *url;
	enum fetch_source source;
	bool allow_http;
	const char *from; /* scheme that redirected here, or NULL */
	bool allowed;
	const char *why; /* substring of the refusal */
};

#define C SOURCE_CANONICAL
#define M SOURCE_MIRROR

static const struct policy_case cases[] = {
	{ "https://example.org/envd", C, false, NULL, true, NULL },
	{ "HTTPS://EXAMPLE.ORG/envd", C, false, NULL, true, NULL },
	{ "https://example.org/envd", C, false, "https", true, NULL },
	{ "https://example.org/envd", M, false, "http", true, NULL },
	{ "http://127.0.0.1/x", C, false, NULL, true, NULL },
	{ "http://127.255.255.254:8080/x", C, false, NULL, true, NULL },
	{ "http://localhost/x", C, false, NULL, true, NULL },
	{ "http://LOCALHOST:1/x", M, false, NULL, true, NULL },
	{ "http://[::1]:8080/x", C, false, NULL, true, NULL },
	{ "http://[::1]/x", C, false, "http", true, NULL },
	{ "http://128.0.0.1/x", C, false, NULL, false, "not loopback" },
	{ "http://126.255.255.255/x", C, false, NULL, false, "not loopback" },
	{ "http://10.0.0.1/x", C, false, NULL, false, "--allow-http" },
	{ "http://example.org/x", C, false, NULL, false, "--allow-http" },
	{ "http://localhost.example.org/x", C, false, NULL, false, "not loopback" },
	{ "http://127.0.0.1.nip.example/x", C, false, NULL, false, "not loopback" },
	{ "http://[::2]/x", C, false, NULL, false, "not loopback" },
	{ "http://[::ffff:127.0.0.1]/x", C, false, NULL, false, "not loopback" },
	{ "http://0.0.0.0/x", C, false, NULL, false, "not loopback" },
	{ "http://example.org/x", C, true, NULL, true, NULL },
	{ "http://example.org/x", C, true, "http", true, NULL },
	{ "http://127.0.0.1/x", C, true, "https", false, "from https to plain http" },
	{ "http://example.org/x", C, true, "https", false, "from https to plain http" },
	{ "file:///srv/mirror/sha256/ab", M, false, NULL, true, NULL },
	{ "file://localhost/srv/mirror", M, false, NULL, true, NULL },
	{ "file:///etc/passwd", C, false, NULL, false, "only allowed for --mirror" },
	{ "file:///etc/passwd", M, false, "https", false, "redirect to file://" },
	{ "file:///etc/passwd", M, true, "http", false, "redirect to file://" },
	{ "ftp://127.0.0.1/x", M, true, NULL, false, "not supported" },
	{ "gopher://127.0.0.1/x", C, true, NULL, false, "not supported" },
	{ "scp://127.0.0.1/x", C, true, NULL, false, "not supported" },
	{ "dict://127.0.0.1/x", C, true, NULL, false, "not supported" },
	{ "not a url", C, true, NULL, false, "not a valid URL" },
	{ "", C, true, NULL, false, "not a valid URL" },
	{ "//example.org/x", C, true, NULL, false, "not a valid URL" },
};

int main(void)
{
	fetch_global_init();
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		const struct policy_case *c = &cases[i];
		char why[256] = "";
		int r = fetch_url_allowed(c->url, c->source, c->allow_http, c->from, why, sizeof(why));
		bool pass = c->allowed ? r == 0 : (r < 0 && strstr(why, c->why));

		if (!ok(pass, "%s %s%s%s%s -> %s", c->source == M ? "mirror" : "url", c->url,
			c->allow_http ? " --allow-http" : "", c->from ? " redirected from " : "", c->from ? c->from : "",
			c->allowed ? "allowed" : "refused"))
			printf("# r=%d why=\"%s\"\n", r, why);
	}
	fetch_global_cleanup();
	return tap_done();
}
