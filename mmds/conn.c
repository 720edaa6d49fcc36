/* One connection's life: one thread, non-blocking sockets, sd-event, every
 * connection in one epoll set of the server's (readiness, below).
 *
 * Every connection is a small state machine (conn.h): ACTIVE, CLOSING,
 * LINGER. Input is read into one shared buffer and only a partial request
 * is copied into the connection; output is a per-connection buffer. Two
 * bounds keep memory flat: a client that does not read stops being read
 * once OUT_HIGH_WATER is queued for it, and all queued output together stays
 * under cfg.max_queued_output by dropping the connections holding the most.
 * Each connection has one deadline (conn_deadline): the request deadline
 * from a request's first byte (slowloris), the idle deadline between
 * requests, the linger deadline after shutdown; server.c's sweep ends the
 * connections past theirs. */
#include "conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api.h"
#include "conn_life.h"
#include "log.h"
#include "loop.h"

#define OUT_HIGH_WATER (256 * 1024) /* stop reading a client that does not read */
#define OUT_KEEP_MAX (16 * 1024)    /* free bigger output buffers once drained */
#define MAX_GUEST_BODY 4096
#define LINGER_USEC (1000 * 1000ULL)
#define READY_BATCH 64 /* connections answered per wake-up */

/* ---- deadlines ---------------------------------------------------------- */

uint64_t conn_deadline(const struct mmds_conn *c)
{
	const struct mmds_config *cfg = &c->s->cfg;

	if (c->state == MMDS_CONN_LINGER)
		return c->linger_start + LINGER_USEC;
	if (conn_out_pending(c) == 0 && c->request_start)
		return c->request_start + cfg->request_timeout_usec;
	return c->last_activity + cfg->idle_timeout_usec;
}

/* ---- connection lifetime ----------------------------------------------- */

static void lru_unlink(struct mmds_server *s, struct mmds_conn *c)
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

static void lru_append(struct mmds_server *s, struct mmds_conn *c)
{
	c->prev = s->lru_tail;
	c->next = NULL;
	if (s->lru_tail)
		s->lru_tail->next = c;
	else
		s->lru_head = c;
	s->lru_tail = c;
}

void conn_free(struct mmds_conn *c)
{
	struct mmds_server *s = c->s;

	lru_unlink(s, c);
	if (conn_is_control(c))
		s->n_control--;
	else
		s->n_guest--;
	close(c->fd); /* never duplicated: this also takes it out of the epoll set */
	free(c->in);
	conn_out_release(c);
	if (s->dispatching) { /* later events of this batch may name it */
		c->dead = true;
		c->next = s->dead;
		s->dead = c;
	} else {
		free(c);
	}
	if (s->accept_paused)
		loop_set_accepting(s, true);
}

static void conn_touch(struct mmds_conn *c, uint64_t now)
{
	c->last_activity = now;
	if (c->s->lru_tail != c) {
		lru_unlink(c->s, c);
		lru_append(c->s, c);
	}
}

bool conn_idle(const struct mmds_conn *c)
{
	return c->state == MMDS_CONN_ACTIVE && c->in_len == 0 && conn_out_pending(c) == 0 && !c->request_start;
}

/* Over the budget for all queued output: drops the connections holding the
 * most until under it. Only connections with unsent output are chosen:
 * never an idle one (at most a small drained buffer, OUT_KEEP_MAX). Returns true when `current` itself was dropped. */
static bool shed_greediest(struct mmds_server *s, struct mmds_conn *current)
{
	bool dropped_current = false;

	while (s->queued_output > s->cfg.max_queued_output) {
		struct mmds_conn *victim = NULL;
		for (struct mmds_conn *c = s->lru_head; c; c = c->next)
			if (conn_out_pending(c) && (!victim || c->out_cap > victim->out_cap))
				victim = c;
		if (!victim)
			break;
		log_notice("queued output over %zu bytes: dropping a connection holding %zu unsent bytes",
			   s->cfg.max_queued_output, conn_out_pending(victim));
		dropped_current |= victim == current;
		conn_free(victim);
	}
	return dropped_current;
}

static void conn_update_events(struct mmds_conn *c)
{
	uint32_t ev = 0;

	if (c->state == MMDS_CONN_LINGER ||
	    (c->state == MMDS_CONN_ACTIVE && !c->peer_eof && conn_out_pending(c) < OUT_HIGH_WATER))
		ev |= EPOLLIN;
	if (conn_out_pending(c))
		ev |= EPOLLOUT;
	if (ev != c->events) {
		struct epoll_event e = { .events = ev, .data.ptr = c };
		if (epoll_ctl(c->s->conn_epoll, EPOLL_CTL_MOD, c->fd, &e) < 0) /* cannot happen: it is in the set */
			log_warning("connection fd %d: epoll_ctl: %s", c->fd, strerror(errno));
		c->events = ev;
	}
}

/* ---- output ------------------------------------------------------------ */

/* Returns 0 when everything queued is written, -EAGAIN when the rest must
 * wait for EPOLLOUT, another -errno when the connection is dead. */
static int conn_flush(struct mmds_conn *c)
{
	while (conn_out_pending(c)) {
		ssize_t n = send(c->fd, c->out + c->out_off, conn_out_pending(c), MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c->out_off += (size_t)n;
		c->last_activity = loop_now_usec(c->s);
	}
	c->out_off = c->out_len = 0;
	if (c->out_cap > OUT_KEEP_MAX)
		conn_out_release(c);
	return 0;
}

/* ---- input ------------------------------------------------------------- */

/* The largest request body a connection may send: to the host API a
 * document pretty-printed up to 4x --max-size (control_api.c), to MMDS
 * MAX_GUEST_BODY. */
static size_t max_body(const struct mmds_config *cfg, bool control)
{
	return control ? 4 * cfg->max_size : MAX_GUEST_BODY;
}

static struct http_limits conn_limits(const struct mmds_conn *c)
{
	struct http_limits l = {
		.max_head = c->s->cfg.max_head,
		.max_headers = c->s->cfg.max_headers,
		.max_body = max_body(&c->s->cfg, conn_is_control(c)),
	};
	return l;
}

static size_t conn_input_cap(const struct mmds_conn *c)
{
	struct http_limits l = conn_limits(c);
	return l.max_head + l.max_body;
}

/* The pending request never completed: at the request deadline or at the
 * client's half-close. A complete head whose body is missing gets
 * Firecracker's "Invalid request." (400); a head still incomplete at the
 * deadline gets 408; at a half-close it gets nothing. */
static void conn_answer_incomplete(struct mmds_conn *c, bool deadline)
{
	struct http_limits limits = conn_limits(c);
	struct http_request req;

	c->head_method = false;
	if (c->state != MMDS_CONN_ACTIVE || conn_out_pending(c))
		return;
	if (c->in_len && http_parse_request(c->in, c->in_len, &limits, &req) == 0 && req.head_len)
		conn_respond_text(c, 400, "Invalid request.", true);
	else if (deadline && c->request_start)
		conn_respond_text(c, 408, "Request timed out.", true);
}

/* Answers every complete request at the start of data, in order; returns
 * how many bytes were consumed. Stops at a partial request, when the
 * connection is closing, or when the client is not reading its answers. */
static size_t conn_process(struct mmds_conn *c, const char *data, size_t len)
{
	struct http_limits limits = conn_limits(c);
	struct http_request req;
	size_t off = 0;

	while (c->state == MMDS_CONN_ACTIVE && off < len && conn_out_pending(c) < OUT_HIGH_WATER) {
		long r = http_parse_request(data + off, len - off, &limits, &req);
		if (r < 0) {
			conn_respond_parse_error(c, (int)r, &req);
			return len;
		}
		if (r == 0) {
			if (req.head_len && c->api->head_ready)
				c->api->head_ready(c, &req);
			break;
		}
		c->head_method = req.method_len == 4 && memcmp(req.method, "HEAD", 4) == 0;
		c->api->handle(c, &req);
		if (!req.keep_alive && c->state == MMDS_CONN_ACTIVE)
			c->state = MMDS_CONN_CLOSING;
		c->continue_sent = false;
		off += (size_t)r;
	}
	if (c->state != MMDS_CONN_ACTIVE)
		return len; /* anything after the last answered request is dropped */
	return off;
}

/* Keeps the unconsumed tail of data (which may be the shared buffer or the
 * connection's own) as the connection's pending input, and restarts the
 * request deadline when a new request begins. */
static int conn_keep_input(struct mmds_conn *c, const char *data, size_t len, size_t consumed, uint64_t now)
{
	size_t left = len - consumed;

	if (left == 0) {
		free(c->in); /* idle connections hold no input buffer */
		c->in = NULL;
		c->in_len = c->in_cap = 0;
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
		loop_schedule_sweep(c->s, now + c->s->cfg.request_timeout_usec);
	}
	return 0;
}

/* Processes the pending input plus what was just read (or, with data ==
 * c->in and n == 0, the pending input alone). Returns how much it consumed. */
static size_t conn_consume(struct mmds_conn *c, const char *data, size_t len, uint64_t now)
{
	size_t consumed = conn_process(c, data, len);
	if (conn_keep_input(c, data, len, consumed, now) < 0)
		c->state = MMDS_CONN_CLOSING;
	return consumed;
}

static void conn_read(struct mmds_conn *c)
{
	struct mmds_server *s = c->s;
	size_t cap = conn_input_cap(c);
	uint64_t now = loop_now_usec(s);
	char *into = c->in_len ? c->in + c->in_len : s->scratch;
	ssize_t n;

	if (c->in_len >= cap)
		return; /* cannot happen: the parser refuses first */
	n = recv(c->fd, into, cap - c->in_len, 0);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR) {
			c->state = MMDS_CONN_CLOSING;
			c->peer_eof = true;
			c->out_off = c->out_len = 0;
		}
		return;
	}
	if (n == 0) {
		c->peer_eof = true;
		conn_answer_incomplete(c, false);
		if (c->state == MMDS_CONN_ACTIVE)
			c->state = MMDS_CONN_CLOSING;
		return;
	}
	conn_touch(c, now);
	if (!c->request_start) {
		c->request_start = now;
		loop_schedule_sweep(s, now + s->cfg.request_timeout_usec);
	}
	(void)conn_consume(c, c->in_len ? c->in : s->scratch, c->in_len + (size_t)n, now);
}

/* After reading or writing: flush, go on with requests held back by a full
 * output buffer, move to the next state, re-arm. Frees the connection when
 * it is done. */
static void conn_after_io(struct mmds_conn *c)
{
	struct mmds_server *s = c->s;

	if (shed_greediest(s, c))
		return;
	for (;;) {
		int r = conn_flush(c);
		if (r == -EAGAIN) {
			loop_schedule_sweep(s, c->last_activity + s->cfg.idle_timeout_usec);
			break;
		}
		if (r < 0) {
			conn_free(c);
			return;
		}
		if (c->state != MMDS_CONN_ACTIVE || !c->in_len || !conn_consume(c, c->in, c->in_len, loop_now_usec(s)))
			break;
		if (shed_greediest(s, c))
			return;
	}

	if (c->state == MMDS_CONN_CLOSING && conn_out_pending(c) == 0) {
		if (c->peer_eof) {
			conn_free(c);
			return;
		}
		/* Shut our side and read until the client closes, so that
		 * unread request bytes do not turn the answer into a reset. */
		shutdown(c->fd, SHUT_WR);
		c->state = MMDS_CONN_LINGER;
		c->linger_start = loop_now_usec(s);
		loop_schedule_sweep(s, c->linger_start + LINGER_USEC);
	}
	conn_update_events(c);
}

static void conn_io(struct mmds_conn *c, uint32_t revents)
{
	if (c->state == MMDS_CONN_LINGER) {
		char sink[4096];
		ssize_t n = recv(c->fd, sink, sizeof(sink), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || (revents & EPOLLERR))
			conn_free(c);
		return;
	}
	if ((revents & EPOLLERR) || ((revents & EPOLLHUP) && !(revents & EPOLLIN))) {
		conn_free(c);
		return;
	}
	if ((revents & EPOLLIN) && c->state == MMDS_CONN_ACTIVE)
		conn_read(c);
	conn_after_io(c);
}

/* ---- readiness ---------------------------------------------------------- */

/* Every connection is in one epoll set of our own, which sd-event watches
 * as a single source: one wake-up answers every ready connection. Given to
 * sd-event one by one, each connection cost an epoll_wait of its own that
 * polled every ready socket again (the profile in bench/README.md). */
static int on_conns_ready(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
	struct mmds_server *s = userdata;
	struct epoll_event ev[READY_BATCH];
	int n = epoll_wait(fd, ev, READY_BATCH, 0);

	if (n < 0 && errno != EINTR)
		log_warning("connections' epoll set (fd %d): epoll_wait: %s", fd, strerror(errno));
	s->dispatching = true;
	for (int i = 0; i < n; i++) {
		struct mmds_conn *c = ev[i].data.ptr;
		if (!c->dead)
			conn_io(c, ev[i].events);
	}
	s->dispatching = false;
	while (s->dead) {
		struct mmds_conn *c = s->dead;
		s->dead = c->next;
		free(c);
	}
	return 0;
}

int conn_poll_open(struct mmds_server *s)
{
	s->conn_epoll = epoll_create1(EPOLL_CLOEXEC);
	if (s->conn_epoll < 0)
		return -errno;
	return sd_event_add_io(s->event, &s->conn_ready, s->conn_epoll, EPOLLIN, on_conns_ready, s);
}

void conn_poll_close(struct mmds_server *s)
{
	s->conn_ready = sd_event_source_disable_unref(s->conn_ready);
	if (s->conn_epoll >= 0)
		close(s->conn_epoll);
	s->conn_epoll = -1;
}

int conn_new(struct mmds_server *s, int fd, const struct mmds_listener *l)
{
	struct mmds_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->s = s;
	c->fd = fd;
	c->kind = l->kind;
	c->api = l->api;
	c->events = EPOLLIN;
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = c };
	if (epoll_ctl(s->conn_epoll, EPOLL_CTL_ADD, fd, &e) < 0) {
		int r = -errno;
		close(fd);
		free(c);
		return r;
	}
	if (conn_is_control(c))
		s->n_control++;
	else
		s->n_guest++;
	lru_append(s, c);
	c->last_activity = loop_now_usec(s);
	loop_schedule_sweep(s, c->last_activity + s->cfg.idle_timeout_usec);
	return 0;
}

void conn_timeout(struct mmds_conn *c)
{
	conn_answer_incomplete(c, true);
	(void)conn_flush(c);
	conn_free(c);
}

size_t conn_max_input(const struct mmds_config *cfg)
{
	size_t guest = max_body(cfg, false), control = max_body(cfg, true);
	return cfg->max_head + (guest > control ? guest : control);
}
