/* What the netlink layers hand back to main() instead of printing:
 * which object a failed request was about, and check's findings. */
#ifndef GUARD_REPORT_H
#define GUARD_REPORT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* The request that failed: its netlink message type (NFT_MSG_*, RTM_*, or
 * -1 when no message was involved, e.g. opening the socket) and the object
 * it was about, e.g. "rule 'drop tcp dport 8888 iifname != lo'". */
struct guard_failure {
	int subsystem;  /* GUARD_SUBSYS_* */
	int msg_type;
	char object[160];
};

enum {
	GUARD_SUBSYS_NFTABLES,
	GUARD_SUBSYS_RTNETLINK,
};

#define GUARD_MAX_FINDINGS 48

struct guard_findings {
	size_t n;
	size_t dropped;
	char item[GUARD_MAX_FINDINGS][512];
};

__attribute__((format(printf, 4, 5)))
static inline void guard_failure_set(struct guard_failure *f, int subsystem, int msg_type, const char *fmt, ...)
{
	va_list ap;

	if (!f)
		return;
	f->subsystem = subsystem;
	f->msg_type = msg_type;
	va_start(ap, fmt);
	vsnprintf(f->object, sizeof(f->object), fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 2, 3)))
static inline void guard_finding(struct guard_findings *f, const char *fmt, ...)
{
	va_list ap;

	if (f->n == GUARD_MAX_FINDINGS) {
		f->dropped++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(f->item[f->n++], sizeof(f->item[0]), fmt, ap);
	va_end(ap);
}

#endif
