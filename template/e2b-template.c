/* e2b-template: reads a template directory's template.conf with the one
 * strict parser (conf.c), checks its files against the directory (files.c)
 * and its base and name against the flavors, and prints the template as
 * JSON for template/template.sh; or, in a directory with E2B's Template JSON
 * instead (e2b.template.json, e2bjson.c), prints that one's normal form.
 * See template/README.md.
 *
 *   e2b-template --dir DIR --flavors "e2b-base e2b-ci e2b-rt" [--json FILE]
 *
 * --flavors: the flavors this checkout builds (os-image/mkosi.profiles/NAME):
 * a template.conf's base and an E2B template's base flavor must be one.
 *
 * --json FILE: the Template JSON of a Dockerfile template (e2b.toml,
 * e2b.Dockerfile or Dockerfile in DIR, converted by template/e2b/dockerfile.py)
 * is read from FILE instead of DIR/e2b.template.json; the name stays DIR's.
 *
 * Exit 0 and JSON on stdout; 1 on a bad template (one message naming the
 * file, the line and the key); 2 on bad usage. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "conf.h"
#include "e2bjson.h"
#include "fileio.h"
#include "files.h"
#include "log.h"

#define DEFAULT_READY_TIMEOUT 30

static void usage(void)
{
	fprintf(stderr, "usage: e2b-template --dir DIR --flavors \"FLAVOR...\" [--json FILE]\n");
}

/* "e2b-base e2b-ci e2b-rt" contains the word w. */
static int is_flavor(const char *flavors, const char *w)
{
	size_t n = strlen(w);

	for (const char *p = flavors; (p = strstr(p, w)); p += n)
		if ((p == flavors || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return 1;
	return 0;
}

/* A base is a flavor, or (builder mode) oci:PATH[:REF] or docker-archive:FILE. */
static int valid_base(const char *base, const char *flavors)
{
	if (!strncmp(base, "oci:", 4))
		return base[4] != '\0' && base[4] != ':';
	if (!strncmp(base, "docker-archive:", 15))
		return base[15] != '\0';
	return is_flavor(flavors, base);
}

/* DIR/NAME (template.conf or e2b.template.json), a regular file in the
 * directory itself. A symlink (to a file of the build machine, say) or a
 * fifo is refused before a byte is read: the parsers' messages quote what
 * they refuse, which must never be another file's. -ELOOP: a symlink;
 * -EINVAL: not a regular file; -ENOENT: none. */
static int read_conf(const char *dir, const char *name, size_t max, char **buf, size_t *len)
{
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int fd = -1;
	struct stat st;

	if (dfd < 0)
		return -errno;
	/* O_NONBLOCK: opening a fifo must not wait for a writer. */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	return read_small_fd(fd, max, buf, len);
}

/* The message for read_conf's error r on DIR/name, logged with its path. */
static void log_read_error(const char *path, const char *name, int r)
{
	switch (r) {
	case -EFBIG:
		log_error("%s: larger than %s", path, strcmp(name, "template.conf") ? "1 MiB" : "256 KiB");
		break;
	case -ELOOP:
		log_error("%s: a symlink; %s must be a regular file in the template directory itself (copy it there)",
			  path, name);
		break;
	case -EINVAL:
		log_error("%s: not a regular file; %s must be a regular file in the template directory", path, name);
		break;
	default:
		log_error("%s: %s", path, strerror(-r));
	}
}

static json_t *to_json(const struct template_conf *c, char **resolved)
{
	json_t *o = json_object(), *a;
	char mode[8];

	json_object_set_new(o, "format", json_string("conf"));
	json_object_set_new(o, "name", json_string(c->name));
	json_object_set_new(o, "base", json_string(c->base));
	json_object_set_new(o, "description", json_string(c->description ? c->description : ""));
	a = json_array();
	for (size_t i = 0; i < c->n_packages; i++)
		json_array_append_new(a, json_string(c->packages[i]));
	json_object_set_new(o, "packages", a);
	a = json_array();
	for (size_t i = 0; i < c->n_files; i++) {
		snprintf(mode, sizeof(mode), "%04o", c->files[i].mode);
		json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "src", resolved[i], "dest",
						   c->files[i].dest, "owner", c->files[i].owner, "group",
						   c->files[i].group, "mode", mode, "line", (json_int_t)c->files[i].line));
	}
	json_object_set_new(o, "files", a);
	a = json_array();
	for (size_t i = 0; i < c->n_runs; i++)
		json_array_append_new(a, json_string(c->runs[i]));
	json_object_set_new(o, "run", a);
	a = json_array();
	for (size_t i = 0; i < c->n_env; i++)
		json_array_append_new(a, json_pack("{s:s, s:s}", "name", c->env[i].name, "value", c->env[i].value));
	json_object_set_new(o, "env", a);
	json_object_set_new(o, "start", c->start ? json_string(c->start) : json_null());
	json_object_set_new(o, "restart", c->start ? json_string(c->restart ? c->restart : "always") : json_null());
	if (c->ready != TPL_READY_NONE) {
		char *check = NULL;
		if (asprintf(&check, "%s %s", tpl_ready_name(c->ready), c->ready_arg) < 0) {
			json_decref(o);
			return NULL;
		}
		json_object_set_new(o, "ready", json_string(check));
		free(check);
		json_object_set_new(o, "ready_timeout",
				    json_integer(c->ready_timeout ? (json_int_t)c->ready_timeout : DEFAULT_READY_TIMEOUT));
	} else {
		json_object_set_new(o, "ready", json_null());
		json_object_set_new(o, "ready_timeout", json_null());
	}
	json_object_set_new(o, "vcpu", c->vcpu ? json_integer((json_int_t)c->vcpu) : json_null());
	json_object_set_new(o, "memory_mb", c->memory_mb ? json_integer((json_int_t)c->memory_mb) : json_null());
	return o;
}

static int check(const char *conf_path, const char *dir, const char *flavors, const struct template_conf *c,
		 char **resolved)
{
	size_t bad = 0;
	int r;

	if (!valid_base(c->base, flavors)) {
		log_error("%s:%u: key 'base': '%s' is not a flavor (%s), oci:PATH[:REF] or docker-archive:FILE",
			  conf_path, c->line_base, c->base, flavors);
		return -EINVAL;
	}
	if (is_flavor(flavors, c->name)) {
		log_error("%s:%u: key 'name': '%s' is a flavor's name; a template needs a name of its own",
			  conf_path, c->line_name, c->name);
		return -EINVAL;
	}
	r = tpl_check_files(dir, c, resolved, &bad);
	if (r == -EXDEV)
		log_error("%s:%u: key 'file': %s resolves outside %s (through '..' or a symlink); "
			  "copy the file into the template directory", conf_path, c->files[bad].line, c->files[bad].src, dir);
	else if (r == -EINVAL)
		log_error("%s:%u: key 'file': %s is not a regular file", conf_path, c->files[bad].line,
			  c->files[bad].src);
	else if (r < 0)
		log_error("%s:%u: key 'file': %s/%s: %s", conf_path, c->files[bad].line, dir, c->files[bad].src,
			  strerror(-r));
	return r;
}

/* The Dockerfile formats, by precedence: template/e2b/dockerfile.py reads
 * them (with E2B's SDK) into the Template JSON that --json FILE names. */
static const char *const DOCKERFILE_FORMATS[] = { "e2b.toml", "e2b.Dockerfile", "Dockerfile" };

static int exists_in(const char *dir, const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The normal form's base, against this checkout's flavors: fromTemplate
 * naming one of them (no local template can have a flavor's name) builds on
 * it, which is how an E2B template gets e2b-rt, for which E2B has no name; a
 * flavor E2B's name maps to must be one this checkout builds; and the SDK's
 * bun_install is refused on a flavor, none of which has bun. 0 or 1 (logged). */
static int check_flavor_base(json_t *o, const char *path, const char *flavors)
{
	json_t *from = json_object_get(o, "from");
	const char *kind = json_string_value(json_object_get(from, "kind"));
	const char *flavor = json_string_value(json_object_get(from, "name"));
	long bun;

	if (!strcmp(kind, "template") && is_flavor(flavors, flavor)) {
		json_t *f = json_pack("{s:s, s:s, s:s}", "kind", "flavor", "name", flavor, "as", flavor);
		if (!f || json_object_set_new(o, "from", f) < 0) {
			log_error("%s: out of memory", path);
			return 1;
		}
		return check_flavor_base(o, path, flavors);
	}
	if (strcmp(kind, "flavor"))
		return 0;
	if (!is_flavor(flavors, flavor)) {
		log_error("%s: '%s' is E2B's name for our flavor %s, which this checkout does not build (its flavors: "
			  "%s); build it where os-image/mkosi.profiles/%s exists, or name one of those flavors",
			  path, json_string_value(json_object_get(from, "as")), flavor, flavors, flavor);
		return 1;
	}
	bun = e2b_bun_install_step(json_object_get(o, "steps"));
	if (bun >= 0) {
		log_error("%s: step %ld: RUN `bun install ...` (the SDK's bun_install): bun is missing from the image "
			  "(%s; no flavor of ours has bun); install bun in an earlier RUN step (`npm install -g bun`, "
			  "as root) or use npm_install", path, bun, flavor);
		return 1;
	}
	return 0;
}

/* DIR/e2b.template.json (e2bjson.h), or with json_file a Dockerfile
 * template's Template JSON: its normal form, with the format and the
 * template's name (its folder's) for template/template.sh. */
static int run_e2b(const char *dir, const char *flavors, const char *json_file)
{
	char path[PATH_MAX], *buf = NULL;
	const char *name = strrchr(dir, '/') + 1, *base;
	struct e2b_error err;
	size_t len = 0;
	json_t *o = NULL;
	int r;

	if (json_file)
		snprintf(path, sizeof(path), "%s (the Template JSON of %s's Dockerfile)", json_file, dir);
	else
		snprintf(path, sizeof(path), "%s/e2b.template.json", dir);
	if (!json_file && !exists_in(dir, "e2b.template.json")) {
		for (size_t i = 0; i < sizeof(DOCKERFILE_FORMATS) / sizeof(*DOCKERFILE_FORMATS); i++)
			if (exists_in(dir, DOCKERFILE_FORMATS[i])) {
				log_error("%s/%s: a Dockerfile template: template/e2b/dockerfile.py turns it into a "
					  "Template JSON first, which --json FILE gives (`make template=%s` does both)",
					  dir, DOCKERFILE_FORMATS[i], dir);
				return 1;
			}
		log_error("template=%s: no template.conf, e2b.template.json, e2b.toml, e2b.Dockerfile or Dockerfile "
			  "in it: write one of them (see template/README.md)", dir);
		return 1;
	}
	if (!tpl_valid_name(name) || is_flavor(flavors, name)) {
		log_error("%s: the template's name is its folder's, '%s', which must be [a-z0-9][a-z0-9-]* "
			  "(at most %d) and not a flavor's (%s); rename the folder", path, name, TPL_MAX_NAME, flavors);
		return 1;
	}
	/* openat ignores the directory for an absolute FILE. */
	r = read_conf(dir, json_file ? json_file : "e2b.template.json", E2B_MAX_BYTES, &buf, &len);
	if (r < 0) {
		log_read_error(path, json_file ? "--json's FILE" : "e2b.template.json", r);
		return 1;
	}
	r = e2b_parse(buf, len, &o, &err);
	free(buf);
	if (r < 0) {
		if (err.step >= 0)
			log_error("%s: step %ld: %s", path, err.step, err.msg);
		else if (err.key[0])
			log_error("%s: key '%s': %s", path, err.key, err.msg);
		else
			log_error("%s: %s", path, err.msg);
		return 1;
	}
	base = json_string_value(json_object_get(json_object_get(o, "from"), "name"));
	if (base && !strcmp(json_string_value(json_object_get(json_object_get(o, "from"), "kind")), "template") &&
	    !strcmp(base, name)) {
		log_error("%s: key 'fromTemplate': '%s' is this template itself; name the template it builds on", path,
			  base);
		json_decref(o);
		return 1;
	}
	r = check_flavor_base(o, path, flavors);
	if (r) {
		json_decref(o);
		return r;
	}
	json_object_set_new(o, "format", json_string("e2b"));
	json_object_set_new(o, "name", json_string(name));
	r = json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 && putchar('\n') != EOF && fflush(stdout) == 0;
	if (!r)
		log_error("%s: cannot write its JSON to stdout", path);
	json_decref(o);
	return r ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "flavors", required_argument, NULL, 'f' },
		{ "json", required_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir_arg = NULL, *flavors = NULL, *json_arg = NULL;
	char conf_path[PATH_MAX], json_path[PATH_MAX], *dir, *buf = NULL, **resolved = NULL;
	struct template_conf conf;
	struct tpl_error err;
	size_t len = 0;
	json_t *out;
	int c, r, rc = 1;

	log_init("e2b-template");
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'd')
			dir_arg = optarg;
		else if (c == 'f')
			flavors = optarg;
		else if (c == 'j')
			json_arg = optarg;
		else {
			usage();
			return 2;
		}
	}
	if (!dir_arg || !flavors || optind != argc) {
		usage();
		return 2;
	}
	dir = realpath(dir_arg, NULL);
	if (!dir) {
		log_error("template %s: %s", dir_arg, strerror(errno));
		return 1;
	}
	snprintf(conf_path, sizeof(conf_path), "%s/template.conf", dir);
	if (json_arg && (exists_in(dir, "template.conf") || exists_in(dir, "e2b.template.json"))) {
		log_error("%s/%s: --json FILE is for a Dockerfile template (e2b.toml, e2b.Dockerfile, Dockerfile), "
			  "and %s is read first; drop --json, or move it out", dir,
			  exists_in(dir, "template.conf") ? "template.conf" : "e2b.template.json",
			  exists_in(dir, "template.conf") ? "template.conf" : "e2b.template.json");
		free(dir);
		return 1;
	}
	if (faccessat(AT_FDCWD, conf_path, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
		r = run_e2b(dir, flavors, json_arg);
		free(dir);
		return r;
	}
	snprintf(json_path, sizeof(json_path), "%s/e2b.template.json", dir);
	if (faccessat(AT_FDCWD, json_path, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		log_error("%s: both template.conf and e2b.template.json: a template is written in one format; "
			  "move one of them out", dir);
		free(dir);
		return 1;
	}
	/* Not read here, and not to be ignored in silence: its cpu_count and
	 * memory_mb would not reach the labels. */
	if (exists_in(dir, "e2b.toml")) {
		log_error("%s: both template.conf and e2b.toml: template.conf is read and e2b.toml would not be; "
			  "set vcpu and memory_mb in template.conf and move e2b.toml out", dir);
		free(dir);
		return 1;
	}
	r = read_conf(dir, "template.conf", TPL_MAX_BYTES, &buf, &len);
	if (r < 0) {
		log_read_error(conf_path, "template.conf", r);
		free(dir);
		return 1;
	}
	r = tpl_parse(buf, len, &conf, &err);
	free(buf);
	if (r < 0) {
		char where[16] = "";
		if (err.line)
			snprintf(where, sizeof(where), ":%u", err.line);
		if (err.key[0])
			log_error("%s%s: key '%s': %s", conf_path, where, err.key, err.msg);
		else
			log_error("%s%s: %s", conf_path, where, err.msg);
		free(dir);
		return 1;
	}
	resolved = calloc(conf.n_files + 1, sizeof(char *));
	if (resolved && check(conf_path, dir, flavors, &conf, resolved) == 0) {
		out = to_json(&conf, resolved);
		if (out && json_dumpf(out, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 && putchar('\n') != EOF &&
		    fflush(stdout) == 0)
			rc = 0;
		else
			log_error("%s: cannot write its JSON to stdout", conf_path);
		json_decref(out);
	} else if (!resolved) {
		log_error("%s: out of memory", conf_path);
	}
	for (size_t i = 0; resolved && i < conf.n_files; i++)
		free(resolved[i]);
	free(resolved);
	tpl_free(&conf);
	free(dir);
	return rc;
}
