/* libFuzzer: the hand-written document code around jansson: JSON Pointer
 * path resolution (slash collapsing, ~0/~1, array indices), IMDS text
 * rendering and the RFC 7396 merge patch. Input: PATH '\n' DOC ['\n' PATCH]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "document.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	const char *nl = memchr(in, '\n', size);
	size_t path_len = nl ? (size_t)(nl - in) : size;
	const char *doc_text = nl ? nl + 1 : "{\"a\":{\"b\":\"c\",\"~/\":[\"x\",{}]},\"n\":1}";
	size_t doc_len = nl ? size - path_len - 1 : strlen(doc_text);
	const char *patch_text = memchr(doc_text, '\n', doc_len);
	if (patch_text) {
		doc_len = (size_t)(patch_text - doc_text);
		patch_text++;
	}

	json_t *doc = NULL, *patch = NULL;
	if (doc_parse(doc_text, doc_len, 51200, &doc, NULL) < 0)
		return 0;
	json_t *v = doc_lookup(doc, in, path_len);
	char *out = NULL;
	size_t len = 0;
	if (v) {
		if (doc_render_imds(v, &out, &len) == 0 && strlen(out) != len && !json_is_string(v))
			__builtin_trap();
		free(out);
		out = NULL;
		if (doc_dump(v, &out, &len) == 0)
			free(out);
	}
	if (patch_text) {
		size_t plen = size - (size_t)(patch_text - in);
		if (doc_parse(patch_text, plen, 51200, &patch, NULL) == 0) {
			json_t *m = doc_merge_patch(doc, patch);
			/* Applying the same patch twice changes nothing more. */
			json_t *m2 = m ? doc_merge_patch(m, patch) : NULL;
			if (m && m2 && !json_equal(m, m2))
				__builtin_trap();
			json_decref(m2);
			json_decref(m);
			json_decref(patch);
		}
	}
	json_decref(doc);
	return 0;
}
