/* libFuzzer: hostlink/text.c's escaping (a hand-written UTF-8 decoder) on
 * arbitrary bytes. The output never holds a C0 control or DEL (but '\n' and
 * '\t' with keep_lines), nor a C1 control in UTF-8, and text_write writes
 * exactly what text_escape gives when the buffer is large enough. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size ? size : 1), *out, *streamed = NULL;
	size_t cap = size * 4 + 1, streamed_len = 0;

	if (!in)
		return 0;
	memcpy(in, data, size);
	out = malloc(cap);
	for (int keep = 0; out && keep < 2; keep++) {
		size_t n = text_escape(in, size, keep, out, cap);
		if (n >= cap || out[n] != 0)
			__builtin_trap();
		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)out[i];
			if ((c < 0x20 && !(keep && (c == '\n' || c == '\t'))) || c == 0x7f)
				__builtin_trap();
			if (c == 0xc2 && i + 1 < n && (unsigned char)out[i + 1] >= 0x80 && (unsigned char)out[i + 1] <= 0x9f)
				__builtin_trap();
		}
		FILE *f = open_memstream(&streamed, &streamed_len);
		if (f && text_write(f, in, size, keep) == 0 && fclose(f) == 0) {
			if (streamed_len != n || memcmp(streamed, out, n) != 0)
				__builtin_trap();
		} else if (f) {
			fclose(f);
		}
		free(streamed);
		streamed = NULL;
	}
	free(out);
	free(in);
	return 0;
}
