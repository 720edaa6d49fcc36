/* See cli.h. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "decimal.h"
#include "fileio.h"

int cli_parse_u32(const char *what, const char *text, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;

	if (parse_decimal(text, min, max, &v) < 0) {
		fprintf(stderr, "e2b-hostlink: %s: '%s' is not a number in %u-%u\n", what, text, min, max);
		return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

int cli_read_input(const char *path, size_t max, char **out, size_t *len)
{
	if (path && strcmp(path, "-") != 0)
		return read_small_file(path, max, out, len);
	return read_small_fd(STDIN_FILENO, max, out, len);
}

const char *cli_input_name(const char *path)
{
	return path && strcmp(path, "-") != 0 ? path : "stdin";
}
