/* The template's files, checked against its directory: each source must be a
 * regular file that resolves inside the directory, so neither `../` nor a
 * symlink can bring a file from outside into the image. */
#ifndef TEMPLATE_FILES_H
#define TEMPLATE_FILES_H

#include <stddef.h>

#include "conf.h"

/* dir must be the template directory's resolved path (realpath). Checks every
 * file of conf; on the first bad one returns -errno (-EXDEV: it resolves
 * outside dir; -EINVAL: not a regular file) and sets *bad to its index.
 * Fills resolved[i] (malloc'ed) with each source's resolved path. */
int tpl_check_files(const char *dir, const struct template_conf *conf, char **resolved, size_t *bad);

#endif
