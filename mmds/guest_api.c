/* The guest side: Firecracker's MMDS protocol on 169.254.169.254:80.
 * PUT /latest/api/token issues a session token; GET <path> answers the
 * document (or part of it) as JSON or IMDS text; every other method is 405.
 * Messages and statuses are Firecracker's, word for word (mmds/README.md). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "answer_cache.h"
#include "api.h"
#include "cleanup.h"
#include "document.h"
#include "token.h"

static const char *const MSG_NO_TOKEN =
	"No MMDS token provided. Use `X-metadata-token` or `X-aws-ec2-metadata-token` header "
	"to specify the session token.";
static const char *const MSG_BAD_TOKEN = "MMDS token not valid.";
static const char *const MSG_NO_TTL =
	"Token time to live value not found. Use `X-metadata-token-ttl-seconds` or "
	"`X-aws-ec2-metadata-token-ttl-seconds` header to specify the token's lifetime.";
static const char *const MSG_METHOD = "Not allowed HTTP method.";
static const char *const MSG_UNSUPPORTED_TYPE = "Cannot retrieve value. The value has an unsupported type.";
static const char *const MSG_NO_DOCUMENT = "MMDS document not yet available.";
static const char *const PATH_TO_TOKEN = "/latest/api/token";

static const struct http_header *find_either(const struct http_request *req, const char *a, const char *b)
{
	const struct http_header *h = http_find_header(req, a);
	return h ? h : http_find_header(req, b);
}

/* Is the path /latest/api/token once runs of '/' are collapsed (as
 * Firecracker's sanitize_uri does)? */
static bool is_token_path(const char *path, size_t len)
{
	const char *want = PATH_TO_TOKEN;
	for (size_t i = 0; i < len; i++) {
		if (path[i] == '/' && i && path[i - 1] == '/')
			continue;
		if (*want++ != path[i])
			return false;
	}
	return *want == '\0';
}

static void respond_not_found(struct mmds_conn *c, const struct http_request *req)
{
	char msg[64 + 8192];
	snprintf(msg, sizeof(msg), "Resource not found: %.*s.", (int)req->path_len, req->path);
	conn_respond_text(c, 404, msg, !req->keep_alive);
}

/* Like Rust's u32 parse: decimal digits, an optional '+', no overflow. */
static bool parse_ttl(const struct http_header *h, uint64_t *ttl)
{
	size_t i = h->value_len && h->value[0] == '+' ? 1 : 0;
	if (i >= h->value_len)
		return false;
	*ttl = 0;
	for (; i < h->value_len; i++) {
		char ch = h->value[i];
		if (ch < '0' || ch > '9' || (*ttl = *ttl * 10 + (uint64_t)(ch - '0')) > UINT32_MAX)
			return false;
	}
	return true;
}

static void handle_token_put(struct mmds_conn *c, const struct http_request *req)
{
	bool close = !req->keep_alive;
	char msg[1024];

	const struct http_header *xff = http_find_header(req, "X-Forwarded-For");
	if (xff) {
		snprintf(msg, sizeof(msg), "Invalid header. Reason: Unsupported header name. Key: %.*s",
			 (int)xff->name_len, xff->name);
		conn_respond_text(c, 400, msg, close);
		return;
	}
	if (!is_token_path(req->path, req->path_len)) {
		respond_not_found(c, req);
		return;
	}
	const struct http_header *ttl_h =
		find_either(req, "X-metadata-token-ttl-seconds", "X-aws-ec2-metadata-token-ttl-seconds");
	if (!ttl_h) {
		conn_respond_text(c, 400, MSG_NO_TTL, close);
		return;
	}
	uint64_t ttl;
	if (!parse_ttl(ttl_h, &ttl)) {
		snprintf(msg, sizeof(msg), "Invalid header. Reason: Invalid value. Key:%.*s; Value:%.*s",
			 (int)ttl_h->name_len, ttl_h->name, (int)ttl_h->value_len, ttl_h->value);
		conn_respond_text(c, 400, msg, close);
		return;
	}
	char token[TOKEN_LEN + 1];
	int r = token_issue(c->s->tokens, (unsigned)ttl, token_now_ms(), token);
	if (r == -ERANGE) {
		snprintf(msg, sizeof(msg),
			 "Invalid time to live value provided for token: %" PRIu64
			 ". Please provide a value between %d and %d.",
			 ttl, TOKEN_TTL_MIN, TOKEN_TTL_MAX);
		conn_respond_text(c, 400, msg, close);
		return;
	}
	if (r < 0) {
		conn_respond_text(c, 500, "Failed to generate a token.", close);
		return;
	}
	/* Echo the TTL header under the name the client used. */
	char extra[256];
	snprintf(extra, sizeof(extra), "%.*s: %" PRIu64 "\r\n", (int)ttl_h->name_len, ttl_h->name, ttl);
	conn_respond(c, 200, "text/plain", extra, token, TOKEN_LEN, close);
}

static bool wants_json(const struct http_request *req)
{
	const struct http_header *h = http_find_header(req, "Accept");
	return h && h->value_len == 16 && strncasecmp(h->value, "application/json", 16) == 0;
}

/* V2: a valid token is required. V1 (as Firecracker's): a token is
 * optional, and a bad one is only counted there, not refused. */
static bool token_accepted(struct mmds_conn *c, const struct http_request *req)
{
	if (c->s->cfg.v1)
		return true;
	const struct http_header *tok = find_either(req, "X-metadata-token", "X-aws-ec2-metadata-token");
	if (!tok) {
		conn_respond_text(c, 401, MSG_NO_TOKEN, !req->keep_alive);
		return false;
	}
	if (!token_valid(c->s->tokens, tok->value, tok->value_len, token_now_ms())) {
		conn_respond_text(c, 401, MSG_BAD_TOKEN, !req->keep_alive);
		return false;
	}
	return true;
}

/* A 200. One for a keep-alive connection is rendered whole and kept for
 * the next GET of the same path and form from this document version. */
static void respond_ok(struct mmds_conn *c, const struct http_request *req, bool json, const char *body,
		       size_t len)
{
	struct mmds_server *s = c->s;
	const char *type = json ? "application/json" : "text/plain";
	_cleanup_free_ char *answer = NULL;
	size_t answer_len = 0;

	if (req->keep_alive && s->doc && respond_render_ok(type, body, len, &answer, &answer_len) == 0) {
		/* One the cache cannot hold (too big, no memory) is rendered again next time. */
		(void)answer_cache_put(&s->answers, s->doc_generation, req->path, req->path_len, json, answer,
				       answer_len);
		conn_respond_bytes(c, answer, answer_len);
	} else {
		conn_respond(c, 200, type, NULL, body, len, !req->keep_alive);
	}
}

/* Answers one value of the document, as JSON or IMDS text. */
static void respond_value(struct mmds_conn *c, const struct http_request *req, json_t *v, bool json)
{
	struct mmds_server *s = c->s;
	bool close = !req->keep_alive;
	_cleanup_free_ char *body = NULL;
	size_t len = 0;
	int r;

	if (json) {
		if (v == s->doc)
			respond_ok(c, req, json, s->doc_json, s->doc_json_len);
		else if (doc_dump(v, &body, &len) == 0)
			respond_ok(c, req, json, body, len);
		else
			conn_respond_text(c, 500, "Failed to serialize the document.", close);
	} else if ((r = doc_render_imds(v, &body, &len)) == 0) {
		respond_ok(c, req, json, body, len);
	} else if (r == -EOPNOTSUPP) {
		conn_respond_text(c, 501, MSG_UNSUPPORTED_TYPE, close);
	} else {
		conn_respond_text(c, 500, "Failed to render the document.", close);
	}
}

static void handle_metadata_get(struct mmds_conn *c, const struct http_request *req)
{
	struct mmds_server *s = c->s;
	bool json = wants_json(req);

	if (!token_accepted(c, req))
		return;
	if (s->doc && req->keep_alive) {
		const struct cached_answer *a =
			answer_cache_find(&s->answers, s->doc_generation, req->path, req->path_len, json);
		if (a) {
			conn_respond_bytes(c, a->bytes, a->len);
			return;
		}
	}
	json_t *root = json_incref(s->doc);
	if (!root) {
		switch (s->cfg.empty) {
		case MMDS_EMPTY_ERROR:
			conn_respond(c, 503, "text/plain", "Retry-After: 1\r\n", MSG_NO_DOCUMENT,
				     strlen(MSG_NO_DOCUMENT), !req->keep_alive);
			return;
		case MMDS_EMPTY_NULL:
			root = json_null();
			break;
		case MMDS_EMPTY_OBJECT:
			root = json_object();
			break;
		}
	}
	json_t *v = doc_lookup(root, req->path, req->path_len);
	if (v)
		respond_value(c, req, v, json);
	else
		respond_not_found(c, req);
	json_decref(root);
}

static void guest_api_handle(struct mmds_conn *c, const struct http_request *req)
{
	if (http_method_is(req, "GET"))
		handle_metadata_get(c, req);
	else if (http_method_is(req, "PUT"))
		handle_token_put(c, req);
	else
		conn_respond(c, 405, "text/plain", "Allow: GET, PUT\r\n", MSG_METHOD, strlen(MSG_METHOD),
			     !req->keep_alive);
}

const struct mmds_api mmds_guest_api = { .handle = guest_api_handle };
