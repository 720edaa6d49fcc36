/* What every e2b-hostlink command reads from its command line and files. */
#ifndef HOSTLINK_CLI_H
#define HOSTLINK_CLI_H

#include <stddef.h>
#include <stdint.h>

/* A metadata document's largest size (mmds-serve enforces its own). */
#define CLI_MAX_DOCUMENT (4u * 1024u * 1024u)

/* A decimal in min..max; said on stderr, naming `what`, when not. */
int cli_parse_u32(const char *what, const char *text, uint32_t min, uint32_t max, uint32_t *out);

/* The whole of a file, or of stdin for "-" or NULL, at most max bytes
 * (-EFBIG beyond); malloc'ed and NUL-terminated. */
int cli_read_input(const char *path, size_t max, char **out, size_t *len);

/* "stdin" for "-" or NULL, else the path: for messages. */
const char *cli_input_name(const char *path);

#endif
