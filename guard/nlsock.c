#include "nlsock.h"

#include <errno.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include "cleanup.h"

void mnl_socket_closep(struct mnl_socket **nl)
{
	if (*nl)
		mnl_socket_close(*nl);
}

int nl_open(int bus, struct mnl_socket **out)
{
	_cleanup_(mnl_socket_closep) struct mnl_socket *nl = mnl_socket_open(bus);
	int one = 1;

	if (!nl)
		return -errno;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
		return -errno;
	/* Errors without a copy of the request keep every ack small. Old
	 * kernels lack the option; acks are then merely bigger. */
	(void)mnl_socket_setsockopt(nl, NETLINK_CAP_ACK, &one, sizeof(one));
	*out = TAKE_PTR(nl);
	return 0;
}

int nl_talk(struct mnl_socket *nl, void *buf, size_t size, mnl_cb_t cb, void *data)
{
	const struct nlmsghdr *nlh = buf;
	uint32_t seq = nlh->nlmsg_seq, portid = mnl_socket_get_portid(nl);
	int r;

	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	/* mnl_cb_run: MNL_CB_STOP at NLMSG_DONE or a positive ack, -1 with
	 * errno set from an error ack, or -1 as the callback failed, with or
	 * without errno. */
	do {
		ssize_t n = mnl_socket_recvfrom(nl, buf, size);

		if (n < 0)
			return -errno;
		errno = 0;
		r = mnl_cb_run(buf, (size_t)n, seq, portid, cb, data);
	} while (r > MNL_CB_STOP);
	if (r < 0)
		/* A callback that gave up on a message without saying why:
		 * the answer was not read in full, which is never success. */
		return errno > 0 ? -errno : -EBADMSG;
	return 0;
}
