#include "nlbatch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter/nfnetlink.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "cleanup.h"
#include "nlsock.h"

/* The guard's batches hold a table, a chain and one rule per port, twice
 * that for a replace; 64 messages is far more than they need. */
#define BATCH_BUFFER   (64 * 1024)
#define BATCH_MAX_MSGS 64
#define ACK_WAIT_MS    2000

struct batch_msg {
	uint32_t seq;
	int msg_type;     /* the subsystem's message type, or NFT_GUARD_MSG_BATCH */
	int status;       /* 0 pending, 1 acked, <0 the kernel's -errno */
	char object[160];
};

struct nl_batch {
	uint16_t subsys;
	char *buf;
	struct mnl_nlmsg_batch *b;
	bool pending;     /* a message sits at mnl_nlmsg_batch_current() */
	bool full;
	struct batch_msg msg[BATCH_MAX_MSGS];
	size_t n;
	uint32_t seq;
};

/* An nfnetlink header: nlmsghdr plus nfgenmsg. */
static struct nlmsghdr *put_header(void *buf, uint16_t type, uint16_t flags, uint8_t family, uint16_t res_id,
				   uint32_t seq)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *nfg;

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = family;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(res_id);
	return nlh;
}

/* Moves past the message the caller has just filled in. */
static void settle_pending(struct nl_batch *b)
{
	/* next() is false once the limit is passed: the batch is too big. */
	if (b->pending && !mnl_nlmsg_batch_next(b->b))
		b->full = true;
	b->pending = false;
}

/* Starts the next message: a slot for its acknowledgement, its header. */
static struct nlmsghdr *add(struct nl_batch *b, uint16_t nl_type, int msg_type, uint8_t family, uint16_t flags,
			    uint16_t res_id, const char *object)
{
	struct batch_msg *m;

	settle_pending(b);
	if (b->full || b->n == BATCH_MAX_MSGS) {
		b->full = true;
		return NULL;
	}
	m = &b->msg[b->n++];
	*m = (struct batch_msg){ .seq = b->seq++, .msg_type = msg_type };
	snprintf(m->object, sizeof(m->object), "%s", object);
	b->pending = true;
	return put_header(mnl_nlmsg_batch_current(b->b), nl_type, flags, family, res_id, m->seq);
}

void nl_batch_freep(struct nl_batch **bp)
{
	struct nl_batch *b = *bp;

	if (!b)
		return;
	if (b->b)
		mnl_nlmsg_batch_stop(b->b);
	free(b->buf);
	free(b);
}

int nl_batch_new(uint16_t subsys, struct nl_batch **out)
{
	_cleanup_(nl_batch_freep) struct nl_batch *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->subsys = subsys;
	b->seq = (uint32_t)time(NULL);
	b->buf = malloc(BATCH_BUFFER);
	if (!b->buf)
		return -ENOMEM;
	/* Leave room for one message past the limit, as libmnl expects. */
	b->b = mnl_nlmsg_batch_start(b->buf, BATCH_BUFFER / 2);
	if (!b->b)
		return -ENOMEM;
	if (!add(b, NFNL_MSG_BATCH_BEGIN, NFT_GUARD_MSG_BATCH, AF_UNSPEC, 0, subsys, "nftables batch"))
		return -E2BIG;
	*out = TAKE_PTR(b);
	return 0;
}

struct nlmsghdr *nl_batch_add(struct nl_batch *b, uint16_t type, uint8_t family, uint16_t flags,
			      const char *fmt, ...)
{
	char object[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(object, sizeof(object), fmt, ap);
	va_end(ap);
	return add(b, (uint16_t)(b->subsys << 8 | type), type, family, flags | NLM_F_ACK, 0, object);
}

static struct batch_msg *batch_find(struct nl_batch *b, uint32_t seq)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->msg[i].seq == seq)
			return &b->msg[i];
	return NULL;
}

static bool batch_settled(const struct nl_batch *b)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->msg[i].status < 0)
			return true; /* the kernel aborted the transaction */
	for (size_t i = 0; i < b->n; i++)
		if (b->msg[i].msg_type != NFT_GUARD_MSG_BATCH && b->msg[i].status == 0)
			return false;
	return true;
}

/* Reads every reply queued for us and files each under the message whose
 * sequence number it carries. */
static int read_replies(struct mnl_socket *nl, struct nl_batch *b, uint32_t portid)
{
	char buf[NL_BUFFER] __attribute__((aligned(NLMSG_ALIGNTO)));

	for (;;) {
		ssize_t n = recv(mnl_socket_get_fd(nl), buf, sizeof(buf), MSG_DONTWAIT);
		int len;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno; /* ENOBUFS: acks were lost */
		}
		len = (int)n;
		for (const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf; mnl_nlmsg_ok(nlh, len);
		     nlh = mnl_nlmsg_next(nlh, &len)) {
			const struct nlmsgerr *err;
			struct batch_msg *m;

			if (nlh->nlmsg_pid != portid || nlh->nlmsg_type != NLMSG_ERROR)
				continue;
			if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*err)))
				return -EBADMSG;
			err = mnl_nlmsg_get_payload(nlh);
			m = batch_find(b, nlh->nlmsg_seq);
			if (!m)
				continue; /* not ours: a stale reply */
			if (err->error < 0)
				m->status = err->error;
			else if (m->status == 0)
				m->status = 1;
		}
	}
}

/* Waits for acknowledgements, in the manner of nftables' mnl_batch_talk,
 * until each message has one (or the transaction failed). */
static int await_acks(struct mnl_socket *nl, struct nl_batch *b, struct guard_failure *failure)
{
	uint32_t portid = mnl_socket_get_portid(nl);
	int r;

	for (;;) {
		struct pollfd pfd = { .fd = mnl_socket_get_fd(nl), .events = POLLIN };

		r = read_replies(nl, b, portid);
		if (r < 0) {
			guard_failure_set(failure, GUARD_SUBSYS_NFTABLES, NFT_GUARD_MSG_BATCH,
					  "nftables batch acknowledgements");
			return r;
		}
		if (batch_settled(b))
			return 0;
		r = poll(&pfd, 1, ACK_WAIT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			r = r < 0 ? -errno : -ETIMEDOUT;
			guard_failure_set(failure, GUARD_SUBSYS_NFTABLES, NFT_GUARD_MSG_BATCH,
					  "nftables batch: acknowledgements");
			return r;
		}
	}
}

int nl_batch_talk(struct mnl_socket *nl, struct nl_batch *b, struct guard_failure *failure)
{
	int r;

	add(b, NFNL_MSG_BATCH_END, NFT_GUARD_MSG_BATCH, AF_UNSPEC, 0, b->subsys, "nftables batch");
	settle_pending(b);
	if (b->full) {
		guard_failure_set(failure, GUARD_SUBSYS_NFTABLES, NFT_GUARD_MSG_NONE, "nftables batch: too large");
		return -E2BIG;
	}
	if (mnl_socket_sendto(nl, mnl_nlmsg_batch_head(b->b), mnl_nlmsg_batch_size(b->b)) < 0) {
		r = -errno;
		guard_failure_set(failure, GUARD_SUBSYS_NFTABLES, NFT_GUARD_MSG_BATCH, "nftables batch");
		return r;
	}
	r = await_acks(nl, b, failure);
	if (r < 0)
		return r;
	for (size_t i = 0; i < b->n; i++)
		if (b->msg[i].status < 0) {
			guard_failure_set(failure, GUARD_SUBSYS_NFTABLES, b->msg[i].msg_type, "%s", b->msg[i].object);
			return b->msg[i].status;
		}
	return 0;
}
