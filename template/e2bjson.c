/* E2B's Template JSON reader (e2bjson.h). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf.h"
#include "e2bjson.h"

#define MAX_ARG_BYTES (256 * 1024)
#define MAX_USER_NAME 32

static const struct {
	const char *e2b, *flavor;
} e2b_templates[] = {
	{ "base", "e2b-base" },
	{ "code-interpreter-v1", "e2b-ci" },
	{ "code-interpreter", "e2b-ci" },
};

const char *e2b_flavor_of(const char *name)
{
	for (size_t i = 0; i < sizeof(e2b_templates) / sizeof(e2b_templates[0]); i++)
		if (!strcmp(name, e2b_templates[i].e2b))
			return e2b_templates[i].flavor;
	return NULL;
}

/* ":TAG" as registries take a tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; returns its length, 0 for none. */
static size_t tag_len(const char *s)
{
	size_t n = 1;

	if (s[0] != ':' || !(isalnum((unsigned char)s[1]) || s[1] == '_'))
		return 0;
	while (n < 129 && (isalnum((unsigned char)s[n]) || strchr("_.-", s[n])) && s[n])
		n++;
	return n;
}

/* "@sha256:" and 64 lowercase hex digits, to the end. */
static bool is_digest(const char *s)
{
	size_t i;

	if (strncmp(s, "@sha256:", 8))
		return false;
	for (i = 8; (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'); i++)
		;
	return i == 8 + 64 && !s[i];
}

const char *e2b_image_template(const char *ref)
{
	/* Docker Hub's names for itself; "docker.io/e2bdev/base" is "e2bdev/base". */
	static const char *const hub[] = { "docker.io/", "index.docker.io/", "registry-1.docker.io/", "" };
	static const struct {
		const char *repo, *e2b;
	} images[] = { { "e2bdev/base", "base" }, { "e2bdev/code-interpreter", "code-interpreter" } };

	for (size_t h = 0; h < sizeof(hub) / sizeof(hub[0]); h++) {
		const char *rest = ref + strlen(hub[h]);
		if (strncmp(ref, hub[h], strlen(hub[h])))
			continue;
		for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++) {
			const char *p = rest + strlen(images[i].repo);
			if (strncmp(rest, images[i].repo, strlen(images[i].repo)))
				continue;
			p += tag_len(p);
			if (!*p || is_digest(p))
				return images[i].e2b;
		}
	}
	return NULL;
}

__attribute__((format(printf, 4, 5))) static int fail(struct e2b_error *err, long step, const char *key,
						      const char *fmt, ...)
{
	va_list ap;

	err->step = step;
	snprintf(err->key, sizeof(err->key), "%s", key);
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* A login name as Debian's useradd takes it: [a-z_][a-z0-9_-]*[$]?, at most 32. */
static bool valid_user(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > MAX_USER_NAME || !((*s >= 'a' && *s <= 'z') || *s == '_'))
		return false;
	for (size_t i = 1; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
		      (c == '$' && i == n - 1)))
			return false;
	}
	return true;
}

/* A numeric id, 0 to 4294967294 ((uid_t)-1 is no id), as chown and id(1) take one. */
static bool valid_id(const char *s)
{
	size_t n = strspn(s, "0123456789");

	return n > 0 && n <= 10 && !s[n] && strtoull(s, NULL, 10) < UINT_MAX;
}

/* A login name or a numeric id: what the SDKs write for a user (USER 1000,
 * copy(user="1000:1000")); E2B's build hands either to id(1), chown and envd. */
static bool valid_account(const char *s)
{
	return valid_user(s) || valid_id(s);
}

/* OWNER[:GROUP], as COPY's third argument (E2B's chown takes it as is) and USER's first. */
static bool valid_owner(const char *s)
{
	char user[MAX_USER_NAME + 2];
	const char *colon = strchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : strlen(s);

	if (n > MAX_USER_NAME)
		return false;
	memcpy(user, s, n);
	user[n] = '\0';
	return valid_account(user) && (!colon || valid_account(colon + 1));
}

static bool valid_env_name(const char *s)
{
	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
		return false;
	for (s++; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

static bool valid_files_hash(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return i == 64;
}

/* "", or up to four octal digits (the SDKs write "0755"). */
static bool valid_mode(const char *s)
{
	size_t n = strlen(s);

	if (n > 4)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '7')
			return false;
	return true;
}

/* A COPY source: relative to the template directory and, read component by
 * component, never above it (the SDK refuses the same; its globs stay). */
static bool stays_inside(const char *p)
{
	long depth = 0;

	if (*p == '/' || *p == '\0')
		return false;
	while (*p) {
		size_t n = strcspn(p, "/");
		if (n == 2 && !strncmp(p, "..", 2)) {
			if (--depth < 0)
				return false;
		} else if (n > 0 && !(n == 1 && *p == '.')) {
			depth++;
		}
		p += n;
		p += *p == '/';
	}
	return true;
}

/* A control byte other than tab and newline (commands may span lines). */
static bool has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 ? (*s != '\t' && *s != '\n') : *s == 0x7f)
			return true;
	return false;
}

/* A path: commands and values may span lines, a path may not (it goes into
 * the launcher's comment, the labels and the build's messages). */
static bool one_line(const char *s)
{
	return !strpbrk(s, "\t\n");
}

/* An image reference as registries name them: [host[:port]/]path[:tag][@digest]. */
static bool valid_image_ref(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 255 || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("._-/:@+", c)))
			return false;
	}
	return !strstr(s, "//") && s[n - 1] != '/' && s[n - 1] != ':' && s[n - 1] != '@';
}

/* The step's args: an array of strings without control bytes (tab and
 * newline aside), each at most MAX_ARG_BYTES. Returns their count or -EINVAL. */
static long string_args(json_t *args, long i, const char *type, struct e2b_error *err)
{
	size_t k;
	json_t *a;

	if (!json_is_array(args))
		return fail(err, i, "args", "%s: 'args' must be an array of strings", type);
	json_array_foreach(args, k, a) {
		if (!json_is_string(a))
			return fail(err, i, "args", "%s: argument %zu is not a string", type, k + 1);
		if (json_string_length(a) > MAX_ARG_BYTES)
			return fail(err, i, "args", "%s: argument %zu is larger than 256 KiB", type, k + 1);
		if (has_control(json_string_value(a)))
			return fail(err, i, "args", "%s: argument %zu has a control character other than tab and newline",
				    type, k + 1);
	}
	return (long)json_array_size(args);
}

#define ARG(k) json_string_value(json_array_get(args, (k)))

static int check_copy(json_t *args, long n, long i, struct e2b_error *err)
{
	if (n < 2 || n > 4)
		return fail(err, i, "args", "COPY takes [src, dest, owner, mode] (2 to 4 arguments), not %ld", n);
	if (!stays_inside(ARG(0)))
		return fail(err, i, "args",
			    "COPY: source '%.80s' is absolute, empty or leads above the template directory; "
			    "copy the files into the template directory and name them relative to it", ARG(0));
	if (!*ARG(1))
		return fail(err, i, "args", "COPY: the destination is empty");
	if (!one_line(ARG(0)) || !one_line(ARG(1)))
		return fail(err, i, "args", "COPY: a source or destination with a tab or newline in it; "
			    "name the files without one");
	if (n > 2 && *ARG(2) && !valid_owner(ARG(2)))
		return fail(err, i, "args", "COPY: owner '%.64s' is not USER or USER:GROUP of login names or numeric ids",
			    ARG(2));
	if (n > 3 && !valid_mode(ARG(3)))
		return fail(err, i, "args", "COPY: mode '%.16s' is not up to four octal digits", ARG(3));
	return 0;
}

static int check_args(const char *type, json_t *args, long i, struct e2b_error *err)
{
	long n = string_args(args, i, type, err);

	if (n < 0)
		return (int)n;
	if (!strcmp(type, "RUN")) {
		if (n < 1 || n > 2 || !*ARG(0))
			return fail(err, i, "args", "RUN takes [command] or [command, user], with a command");
		if (n == 2 && !valid_account(ARG(1)))
			return fail(err, i, "args", "RUN: user '%.64s' is not a login name or a numeric uid", ARG(1));
	} else if (!strcmp(type, "COPY")) {
		return check_copy(args, n, i, err);
	} else if (!strcmp(type, "ENV")) {
		if (n < 2 || n % 2)
			return fail(err, i, "args", "ENV takes name, value pairs, not %ld arguments", n);
		for (long k = 0; k < n; k += 2)
			if (!valid_env_name(ARG(k)))
				return fail(err, i, "args", "ENV: '%.64s' is not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
					    ARG(k));
	} else if (!strcmp(type, "WORKDIR")) {
		if (n != 1 || !*ARG(0))
			return fail(err, i, "args", "WORKDIR takes [path], with a path");
		if (!one_line(ARG(0)))
			return fail(err, i, "args", "WORKDIR: the path has a tab or newline in it; name one without");
	} else { /* USER */
		if (n < 1 || n > 2 || !valid_owner(ARG(0)))
			return fail(err, i, "args", "USER takes [name] or [name, \"true\"]: a login name or a numeric uid, "
				    "with :GROUP (a name or a gid) or without");
		if (n == 2 && strcmp(ARG(1), "true") && strcmp(ARG(1), "false"))
			return fail(err, i, "args", "USER: the second argument (sudo) is \"true\" or \"false\"");
	}
	return 0;
}

#undef ARG

/* A step's type as E2B's build dispatches it (upper-cased; ADD is COPY, ARG is ENV). */
static const char *step_type(const char *t)
{
	static const char *const types[] = { "RUN", "COPY", "ENV", "WORKDIR", "USER" };

	if (!strcasecmp(t, "ADD"))
		return "COPY";
	if (!strcasecmp(t, "ARG"))
		return "ENV";
	for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++)
		if (!strcasecmp(t, types[k]))
			return types[k];
	return NULL;
}

static bool bool_or_absent(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return !v || json_is_boolean(v);
}

static int read_step(json_t *s, long i, json_t *steps, struct e2b_error *err)
{
	static const char *const known[] = { "type", "args", "force", "filesHash", "forceUpload", "resolveSymlinks",
					     "gzip" };
	const char *key, *type, *hash = NULL;
	json_t *v, *t = json_object_get(s, "type"), *args = json_object_get(s, "args"), *out;
	int r;

	if (!json_is_object(s))
		return fail(err, i, "", "a step must be an object {type, args, force, filesHash}");
	json_object_foreach(s, key, v) {
		size_t k = 0;
		while (k < sizeof(known) / sizeof(known[0]) && strcmp(key, known[k]))
			k++;
		if (k == sizeof(known) / sizeof(known[0]))
			return fail(err, i, "", "unknown key '%.40s' (a step has type, args, force, filesHash, "
				    "forceUpload, resolveSymlinks, gzip)", key);
	}
	if (!json_is_string(t))
		return fail(err, i, "type", "no type: a step's \"type\" is RUN, COPY, ENV, WORKDIR or USER");
	type = step_type(json_string_value(t));
	if (!type)
		return fail(err, i, "type",
			    "unknown step type '%.40s': E2B's build runs RUN, COPY (ADD), ENV (ARG), WORKDIR and USER; "
			    "regenerate the JSON with the SDK", json_string_value(t));
	if (!args)
		return fail(err, i, "args", "%s: no \"args\"", type);
	r = check_args(type, args, i, err);
	if (r < 0)
		return r;
	if (!bool_or_absent(s, "force") || !bool_or_absent(s, "forceUpload") || !bool_or_absent(s, "resolveSymlinks") ||
	    !bool_or_absent(s, "gzip"))
		return fail(err, i, "", "%s: force, forceUpload, resolveSymlinks and gzip are true or false", type);
	v = json_object_get(s, "filesHash");
	if (strcmp(type, "COPY")) {
		if (v)
			return fail(err, i, "filesHash", "%s: only a COPY step has a filesHash", type);
	} else {
		if (!json_is_string(v) || !valid_files_hash(json_string_value(v)))
			return fail(err, i, "filesHash",
				    "COPY: no filesHash of 64 lowercase hex digits (the JS SDK's Template.toJSON(t, false) "
				    "writes none); write the JSON with Template.to_json(t) or toJSON(t) from the template's "
				    "own folder");
		hash = json_string_value(v);
	}
	out = json_pack("{s:I, s:s, s:O, s:b}", "index", (json_int_t)i, "type", type, "args", args, "force",
			json_is_true(json_object_get(s, "force")));
	if (!out)
		return -ENOMEM;
	if (hash) {
		/* The SDKs send four; a JSON written by hand may stop after dest. */
		json_t *a = json_object_get(out, "args");
		json_object_set_new(out, "args", a = json_copy(a));
		while (a && json_array_size(a) < 4)
			json_array_append_new(a, json_string(""));
		json_object_set_new(out, "filesHash", json_string(hash));
		/* Only the JS SDK writes it; the Python SDK hashes with it unwritten. */
		if (json_object_get(s, "resolveSymlinks"))
			json_object_set(out, "resolveSymlinks", json_object_get(s, "resolveSymlinks"));
	}
	return json_array_append_new(steps, out) == 0 ? 0 : -ENOMEM;
}

static int read_from(json_t *root, json_t *o, struct e2b_error *err)
{
	json_t *img = json_object_get(root, "fromImage"), *tpl = json_object_get(root, "fromTemplate");
	json_t *from;

	if (img && tpl)
		return fail(err, -1, "fromTemplate",
			    "both fromImage and fromTemplate: E2B builds on exactly one (the Python SDK writes both "
			    "after from_template(...).from_dockerfile(...)); keep one");
	if (!img && !tpl)
		return fail(err, -1, "fromImage", "neither fromImage nor fromTemplate: a template builds on one of them");
	if (img) {
		const char *ref = json_is_string(img) ? json_string_value(img) : "";
		if (strstr(ref, "${") || (*ref == '$'))
			return fail(err, -1, "fromImage",
				    "'%.80s' is an unexpanded build ARG (the SDK's from_dockerfile keeps FROM as "
				    "written); name the image in FROM", ref);
		if (!valid_image_ref(ref))
			return fail(err, -1, "fromImage",
				    "'%.80s' is not an image reference ([registry/]name[:tag][@digest])", ref);
		/* E2B's own images are our flavors, whatever their tag: the SDKs'
		 * default base (Template() writes fromImage "e2bdev/base") is base. */
		if (e2b_image_template(ref))
			from = json_pack("{s:s, s:s, s:s}", "kind", "flavor", "name",
					 e2b_flavor_of(e2b_image_template(ref)), "as", e2b_image_template(ref));
		else
			from = json_pack("{s:s, s:s}", "kind", "image", "ref", ref);
	} else {
		const char *name = json_is_string(tpl) ? json_string_value(tpl) : "", *flavor = e2b_flavor_of(name);
		if (flavor)
			from = json_pack("{s:s, s:s, s:s}", "kind", "flavor", "name", flavor, "as", name);
		else if (strchr(name, ':'))
			return fail(err, -1, "fromTemplate",
				    "'%.80s' has a tag: a local template is named by its folder's name alone", name);
		else if (!tpl_valid_name(name))
			return fail(err, -1, "fromTemplate",
				    "'%.80s' is neither one of E2B's templates (base, code-interpreter-v1, "
				    "code-interpreter) nor a template's folder name ([a-z0-9][a-z0-9-]*)", name);
		else
			from = json_pack("{s:s, s:s}", "kind", "template", "name", name);
	}
	return from && json_object_set_new(o, "from", from) == 0 ? 0 : -ENOMEM;
}

/* fromImageRegistry: credentials are not taken from the JSON (they would
 * reach the image's build record and logs); only the type is kept, so the
 * build can say where it takes them from instead. */
static int read_registry(json_t *root, json_t *o, struct e2b_error *err)
{
	json_t *reg = json_object_get(root, "fromImageRegistry");
	const char *type;

	if (!reg)
		return json_object_set_new(o, "registry_auth", json_null());
	type = json_string_value(json_object_get(reg, "type"));
	if (!json_is_object(reg) || !type || (strcmp(type, "registry") && strcmp(type, "aws") && strcmp(type, "gcp")))
		return fail(err, -1, "fromImageRegistry", "not an object with type registry, aws or gcp");
	if (!json_object_get(root, "fromImage"))
		return fail(err, -1, "fromImageRegistry", "given without fromImage");
	return json_object_set_new(o, "registry_auth", json_string(type));
}

static int read_cmd(json_t *root, const char *key, json_t *o, const char *out_key, struct e2b_error *err)
{
	json_t *v = json_object_get(root, key);

	if (!v)
		return json_object_set_new(o, out_key, json_null());
	if (!json_is_string(v) || !json_string_length(v))
		return fail(err, -1, key, "must be a command (a non-empty string)");
	if (json_string_length(v) > MAX_ARG_BYTES || has_control(json_string_value(v)))
		return fail(err, -1, key, "larger than 256 KiB, or has a control character other than tab and newline");
	return json_object_set(o, out_key, v);
}

static int read_template(json_t *root, json_t *o, struct e2b_error *err)
{
	static const char *const known[] = { "fromImage", "fromTemplate", "fromImageRegistry", "force", "steps",
					     "startCmd", "readyCmd" };
	const char *key;
	json_t *v, *steps = json_object_get(root, "steps"), *out;
	int r;

	json_object_foreach(root, key, v) {
		size_t k = 0;
		while (k < sizeof(known) / sizeof(known[0]) && strcmp(key, known[k]))
			k++;
		if (k == sizeof(known) / sizeof(known[0]))
			return fail(err, -1, "", "unknown key '%.40s' (a Template JSON has fromImage or fromTemplate, "
				    "fromImageRegistry, force, steps, startCmd, readyCmd)", key);
	}
	if ((r = read_from(root, o, err)) < 0 || (r = read_registry(root, o, err)) < 0)
		return r;
	if (!bool_or_absent(root, "force"))
		return fail(err, -1, "force", "must be true or false");
	json_object_set_new(o, "force", json_boolean(json_is_true(json_object_get(root, "force"))));
	if (steps && !json_is_array(steps))
		return fail(err, -1, "steps", "must be an array of steps");
	if (json_array_size(steps) > E2B_MAX_STEPS)
		return fail(err, -1, "steps", "more than %d steps", E2B_MAX_STEPS);
	out = json_array();
	if (!out || json_object_set_new(o, "steps", out) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < json_array_size(steps); i++)
		if ((r = read_step(json_array_get(steps, i), (long)i, out, err)) < 0)
			return r;
	if ((r = read_cmd(root, "startCmd", o, "start_cmd", err)) < 0)
		return r;
	return read_cmd(root, "readyCmd", o, "ready_cmd", err);
}

/* "bun" as a word of s: not inside a longer name (ubuntu, bunny, bun-x). */
static bool names_bun(const char *s)
{
	for (const char *p = s; (p = strstr(p, "bun")); p += 3) {
		bool before = p == s || !(isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '-');
		bool after = !(isalnum((unsigned char)p[3]) || p[3] == '_' || p[3] == '-');
		if (before && after)
			return true;
	}
	return false;
}

long e2b_bun_install_step(json_t *steps)
{
	size_t i, k;
	json_t *s, *a;

	json_array_foreach(steps, i, s) {
		const char *type = json_string_value(json_object_get(s, "type"));
		const char *cmd = json_string_value(json_array_get(json_object_get(s, "args"), 0));
		/* What bun_install writes: "bun install", then -g, --dev or packages. */
		if (type && cmd && !strcmp(type, "RUN") && !strncmp(cmd, "bun install", 11) &&
		    (!cmd[11] || cmd[11] == ' '))
			return (long)i;
		/* A step before it that names bun may install it (npm install -g bun, curl bun.sh/install). */
		json_array_foreach(json_object_get(s, "args"), k, a)
			if (json_is_string(a) && names_bun(json_string_value(a)))
				return -1;
	}
	return -1;
}

int e2b_parse(const char *buf, size_t len, json_t **out, struct e2b_error *err)
{
	json_error_t jerr;
	json_t *root, *o;
	int r;

	*out = NULL;
	memset(err, 0, sizeof(*err));
	err->step = -1;
	if (len > E2B_MAX_BYTES) {
		fail(err, -1, "", "larger than 1 MiB");
		return -EFBIG;
	}
	/* Duplicate keys would let two readers see two templates. */
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return fail(err, -1, "", "not JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
	if (!json_is_object(root)) {
		json_decref(root);
		return fail(err, -1, "", "not a JSON object: write it with the SDK's Template.to_json(template)");
	}
	o = json_object();
	r = o ? read_template(root, o, err) : -ENOMEM;
	json_decref(root);
	if (r < 0) {
		json_decref(o);
		if (r == -ENOMEM)
			fail(err, -1, "", "out of memory");
		return r;
	}
	*out = o;
	return 0;
}
