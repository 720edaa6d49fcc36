/* envd-guard: keeps envd, the code interpreter, Jupyter and the MMDS alias
 * reachable from inside the guest only. See guard/README.md. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <linux/rtnetlink.h>

#include "args.h"
#include "log.h"
#include "nft.h"
#include "report.h"
#include "rtnl.h"
#include "ruleset.h"

enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,  /* the kernel refused, or check found differences */
	EXIT_USAGE = 2,
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: envd-guard install|check|remove [--ports LIST] [--alias ADDR] [--verbose]\n"
		"\n"
		"  install  create or atomically replace table inet " GUARD_TABLE ", dropping TCP\n"
		"           to each port in LIST and to ADDR:80 unless it arrives on lo,\n"
		"           and add ADDR/32 to lo\n"
		"  check    exit 0 only if the kernel holds exactly what install creates\n"
		"  remove   delete table inet " GUARD_TABLE " and ADDR from lo\n"
		"\n"
		"  --ports LIST   comma-separated TCP ports (default " GUARD_DEFAULT_PORTS ")\n"
		"  --alias ADDR   the MMDS address (default " GUARD_DEFAULT_ALIAS ")\n"
		"\n"
		"Exit status: 0 ok, 1 failure or check mismatch, 2 usage error.\n");
}

static void report_failure(const char *command, int r, const struct guard_failure *f)
{
	const char *hint = NULL;

	if (f->subsystem == GUARD_SUBSYS_NFTABLES)
		hint = nft_error_hint(-r, f->msg_type);
	else if (-r == EPERM || -r == EACCES)
		hint = "needs CAP_NET_ADMIN";
	else if (-r == ENODEV)
		hint = "no loopback interface";

	if (hint)
		log_error("%s: %s: %s: %s", command, f->object[0] ? f->object : "netlink", strerror(-r), hint);
	else
		log_error("%s: %s: %s", command, f->object[0] ? f->object : "netlink", strerror(-r));
}

static int do_install(const struct guard_config *config)
{
	static const char *const done[] = {
		[NFT_INSTALL_CREATED] = "absent: created",
		[NFT_INSTALL_UNCHANGED] = "already intact: nothing committed",
		[NFT_INSTALL_REPLACED] = "different: replaced",
		[NFT_INSTALL_RACED] = "created by another process meanwhile: replaced",
	};
	static struct guard_findings findings;
	enum nft_install_action action = NFT_INSTALL_CREATED;
	struct guard_failure f = { 0 };
	char alias[INET_ADDRSTRLEN] = "?";
	int r;

	for (size_t i = 0; i < guard_rule_count(config); i++) {
		char name[128];

		if (guard_rule_name(config, i, name, sizeof(name)) == 0)
			log_debug("install: rule %zu: %s", i + 1, name);
	}
	/* The table first: the alias only appears once traffic to it from
	 * outside is already dropped. */
	r = nft_guard_install(config, &findings, &action, &f);
	for (size_t i = 0; i < findings.n; i++)
		log_debug("install: %s", findings.item[i]);
	if (r < 0) {
		report_failure("install", r, &f);
		return EXIT_FAIL;
	}
	log_debug("install: table inet " GUARD_TABLE " %s", done[action]);
	r = rtnl_alias_install(config->alias, &f);
	if (r < 0) {
		report_failure("install", r, &f);
		return EXIT_FAIL;
	}
	inet_ntop(AF_INET, &config->alias, alias, sizeof(alias));
	log_info("installed table inet " GUARD_TABLE " (%zu rules) and %s/32 on " GUARD_LOOPBACK,
		 guard_rule_count(config), alias);
	return EXIT_OK;
}

static int do_check(const struct guard_config *config)
{
	static struct guard_findings findings;
	struct guard_failure f = { 0 };
	struct alias_state st;
	char alias[INET_ADDRSTRLEN] = "?";
	int r;

	inet_ntop(AF_INET, &config->alias, alias, sizeof(alias));
	r = nft_guard_check(config, &findings, &f);
	if (r < 0) {
		report_failure("check", r, &f);
		return EXIT_FAIL;
	}
	r = rtnl_alias_query(config->alias, &st, &f);
	if (r < 0) {
		report_failure("check", r, &f);
		return EXIT_FAIL;
	}
	if (!st.present)
		guard_finding(&findings, "alias %s/32 on " GUARD_LOOPBACK " is missing", alias);
	else if (st.prefixlen != GUARD_ALIAS_PREFIXLEN || st.scope != RT_SCOPE_HOST)
		guard_finding(&findings, "alias %s on " GUARD_LOOPBACK " is /%u scope %s, expected /%d scope host",
			      alias, st.prefixlen, rtnl_scope_name(st.scope), GUARD_ALIAS_PREFIXLEN);

	for (size_t i = 0; i < findings.n; i++)
		log_error("%s", findings.item[i]);
	if (findings.dropped)
		log_error("... and %zu more differences", findings.dropped);
	if (findings.n) {
		log_error("check: the guard is not intact (%zu difference%s); rerun `envd-guard install`",
			  findings.n + findings.dropped, findings.n + findings.dropped == 1 ? "" : "s");
		return EXIT_FAIL;
	}
	log_info("check: table inet " GUARD_TABLE " (%zu rules) and %s/32 on " GUARD_LOOPBACK " are intact",
		 guard_rule_count(config), alias);
	return EXIT_OK;
}

static int do_remove(const struct guard_config *config)
{
	struct guard_failure f = { 0 };
	int r;

	r = nft_guard_remove(&f);
	if (r < 0) {
		report_failure("remove", r, &f);
		return EXIT_FAIL;
	}
	r = rtnl_alias_remove(config->alias, &f);
	if (r < 0) {
		report_failure("remove", r, &f);
		return EXIT_FAIL;
	}
	log_info("removed table inet " GUARD_TABLE " and the alias on " GUARD_LOOPBACK);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	struct guard_args args;
	char why[256] = "";

	log_init("envd-guard");
	if (guard_parse_args(argc, argv, &args, why, sizeof(why)) < 0) {
		log_error("%s", why);
		log_error("usage: envd-guard install|check|remove [--ports LIST] [--alias ADDR]");
		return EXIT_USAGE;
	}
	if (args.verbose)
		log_set_max_priority(LOG_DEBUG);

	switch (args.command) {
	case GUARD_CMD_HELP:
		usage(stdout);
		return EXIT_OK;
	case GUARD_CMD_INSTALL:
		return do_install(&args.config);
	case GUARD_CMD_CHECK:
		return do_check(&args.config);
	case GUARD_CMD_REMOVE:
		return do_remove(&args.config);
	case GUARD_CMD_NONE:
		break;
	}
	return EXIT_USAGE;
}
