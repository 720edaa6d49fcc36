/* The server: its listeners, who gets a connection (the bounds, eviction,
 * the vsock peer policy), the sweep that ends connections past their
 * deadline, and setup and teardown. Each connection's own life is conn.c's. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn_life.h"
#include "log.h"
#include "loop.h"
#include "server.h"
#include "token.h"

#define MAX_CONTROL_CONNS 16
#define ACCEPT_PAUSE_USEC (100 * 1000ULL)
#define TIMER_ACCURACY_USEC (5 * 1000ULL)

/* ---- admission ---------------------------------------------------------- */

/* Frees the guest connection idle the longest; failing that, the one
 * silent the longest (its request deadline would end it anyway). */
static bool evict_one(struct mmds_server *s)
{
	struct mmds_conn *victim = NULL;

	for (struct mmds_conn *c = s->lru_head; c && !victim; c = c->next)
		if (!conn_is_control(c) && conn_idle(c))
			victim = c;
	for (struct mmds_conn *c = s->lru_head; c && !victim; c = c->next)
		if (!conn_is_control(c))
			victim = c;
	if (!victim)
		return false;
	log_debug("connection limit %u reached: dropping the oldest idle connection", s->cfg.max_connections);
	conn_free(victim);
	return true;
}

/* Is there room for one more connection of this kind? A guest connection
 * at the bound makes room by evicting the oldest idle one. */
static bool make_room(struct mmds_server *s, enum mmds_listener_kind kind)
{
	if (kind != MMDS_LISTEN_GUEST)
		return s->n_control < MAX_CONTROL_CONNS;
	return s->n_guest < s->cfg.max_connections || evict_one(s);
}

/* The vsock control admits the peers its policy names; any other is closed
 * at once, with a line naming its CID. */
static bool vsock_peer_admitted(struct mmds_server *s, int fd)
{
	uint32_t cid = 0;
	char allowed[128];
	int r = vsock_peer_cid(fd, &cid);

	if (r == 0 && vsock_peer_allowed(&s->cfg.vsock_policy, cid))
		return true;
	vsock_policy_format(&s->cfg.vsock_policy, allowed, sizeof(allowed));
	if (r < 0)
		log_warning("control over vsock: peer unknown (%s); closed", strerror(-r));
	else
		log_warning("control over vsock: peer CID %" PRIu32 " refused (allowed: CID %s); closed", cid,
			    allowed);
	return false;
}

static int on_accept(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
	struct mmds_listener *l = userdata;
	struct mmds_server *s = l->s;

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
				loop_set_accepting(s, false);
				loop_schedule_sweep(s, loop_now_usec(s) + ACCEPT_PAUSE_USEC);
				break;
			}
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO || errno == EPERM)
				continue;
			log_error("accept: %s", strerror(errno));
			break;
		}
		if ((l->kind == MMDS_LISTEN_CONTROL_VSOCK && !vsock_peer_admitted(s, cfd)) || !make_room(s, l->kind)) {
			close(cfd);
			continue;
		}
		int r = conn_new(s, cfd, l);
		if (r < 0)
			log_error("connection: %s", strerror(-r));
	}
	return 0;
}

/* ---- the sweep ---------------------------------------------------------- */

static int on_sweep(sd_event_source *es, uint64_t usec, void *userdata)
{
	struct mmds_server *s = userdata;
	uint64_t now = loop_now_usec(s), next = UINT64_MAX;

	s->sweep_at = 0;
	for (struct mmds_conn *c = s->lru_head, *n; c; c = n) {
		n = c->next;
		uint64_t d = conn_deadline(c);
		if (d <= now)
			conn_timeout(c);
		else if (d < next)
			next = d;
	}
	if (s->accept_paused)
		loop_set_accepting(s, true);
	if (next != UINT64_MAX)
		loop_schedule_sweep(s, next);
	return 0;
}

/* ---- setup ------------------------------------------------------------- */

int mmds_server_add_listener(struct mmds_server *s, int fd, enum mmds_listener_kind kind,
			     const struct mmds_api *api)
{
	if (s->n_listeners >= MMDS_MAX_LISTENERS) {
		close(fd);
		return -E2BIG;
	}
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	struct mmds_listener *l = &s->listeners[s->n_listeners];
	*l = (struct mmds_listener){ .s = s, .kind = kind, .api = api };
	int r = sd_event_add_io(s->event, &l->source, fd, EPOLLIN, on_accept, l);
	if (r < 0) {
		close(fd);
		return r;
	}
	(void)sd_event_source_set_io_fd_own(l->source, true);
	s->n_listeners++;
	return 0;
}

int mmds_server_init(struct mmds_server *s, const struct mmds_config *cfg, sd_event *event)
{
	memset(s, 0, sizeof(*s));
	s->cfg = *cfg;
	s->event = sd_event_ref(event);
	s->conn_epoll = -1;
	int r = token_authority_new(NULL, 0, &s->tokens);
	if (r < 0)
		return r;
	r = conn_poll_open(s);
	if (r < 0)
		return r;
	s->scratch_len = conn_max_input(cfg);
	s->scratch = malloc(s->scratch_len);
	if (!s->scratch)
		return -ENOMEM;
	return sd_event_add_time(event, &s->sweep, CLOCK_MONOTONIC, UINT64_MAX, TIMER_ACCURACY_USEC, on_sweep, s);
}

void mmds_server_done(struct mmds_server *s)
{
	while (s->lru_head)
		conn_free(s->lru_head);
	conn_poll_close(s);
	for (int i = 0; i < s->n_listeners; i++)
		sd_event_source_disable_unref(s->listeners[i].source);
	sd_event_source_disable_unref(s->sweep);
	token_authority_free(s->tokens);
	answer_cache_clear(&s->answers);
	json_decref(s->doc);
	free(s->doc_json);
	free(s->scratch);
	sd_event_unref(s->event);
	memset(s, 0, sizeof(*s));
}
