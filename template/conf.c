#include "conf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decimal.h"

enum key { K_NAME, K_BASE, K_DESCRIPTION, K_PACKAGES, K_FILE, K_RUN, K_ENV, K_START, K_RESTART, K_READY,
	   K_READY_TIMEOUT, K_VCPU, K_MEMORY_MB, K_COUNT };
static const char *const key_names[K_COUNT] = {
	"name", "base", "description", "packages", "file", "run", "env", "start", "restart", "ready",
	"ready_timeout", "vcpu", "memory_mb",
};
#define KNOWN_KEYS "name, base, description, packages, file, run, env, start, restart, ready, " \
		   "ready_timeout, vcpu, memory_mb"

static bool repeats(enum key k)
{
	return k == K_FILE || k == K_RUN || k == K_ENV;
}

__attribute__((format(printf, 4, 5)))
static int fail(struct tpl_error *err, unsigned line, const char *key, const char *fmt, ...)
{
	va_list ap;

	err->line = line;
	snprintf(err->key, sizeof(err->key), "%s", key);
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_lower_digit(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool tpl_valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > TPL_MAX_NAME || !is_lower_digit(s[0]) || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_lower_digit(s[i]) && s[i] != '-')
			return false;
	return true;
}

const char *tpl_ready_name(enum tpl_ready r)
{
	static const char *const names[] = { "", "port", "url", "process", "file", "command" };

	return names[r];
}

/* Debian's package name rule: [a-z0-9][a-z0-9+.-]+. */
static bool valid_package(const char *s)
{
	size_t n = strlen(s);

	if (n < 2 || !is_lower_digit(s[0]))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!is_lower_digit(s[i]) && s[i] != '+' && s[i] != '.' && s[i] != '-')
			return false;
	return true;
}

/* A user or group name as useradd takes it: [a-z_][a-z0-9_-]*, at most 32. */
static bool valid_account(const char *s, size_t n)
{
	if (n == 0 || n > 32 || !((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_lower_digit(s[i]) && s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

/* Components between slashes: none empty, none "." or "..". */
static bool clean_components(const char *p)
{
	while (*p) {
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p = *end ? end + 1 : end;
		if (*end && !*p)
			return false; /* a trailing slash */
	}
	return true;
}

static bool env_value_char(char c)
{
	/* Written into systemd and /etc/environment files verbatim: no quoting,
	 * escaping or expansion characters. */
	return c != '"' && c != '\'' && c != '\\' && c != '$' && c != '`';
}

static int push(void **arr, size_t *n, size_t size)
{
	void *p;

	if (*n >= TPL_MAX_ITEMS)
		return -E2BIG;
	p = realloc(*arr, (*n + 1) * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	memset((char *)p + *n * size, 0, size);
	(*n)++;
	return 0;
}

static int too_many(int r, struct tpl_error *err, unsigned line, const char *key)
{
	if (r == -E2BIG)
		return fail(err, line, key, "more than %d entries", TPL_MAX_ITEMS);
	return r;
}

static int parse_packages(struct template_conf *c, char *v, unsigned line, struct tpl_error *err)
{
	for (char *save = NULL, *w = strtok_r(v, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		int r;

		if (!valid_package(w))
			return fail(err, line, "packages", "'%s' is not a Debian package name ([a-z0-9][a-z0-9+.-]+)", w);
		for (size_t i = 0; i < c->n_packages; i++)
			if (strcmp(c->packages[i], w) == 0)
				return fail(err, line, "packages", "'%s' is listed twice", w);
		r = push((void **)&c->packages, &c->n_packages, sizeof(char *));
		if (r < 0)
			return too_many(r, err, line, "packages");
		if (!(c->packages[c->n_packages - 1] = strdup(w)))
			return -ENOMEM;
	}
	return 0;
}

/* file = SRC DEST OWNER[:GROUP] MODE */
static int parse_file(struct template_conf *c, char *v, unsigned line, struct tpl_error *err)
{
	char *f[5], *save = NULL, *colon;
	size_t n = 0;
	struct tpl_file *e;
	int r;

	for (char *w = strtok_r(v, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		if (n == 4)
			return fail(err, line, "file", "more than four fields (SRC DEST OWNER[:GROUP] MODE)");
		f[n++] = w;
	}
	if (n != 4)
		return fail(err, line, "file", "want four fields: SRC DEST OWNER[:GROUP] MODE");
	if (f[0][0] == '/' || !clean_components(f[0]))
		return fail(err, line, "file", "source '%s' must be a path inside the template directory "
			    "(relative, no '..', '.' or empty parts)", f[0]);
	if (f[1][0] != '/' || !f[1][1] || !clean_components(f[1] + 1))
		return fail(err, line, "file", "destination '%s' must be an absolute path "
			    "(no '..', '.' or empty parts)", f[1]);
	colon = strchr(f[2], ':');
	if (!valid_account(f[2], colon ? (size_t)(colon - f[2]) : strlen(f[2])) ||
	    (colon && !valid_account(colon + 1, strlen(colon + 1))))
		return fail(err, line, "file", "owner '%s' is not USER or USER:GROUP", f[2]);
	if (strlen(f[3]) < 3 || strlen(f[3]) > 4 || strspn(f[3], "01234567") != strlen(f[3]))
		return fail(err, line, "file", "mode '%s' is not 3 or 4 octal digits (e.g. 0644)", f[3]);
	for (size_t i = 0; i < c->n_files; i++)
		if (strcmp(c->files[i].dest, f[1]) == 0)
			return fail(err, line, "file", "destination %s is already written by line %u", f[1],
				    c->files[i].line);
	r = push((void **)&c->files, &c->n_files, sizeof(*c->files));
	if (r < 0)
		return too_many(r, err, line, "file");
	e = &c->files[c->n_files - 1];
	e->line = line;
	e->mode = (unsigned)strtoul(f[3], NULL, 8);
	if (colon)
		*colon = '\0';
	e->src = strdup(f[0]);
	e->dest = strdup(f[1]);
	e->owner = strdup(f[2]);
	e->group = strdup(colon ? colon + 1 : f[2]);
	return e->src && e->dest && e->owner && e->group ? 0 : -ENOMEM;
}

static int parse_env(struct template_conf *c, const char *v, unsigned line, struct tpl_error *err)
{
	const char *eq = strchr(v, '=');
	size_t n = eq ? (size_t)(eq - v) : 0;
	struct tpl_env *e;
	int r;

	if (!eq || n == 0 || !((v[0] >= 'A' && v[0] <= 'Z') || (v[0] >= 'a' && v[0] <= 'z') || v[0] == '_'))
		return fail(err, line, "env", "want NAME=VALUE with NAME of letters, digits and '_'");
	for (size_t i = 0; i < n; i++)
		if (!is_lower_digit(v[i]) && !(v[i] >= 'A' && v[i] <= 'Z') && v[i] != '_')
			return fail(err, line, "env", "name '%.*s' has a character other than letters, digits and '_'",
				    (int)n, v);
	for (const char *p = eq + 1; *p; p++)
		if (!env_value_char(*p))
			return fail(err, line, "env", "value of %.*s has '%c': quotes, '\\', '$' and '`' are not allowed",
				    (int)n, v, *p);
	for (size_t i = 0; i < c->n_env; i++)
		if (strlen(c->env[i].name) == n && memcmp(c->env[i].name, v, n) == 0)
			return fail(err, line, "env", "%.*s is set twice", (int)n, v);
	r = push((void **)&c->env, &c->n_env, sizeof(*c->env));
	if (r < 0)
		return too_many(r, err, line, "env");
	e = &c->env[c->n_env - 1];
	e->name = strndup(v, n);
	e->value = strdup(eq + 1);
	return e->name && e->value ? 0 : -ENOMEM;
}

static int parse_ready(struct template_conf *c, const char *v, unsigned line, struct tpl_error *err)
{
	static const struct {
		const char *word;
		enum tpl_ready kind;
	} kinds[] = {
		{ "port", TPL_READY_PORT }, { "url", TPL_READY_URL }, { "process", TPL_READY_PROCESS },
		{ "file", TPL_READY_FILE }, { "command", TPL_READY_COMMAND },
	};
	size_t wn = strcspn(v, " \t");
	const char *arg = v + wn + strspn(v + wn, " \t");
	uint64_t port;

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strlen(kinds[i].word) == wn && memcmp(kinds[i].word, v, wn) == 0)
			c->ready = kinds[i].kind;
	if (c->ready == TPL_READY_NONE)
		return fail(err, line, "ready", "'%.*s' is not a ready check (port N, url URL, process NAME, "
			    "file PATH, command CMD)", (int)wn, v);
	if (!*arg)
		return fail(err, line, "ready", "%s needs an argument", tpl_ready_name(c->ready));
	switch (c->ready) {
	case TPL_READY_PORT:
		if (parse_decimal(arg, 1, 65535, &port) < 0)
			return fail(err, line, "ready", "port '%s' is not a number in 1..65535", arg);
		break;
	case TPL_READY_URL:
		if ((strncmp(arg, "http://", 7) && strncmp(arg, "https://", 8)) || strpbrk(arg, " \t'\"\\"))
			return fail(err, line, "ready", "url '%s' is not one http:// or https:// URL", arg);
		break;
	case TPL_READY_PROCESS:
		/* Matched against /proc/PID/comm: at most 15 bytes, no '/'. */
		if (strlen(arg) > 15 || strpbrk(arg, "/ \t'\"\\"))
			return fail(err, line, "ready", "process '%s' is not a command name (1..15 characters, "
				    "no '/', blanks or quotes)", arg);
		break;
	case TPL_READY_FILE:
		if (arg[0] != '/' || !arg[1] || !clean_components(arg + 1) || strpbrk(arg, " \t'\"\\"))
			return fail(err, line, "ready", "file '%s' is not an absolute path without blanks or quotes",
				    arg);
		break;
	default:
		break;
	}
	return (c->ready_arg = strdup(arg)) ? 0 : -ENOMEM;
}

static int parse_number(const char *v, uint64_t min, uint64_t max, uint64_t *out, unsigned line, const char *key,
			struct tpl_error *err)
{
	if (parse_decimal(v, min, max, out) < 0)
		return fail(err, line, key, "'%s' is not a whole number in %llu..%llu", v, (unsigned long long)min,
			    (unsigned long long)max);
	return 0;
}

static int set_string(char **dst, const char *v)
{
	return (*dst = strdup(v)) ? 0 : -ENOMEM;
}

/* A flavor (the caller checks which), or an image of one's own: oci:PATH[:REF]
 * or docker-archive:FILE with PATH inside the template directory. Relative
 * and without '..' here; os-image/builder_base.py --confine checks it again
 * with its symlinks resolved. An image elsewhere on the build machine (another
 * tenant's) is the operator's to give, as base= on the command line. */
static int parse_base(struct template_conf *c, const char *v, unsigned line, struct tpl_error *err)
{
	const char *path = !strncmp(v, "oci:", 4) ? v + 4 : !strncmp(v, "docker-archive:", 15) ? v + 15 : NULL;

	if (path && (!path[0] || path[0] == '/' || !clean_components(path)))
		return fail(err, line, "base", "PATH must be relative, inside the template directory (no '..', '.' "
			    "or empty parts; copy the image there): '%s'", path);
	return set_string(&c->base, v);
}

static int parse_value(struct template_conf *c, enum key k, char *v, unsigned line, struct tpl_error *err)
{
	switch (k) {
	case K_NAME:
		if (!tpl_valid_name(v))
			return fail(err, line, "name", "'%s' is not a name ([a-z0-9][a-z0-9-]*, at most %d, "
				    "no trailing '-')", v, TPL_MAX_NAME);
		c->line_name = line;
		return set_string(&c->name, v);
	case K_BASE:
		c->line_base = line;
		return parse_base(c, v, line, err);
	case K_DESCRIPTION:
		return set_string(&c->description, v);
	case K_PACKAGES:
		return parse_packages(c, v, line, err);
	case K_FILE:
		return parse_file(c, v, line, err);
	case K_RUN: {
		int r = push((void **)&c->runs, &c->n_runs, sizeof(char *));
		if (r < 0)
			return too_many(r, err, line, "run");
		return set_string(&c->runs[c->n_runs - 1], v);
	}
	case K_ENV:
		return parse_env(c, v, line, err);
	case K_START:
		return set_string(&c->start, v);
	case K_RESTART:
		if (strcmp(v, "always") && strcmp(v, "on-failure") && strcmp(v, "no"))
			return fail(err, line, "restart", "'%s' is not always, on-failure or no", v);
		return set_string(&c->restart, v);
	case K_READY:
		return parse_ready(c, v, line, err);
	case K_READY_TIMEOUT:
		return parse_number(v, 1, 3600, &c->ready_timeout, line, "ready_timeout", err);
	case K_VCPU:
		return parse_number(v, 1, 64, &c->vcpu, line, "vcpu", err);
	case K_MEMORY_MB:
		return parse_number(v, 128, 65536, &c->memory_mb, line, "memory_mb", err);
	default:
		return -EINVAL;
	}
}

/* One line, NUL-terminated, no newline. */
static int parse_line(struct template_conf *c, char *s, unsigned line, unsigned seen[K_COUNT],
		      struct tpl_error *err)
{
	char *eq, *end, *v;
	size_t kn;
	int k = -1;

	while (is_blank(*s))
		s++;
	if (!*s || *s == '#')
		return 0;
	eq = strchr(s, '=');
	kn = strcspn(s, " \t=");
	if (!eq)
		return fail(err, line, "", "'%.*s': want KEY = VALUE", (int)(kn > 40 ? 40 : kn), s);
	for (int i = 0; i < K_COUNT; i++)
		if (strlen(key_names[i]) == kn && memcmp(key_names[i], s, kn) == 0)
			k = i;
	if (k < 0)
		return fail(err, line, "", "unknown key '%.*s' (known: " KNOWN_KEYS ")", (int)(kn > 40 ? 40 : kn), s);
	for (char *p = s + kn; p < eq; p++)
		if (!is_blank(*p))
			return fail(err, line, key_names[k], "want KEY = VALUE");
	if (seen[k] && !repeats((enum key)k))
		return fail(err, line, key_names[k], "duplicate key (first on line %u)", seen[k]);
	if (!seen[k])
		seen[k] = line;
	v = eq + 1;
	while (is_blank(*v))
		v++;
	end = v + strlen(v);
	while (end > v && is_blank(end[-1]))
		*--end = '\0';
	if (!*v && k != K_DESCRIPTION)
		return fail(err, line, key_names[k], "empty value");
	return parse_value(c, (enum key)k, v, line, err);
}

int tpl_parse(const char *buf, size_t len, struct template_conf *conf, struct tpl_error *err)
{
	unsigned seen[K_COUNT] = { 0 };
	char linebuf[TPL_MAX_LINE + 1];
	unsigned line = 0;
	size_t pos = 0;
	int r = 0;

	memset(conf, 0, sizeof(*conf));
	memset(err, 0, sizeof(*err));
	if (len > TPL_MAX_BYTES)
		return fail(err, 0, "", "larger than %d bytes", TPL_MAX_BYTES);
	while (pos < len && r == 0) {
		const char *nl = memchr(buf + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (buf + pos)) : len - pos;

		line++;
		if (n > TPL_MAX_LINE) {
			r = fail(err, line, "", "line longer than %d bytes", TPL_MAX_LINE);
			break;
		}
		for (size_t i = 0; i < n && r == 0; i++) {
			unsigned char ch = (unsigned char)buf[pos + i];
			if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
				r = fail(err, line, "", "control character 0x%02x (a CR? save with Unix line ends)", ch);
		}
		if (r)
			break;
		memcpy(linebuf, buf + pos, n);
		linebuf[n] = '\0';
		r = parse_line(conf, linebuf, line, seen, err);
		pos += n + (nl ? 1 : 0);
	}
	if (r == 0 && !conf->name)
		r = fail(err, 0, "name", "missing: every template needs a name");
	if (r == 0 && !conf->base)
		r = fail(err, 0, "base", "missing: every template needs a base: a flavor (e2b-rt, e2b-base, e2b-ci), "
			 "oci:PATH[:REF] or docker-archive:FILE");
	if (r == 0 && (conf->restart && !conf->start))
		r = fail(err, seen[K_RESTART], "restart", "set without a start command");
	if (r == 0 && conf->ready_timeout && conf->ready == TPL_READY_NONE)
		r = fail(err, seen[K_READY_TIMEOUT], "ready_timeout", "set without a ready check");
	if (r < 0) {
		if (r == -ENOMEM && !err->msg[0])
			fail(err, line, "", "out of memory");
		tpl_free(conf);
	}
	return r;
}

static void free_strings(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void tpl_free(struct template_conf *c)
{
	free(c->name);
	free(c->base);
	free(c->description);
	free(c->start);
	free(c->restart);
	free(c->ready_arg);
	free_strings(c->packages, c->n_packages);
	for (size_t i = 0; i < c->n_files; i++) {
		free(c->files[i].src);
		free(c->files[i].dest);
		free(c->files[i].owner);
		free(c->files[i].group);
	}
	free(c->files);
	free_strings(c->runs, c->n_runs);
	for (size_t i = 0; i < c->n_env; i++) {
		free(c->env[i].name);
		free(c->env[i].value);
	}
	free(c->env);
	memset(c, 0, sizeof(*c));
}
