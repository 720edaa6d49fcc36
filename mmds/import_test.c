/* Unit tests (TAP) for mmds-serve --import (mmds/import.c): what it writes,
 * and that a bad source or an unwritable target leaves the target as it was
 * and no temporary file behind. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "import.h"
#include "tap.h"

static char dir[] = "/tmp/mmds-import-test.XXXXXX";

static void put(const char *name, const char *text)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		abort();
}

static char *get(const char *name)
{
	char path[256], *out = NULL;
	size_t len;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return read_small_file(path, 1 << 20, &out, &len) < 0 ? NULL : out;
}

static int entries(void) /* files in dir, temporaries included */
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static int import(const char *src, const char *dst, size_t max, struct mmds_import_result *res)
{
	static char s[256], t[256]; /* res->failed_on points into them */
	snprintf(s, sizeof(s), "%s/%s", dir, src);
	snprintf(t, sizeof(t), "%s/%s", dir, dst);
	return mmds_import_document(s, t, max, res);
}

int main(void)
{
	struct mmds_import_result res;
	struct stat st;
	char path[256];

	if (!mkdtemp(dir))
		return 1;
	umask(077);

	put("fw_cfg", "{ \"instanceID\": \"isb-1\",\n  \"envID\": \"tmpl-1\" }\n");
	ok(import("fw_cfg", "document.json", 51200, &res) == 0, "a document is imported");
	char *text = get("document.json");
	ok(text && !strcmp(text, "{\"envID\":\"tmpl-1\",\"instanceID\":\"isb-1\"}"), "written compact, keys sorted: %s",
	   text ? text : "(none)");
	ok(res.written == strlen("{\"envID\":\"tmpl-1\",\"instanceID\":\"isb-1\"}") && !res.failed_on,
	   "the result has the bytes written");
	snprintf(path, sizeof(path), "%s/document.json", dir);
	int stat_r = stat(path, &st);
	ok(stat_r == 0 && (st.st_mode & 0777) == 0644, "mode 0644 whatever the umask (%o)", (unsigned)st.st_mode & 0777);
	ok(entries() == 2, "no temporary file is left (%d entries)", entries());
	free(text);

	put("bad", "{\"instanceID\": ");
	ok(import("bad", "document.json", 51200, &res) == -EINVAL, "not JSON: -EINVAL");
	ok(res.failed_on && strstr(res.failed_on, "/bad") && res.json.line >= 1 && res.json.text[0],
	   "named the source, and where: line %d, column %d: %s", res.json.line, res.json.column, res.json.text);
	text = get("document.json");
	ok(text && strstr(text, "isb-1"), "the document is as it was");
	free(text);

	put("big", "{\"k\": \"0123456789012345678901234567890123456789\"}");
	ok(import("big", "document.json", 32, &res) == -EFBIG, "over --max-size: -EFBIG");
	ok(import("missing", "document.json", 51200, &res) == -ENOENT && strstr(res.failed_on, "/missing"),
	   "a missing source: -ENOENT, named");
	ok(import("fw_cfg", "nodir/document.json", 51200, &res) == -ENOENT && strstr(res.failed_on, "/nodir/"),
	   "a target directory that is not there: -ENOENT, named");
	ok(import("fw_cfg", "", 51200, &res) == -EISDIR, "a target ending in '/': -EISDIR");
	ok(entries() == 4, "still no temporary file (%d entries: fw_cfg, bad, big, document.json)", entries());

	static const char *const made[] = { "fw_cfg", "bad", "big", "document.json" };
	for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, made[i]);
		(void)unlink(path);
	}
	(void)rmdir(dir);
	return tap_done();
}
