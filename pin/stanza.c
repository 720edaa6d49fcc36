/* Printing stanzas: one from a lock as JSON or one field (so shell and Python
 * read locks through the one parser), and --print-pin's new stanza. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cleanup.h"
#include "lock.h"
#include "pinfetch.h"

static int flush_stdout(char *why, size_t why_len)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		snprintf(why, why_len, "writing to stdout: %s", strerror(errno));
		return -EIO;
	}
	return 0;
}

int stanza_print_json(const struct artifact *a)
{
	json_t *j = json_pack("{s:s, s:s, s:s}", "name", a->name, "version", a->version, "url", a->url);
	char tree[NAR_SRI_SIZE];
	int r = j ? 0 : -ENOMEM;

	if (j && a->has_sha256 && json_object_set_new(j, "sha256", json_string(a->sha256)) < 0)
		r = -ENOMEM;
	if (j && a->has_tree) {
		nar_sri(a->tree_sha256, tree);
		if (json_object_set_new(j, "tree_sha256", json_string(tree)) < 0)
			r = -ENOMEM;
	}
	if (j && a->has_commit && json_object_set_new(j, "commit", json_string(a->commit)) < 0)
		r = -ENOMEM;
	if (j && a->has_size && json_object_set_new(j, "size", json_integer((json_int_t)a->size)) < 0)
		r = -ENOMEM;
	if (r == 0 && (json_dumpf(j, stdout, JSON_SORT_KEYS | JSON_COMPACT) < 0 || putchar('\n') == EOF))
		r = -EIO;
	json_decref(j);
	if (r == 0 && fflush(stdout) != 0)
		r = -errno;
	return r;
}

int stanza_print_field(const struct artifact *a, const char *key, char *why, size_t why_len)
{
	char size[24], tree[NAR_SRI_SIZE];
	const char *value = NULL;

	if (strcmp(key, "name") == 0)
		value = a->name;
	else if (strcmp(key, "version") == 0)
		value = a->version;
	else if (strcmp(key, "url") == 0)
		value = a->url;
	else if (strcmp(key, "sha256") == 0 || strcmp(key, "tree_sha256") == 0) {
		bool tree_key = key[0] == 't';
		if (!(tree_key ? a->has_tree : a->has_sha256)) {
			snprintf(why, why_len, "[%s] has no %s (it pins the %s)", a->name, key,
				 tree_key ? "archive's bytes only" : "unpacked tree only");
			return -ENOENT;
		}
		if (tree_key)
			nar_sri(a->tree_sha256, tree);
		value = tree_key ? tree : a->sha256;
	} else if (strcmp(key, "commit") == 0) {
		if (!a->has_commit) {
			snprintf(why, why_len, "[%s] has no commit (it is optional)", a->name);
			return -ENOENT;
		}
		value = a->commit;
	} else if (strcmp(key, "size") == 0) {
		if (!a->has_size) {
			snprintf(why, why_len, "[%s] has no size (it is optional)", a->name);
			return -ENOENT;
		}
		snprintf(size, sizeof(size), "%llu", (unsigned long long)a->size);
		value = size;
	} else {
		snprintf(why, why_len, "--field %s: unknown key (known: name, version, url, sha256, tree_sha256, size, commit)", key);
		return -EINVAL;
	}
	printf("%s\n", value);
	return flush_stdout(why, why_len);
}

static int check_print_pin_args(const struct options *o, char *why, size_t why_len)
{
	if (fetch_url_allowed(o->print_pin, SOURCE_CANONICAL, o->allow_http, NULL, why, why_len) < 0) {
		char policy[256];
		snprintf(policy, sizeof(policy), "%s", why);
		snprintf(why, why_len, "%s: %s", o->print_pin, policy);
		return -EINVAL;
	}
	if (strncmp(o->print_pin, "https://", 8) != 0 && strncmp(o->print_pin, "http://", 7) != 0) {
		snprintf(why, why_len, "%s: a pin's url must be https:// or http://", o->print_pin);
		return -EINVAL;
	}
	for (const char *c = o->print_pin; *c; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f) {
			snprintf(why, why_len, "the URL contains a blank or a non-ASCII byte; percent-encode it");
			return -EINVAL;
		}
	if (o->name && !lock_valid_name(o->name, strlen(o->name))) {
		snprintf(why, why_len, "--name: invalid artifact name \"%s\"", o->name);
		return -EINVAL;
	}
	return 0;
}

int stanza_print_pin(const struct options *o, char *why, size_t why_len, bool *usage)
{
	struct fetch_opts fopts = {
		.allow_http = o->allow_http, .timeout = o->timeout, .max_size = o->max_size, .ca_file = o->ca_file,
		.progress = !o->quiet && isatty(STDERR_FILENO), .label = "print-pin",
	};
	struct fetch_result res;
	_cleanup_free_ char *name = NULL, *version = NULL;
	int r;

	*usage = true;
	if ((r = check_print_pin_args(o, why, why_len)) < 0)
		return r;
	name = o->name ? strdup(o->name) : artifact_name_from_url(o->print_pin);
	version = o->version ? strdup(o->version) : artifact_version_from_url(o->print_pin);
	if (!version) {
		snprintf(why, why_len, "%s: cannot tell the version from the URL; pass --version", o->print_pin);
		return -EINVAL;
	}
	if (!lock_valid_version(version, strlen(version))) {
		snprintf(why, why_len, "--version: invalid version \"%s\" (1-%d letters, digits and \"%s\")", version,
			 LOCK_MAX_VERSION, LOCK_VERSION_PUNCT);
		return -EINVAL;
	}
	*usage = false;
	/* Kept (unnamed, under $TMPDIR) to be unpacked for the tree pin when it is an archive. */
	const char *tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	_cleanup_close_ int fd = open(tmpdir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(why, why_len, "%s: cannot make a temporary file in %s: %s", name, tmpdir, strerror(errno));
		return -errno;
	}
	r = fetch_url(o->print_pin, SOURCE_CANONICAL, fd, &fopts, &res);
	if (r < 0) {
		snprintf(why, why_len, "%s: %s, from %s; %s", name, res.detail, o->print_pin, fetch_hint(res.failure));
		return r;
	}
	printf("[%s]\nversion = %s\nurl = %s\nsha256 = %s\nsize = %llu\n", name, version, o->print_pin, res.sha256,
	       (unsigned long long)res.bytes);
	unsigned char tree[NAR_DIGEST_SIZE];
	char detail[1400], sri[NAR_SRI_SIZE];
	r = tree_pin_of_archive(fd, &o->limits, tree, detail, sizeof(detail));
	if (r == 0) {
		nar_sri(tree, sri);
		printf("tree_sha256 = %s\n", sri);
	} else if (r != -EMEDIUMTYPE) {
		fflush(stdout);
		snprintf(why, why_len, "%s: from %s: %s", name, o->print_pin, detail);
		return r;
	}
	return flush_stdout(why, why_len);
}
