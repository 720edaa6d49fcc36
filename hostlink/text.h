/* Guest bytes shown to a person: every control character (C0, DEL, C1) and
 * every byte that is not part of valid UTF-8 becomes "\xNN", so a guest can
 * neither drive the host's terminal (escape sequences, OSC titles, bells) nor
 * forge lines in a log. With keep_lines, '\n' and '\t' pass as they are
 * (a document printed to a terminal); without, they are escaped too (one
 * line of an error message). A backslash is not escaped. */
#ifndef HOSTLINK_TEXT_H
#define HOSTLINK_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Into out[0..out_len) (NUL-terminated, cut at a whole unit if it does not
 * fit); the length written. */
size_t text_escape(const char *in, size_t len, bool keep_lines, char *out, size_t out_len);

/* Onto a stream; 0 or -errno. */
int text_write(FILE *f, const char *in, size_t len, bool keep_lines);

#endif
