/* See init_args.h. */
#include "init_args.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decimal.h"
#include "why.h"

/* [A-Za-z_][A-Za-z0-9_]*: what a shell, and so the user's code, can read back. */
static bool env_name(const char *name, size_t len)
{
	if (len == 0 || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

static int check_env(const struct init_args *a, const char *arg, char *why, size_t why_len)
{
	const char *eq = strchr(arg, '=');

	if (!eq)
		return why_invalid(why, why_len, "--env '%s': no '=' (give NAME=VALUE; NAME= for an empty value)", arg);
	size_t len = (size_t)(eq - arg);
	if (!env_name(arg, len))
		return why_invalid(why, why_len, "--env '%s': '%.*s' is not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
				   arg, (int)len, arg);
	for (size_t i = 0; i < a->n_env; i++)
		if (strncmp(a->env[i], arg, len + 1) == 0)
			return why_invalid(why, why_len, "--env: %.*s given twice", (int)len, arg);
	if (a->n_env == INIT_MAX_ENV)
		return why_invalid(why, why_len, "--env: more than %d variables", INIT_MAX_ENV);
	return 0;
}

static int check_mount(const struct init_args *a, const char *arg, char *why, size_t why_len)
{
	const char *eq = strchr(arg, '=');

	if (arg[0] != '/' || !eq || !eq[1])
		return why_invalid(why, why_len, "--volume-mount '%s': expected PATH=NFS_TARGET, PATH absolute "
				   "(e.g. /mnt/data=nfs.example:/export/data)", arg);
	if (a->n_mounts == INIT_MAX_MOUNTS)
		return why_invalid(why, why_len, "--volume-mount: more than %d mounts", INIT_MAX_MOUNTS);
	return 0;
}

static int check_text(const char *option, const char *arg, char *why, size_t why_len)
{
	if (!*arg)
		return why_invalid(why, why_len, "%s: empty (leave the option out for envd's default)", option);
	return 0;
}

int init_args_parse(int argc, char **argv, bool restore, struct init_args *a, char *why, size_t why_len)
{
	static const struct option opts[] = {
		{ "token-file", required_argument, NULL, 't' },
		{ "env", required_argument, NULL, 'e' },
		{ "user", required_argument, NULL, 'u' },
		{ "workdir", required_argument, NULL, 'w' },
		{ "volume-mount", required_argument, NULL, 'm' },
		{ "ca-bundle", required_argument, NULL, 'c' },
		{ "lifecycle-id", required_argument, NULL, 'l' },
		{ "generation", required_argument, NULL, 'g' },
		{ "document", required_argument, NULL, 'd' },
		{ 0 },
	};
	const char *cmd = restore ? "restore" : "init";
	int c, r = 0;

	*a = (struct init_args){ 0 };
	optind = 1;
	opterr = 0;
	while (r == 0 && (c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (!restore && (c == 'g' || c == 'd'))
			return why_invalid(why, why_len, "init: --%s belongs to restore", c == 'g' ? "generation" : "document");
		switch (c) {
		case 't':
			a->token_file = optarg;
			r = check_text("--token-file", optarg, why, why_len);
			break;
		case 'e':
			r = check_env(a, optarg, why, why_len);
			if (r == 0)
				a->env[a->n_env++] = optarg;
			break;
		case 'u':
			a->user = optarg;
			r = check_text("--user", optarg, why, why_len);
			break;
		case 'w':
			a->workdir = optarg;
			r = check_text("--workdir", optarg, why, why_len);
			if (r == 0 && optarg[0] != '/')
				r = why_invalid(why, why_len, "--workdir '%s': not an absolute path", optarg);
			break;
		case 'm':
			r = check_mount(a, optarg, why, why_len);
			if (r == 0)
				a->mounts[a->n_mounts++] = optarg;
			break;
		case 'c':
			a->ca_bundle_file = optarg;
			r = check_text("--ca-bundle", optarg, why, why_len);
			break;
		case 'l':
			a->lifecycle_id = optarg;
			r = check_text("--lifecycle-id", optarg, why, why_len);
			break;
		case 'g':
			if (parse_decimal(optarg, 1, INT64_MAX, &a->generation) < 0)
				r = why_invalid(why, why_len, "--generation '%s': expected 1-%lld", optarg,
						(long long)INT64_MAX);
			break;
		case 'd':
			a->document_file = optarg;
			r = check_text("--document", optarg, why, why_len);
			break;
		default:
			return why_invalid(why, why_len, "%s: unknown option or missing value: '%s'", cmd,
					   argv[optind - 1]);
		}
	}
	if (r < 0)
		return r;
	if (optind != argc)
		return why_invalid(why, why_len, "%s: unexpected argument '%s'", cmd, argv[optind]);
	if (!a->token_file)
		return why_invalid(why, why_len, "%s: --token-file FILE (or - for stdin) is required: the access "
				   "token is never taken from the command line", cmd);
	if (restore && (!a->generation || !a->document_file))
		return why_invalid(why, why_len, "restore: --generation N and --document FILE are required");
	return 0;
}

int init_token_check(char *token, size_t *len, char *why, size_t why_len)
{
	size_t n = *len;

	if (n && token[n - 1] == '\n')
		n--;
	if (n && token[n - 1] == '\r')
		n--;
	token[n] = '\0';
	*len = n;
	if (n == 0)
		return -ENODATA;
	if (n > INIT_TOKEN_MAX)
		return why_invalid(why, why_len, "longer than %d bytes", INIT_TOKEN_MAX);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)token[i];
		if (c < 0x21 || c > 0x7e || c == '"' || c == '\\')
			return why_invalid(why, why_len, "byte %zu is %s (a token is printable ASCII without spaces, "
					   "'\"' or '\\', all on one line)", i + 1,
					   c == '\n' ? "a second line" : c == ' ' ? "a space" : "not allowed");
	}
	return 0;
}

int init_timestamp(const struct timespec *t, char *out, size_t out_len)
{
	struct tm tm;
	char date[32];

	if (!gmtime_r(&t->tv_sec, &tm) || strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
		return -EOVERFLOW;
	int n = snprintf(out, out_len, "%s.%09ldZ", date, t->tv_nsec);
	return n < 0 || (size_t)n >= out_len ? -EOVERFLOW : 0;
}

/* json_string refuses what is not UTF-8: said, naming the option. */
static int set_string(json_t *obj, const char *key, const char *value, const char *option, char *why,
		      size_t why_len)
{
	json_t *s = json_string(value);

	if (!s)
		return why_invalid(why, why_len, "%s: not valid UTF-8", option);
	return json_object_set_new(obj, key, s) == 0 ? 0 : -ENOMEM;
}

static int add_env(json_t *body, const struct init_args *a, char *why, size_t why_len)
{
	json_t *vars = json_object();

	if (!vars || json_object_set_new(body, "envVars", vars) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < a->n_env; i++) {
		const char *eq = strchr(a->env[i], '=');
		char name[256];
		int n = snprintf(name, sizeof(name), "%.*s", (int)(eq - a->env[i]), a->env[i]);
		if (n < 0 || (size_t)n >= sizeof(name))
			return why_invalid(why, why_len, "--env %.40s…: name longer than %zu bytes", a->env[i],
					   sizeof(name) - 1);
		int r = set_string(vars, name, eq + 1, "--env", why, why_len);
		if (r < 0)
			return r == -EINVAL ? why_invalid(why, why_len, "--env %s: value is not valid UTF-8", name) : r;
	}
	return 0;
}

static int add_mounts(json_t *body, const struct init_args *a, char *why, size_t why_len)
{
	json_t *list = json_array();

	if (!list || json_object_set_new(body, "volumeMounts", list) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < a->n_mounts; i++) {
		const char *spec = a->mounts[i], *eq = strchr(spec, '=');
		json_t *m = json_object();
		if (!m || json_array_append_new(list, m) < 0)
			return -ENOMEM;
		json_t *path = json_stringn(spec, (size_t)(eq - spec));
		if (!path || json_object_set_new(m, "path", path) < 0)
			return why_invalid(why, why_len, "--volume-mount %s: not valid UTF-8", spec);
		int r = set_string(m, "nfs_target", eq + 1, "--volume-mount", why, why_len);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Everything but the token, as a JSON object. */
static int body_rest(const struct init_args *a, const char *ca_bundle, const struct timespec *now, char **out,
		     char *why, size_t why_len)
{
	json_t *body = json_object();
	char stamp[64];
	int r = body ? init_timestamp(now, stamp, sizeof(stamp)) : -ENOMEM;

	if (r == 0)
		r = set_string(body, "timestamp", stamp, "timestamp", why, why_len);
	if (r == 0 && a->n_env)
		r = add_env(body, a, why, why_len);
	if (r == 0 && a->user)
		r = set_string(body, "defaultUser", a->user, "--user", why, why_len);
	if (r == 0 && a->workdir)
		r = set_string(body, "defaultWorkdir", a->workdir, "--workdir", why, why_len);
	if (r == 0 && ca_bundle)
		r = set_string(body, "caBundle", ca_bundle, "--ca-bundle", why, why_len);
	if (r == 0 && a->lifecycle_id)
		r = set_string(body, "lifecycleID", a->lifecycle_id, "--lifecycle-id", why, why_len);
	if (r == 0 && a->n_mounts)
		r = add_mounts(body, a, why, why_len);
	if (r == 0) {
		*out = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
		r = *out ? 0 : -ENOMEM;
	}
	json_decref(body);
	return r;
}

int init_body(const struct init_args *a, const char *token, size_t token_len, const char *ca_bundle,
	      const struct timespec *now, char **out, size_t *out_len, char *why, size_t why_len)
{
	static const char head[] = "{\"accessToken\":\"";
	char *rest = NULL;
	int r = body_rest(a, ca_bundle, now, &rest, why, why_len);

	if (r < 0)
		return r;
	/* rest is "{...}" with at least the timestamp: its '{' becomes the
	 * token's closing '",'. */
	size_t rest_len = strlen(rest), len = sizeof(head) - 1 + token_len + 2 + rest_len - 1;
	char *buf = malloc(len + 1);
	if (!buf) {
		free(rest);
		return -ENOMEM;
	}
	memcpy(buf, head, sizeof(head) - 1);
	memcpy(buf + sizeof(head) - 1, token, token_len);
	memcpy(buf + sizeof(head) - 1 + token_len, "\",", 2);
	memcpy(buf + sizeof(head) - 1 + token_len + 2, rest + 1, rest_len);
	free(rest);
	*out = buf;
	*out_len = len;
	return 0;
}
