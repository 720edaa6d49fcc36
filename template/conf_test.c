/* Unit tests for the template.conf parser (template/conf.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "tap.h"

#define GOOD "name = web\nbase = e2b-rt\n"

static int parse(const char *text, struct template_conf *c, struct tpl_error *err)
{
	return tpl_parse(text, strlen(text), c, err);
}

/* Expects a parse error on `line`, for `key`, whose message contains `needle`. */
static void rejects(const char *what, const char *text, unsigned line, const char *key, const char *needle)
{
	struct template_conf c;
	struct tpl_error err;
	int r = parse(text, &c, &err);

	if (!ok(r == -EINVAL && err.line == line && strcmp(err.key, key) == 0 && strstr(err.msg, needle) &&
			!c.name && !c.files && !c.env,
		"rejects %s", what))
		printf("# r=%d line=%u key=%s msg=\"%s\" (wanted line %u, key %s, \"%s\")\n", r, err.line, err.key,
		       err.msg, line, key, needle);
}

int main(void)
{
	struct template_conf c;
	struct tpl_error err;

	ok(parse("# a web server\n\n" GOOD "description = a small web server\n"
		 "packages = python3 curl\n"
		 "file = site/index.html /home/user/site/index.html user 0644\n"
		 "file = etc/web.conf /etc/web.conf root:adm 640\n"
		 "run = echo one > /etc/one\nrun = echo two >> /etc/one\n"
		 "env = GREETING=hello world\nenv = EMPTY=\n"
		 "start = python3 -m http.server 3000\nrestart = on-failure\n"
		 "ready = port 3000\nready_timeout = 45\nvcpu = 2\nmemory_mb = 512\n",
		 &c, &err) == 0,
	   "parses a complete template");
	ok(strcmp(c.name, "web") == 0 && strcmp(c.base, "e2b-rt") == 0 && c.line_name == 3 && c.line_base == 4,
	   "name and base, with their lines");
	ok(c.n_packages == 2 && strcmp(c.packages[1], "curl") == 0, "packages in order");
	ok(c.n_files == 2 && strcmp(c.files[0].owner, "user") == 0 && strcmp(c.files[0].group, "user") == 0 &&
		   c.files[0].mode == 0644 && strcmp(c.files[1].group, "adm") == 0 && c.files[1].mode == 0640 &&
		   c.files[1].line == 8,
	   "files with owner, group (default: the owner's) and mode");
	ok(c.n_runs == 2 && strcmp(c.runs[1], "echo two >> /etc/one") == 0, "build commands in order");
	ok(c.n_env == 2 && strcmp(c.env[0].value, "hello world") == 0 && strcmp(c.env[1].value, "") == 0,
	   "env values kept whole, empty allowed");
	ok(c.ready == TPL_READY_PORT && strcmp(c.ready_arg, "3000") == 0 && c.ready_timeout == 45 && c.vcpu == 2 &&
		   c.memory_mb == 512 && strcmp(c.restart, "on-failure") == 0,
	   "ready check, timeout, vCPU, memory, restart");
	tpl_free(&c);

	ok(parse(GOOD "ready = url http://127.0.0.1:3000/health\n", &c, &err) == 0 && c.ready == TPL_READY_URL,
	   "url ready check");
	tpl_free(&c);
	ok(parse(GOOD "ready = command test -s /tmp/x && true\n", &c, &err) == 0 && c.ready == TPL_READY_COMMAND &&
		   strcmp(c.ready_arg, "test -s /tmp/x && true") == 0,
	   "command ready check keeps its words");
	tpl_free(&c);
	ok(parse(GOOD "file = ..hidden/x /x root 0600\n", &c, &err) == 0, "a name starting with '..' is a name");
	tpl_free(&c);

	rejects("an unknown key", GOOD "colour = blue\n", 3, "", "unknown key 'colour'");
	rejects("a duplicate key", GOOD "vcpu = 2\nvcpu = 4\n", 4, "vcpu", "duplicate key (first on line 3)");
	rejects("a duplicate base", GOOD "base = e2b-ci\n", 3, "base", "duplicate key (first on line 2)");
	rejects("a line without '='", GOOD "packages\n", 3, "", "want KEY = VALUE");
	rejects("a missing name", "base = e2b-rt\n", 0, "name", "missing");
	rejects("a missing base", "name = web\n", 0, "base", "missing");
	rejects("a bad name", "name = Web\n", 1, "name", "not a name");
	rejects("an empty value", GOOD "start =\n", 3, "start", "empty value");
	rejects("a CR", "name = web\r\nbase = e2b-rt\n", 1, "", "control character 0x0d");
	rejects("a source with ..", GOOD "file = ../secret /etc/secret root 0600\n", 3, "file", "inside the template");
	rejects("an absolute source", GOOD "file = /etc/passwd /etc/x root 0600\n", 3, "file", "inside the template");
	rejects("a relative destination", GOOD "file = a etc/a root 0600\n", 3, "file", "absolute path");
	rejects("a destination with ..", GOOD "file = a /etc/../a root 0600\n", 3, "file", "absolute path");
	rejects("a file with three fields", GOOD "file = a /a root\n", 3, "file", "four fields");
	rejects("a bad mode", GOOD "file = a /a root 0989\n", 3, "file", "octal");
	rejects("a bad owner", GOOD "file = a /a Root 0644\n", 3, "file", "owner");
	rejects("a destination twice", GOOD "file = a /a root 0644\nfile = b /a root 0644\n", 4, "file",
		"already written by line 3");
	rejects("a bad package", GOOD "packages = python3 Curl\n", 3, "packages", "'Curl'");
	rejects("a package twice", GOOD "packages = curl curl\n", 3, "packages", "twice");
	rejects("an env var twice", GOOD "env = A=1\nenv = A=2\n", 4, "env", "A is set twice");
	rejects("an env value with $", GOOD "env = A=$HOME\n", 3, "env", "'$'");
	rejects("an env without =", GOOD "env = A\n", 3, "env", "NAME=VALUE");
	rejects("an unknown ready check", GOOD "ready = socket 3\n", 3, "ready", "'socket' is not a ready check");
	rejects("a port out of range", GOOD "ready = port 65536\n", 3, "ready", "1..65535");
	rejects("a url that is not http", GOOD "ready = url ftp://x\n", 3, "ready", "http://");
	rejects("a ready check without argument", GOOD "ready = port\n", 3, "ready", "needs an argument");
	rejects("a long process name", GOOD "ready = process abcdefghijklmnop\n", 3, "ready", "command name");
	rejects("vcpu 0", GOOD "vcpu = 0\n", 3, "vcpu", "1..64");
	rejects("memory below 128", GOOD "memory_mb = 64\n", 3, "memory_mb", "128..65536");
	rejects("a bad restart", GOOD "start = x\nrestart = sometimes\n", 4, "restart", "always, on-failure or no");
	rejects("restart without start", GOOD "restart = always\n", 3, "restart", "without a start");
	ok(parse("name = web\nbase = oci:images/app:v2\n", &c, &err) == 0 && strcmp(c.base, "oci:images/app:v2") == 0,
	   "an image base inside the template directory");
	tpl_free(&c);
	rejects("an absolute oci base", "name = web\nbase = oci:/srv/other-tenant/app:v1\n", 2, "base",
		"copy the image there): '/srv/other-tenant/app:v1'");
	rejects("an oci base with ..", "name = web\nbase = oci:../other/app\n", 2, "base", "no '..'");
	rejects("an oci base with .. inside", "name = web\nbase = oci:a/../../b\n", 2, "base", "no '..'");
	rejects("an absolute docker archive", "name = web\nbase = docker-archive:/tmp/x.tar\n", 2, "base",
		"PATH must be relative");
	rejects("an empty oci path", "name = web\nbase = oci:\n", 2, "base", "PATH must be relative");
	rejects("a timeout without a check", GOOD "ready_timeout = 5\n", 3, "ready_timeout", "without a ready check");
	return tap_done();
}
