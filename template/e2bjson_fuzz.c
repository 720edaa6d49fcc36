/* libFuzzer target for E2B's Template JSON reader (e2bjson.c). Besides memory
 * safety it checks the reader's promises: a rejected input returns nothing and
 * says why; an accepted one has a base of a known kind (a flavor only by E2B's
 * name for it) and steps of the five types in order, each COPY with four args
 * and a filesHash, no secret kept. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "e2bjson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int is_type(const char *t)
{
	return t && (!strcmp(t, "RUN") || !strcmp(t, "COPY") || !strcmp(t, "ENV") || !strcmp(t, "WORKDIR") ||
		     !strcmp(t, "USER"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct e2b_error err;
	json_t *o = NULL, *from, *steps, *s;
	const char *kind;
	size_t i;

	if (e2b_parse((const char *)data, size, &o, &err) < 0) {
		if (o || !err.msg[0])
			abort();
		return 0;
	}
	from = json_object_get(o, "from");
	kind = json_string_value(json_object_get(from, "kind"));
	if (!kind || (strcmp(kind, "image") && strcmp(kind, "flavor") && strcmp(kind, "template")))
		abort();
	/* A flavor is only ever E2B's name for one (fromTemplate, or one of its images). */
	if (!strcmp(kind, "flavor")) {
		const char *as = json_string_value(json_object_get(from, "as"));
		const char *name = json_string_value(json_object_get(from, "name"));
		if (!as || !name || !e2b_flavor_of(as) || strcmp(e2b_flavor_of(as), name))
			abort();
	}
	(void)e2b_bun_install_step(json_object_get(o, "steps"));
	steps = json_object_get(o, "steps");
	if (!json_is_array(steps))
		abort();
	json_array_foreach(steps, i, s) {
		const char *t = json_string_value(json_object_get(s, "type"));
		if (!is_type(t) || json_integer_value(json_object_get(s, "index")) != (json_int_t)i)
			abort();
		if (!strcmp(t, "COPY") && (json_array_size(json_object_get(s, "args")) != 4 ||
					   json_string_length(json_object_get(s, "filesHash")) != 64))
			abort();
	}
	s = json_object_get(o, "registry_auth");
	if (!json_is_null(s) && !json_is_string(s))
		abort();
	json_decref(o);
	return 0;
}
