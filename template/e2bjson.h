/* E2B's Template JSON, DIR/e2b.template.json: what `Template.to_json(t)`
 * (Python SDK, e2b 2.63.0) and `Template.toJSON(t)` (JS SDK, e2b 2.51.0)
 * write, which is what E2B's build service receives:
 *
 *   {"fromImage": "python:3.13" | "fromTemplate": "code-interpreter-v1",
 *    "fromImageRegistry": {"type": "registry"|"aws"|"gcp", ...},
 *    "force": false,
 *    "steps": [{"type": "RUN", "args": ["apt-get ...", "root"], "force": false},
 *              {"type": "COPY", "args": ["app.py", "/app/", "user", "0644"],
 *               "force": false, "filesHash": "<64 hex>"}, ...],
 *    "startCmd": "python app.py", "readyCmd": "[ -n \"$(ss -Htuln sport = :3000)\" ]"}
 *
 * The reader is strict, as template.conf's is: an unknown key, a step type
 * E2B's build does not run, a step with arguments of the wrong number or
 * shape is an error naming the step's index, its type and what to do. It
 * checks bytes only; the files of COPY steps and the base are the caller's.
 * What it returns is the template in one normal form (e2b_parse). */
#ifndef TEMPLATE_E2BJSON_H
#define TEMPLATE_E2BJSON_H

#include <jansson.h>
#include <stddef.h>

#define E2B_MAX_BYTES (1024 * 1024)
#define E2B_MAX_STEPS 1024

struct e2b_error {
	long step;    /* the step's index in "steps", -1 when not a step's */
	char key[24]; /* the key at fault ("" when none could be read) */
	char msg[240];
};

/* Parses buf[0..len) (no NUL inside). On success *out is the normal form:
 *
 *   {"from": {"kind": "flavor", "name": "e2b-ci", "as": "code-interpreter-v1"}   (also for
 *             fromImage "e2bdev/code-interpreter:TAG", as "code-interpreter": e2b_image_template)
 *          | {"kind": "template", "name": "web"} | {"kind": "image", "ref": "python:3.13"},
 *    "registry_auth": "registry" | "aws" | "gcp" | null,   (the type only: no secret is kept)
 *    "force": bool,
 *    "steps": [{"index": N, "type": "RUN"|"COPY"|"ENV"|"WORKDIR"|"USER", "args": [...],
 *               "force": bool, COPY only: "filesHash", and "resolveSymlinks": bool
 *               when the JSON has it}],
 *    "start_cmd": str | null, "ready_cmd": str | null}
 *
 * with ADD read as COPY and ARG as ENV (as E2B's build runs them), types in
 * upper case, COPY's args always four (owner and mode "" when not given).
 * On error returns -EINVAL (-ENOMEM, -EFBIG), fills *err, leaves *out NULL. */
int e2b_parse(const char *buf, size_t len, json_t **out, struct e2b_error *err);

/* E2B's names of its own templates, as our flavors: "base" is e2b-base,
 * "code-interpreter-v1" and "code-interpreter" are e2b-ci. NULL otherwise. */
const char *e2b_flavor_of(const char *e2b_template_name);

/* E2B's own images on Docker Hub, as fromImage names them, as E2B's template
 * names: e2bdev/base is "base", e2bdev/code-interpreter "code-interpreter",
 * with any tag and/or @sha256 digest, with or without docker.io/,
 * index.docker.io/ or registry-1.docker.io/ first. NULL for any other image. */
const char *e2b_image_template(const char *image_ref);

/* The index of the first step of the normal form's STEPS that is the SDK's
 * bun_install (a RUN "bun install ...") with no step before it naming bun
 * (which may install it); -1 when there is none. None of our flavors has bun. */
long e2b_bun_install_step(json_t *steps);

#endif
