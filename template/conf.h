/* A template's declarative file, DIR/template.conf (template/README.md):
 *
 *   # comment
 *   name = web
 *   base = e2b-rt
 *   packages = python3 curl
 *   file = site/index.html /home/user/site/index.html user 0644
 *   run = echo built > /etc/web-built
 *   env = GREETING=hello
 *   start = python3 -m http.server 3000
 *   ready = port 3000
 *   ready_timeout = 30
 *   vcpu = 2
 *   memory_mb = 512
 *
 * One `key = value` a line. file, run and env repeat (in order); every other
 * key appears at most once. The parser is strict on purpose: anything it
 * cannot read one way only is an error naming the line and the key, never a
 * guess. It reads bytes only; whether a file exists or a base is known is
 * the caller's check (files.h, e2b-template.c). */
#ifndef TEMPLATE_CONF_H
#define TEMPLATE_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TPL_MAX_BYTES   (256 * 1024)
#define TPL_MAX_LINE    4096
#define TPL_MAX_NAME    63
#define TPL_MAX_ITEMS   256 /* files, runs, env vars or packages each */

enum tpl_ready { TPL_READY_NONE, TPL_READY_PORT, TPL_READY_URL, TPL_READY_PROCESS, TPL_READY_FILE,
		 TPL_READY_COMMAND };

struct tpl_file {
	char *src;   /* relative to the template directory, no ".." */
	char *dest;  /* absolute in the image */
	char *owner; /* user name */
	char *group; /* group name (the owner's own group when not given) */
	unsigned mode;
	unsigned line;
};

struct tpl_env {
	char *name;
	char *value;
};

struct template_conf {
	char *name, *base, *description, *start, *restart, *ready_arg;
	char **packages;
	size_t n_packages;
	struct tpl_file *files;
	size_t n_files;
	char **runs;
	size_t n_runs;
	struct tpl_env *env;
	size_t n_env;
	enum tpl_ready ready;
	uint64_t ready_timeout, vcpu, memory_mb; /* 0: not given */
	unsigned line_name, line_base; /* for the caller's errors */
};

struct tpl_error {
	unsigned line; /* 0: not tied to a line (e.g. a missing key) */
	char key[32];  /* "" when no key could be read */
	char msg[200];
};

/* Parses buf[0..len). On error returns -EINVAL (or -ENOMEM), fills *err and
 * leaves *conf empty (nothing to free). */
int tpl_parse(const char *buf, size_t len, struct template_conf *conf, struct tpl_error *err);
void tpl_free(struct template_conf *conf);
/* "port", "url", ...: the ready check's kind as written. */
const char *tpl_ready_name(enum tpl_ready r);
/* [a-z0-9][a-z0-9-]*, at most TPL_MAX_NAME: names of templates and flavors. */
bool tpl_valid_name(const char *s);

#endif
