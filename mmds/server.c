/* mmds-serve's event loop. One thread, non-blocking sockets, sd-event.
 *
 * Every connection is a small state machine: ACTIVE (reading and answering
 * requests in order), CLOSING (answer queued, close once it is written),
 * LINGER (write side shut, reading and discarding until EOF so the client
 * sees the answer rather than a reset). Input is read into one shared buffer
 * and only a partial request is copied into the connection; output is a
 * per-connection buffer. One timer sweeps the connections at the earliest
 * deadline: request deadline from a request's first byte (slowloris), idle
 * deadline between requests, linger deadline after shutdown. */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "cleanup.h"
#include "document.h"
#include "fileio.h"
#include "http.h"
#include "log.h"
#include "token.h"

#define OUT_HIGH_WATER (256 * 1024) /* stop reading a client that does not read */
#define OUT_KEEP_MAX (16 * 1024)    /* free bigger output buffers once drained */
#define MAX_CONTROL_CONNS 16
#define MAX_GUEST_BODY 4096
#define LINGER_USEC (1000 * 1000ULL)
#define ACCEPT_PAUSE_USEC (100 * 1000ULL)
#define TIMER_ACCURACY_USEC (5 * 1000ULL)

enum conn_state { C_ACTIVE, C_CLOSING, C_LINGER };

struct conn {
	struct server *s;
	int fd;
	sd_event_source *io;
	uint32_t events;
	bool control;
	bool peer_eof;
	bool head_method; /* answering a HEAD: headers only */
	enum conn_state state;
	char *in;
	size_t in_len, in_cap;
	char *out;
	size_t out_len, out_off, out_cap;
	uint64_t last_activity;
	uint64_t request_start; /* first byte of the pending request, 0 if none */
	uint64_t linger_start;
	struct conn *prev, *next;
};

struct listener {
	struct server *s;
	bool control;
};

static struct listener listener_guest = { NULL, false }, listener_control = { NULL, true };

static const char *const MSG_NO_TOKEN =
	"No MMDS token provided. Use `X-metadata-token` or `X-aws-ec2-metadata-token` header "
	"to specify the session token.";
static const char *const MSG_BAD_TOKEN = "MMDS token not valid.";
static const char *const MSG_NO_TTL =
	"Token time to live value not found. Use `X-metadata-token-ttl-seconds` or "
	"`X-aws-ec2-metadata-token-ttl-seconds` header to specify the token's lifetime.";
static const char *const MSG_METHOD = "Not allowed HTTP method.";
static const char *const MSG_UNSUPPORTED_TYPE =
	"Cannot retrieve value. The value has an unsupported type.";
static const char *const MSG_INVALID_REQUEST = "Invalid request.";
static const char *const MSG_NO_DOCUMENT = "MMDS document not yet available.";
static const char *const PATH_TO_TOKEN = "/latest/api/token";

static uint64_t now_usec(struct server *s)
{
	uint64_t t = 0;
	sd_event_now(s->event, CLOCK_MONOTONIC, &t);
	return t;
}

/* ---- timers ---------------------------------------------------------- */

static void schedule_sweep(struct server *s, uint64_t when)
{
	if (s->sweep_at && s->sweep_at <= when)
		return;
	s->sweep_at = when;
	sd_event_source_set_time(s->sweep, when);
	sd_event_source_set_enabled(s->sweep, SD_EVENT_ONESHOT);
}

static uint64_t conn_deadline(const struct conn *c)
{
	const struct config *cfg = &c->s->cfg;

	if (c->state == C_LINGER)
		return c->linger_start + LINGER_USEC;
	if (c->out_len > c->out_off)
		return c->last_activity + cfg->idle_timeout_usec;
	if (c->request_start)
		return c->request_start + cfg->request_timeout_usec;
	return c->last_activity + cfg->idle_timeout_usec;
}

/* ---- connection lifetime ---------------------------------------------- */

static void lru_unlink(struct server *s, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		s->lru_head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		s->lru_tail = c->prev;
	c->prev = c->next = NULL;
}

static void lru_append(struct server *s, struct conn *c)
{
	c->prev = s->lru_tail;
	c->next = NULL;
	if (s->lru_tail)
		s->lru_tail->next = c;
	else
		s->lru_head = c;
	s->lru_tail = c;
}

static void conn_free(struct conn *c)
{
	struct server *s = c->s;

	lru_unlink(s, c);
	if (c->control)
		s->n_control--;
	else
		s->n_guest--;
	sd_event_source_disable_unref(c->io);
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);

	if (s->accept_paused) {
		s->accept_paused = false;
		for (int i = 0; i < s->n_listeners; i++)
			sd_event_source_set_enabled(s->listeners[i], SD_EVENT_ON);
	}
}

static void conn_touch(struct conn *c, uint64_t now)
{
	c->last_activity = now;
	if (c->s->lru_tail != c) {
		lru_unlink(c->s, c);
		lru_append(c->s, c);
	}
}

static bool conn_idle(const struct conn *c)
{
	return c->state == C_ACTIVE && c->in_len == 0 && c->out_len == c->out_off &&
	       !c->request_start;
}

/* Frees the guest connection idle the longest; failing that, the one
 * silent the longest (its request deadline would end it anyway). */
static bool evict_one(struct server *s)
{
	struct conn *victim = NULL;

	for (struct conn *c = s->lru_head; c; c = c->next)
		if (!c->control && conn_idle(c)) {
			victim = c;
			break;
		}
	if (!victim)
		for (struct conn *c = s->lru_head; c; c = c->next)
			if (!c->control) {
				victim = c;
				break;
			}
	if (!victim)
		return false;
	log_debug("connection limit %u reached: dropping the oldest idle connection",
		  s->cfg.max_connections);
	conn_free(victim);
	return true;
}

static void conn_update_events(struct conn *c)
{
	uint32_t ev = 0;

	if (c->state == C_LINGER || (c->state == C_ACTIVE && !c->peer_eof &&
				      c->out_len - c->out_off < OUT_HIGH_WATER))
		ev |= EPOLLIN;
	if (c->out_len > c->out_off)
		ev |= EPOLLOUT;
	if (ev != c->events) {
		sd_event_source_set_io_events(c->io, ev);
		c->events = ev;
	}
}

/* ---- output ---------------------------------------------------------- */

static int out_reserve(struct conn *c, size_t more)
{
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_len + more <= c->out_cap)
		return 0;
	size_t cap = c->out_cap ? c->out_cap : 1024;
	while (cap < c->out_len + more)
		cap *= 2;
	char *p = realloc(c->out, cap);
	if (!p)
		return -ENOMEM;
	c->out = p;
	c->out_cap = cap;
	return 0;
}

static void conn_respond(struct conn *c, int status, const char *content_type,
			 const char *extra_headers, const char *body, size_t body_len, bool close)
{
	char head[512];
	int n;

	if (close && c->state == C_ACTIVE)
		c->state = C_CLOSING;
	char length[40] = "";
	if (status != 204) /* RFC 9110 8.6: never on 204 */
		snprintf(length, sizeof(length), "Content-Length: %zu\r\n", body_len);
	n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nServer: mmds-serve\r\n%s%s%s%s%s\r\n",
		     status, http_reason(status), content_type ? "Content-Type: " : "",
		     content_type ? content_type : "", content_type ? "\r\n" : "", length,
		     c->state != C_ACTIVE ? "Connection: close\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(head))
		return;
	size_t extra_len = extra_headers ? strlen(extra_headers) : 0;
	if (out_reserve(c, (size_t)n + extra_len + body_len) < 0) {
		c->state = C_CLOSING;
		return;
	}
	/* The extra headers go before the blank line. */
	memcpy(c->out + c->out_len, head, (size_t)n - 2);
	c->out_len += (size_t)n - 2;
	if (extra_len) {
		memcpy(c->out + c->out_len, extra_headers, extra_len);
		c->out_len += extra_len;
	}
	memcpy(c->out + c->out_len, "\r\n", 2);
	c->out_len += 2;
	if (body_len && !c->head_method) {
		memcpy(c->out + c->out_len, body, body_len);
		c->out_len += body_len;
	}
	c->s->requests_served++;
}

static void respond_text(struct conn *c, int status, const char *msg, bool close)
{
	conn_respond(c, status, "text/plain", NULL, msg, strlen(msg), close);
}

static void respond_fault(struct conn *c, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void respond_fault(struct conn *c, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Firecracker's API answers errors as {"fault_message": "..."}. */
	json_t *j = json_pack("{s:s}", "fault_message", msg);
	char *body = NULL;
	size_t len = 0;
	if (j && doc_dump(j, &body, &len) == 0)
		conn_respond(c, status, "application/json", NULL, body, len, false);
	else
		respond_text(c, 500, "out of memory", true);
	free(body);
	json_decref(j);
}

/* Returns 0 when everything queued is written, -EAGAIN when the rest must
 * wait for EPOLLOUT, another -errno when the connection is dead. */
static int conn_flush(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? -EAGAIN : -errno;
		}
		c->out_off += (size_t)n;
		c->last_activity = now_usec(c->s);
	}
	c->out_off = c->out_len = 0;
	if (c->out_cap > OUT_KEEP_MAX) {
		free(c->out);
		c->out = NULL;
		c->out_cap = 0;
	}
	return 0;
}

/* ---- metadata requests (guest side) ----------------------------------- */

static const struct http_header *find_either(const struct http_request *req, const char *a,
					     const char *b)
{
	const struct http_header *h = http_find_header(req, a);
	return h ? h : http_find_header(req, b);
}

/* Collapses runs of '/' (Firecracker's sanitize_uri). */
static size_t collapse_slashes(const char *in, size_t len, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++)
		if (!(in[i] == '/' && o && out[o - 1] == '/'))
			out[o++] = in[i];
	return o;
}

static void respond_not_found(struct conn *c, const struct http_request *req)
{
	char msg[64 + 8192];
	snprintf(msg, sizeof(msg), "Resource not found: %.*s.", (int)req->path_len, req->path);
	respond_text(c, 404, msg, !req->keep_alive);
}

static void handle_token_put(struct conn *c, const struct http_request *req)
{
	struct server *s = c->s;
	bool close = !req->keep_alive;
	char msg[1024];

	const struct http_header *xff = http_find_header(req, "X-Forwarded-For");
	if (xff) {
		snprintf(msg, sizeof(msg), "Invalid header. Reason: Unsupported header name. Key: %.*s",
			 (int)xff->name_len, xff->name);
		respond_text(c, 400, msg, close);
		return;
	}

	char path[8192];
	size_t plen = collapse_slashes(req->path, req->path_len < sizeof(path) ? req->path_len : 0, path);
	if (plen != strlen(PATH_TO_TOKEN) || memcmp(path, PATH_TO_TOKEN, plen) != 0) {
		respond_not_found(c, req);
		return;
	}

	const struct http_header *ttl_h = find_either(req, "X-metadata-token-ttl-seconds",
						      "X-aws-ec2-metadata-token-ttl-seconds");
	if (!ttl_h) {
		respond_text(c, 400, MSG_NO_TTL, close);
		return;
	}
	/* Like Rust's u32 parse: decimal digits, an optional '+', no overflow. */
	uint64_t ttl = 0;
	size_t i = ttl_h->value_len && ttl_h->value[0] == '+' ? 1 : 0;
	bool ok = i < ttl_h->value_len;
	for (; ok && i < ttl_h->value_len; i++) {
		char ch = ttl_h->value[i];
		if (ch < '0' || ch > '9' || (ttl = ttl * 10 + (uint64_t)(ch - '0')) > UINT32_MAX)
			ok = false;
	}
	if (!ok) {
		snprintf(msg, sizeof(msg), "Invalid header. Reason: Invalid value. Key:%.*s; Value:%.*s",
			 (int)ttl_h->name_len, ttl_h->name, (int)ttl_h->value_len, ttl_h->value);
		respond_text(c, 400, msg, close);
		return;
	}
	char token[TOKEN_LEN + 1];
	int r = token_issue(s->tokens, (unsigned)ttl, token_now_ms(), token);
	if (r == -ERANGE) {
		snprintf(msg, sizeof(msg),
			 "Invalid time to live value provided for token: %" PRIu64
			 ". Please provide a value between %d and %d.",
			 ttl, TOKEN_TTL_MIN, TOKEN_TTL_MAX);
		respond_text(c, 400, msg, close);
		return;
	}
	if (r < 0) {
		respond_text(c, 500, "Failed to generate a token.", close);
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

static void handle_metadata_get(struct conn *c, const struct http_request *req)
{
	struct server *s = c->s;
	bool close = !req->keep_alive;

	const struct http_header *tok = find_either(req, "X-metadata-token", "X-aws-ec2-metadata-token");
	if (!s->cfg.v1) {
		if (!tok) {
			respond_text(c, 401, MSG_NO_TOKEN, close);
			return;
		}
		if (!token_valid(s->tokens, tok->value, tok->value_len, token_now_ms())) {
			respond_text(c, 401, MSG_BAD_TOKEN, close);
			return;
		}
	}
	/* V1 (as Firecracker's): a token is optional, and a bad one is only
	 * counted there, not refused. */

	json_t *root = s->doc;
	if (!root) {
		switch (s->cfg.empty) {
		case EMPTY_ERROR:
			conn_respond(c, 503, "text/plain", "Retry-After: 1\r\n", MSG_NO_DOCUMENT,
				     strlen(MSG_NO_DOCUMENT), close);
			return;
		case EMPTY_NULL:
			root = json_null();
			break;
		case EMPTY_OBJECT:
			root = json_object();
			break;
		}
	}

	json_t *v = doc_lookup(root, req->path, req->path_len);
	char *body = NULL;
	size_t len = 0;
	int r;
	if (!v) {
		respond_not_found(c, req);
	} else if (wants_json(req)) {
		if (v == s->doc) {
			conn_respond(c, 200, "application/json", NULL, s->doc_json, s->doc_json_len, close);
		} else if ((r = doc_dump(v, &body, &len)) == 0) {
			conn_respond(c, 200, "application/json", NULL, body, len, close);
		} else {
			respond_text(c, 500, "Failed to serialize the document.", close);
		}
	} else if ((r = doc_render_imds(v, &body, &len)) == 0) {
		conn_respond(c, 200, "text/plain", NULL, body, len, close);
	} else if (r == -EOPNOTSUPP) {
		respond_text(c, 501, MSG_UNSUPPORTED_TYPE, close);
	} else {
		respond_text(c, 500, "Failed to render the document.", close);
	}
	free(body);
	if (root != s->doc)
		json_decref(root);
}

static bool method_is(const struct http_request *req, const char *m)
{
	size_t n = strlen(m);
	return req->method_len == n && memcmp(req->method, m, n) == 0;
}

static void handle_metadata(struct conn *c, const struct http_request *req)
{
	if (method_is(req, "GET"))
		handle_metadata_get(c, req);
	else if (method_is(req, "PUT"))
		handle_token_put(c, req);
	else
		conn_respond(c, 405, "text/plain", "Allow: GET, PUT\r\n", MSG_METHOD,
			     strlen(MSG_METHOD), !req->keep_alive);
}

/* ---- host API (control socket) ---------------------------------------- */

static void handle_control(struct conn *c, const struct http_request *req)
{
	struct server *s = c->s;
	json_error_t jerr;
	json_t *v = NULL;
	int r;

	if (!(req->path_len == 5 && memcmp(req->path, "/mmds", 5) == 0) ||
	    !(method_is(req, "GET") || method_is(req, "PUT") || method_is(req, "PATCH"))) {
		respond_fault(c, 400, "Invalid request method and/or path: %.*s %.*s.",
			      (int)req->method_len, req->method, (int)req->path_len, req->path);
		return;
	}
	if (method_is(req, "GET")) {
		if (s->doc)
			conn_respond(c, 200, "application/json", NULL, s->doc_json, s->doc_json_len, false);
		else
			conn_respond(c, 200, "application/json", NULL, "null", 4, false);
		return;
	}
	if (method_is(req, "PATCH") && !s->doc) {
		respond_fault(c, 400, "The MMDS data store is not initialized.");
		return;
	}
	/* The raw body may be pretty-printed: its bound is looser than the
	 * store's, which applies to the compact form. */
	r = doc_parse(req->body, req->content_length, method_is(req, "PUT") ? s->cfg.max_size : SIZE_MAX,
		      &v, &jerr);
	if (r == -EINVAL) {
		respond_fault(c, 400, "Invalid JSON: %s (line %d, column %d).", jerr.text, jerr.line,
			      jerr.column);
		return;
	}
	if (r == -EFBIG) {
		respond_fault(c, 413, "The MMDS data store limit of %zu bytes is exceeded.", s->cfg.max_size);
		return;
	}
	if (r < 0) {
		respond_fault(c, 500, "%s", strerror(-r));
		return;
	}
	if (method_is(req, "PATCH")) {
		json_t *merged = doc_merge_patch(s->doc, v);
		json_decref(v);
		if (!merged) {
			respond_fault(c, 500, "out of memory");
			return;
		}
		if (json_dumpb(merged, NULL, 0, DOC_DUMP_FLAGS) > s->cfg.max_size) {
			json_decref(merged);
			respond_fault(c, 413, "The MMDS patch request doesn't fit.");
			return;
		}
		v = merged;
	}
	r = server_set_document(s, v, method_is(req, "PUT") ? "control PUT" : "control PATCH");
	if (r < 0) {
		respond_fault(c, 500, "%s", strerror(-r));
		return;
	}
	conn_respond(c, 204, NULL, NULL, NULL, 0, false);
}

/* ---- input ------------------------------------------------------------- */

static struct http_limits conn_limits(const struct conn *c)
{
	struct http_limits l = {
		.max_head = c->s->cfg.max_head,
		.max_headers = c->s->cfg.max_headers,
		.max_body = c->control ? 4 * c->s->cfg.max_size : MAX_GUEST_BODY,
	};
	return l;
}

static size_t conn_input_cap(const struct conn *c)
{
	struct http_limits l = conn_limits(c);
	return l.max_head + l.max_body;
}

static void respond_parse_error(struct conn *c, int err)
{
	c->head_method = false;
	int status = http_error_status(err);
	const char *msg;

	switch (-err) {
	case HTTP_ERR_HEAD_TOO_LARGE:
		msg = "Request header section is too large.";
		break;
	case HTTP_ERR_TOO_MANY_HEADERS:
		msg = "Too many request headers.";
		break;
	case HTTP_ERR_BODY_TOO_LARGE:
		msg = "Request payload is too large.";
		break;
	case HTTP_ERR_NOT_IMPLEMENTED:
		msg = "Transfer-Encoding is not supported.";
		break;
	case HTTP_ERR_VERSION:
		msg = "Invalid HTTP Version: Unsupported HTTP version.";
		break;
	default:
		msg = MSG_INVALID_REQUEST;
		break;
	}
	/* After a framing error the rest of the stream cannot be trusted. */
	respond_text(c, status, msg, true);
}

/* Answers every complete request at the start of data, in order; returns
 * how many bytes were consumed. Stops at a partial request, when the
 * connection is closing, or when the client is not reading its answers. */
static size_t conn_process(struct conn *c, const char *data, size_t len)
{
	struct http_limits limits = conn_limits(c);
	struct http_request req;
	size_t off = 0;

	while (c->state == C_ACTIVE && off < len && c->out_len - c->out_off < OUT_HIGH_WATER) {
		long r = http_parse_request(data + off, len - off, &limits, &req);
		if (r == 0)
			break;
		if (r < 0) {
			respond_parse_error(c, (int)r);
			return len;
		}
		c->head_method = req.method_len == 4 && memcmp(req.method, "HEAD", 4) == 0;
		if (c->control)
			handle_control(c, &req);
		else
			handle_metadata(c, &req);
		if (!req.keep_alive && c->state == C_ACTIVE)
			c->state = C_CLOSING;
		off += (size_t)r;
	}
	if (c->state != C_ACTIVE)
		return len; /* anything after the last answered request is dropped */
	return off;
}

/* Keeps the unconsumed tail of data (which may be the shared buffer or the
 * connection's own) as the connection's pending input. */
static int conn_keep_input(struct conn *c, const char *data, size_t len, size_t consumed, uint64_t now)
{
	size_t left = len - consumed;

	if (left == 0) {
		c->in_len = 0;
		free(c->in); /* idle connections hold no input buffer */
		c->in = NULL;
		c->in_cap = 0;
		c->request_start = 0;
		return 0;
	}
	if (!c->in) {
		c->in_cap = conn_input_cap(c);
		c->in = malloc(c->in_cap);
		if (!c->in)
			return -ENOMEM;
	}
	memmove(c->in, data + consumed, left);
	c->in_len = left;
	if (consumed || !c->request_start) {
		c->request_start = now;
		schedule_sweep(c->s, now + c->s->cfg.request_timeout_usec);
	}
	return 0;
}

static void conn_after_io(struct conn *c);

static void conn_on_eof(struct conn *c)
{
	c->peer_eof = true;
	c->head_method = false;
	if (c->state == C_ACTIVE && c->in_len) {
		/* A head whose body never fully came: answer like Firecracker. */
		struct http_limits limits = conn_limits(c);
		struct http_request req;
		if (http_parse_request(c->in, c->in_len, &limits, &req) == 0 && req.head_len)
			respond_text(c, 400, MSG_INVALID_REQUEST, true);
	}
	if (c->state == C_ACTIVE)
		c->state = C_CLOSING;
}

static void conn_read(struct conn *c)
{
	struct server *s = c->s;
	size_t cap = conn_input_cap(c);
	uint64_t now = now_usec(s);
	ssize_t n;

	if (c->in_len == 0) {
		n = recv(c->fd, s->scratch, cap, 0);
	} else {
		if (c->in_len >= cap)
			return; /* cannot happen: the parser refuses first */
		n = recv(c->fd, c->in + c->in_len, cap - c->in_len, 0);
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR) {
			c->state = C_CLOSING;
			c->peer_eof = true;
			c->out_off = c->out_len = 0;
		}
		return;
	}
	if (n == 0) {
		conn_on_eof(c);
		return;
	}
	conn_touch(c, now);
	if (!c->request_start) {
		c->request_start = now;
		schedule_sweep(s, now + s->cfg.request_timeout_usec);
	}

	const char *data = c->in_len ? c->in : s->scratch;
	size_t len = c->in_len + (size_t)n;
	size_t consumed = conn_process(c, data, len);
	if (conn_keep_input(c, data, len, consumed, now) < 0)
		c->state = C_CLOSING;
}

/* After reading or writing: flush, move to the next state, re-arm. Frees
 * the connection when it is done. */
static void conn_after_io(struct conn *c)
{
	struct server *s = c->s;

	for (;;) {
		int r = conn_flush(c);
		if (r < 0 && r != -EAGAIN) {
			conn_free(c);
			return;
		}
		if (r == -EAGAIN) {
			schedule_sweep(s, c->last_activity + s->cfg.idle_timeout_usec);
			break;
		}
		/* Everything written. Requests held back by a full output
		 * buffer can go on now. */
		if (c->state == C_ACTIVE && c->in_len) {
			size_t before = c->in_len;
			size_t consumed = conn_process(c, c->in, c->in_len);
			if (conn_keep_input(c, c->in, c->in_len, consumed, now_usec(s)) < 0)
				c->state = C_CLOSING;
			if (consumed && c->out_len)
				continue;
			(void)before;
		}
		break;
	}

	if (c->state == C_CLOSING && c->out_len == c->out_off) {
		if (c->peer_eof) {
			conn_free(c);
			return;
		}
		/* Shut our side and read until the client closes, so that
		 * unread request bytes do not turn the answer into a reset. */
		shutdown(c->fd, SHUT_WR);
		c->state = C_LINGER;
		c->linger_start = now_usec(s);
		schedule_sweep(s, c->linger_start + LINGER_USEC);
	}
	conn_update_events(c);
}

static int on_conn_io(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
	struct conn *c = userdata;

	if (c->state == C_LINGER) {
		char sink[4096];
		ssize_t n = recv(fd, sink, sizeof(sink), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || (revents & EPOLLERR))
			conn_free(c);
		return 0;
	}
	if ((revents & EPOLLERR) || ((revents & EPOLLHUP) && !(revents & EPOLLIN))) {
		conn_free(c);
		return 0;
	}
	if ((revents & EPOLLIN) && c->state == C_ACTIVE)
		conn_read(c);
	conn_after_io(c);
	return 0;
}

static int conn_new(struct server *s, int fd, bool control)
{
	struct conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->s = s;
	c->fd = fd;
	c->control = control;
	c->events = EPOLLIN;
	int r = sd_event_add_io(s->event, &c->io, fd, EPOLLIN, on_conn_io, c);
	if (r < 0) {
		close(fd);
		free(c);
		return r;
	}
	if (control)
		s->n_control++;
	else
		s->n_guest++;
	lru_append(s, c);
	c->last_activity = now_usec(s);
	schedule_sweep(s, c->last_activity + s->cfg.idle_timeout_usec);
	return 0;
}

static void pause_accepting(struct server *s)
{
	s->accept_paused = true;
	for (int i = 0; i < s->n_listeners; i++)
		sd_event_source_set_enabled(s->listeners[i], SD_EVENT_OFF);
	schedule_sweep(s, now_usec(s) + ACCEPT_PAUSE_USEC);
}

static int on_accept(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
	struct listener *l = userdata;
	struct server *s = l->s;

	for (int i = 0; i < 64; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EAGAIN)
				break;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				if (evict_one(s))
					continue;
				log_warning("accept: %s: pausing for %llu ms", strerror(errno),
					    ACCEPT_PAUSE_USEC / 1000);
				pause_accepting(s);
				break;
			}
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO || errno == EPERM)
				continue;
			log_error("accept: %s", strerror(errno));
			break;
		}
		if (l->control) {
			if (s->n_control >= MAX_CONTROL_CONNS) {
				close(cfd);
				continue;
			}
		} else if (s->n_guest >= s->cfg.max_connections && !evict_one(s)) {
			close(cfd);
			continue;
		}
		int r = conn_new(s, cfd, l->control);
		if (r < 0)
			log_error("connection: %s", strerror(-r));
	}
	return 0;
}

/* On a request deadline: a complete head whose body is missing gets
 * Firecracker's "Invalid request." (400); a head that never completed gets
 * 408. Either way the connection ends now: the client had its chance. */
static void conn_timeout(struct conn *c)
{
	c->head_method = false;
	if (c->state == C_ACTIVE && c->request_start && c->out_len == c->out_off) {
		struct http_limits limits = conn_limits(c);
		struct http_request req;
		if (c->in_len && http_parse_request(c->in, c->in_len, &limits, &req) == 0 && req.head_len)
			respond_text(c, 400, MSG_INVALID_REQUEST, true);
		else
			respond_text(c, 408, "Request timed out.", true);
		(void)conn_flush(c);
	}
	conn_free(c);
}

static int on_sweep(sd_event_source *es, uint64_t usec, void *userdata)
{
	struct server *s = userdata;
	uint64_t now = now_usec(s), next = UINT64_MAX;

	s->sweep_at = 0;
	for (struct conn *c = s->lru_head, *n; c; c = n) {
		n = c->next;
		uint64_t d = conn_deadline(c);
		if (d <= now)
			conn_timeout(c);
		else if (d < next)
			next = d;
	}
	if (s->accept_paused) {
		s->accept_paused = false;
		for (int i = 0; i < s->n_listeners; i++)
			sd_event_source_set_enabled(s->listeners[i], SD_EVENT_ON);
	}
	if (next != UINT64_MAX)
		schedule_sweep(s, next);
	return 0;
}

/* ---- document --------------------------------------------------------- */

int server_set_document(struct server *s, json_t *doc, const char *origin)
{
	char *text = NULL;
	size_t len = 0;
	int r = doc_dump(doc, &text, &len);
	if (r < 0) {
		json_decref(doc);
		return r;
	}
	/* One thread: no request sees anything but the old or the new. */
	json_decref(s->doc);
	free(s->doc_json);
	s->doc = doc;
	s->doc_json = text;
	s->doc_json_len = len;
	s->doc_generation++;
	log_info("document %" PRIu64 " from %s: %zu bytes", s->doc_generation, origin, len);
	sd_notifyf(0, "STATUS=Serving document %" PRIu64 " (%zu bytes, from %s)", s->doc_generation,
		   len, origin);
	return 0;
}

int server_load_document_file(struct server *s, int prio)
{
	const char *path = s->cfg.document_path;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;

	if (fd < 0) {
		int r = -errno;
		if (r != -ENOENT)
			log_msg(prio, "%s: %s; keeping the last good document", path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		log_msg(prio, "%s: not a regular file; keeping the last good document", path);
		return -EINVAL;
	}
	/* The compact form must fit max_size; the file may be pretty-printed,
	 * so it may be larger, but not without bound. */
	size_t raw_max = 4 * s->cfg.max_size, len = 0;
	_cleanup_free_ char *buf = NULL;
	int rr = read_small_fd(fd, raw_max, &buf, &len);
	if (rr == -EFBIG) {
		log_msg(prio, "%s: larger than %zu bytes; keeping the last good document", path, raw_max);
		return rr;
	}
	if (rr < 0) {
		log_msg(prio, "%s: read: %s; keeping the last good document", path, strerror(-rr));
		return rr;
	}

	json_error_t jerr;
	json_t *doc = NULL;
	int r = doc_parse(buf, len, s->cfg.max_size, &doc, &jerr);
	if (r == -EINVAL) {
		log_msg(prio, "%s: invalid JSON at line %d, column %d: %s; keeping the last good document",
			path, jerr.line, jerr.column, jerr.text);
		return r;
	}
	if (r == -EFBIG) {
		log_msg(prio, "%s: document over the %zu-byte limit; keeping the last good document", path,
			s->cfg.max_size);
		return r;
	}
	if (r < 0)
		return r;
	return server_set_document(s, doc, path);
}

/* ---- setup ------------------------------------------------------------ */

int server_init(struct server *s, const struct config *cfg, sd_event *event)
{
	int r;

	memset(s, 0, sizeof(*s));
	s->cfg = *cfg;
	s->event = sd_event_ref(event);
	r = token_authority_new(NULL, 0, &s->tokens);
	if (r < 0)
		return r;
	size_t guest = cfg->max_head + MAX_GUEST_BODY, control = cfg->max_head + 4 * cfg->max_size;
	s->scratch_len = guest > control ? guest : control;
	s->scratch = malloc(s->scratch_len);
	if (!s->scratch)
		return -ENOMEM;
	r = sd_event_add_time(event, &s->sweep, CLOCK_MONOTONIC, UINT64_MAX, TIMER_ACCURACY_USEC,
			      on_sweep, s);
	if (r < 0)
		return r;
	listener_guest.s = listener_control.s = s;
	return 0;
}

int server_add_listener(struct server *s, int fd, bool control)
{
	if (s->n_listeners >= (int)(sizeof(s->listeners) / sizeof(s->listeners[0])))
		return -E2BIG;
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	sd_event_source *src = NULL;
	int r = sd_event_add_io(s->event, &src, fd, EPOLLIN, on_accept,
				control ? &listener_control : &listener_guest);
	if (r < 0)
		return r;
	(void)sd_event_source_set_io_fd_own(src, true);
	s->listeners[s->n_listeners++] = src;
	return 0;
}

void server_done(struct server *s)
{
	while (s->lru_head)
		conn_free(s->lru_head);
	for (int i = 0; i < s->n_listeners; i++)
		sd_event_source_disable_unref(s->listeners[i]);
	sd_event_source_disable_unref(s->sweep);
	token_authority_free(s->tokens);
	json_decref(s->doc);
	free(s->doc_json);
	free(s->scratch);
	sd_event_unref(s->event);
	memset(s, 0, sizeof(*s));
}
