/* The host API, as Firecracker's /mmds: PUT replaces the document, PATCH
 * merges an RFC 7396 patch into it, GET reads it. One call of our own:
 * PUT /token-key draws a new token key, so every token minted before (in the
 * template a clone was restored from) is refused; the clone step calls it
 * after reseeding the kernel's CRNG, which the new key comes from. Errors are
 * {"fault_message": "..."}, like Firecracker's API. Bodies may be up to 4x
 * --max-size raw (pretty-printed); the compact result must fit --max-size. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "cleanup.h"
#include "document.h"
#include "log.h"
#include "token.h"

static void respond_fault(struct mmds_conn *c, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void respond_fault(struct mmds_conn *c, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *j = json_pack("{s:s}", "fault_message", msg);
	_cleanup_free_ char *body = NULL;
	size_t len = 0;
	if (j && doc_dump(j, &body, &len) == 0)
		conn_respond(c, status, "application/json", NULL, body, len, false);
	else
		conn_respond_text(c, 500, "out of memory", true);
	json_decref(j);
}

static bool expects_continue(const struct http_request *req)
{
	const struct http_header *h = http_find_header(req, "Expect");
	return h && http_list_has_token(h->value, h->value_len, "100-continue");
}

static void control_api_head_ready(struct mmds_conn *c, const struct http_request *req)
{
	if (c->continue_sent || !expects_continue(req))
		return;
	conn_respond_interim(c, 100);
	c->continue_sent = true;
}

static bool control_api_refuse_expectation(struct mmds_conn *c, const struct http_request *req)
{
	if (!expects_continue(req))
		return false;
	c->state = MMDS_CONN_CLOSING; /* the body, if it comes anyway, is not read */
	respond_fault(c, 417, "The MMDS data store limit of %zu bytes is exceeded (Content-Length %zu).",
		      c->s->cfg.max_size, req->content_length);
	return true;
}

/* PUT and PATCH: the new document from the body, or an answer saying why
 * not. Returns the new document (a new reference) or NULL when answered. */
static json_t *document_from_body(struct mmds_conn *c, const struct http_request *req, bool patch)
{
	struct mmds_server *s = c->s;
	json_error_t jerr;
	json_t *v = NULL;

	/* The raw body may be pretty-printed: its bound is looser than the
	 * store's, which applies to the compact form. */
	int r = doc_parse(req->body, req->content_length, patch ? SIZE_MAX : s->cfg.max_size, &v, &jerr);
	if (r == -EINVAL) {
		respond_fault(c, 400, "Invalid JSON: %s (line %d, column %d).", jerr.text, jerr.line, jerr.column);
		return NULL;
	}
	if (r == -EFBIG) {
		respond_fault(c, 413, "The MMDS data store limit of %zu bytes is exceeded.", s->cfg.max_size);
		return NULL;
	}
	if (r < 0) {
		respond_fault(c, 500, "%s", strerror(-r));
		return NULL;
	}
	if (!patch)
		return v;
	json_t *merged = doc_merge_patch(s->doc, v);
	json_decref(v);
	if (!merged) {
		respond_fault(c, 500, "out of memory");
		return NULL;
	}
	if (json_dumpb(merged, NULL, 0, DOC_DUMP_FLAGS) > s->cfg.max_size) {
		json_decref(merged);
		respond_fault(c, 413, "The MMDS patch request doesn't fit.");
		return NULL;
	}
	return merged;
}

/* PUT /token-key: a new key from getrandom(); the old one is gone. */
static void rotate_token_key(struct mmds_conn *c, const struct http_request *req)
{
	struct mmds_server *s = c->s;
	struct token_authority *fresh = NULL;

	if (!http_method_is(req, "PUT") || req->content_length != 0) {
		respond_fault(c, 400, "PUT /token-key takes no body: %.*s with %zu bytes.", (int)req->method_len,
			      req->method, req->content_length);
		return;
	}
	int r = token_authority_new(NULL, 0, &fresh);
	if (r < 0) {
		respond_fault(c, 500, "token key: %s", strerror(-r));
		return;
	}
	token_authority_free(s->tokens);
	s->tokens = fresh;
	log_notice("token key rotated by the host API: every token issued before is refused");
	conn_respond(c, 204, NULL, NULL, NULL, 0, false);
}

static void control_api_handle(struct mmds_conn *c, const struct http_request *req)
{
	struct mmds_server *s = c->s;

	if (req->path_len == 10 && memcmp(req->path, "/token-key", 10) == 0) {
		rotate_token_key(c, req);
		return;
	}
	bool get = http_method_is(req, "GET"), put = http_method_is(req, "PUT"),
	     patch = http_method_is(req, "PATCH");

	if (!(req->path_len == 5 && memcmp(req->path, "/mmds", 5) == 0) || !(get || put || patch)) {
		respond_fault(c, 400, "Invalid request method and/or path: %.*s %.*s.", (int)req->method_len,
			      req->method, (int)req->path_len, req->path);
		return;
	}
	if (get) {
		if (s->doc)
			conn_respond(c, 200, "application/json", NULL, s->doc_json, s->doc_json_len, false);
		else
			conn_respond(c, 200, "application/json", NULL, "null", 4, false);
		return;
	}
	if (patch && !s->doc) {
		respond_fault(c, 400, "The MMDS data store is not initialized.");
		return;
	}
	json_t *v = document_from_body(c, req, patch);
	if (!v)
		return;
	int r = mmds_store_set(s, v, patch ? "control PATCH" : "control PUT");
	if (r < 0)
		respond_fault(c, 500, "%s", strerror(-r));
	else
		conn_respond(c, 204, NULL, NULL, NULL, 0, false);
}

const struct mmds_api mmds_control_api = {
	.handle = control_api_handle,
	.head_ready = control_api_head_ready,
	.refuse_expectation = control_api_refuse_expectation,
};
