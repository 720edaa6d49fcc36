/* Unit tests (TAP) for mmds-serve's document (mmds/document.c): JSON Pointer
 * lookup, RFC 7396 merge patch, IMDS text, size limits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "document.h"
#include "tap.h"

static json_t *load(const char *s)
{
	json_t *v = NULL;
	if (doc_parse(s, strlen(s), 1 << 20, &v, NULL) < 0)
		abort();
	return v;
}

static int dumps_as(const json_t *v, const char *want)
{
	char *s = NULL;
	size_t n;
	int eq = doc_dump(v, &s, &n) == 0 && strcmp(s, want) == 0;
	if (!eq)
		fprintf(stderr, "# got %s, want %s\n", s ? s : "(null)", want);
	free(s);
	return eq;
}

static void test_document(void)
{
	json_t *doc = load("{\"a\":{\"b\":\"c\",\"x/y\":\"slash\",\"t~\":\"tilde\"},\"arr\":[\"z\",{\"k\":\"v\"}],\"n\":1}");
	ok(doc_lookup(doc, "/", 1) == doc && doc_lookup(doc, "", 0) == doc && doc_lookup(doc, "//", 2) == doc, "root paths");
	json_t *v = doc_lookup(doc, "/a/b", 4);
	ok(v && !strcmp(json_string_value(v), "c"), "/a/b");
	ok(doc_lookup(doc, "//a///b/", 8) == v, "slashes collapse, trailing slash tolerated");
	v = doc_lookup(doc, "/a/x~1y", 7);
	ok(v && !strcmp(json_string_value(v), "slash"), "~1 is /");
	v = doc_lookup(doc, "/a/t~0", 6);
	ok(v && !strcmp(json_string_value(v), "tilde"), "~0 is ~");
	v = doc_lookup(doc, "/arr/1/k", 8);
	ok(v && !strcmp(json_string_value(v), "v"), "array index");
	ok(!doc_lookup(doc, "/arr/01", 7) && !doc_lookup(doc, "/arr/2", 6) && !doc_lookup(doc, "/arr/-", 6), "bad indices");
	ok(!doc_lookup(doc, "/a/b/c", 6) && !doc_lookup(doc, "/nope", 5), "missing paths");

	char *out = NULL;
	size_t len;
	ok(doc_render_imds(doc, &out, &len) == 0 && !strcmp(out, "a/\narr\nn"), "IMDS object listing");
	free(out);
	ok(doc_render_imds(doc_lookup(doc, "/a/b", 4), &out, &len) == 0 && !strcmp(out, "c"), "IMDS string raw");
	free(out);
	ok(doc_render_imds(doc_lookup(doc, "/n", 2), &out, &len) == -EOPNOTSUPP, "IMDS number: unsupported");
	ok(doc_render_imds(doc_lookup(doc, "/arr", 4), &out, &len) == -EOPNOTSUPP, "IMDS array: unsupported");
	ok(doc_render_imds(json_null(), &out, &len) == -EOPNOTSUPP, "IMDS null: unsupported");
	json_t *empty = json_object();
	ok(doc_render_imds(empty, &out, &len) == 0 && len == 0, "IMDS empty object: empty body");
	free(out);
	json_decref(empty);
	json_decref(doc);

	json_t *x = NULL;
	ok(doc_parse("{", 1, 100, &x, NULL) == -EINVAL, "invalid JSON refused");
	ok(doc_parse("{\"a\": \"0123456789\"}", 19, 10, &x, NULL) == -EFBIG, "over the size limit refused");
	ok(doc_parse("{\"a\":   \"b\"}", 12, 9, &x, NULL) == 0, "limit applies to the compact form");
	json_decref(x);

	/* RFC 7396 appendix A. */
	static const char *const cases[][3] = {
		{ "{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}" },
		{ "{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}" },
		{ "{\"a\":\"b\"}", "{\"a\":null}", "{}" },
		{ "{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}" },
		{ "{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}" },
		{ "{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}" },
		{ "{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}" },
		{ "{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}" },
		{ "[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]" },
		{ "{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]" },
		{ "{\"a\":\"foo\"}", "null", "null" },
		{ "{\"a\":\"foo\"}", "\"bar\"", "\"bar\"" },
		{ "{\"e\":null}", "{\"a\":1}", "{\"a\":1,\"e\":null}" },
		{ "[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}" },
		{ "{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *t = load(cases[i][0]), *p = load(cases[i][1]);
		json_t *m = doc_merge_patch(t, p);
		ok(m && dumps_as(m, cases[i][2]), "merge patch: %s + %s", cases[i][0], cases[i][1]);
		char *before = NULL;
		size_t blen;
		json_t *again = load(cases[i][0]);
		ok(doc_dump(again, &before, &blen) == 0 && dumps_as(t, before), "merge patch leaves the target alone");
		free(before);
		json_decref(again);
		json_decref(t);
		json_decref(p);
		json_decref(m);
	}
}

int main(void)
{
	test_document();
	return tap_done();
}
