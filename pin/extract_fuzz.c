/* libFuzzer target for the hand-written parsers of tree pins: archive entry
 * paths (extract_split_path, then the NAR stream's placing of each line as
 * an entry) and the lock's "sha256-<base64>" (lock_parse_tree_sha256). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "extract.h"
#include "lock.h"
#include "nar.h"
#include "nar_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), top[256], rest[4096];
	unsigned char d[NAR_DIGEST_SIZE];
	char sri[NAR_SRI_SIZE];
	const char *why = NULL;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (extract_split_path(s, top, sizeof(top), rest, sizeof(rest), &why) == 0) {
		/* Nothing that escapes: no "..", no empty or absolute parts. */
		if (!top[0] || !strcmp(top, "..") || strchr(top, '/') || rest[0] == '/' || strstr(rest, "//"))
			abort();
		for (const char *p = rest; *p; p += strcspn(p, "/"), p += *p == '/')
			if (!strncmp(p, "..", 2) && (p[2] == '/' || !p[2]))
				abort();
	} else if (!why) {
		abort();
	}
	/* Every line as an entry's path, alternately a directory and a file. */
	struct nar_stream *stream = nar_stream_new();
	const char *reason;
	int i = 0;
	for (char *line = strtok(s, "\n"); stream && line; line = strtok(NULL, "\n"), i++) {
		if (extract_split_path(line, top, sizeof(top), rest, sizeof(rest), &why) < 0 || !rest[0])
			continue;
		if (i % 2) {
			nar_stream_directory(stream, rest);
		} else {
			nar_stream_file(stream, rest, i % 4 == 0, true, 1);
			nar_stream_data(stream, 0, "x", 1);
			nar_stream_file_end(stream);
		}
	}
	if (stream)
		nar_stream_finish(stream, d, &reason);
	nar_stream_free(stream);
	if (lock_parse_tree_sha256((const char *)data, size, d) == 0) {
		nar_sri(d, sri);
		if (size != strlen(sri) || memcmp(sri, data, size) != 0)
			abort(); /* only canonical forms are accepted */
	}
	free(s);
	return 0;
}
