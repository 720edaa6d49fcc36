/* See envd.h. */
#include "envd.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "http.h"
#include "io.h"
#include "text.h"
#include "vsock_ports.h"

/* How much of an answer's body goes into a message (escaped, one line). */
#define SHOWN_BODY 400

/* Each /health attempt's own limit, so a guest that hangs one connection
 * is asked again within the budget. */
#define HEALTH_ATTEMPT_MS 2000

/* One request on a fresh connection to guest 127.0.0.1:port, by link_end(link). */
static int exchange(const struct link *link, uint16_t port, const struct http_request *req,
		    struct http_response *resp, char *why, size_t why_len)
{
	struct link bounded = *link;

	bounded.deadline = link_end(link);
	_cleanup_close_ int fd = link_open_loopback(&bounded, port, why, why_len);
	if (fd < 0)
		return fd;
	return http_exchange(fd, req, bounded.deadline, resp, why, why_len);
}

/* "HTTP 401: <body, escaped and cut>" after `lead`; frees the response. */
static void said(struct http_response *resp, const char *lead, char *why, size_t why_len)
{
	char shown[4 * SHOWN_BODY + 8];
	size_t len = resp->body_len < SHOWN_BODY ? resp->body_len : SHOWN_BODY;

	text_escape(resp->body ? resp->body : "", len, false, shown, sizeof(shown));
	/* envd's JSON ends with a newline: escaped, it says nothing. */
	size_t n = strlen(shown);
	if (n >= 4 && strcmp(shown + n - 4, "\\x0a") == 0)
		shown[n - 4] = '\0';
	snprintf(why, why_len, "%sHTTP %d: %s%s", lead, resp->status, shown, resp->body_len > SHOWN_BODY ? "…" : "");
	http_response_free(resp);
}

/* 0 when the answer is `want`; else `refused` or `other` leads envd's
 * words in `why`: -EACCES for a 401, -EPROTO for any other status. */
static int verdict(struct http_response *resp, int want, const char *refused, const char *other, char *why,
		   size_t why_len)
{
	int status = resp->status;

	if (status == want) {
		http_response_free(resp);
		return 0;
	}
	said(resp, status == 401 ? refused : other, why, why_len);
	return status == 401 ? -EACCES : -EPROTO;
}

int envd_wait_health(const struct link *base, uint16_t port, unsigned *tries, char *why, size_t why_len)
{
	int64_t deadline = link_end(base);
	int want = port == VSOCK_PORT_ENVD ? 204 : 200;
	struct http_request req = { .method = "GET", .path = "/health" };

	snprintf(why, why_len, "no attempt made");
	*tries = 0;
	do {
		struct link link = *base;
		int64_t now = io_now_ms();
		bool clipped = deadline - now < HEALTH_ATTEMPT_MS; /* the budget, not the guest, ends this attempt */
		struct http_response resp;
		char attempt[512];

		link.deadline = clipped ? deadline : now + HEALTH_ATTEMPT_MS;
		link.timeout_ms = (int)(link.deadline - now);
		++*tries;
		int r = exchange(&link, port, &req, &resp, attempt, sizeof(attempt));
		if (r == 0) {
			int status = resp.status;
			http_response_free(&resp);
			if (status == want)
				return 0;
			snprintf(attempt, sizeof(attempt), "GET /health answered %d, not %d", status, want);
		}
		/* An attempt the budget cut short says nothing about the guest:
		 * the last real answer is what the user needs to read. */
		if (!(clipped && r == -ETIMEDOUT && *tries > 1))
			snprintf(why, why_len, "%s", attempt);
		int64_t pause_ms = deadline - io_now_ms() < 50 ? deadline - io_now_ms() : 50;
		struct timespec pause = { 0, pause_ms * 1000 * 1000 };
		if (pause_ms > 0)
			nanosleep(&pause, NULL);
	} while (io_now_ms() < deadline);
	return -ETIMEDOUT;
}

int envd_post_init(const struct link *link, const char *body, size_t body_len, char *why, size_t why_len)
{
	struct http_request req = { .method = "POST", .path = "/init", .body = body, .body_len = body_len };
	struct http_response resp;
	int r = exchange(link, VSOCK_PORT_ENVD, &req, &resp, why, why_len);

	if (r < 0)
		return r;
	return verdict(&resp, 204, "envd refused the access token (it does not hash to the accessTokenHash of the "
				   "clone's metadata document, or envd already holds another token): ", "", why, why_len);
}

int envd_check_token(const struct link *link, const char *token, char *why, size_t why_len)
{
	char headers[128 + 1024];
	struct http_response resp;
	int n = snprintf(headers, sizeof(headers), "Connect-Protocol-Version: 1\r\nX-Access-Token: %s\r\n", token);

	if (n < 0 || (size_t)n >= sizeof(headers))
		return -ENAMETOOLONG;
	/* An empty path is the default workdir, or the default user's home. */
	struct http_request req = { .method = "POST", .path = "/filesystem.Filesystem/Stat", .headers = headers,
				    .body = "{\"path\":\"\"}", .body_len = 11 };
	int r = exchange(link, VSOCK_PORT_ENVD, &req, &resp, why, why_len);
	explicit_bzero(headers, sizeof(headers));
	if (r < 0)
		return r;
	bool user = resp.body && strstr(resp.body, "invalid default user");
	return verdict(&resp, 200, user ? "envd took the token but not the default user: "
					: "envd refused the access token on an authenticated call: ",
		       resp.status == 404 ? "the default workdir is missing in the guest: " : "", why, why_len);
}
