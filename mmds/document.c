/* See document.h. */
#include "document.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int doc_dump(const json_t *v, char **out, size_t *out_len)
{
	size_t n = json_dumpb(v, NULL, 0, DOC_DUMP_FLAGS);
	if (n == 0)
		return -EINVAL;
	char *buf = malloc(n + 1);
	if (!buf)
		return -ENOMEM;
	if (json_dumpb(v, buf, n, DOC_DUMP_FLAGS) != n) {
		free(buf);
		return -EINVAL;
	}
	buf[n] = '\0';
	*out = buf;
	*out_len = n;
	return 0;
}

int doc_parse(const char *buf, size_t len, size_t max_size, json_t **out, json_error_t *err)
{
	json_error_t local;
	json_t *v = json_loadb(buf, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, err ? err : &local);
	if (!v)
		return -EINVAL;
	if (json_dumpb(v, NULL, 0, DOC_DUMP_FLAGS) > max_size) {
		json_decref(v);
		return -EFBIG;
	}
	*out = v;
	return 0;
}

json_t *doc_merge_patch(const json_t *target, const json_t *patch)
{
	if (!json_is_object(patch))
		return json_deep_copy(patch);

	json_t *result = json_is_object(target) ? json_deep_copy(target) : json_object();
	if (!result)
		return NULL;

	const char *key;
	size_t key_len;
	json_t *value;
	void *tmp;
	json_object_keylen_foreach_safe((json_t *)patch, tmp, key, key_len, value) {
		if (json_is_null(value)) {
			json_object_deln(result, key, key_len);
			continue;
		}
		json_t *merged = doc_merge_patch(json_object_getn(result, key, key_len), value);
		if (!merged || json_object_setn_new(result, key, key_len, merged) < 0) {
			json_decref(result);
			return NULL;
		}
	}
	return result;
}

/* RFC 6901 array index: "0" or digits without a leading zero. */
static int parse_index(const char *tok, size_t len, size_t *out)
{
	size_t v = 0;

	if (len == 0 || len > 18 || (len > 1 && tok[0] == '0'))
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (tok[i] < '0' || tok[i] > '9')
			return -EINVAL;
		v = v * 10 + (size_t)(tok[i] - '0');
	}
	*out = v;
	return 0;
}

json_t *doc_lookup(json_t *root, const char *path, size_t len)
{
	char key[4096];
	size_t i = 0;

	/* "//" collapses; a trailing '/' (after collapsing) is dropped. */
	while (len > 0 && path[len - 1] == '/' && (len == 1 || path[len - 2] == '/'))
		len--;
	if (len > 0 && path[len - 1] == '/')
		len--;
	if (len == 0)
		return root;
	if (path[0] != '/')
		return NULL;

	json_t *cur = root;
	while (i < len) {
		while (i < len && path[i] == '/')
			i++;
		if (i >= len)
			break;
		size_t klen = 0;
		while (i < len && path[i] != '/') {
			char c = path[i++];
			if (c == '~' && i < len && (path[i] == '0' || path[i] == '1'))
				c = path[i++] == '0' ? '~' : '/';
			if (klen >= sizeof(key))
				return NULL;
			key[klen++] = c;
		}
		if (json_is_object(cur)) {
			cur = json_object_getn(cur, key, klen);
		} else if (json_is_array(cur)) {
			size_t idx;
			if (parse_index(key, klen, &idx) < 0)
				return NULL;
			cur = json_array_get(cur, idx);
		} else {
			return NULL;
		}
		if (!cur)
			return NULL;
	}
	return cur;
}

struct key_ref {
	const char *key;
	size_t len;
	int is_object;
};

static int key_cmp(const void *a, const void *b)
{
	const struct key_ref *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->key, y->key, n);
	if (c)
		return c;
	return (x->len > y->len) - (x->len < y->len);
}

int doc_render_imds(const json_t *v, char **out, size_t *out_len)
{
	if (json_is_string(v)) {
		size_t n = json_string_length(v);
		char *buf = malloc(n + 1);
		if (!buf)
			return -ENOMEM;
		memcpy(buf, json_string_value(v), n);
		buf[n] = '\0';
		*out = buf;
		*out_len = n;
		return 0;
	}
	if (!json_is_object(v))
		return -EOPNOTSUPP;

	size_t n = json_object_size(v), total = 0, k = 0;
	struct key_ref *keys = calloc(n ? n : 1, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	const char *key;
	size_t key_len;
	json_t *value;
	json_object_keylen_foreach((json_t *)v, key, key_len, value) {
		keys[k].key = key;
		keys[k].len = key_len;
		keys[k].is_object = json_is_object(value);
		total += key_len + 2;
		k++;
	}
	qsort(keys, n, sizeof(*keys), key_cmp);

	char *buf = malloc(total + 1);
	if (!buf) {
		free(keys);
		return -ENOMEM;
	}
	size_t pos = 0;
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf[pos++] = '\n';
		memcpy(buf + pos, keys[i].key, keys[i].len);
		pos += keys[i].len;
		if (keys[i].is_object)
			buf[pos++] = '/';
	}
	buf[pos] = '\0';
	free(keys);
	*out = buf;
	*out_len = pos;
	return 0;
}
