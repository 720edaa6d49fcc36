#include "files.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int check_one(const char *dir, const char *src, char **out)
{
	char path[PATH_MAX];
	char *real;
	size_t n = strlen(dir);
	struct stat st;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, src) >= sizeof(path))
		return -ENAMETOOLONG;
	real = realpath(path, NULL);
	if (!real)
		return -errno;
	/* Resolved, the path must still be below dir: a symlink anywhere on
	 * the way that leads out is refused like `../`. */
	if (strncmp(real, dir, n) != 0 || real[n] != '/') {
		free(real);
		return -EXDEV;
	}
	if (stat(real, &st) < 0) {
		int r = -errno;
		free(real);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		free(real);
		return -EINVAL;
	}
	*out = real;
	return 0;
}

int tpl_check_files(const char *dir, const struct template_conf *conf, char **resolved, size_t *bad)
{
	for (size_t i = 0; i < conf->n_files; i++) {
		int r = check_one(dir, conf->files[i].src, &resolved[i]);

		if (r < 0) {
			for (size_t j = 0; j < i; j++) {
				free(resolved[j]);
				resolved[j] = NULL;
			}
			*bad = i;
			return r;
		}
	}
	return 0;
}
