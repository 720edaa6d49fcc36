/* libFuzzer target for the template.conf parser. Besides memory safety it
 * checks the parser's promises: a rejected input leaves nothing allocated and
 * says why; an accepted one has a valid name, a base, and only paths,
 * packages and env names of the documented shapes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A ".." component anywhere in p. */
static int has_dotdot(const char *p)
{
	size_t n = strlen(p);

	return !strcmp(p, "..") || !strncmp(p, "../", 3) || strstr(p, "/../") ||
	       (n >= 3 && !strcmp(p + n - 3, "/.."));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct template_conf c;
	struct tpl_error err;

	if (tpl_parse((const char *)data, size, &c, &err) < 0) {
		if (c.name || c.base || c.n_files || c.files || c.n_runs || c.n_env || !err.msg[0])
			abort();
		return 0;
	}
	if (!c.name || !tpl_valid_name(c.name) || !c.base || !*c.base)
		abort();
	for (size_t i = 0; i < c.n_files; i++) {
		const struct tpl_file *f = &c.files[i];
		if (f->src[0] == '/' || has_dotdot(f->src) || f->dest[0] != '/' || has_dotdot(f->dest) || f->mode > 07777 || !*f->owner || !*f->group)
			abort();
	}
	for (size_t i = 0; i < c.n_env; i++)
		if (!*c.env[i].name || strchr(c.env[i].name, '=') || strpbrk(c.env[i].value, "\"'\\$`"))
			abort();
	if ((c.ready == TPL_READY_NONE) != (c.ready_arg == NULL))
		abort();
	tpl_free(&c);
	return 0;
}
