/* mmds-serve --import: see import.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "document.h"
#include "fileio.h"
#include "import.h"

/* "<dir>/.<name>.XXXXXX", beside dst so that the rename stays on one file system. */
static int temp_name_for(const char *dst, char **out)
{
	const char *slash = strrchr(dst, '/');
	const char *name = slash ? slash + 1 : dst;
	int dir_len = slash ? (int)(slash - dst) + 1 : 0;

	if (!*name)
		return -EISDIR;
	if (asprintf(out, "%.*s.%s.XXXXXX", dir_len, dst, name) < 0)
		return -ENOMEM;
	return 0;
}

static int write_replacing(const char *dst, const char *text, size_t len)
{
	_cleanup_free_ char *tmp = NULL;
	int r = temp_name_for(dst, &tmp);
	if (r < 0)
		return r;
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = fchmod(fd, 0644) < 0 ? -errno : 0;
	if (r == 0)
		r = write_all(fd, text, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, dst) < 0)
		r = -errno;
	if (r < 0)
		(void)unlink(tmp);
	return r;
}

int mmds_import_document(const char *src, const char *dst, size_t max_size, struct mmds_import_result *res)
{
	_cleanup_free_ char *raw = NULL, *text = NULL;
	size_t raw_len = 0, len = 0;
	json_t *doc = NULL;

	*res = (struct mmds_import_result){ .failed_on = src };
	int r = read_small_file(src, 4 * max_size, &raw, &raw_len);
	if (r < 0)
		return r;
	r = doc_parse(raw, raw_len, max_size, &doc, &res->json);
	if (r < 0)
		return r;
	r = doc_dump(doc, &text, &len);
	json_decref(doc);
	if (r < 0)
		return r;
	res->failed_on = dst;
	r = write_replacing(dst, text, len);
	if (r < 0)
		return r;
	res->failed_on = NULL;
	res->written = len;
	return 0;
}
