/* mmds-serve --import: see import.h. */
#include <stdlib.h>

#include "cleanup.h"
#include "document.h"
#include "fileio.h"
#include "import.h"

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
	r = write_file_replacing(dst, text, len, 0644);
	if (r < 0)
		return r;
	res->failed_on = NULL;
	res->written = len;
	return 0;
}
