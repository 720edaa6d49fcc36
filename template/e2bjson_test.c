/* Unit tests for E2B's Template JSON reader (template/e2bjson.c). The good
 * inputs are shaped as the SDKs write them (see tests/template/ for JSON
 * written by the real SDK). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "e2bjson.h"
#include "tap.h"

#define HASH "2b2ef6e8a8f4b0b56e5bb1ba6dfb1bd3bdf1c77b5bd6a0fcdec5e67c9b6c2091"
#define RUN(c) "{\"type\": \"RUN\", \"args\": [\"" c "\"], \"force\": false}"
#define IMG "\"fromImage\": \"python:3.13\", "
/* A template of one COPY step with these args and a well-formed filesHash. */
#define COPY_JSON(args) "{" IMG "\"steps\": [{\"type\": \"COPY\", \"args\": [" args "], \"filesHash\": \"" HASH "\"}]}"

static int parse(const char *text, json_t **out, struct e2b_error *err)
{
	return e2b_parse(text, strlen(text), out, err);
}

/* Expects an error for step `step` (-1: none), `key`, with `needle` in its message. */
static void rejects(const char *what, const char *text, long step, const char *key, const char *needle)
{
	struct e2b_error err;
	json_t *out = (json_t *)1;
	int r = parse(text, &out, &err);

	if (!ok(r < 0 && !out && err.step == step && !strcmp(err.key, key) && strstr(err.msg, needle), "rejects %s",
		what))
		printf("# r=%d step=%ld key=%s msg=\"%s\" (wanted step %ld, key %s, \"%s\")\n", r, err.step, err.key,
		       err.msg, step, key, needle);
	json_decref(r < 0 ? NULL : out);
}

static const char *str_at(json_t *o, const char *path1, size_t i, const char *path2)
{
	return json_string_value(json_object_get(json_array_get(json_object_get(o, path1), i), path2));
}

int main(void)
{
	struct e2b_error err;
	json_t *o;

	ok(parse("{\"steps\": [{\"type\": \"USER\", \"args\": [\"root\"], \"force\": false},"
		 "{\"type\": \"COPY\", \"args\": [\"site\", \"/home/user/site\", \"user:user\", \"0644\"], \"force\": false,"
		 " \"filesHash\": \"" HASH "\"},"
		 "{\"type\": \"ENV\", \"args\": [\"GREETING\", \"hello world\", \"B\", \"\"], \"force\": false},"
		 "{\"type\": \"WORKDIR\", \"args\": [\"/home/user/site\"], \"force\": true},"
		 "{\"type\": \"RUN\", \"args\": [\"apt-get update && apt-get install -y curl\", \"root\"], \"force\": true}],"
		 " \"force\": false, " IMG "\"startCmd\": \"python3 -m http.server 3000\","
		 " \"readyCmd\": \"[ -n \\\"$(ss -Htuln sport = :3000)\\\" ]\"}", &o, &err) == 0,
	   "reads a template as the Python SDK writes it");
	ok(o && !strcmp(json_string_value(json_object_get(json_object_get(o, "from"), "kind")), "image") &&
		   !strcmp(json_string_value(json_object_get(json_object_get(o, "from"), "ref")), "python:3.13"),
	   "fromImage is an image base");
	ok(o && json_array_size(json_object_get(o, "steps")) == 5 && !strcmp(str_at(o, "steps", 1, "type"), "COPY") &&
		   !strcmp(str_at(o, "steps", 1, "filesHash"), HASH) &&
		   json_integer_value(json_object_get(json_array_get(json_object_get(o, "steps"), 4), "index")) == 4,
	   "the steps keep their order, index and filesHash");
	ok(o && !strcmp(json_string_value(json_object_get(o, "start_cmd")), "python3 -m http.server 3000") &&
		   strstr(json_string_value(json_object_get(o, "ready_cmd")), "ss -Htuln"),
	   "start and ready commands");
	ok(o && json_is_null(json_object_get(o, "registry_auth")), "no registry credentials");
	json_decref(o);

	ok(parse("{\"fromTemplate\": \"code-interpreter-v1\", \"steps\": [{\"type\": \"add\", \"args\": [\"a.txt\","
		 " \"/app/\"], \"filesHash\": \"" HASH "\"}, {\"type\": \"Arg\", \"args\": [\"V\", \"1\"]}]}",
		 &o, &err) == 0, "ADD and ARG in any case, args short of four");
	ok(o && !strcmp(json_string_value(json_object_get(json_object_get(o, "from"), "name")), "e2b-ci") &&
		   !strcmp(json_string_value(json_object_get(json_object_get(o, "from"), "as")), "code-interpreter-v1"),
	   "code-interpreter-v1 is e2b-ci");
	ok(o && !strcmp(str_at(o, "steps", 0, "type"), "COPY") && !strcmp(str_at(o, "steps", 1, "type"), "ENV") &&
		   json_array_size(json_object_get(json_array_get(json_object_get(o, "steps"), 0), "args")) == 4,
	   "ADD is COPY (owner and mode filled in), ARG is ENV");
	json_decref(o);

	ok(parse("{\"fromTemplate\": \"base\"}", &o, &err) == 0 &&
		   !strcmp(json_string_value(json_object_get(json_object_get(o, "from"), "name")), "e2b-base") &&
		   json_array_size(json_object_get(o, "steps")) == 0,
	   "base is e2b-base; no steps");
	json_decref(o);
	ok(parse("{\"fromImage\": \"e2bdev/base\"}", &o, &err) == 0 &&
		   !strcmp(json_string_value(json_object_get(json_object_get(o, "from"), "kind")), "flavor") &&
		   !strcmp(json_string_value(json_object_get(json_object_get(o, "from"), "name")), "e2b-base") &&
		   !strcmp(json_string_value(json_object_get(json_object_get(o, "from"), "as")), "base"),
	   "fromImage e2bdev/base (Template()'s default) is e2b-base");
	json_decref(o);
	ok(parse("{\"fromImage\": \"docker.io/e2bdev/code-interpreter:v1.2@sha256:" HASH "\"}", &o, &err) == 0 &&
		   !strcmp(json_string_value(json_object_get(json_object_get(o, "from"), "name")), "e2b-ci") &&
		   !strcmp(json_string_value(json_object_get(json_object_get(o, "from"), "as")), "code-interpreter"),
	   "fromImage docker.io/e2bdev/code-interpreter with a tag and a digest is e2b-ci");
	json_decref(o);
	ok(parse("{\"fromImage\": \"e2bdev/base-extra:1\"}", &o, &err) == 0 &&
		   !strcmp(json_string_value(json_object_get(json_object_get(o, "from"), "kind")), "image"),
	   "another image of e2bdev's is a registry image");
	json_decref(o);
	ok(parse("{" IMG "\"steps\": [{\"type\": \"USER\", \"args\": [\"1000\"]},"
		 " {\"type\": \"USER\", \"args\": [\"1000:1000\", \"true\"]}, {\"type\": \"USER\", \"args\": [\"app:staff\"]},"
		 " {\"type\": \"RUN\", \"args\": [\"id\", \"1000\"]}, {\"type\": \"RUN\", \"args\": [\"id\", \"0\"]},"
		 " {\"type\": \"COPY\", \"args\": [\"a\", \"/a\", \"1000:1000\", \"\"], \"filesHash\": \"" HASH "\"},"
		 " {\"type\": \"COPY\", \"args\": [\"a\", \"/a\", \"app:1000\", \"\"], \"filesHash\": \"" HASH "\"}]}",
		 &o, &err) == 0 && json_array_size(json_object_get(o, "steps")) == 7 &&
		   !strcmp(json_string_value(json_array_get(json_object_get(json_array_get(json_object_get(o, "steps"), 1),
									  "args"), 0)), "1000:1000"),
	   "numeric users as the SDKs write them: USER 1000, USER 1000:1000, RUN as 1000, COPY owner 1000:1000");
	json_decref(o);
	ok(parse("{\"fromTemplate\": \"my-web\", \"steps\": []}", &o, &err) == 0 &&
		   !strcmp(json_string_value(json_object_get(json_object_get(o, "from"), "kind")), "template"),
	   "another template by its folder's name");
	json_decref(o);
	{
		char *dump = NULL;
		ok(parse("{" IMG "\"fromImageRegistry\": {\"type\": \"registry\", \"username\": \"u\","
			 " \"password\": \"s3cret\"}}", &o, &err) == 0 &&
			   !strcmp(json_string_value(json_object_get(o, "registry_auth")), "registry") &&
			   (dump = json_dumps(o, 0)) && !strstr(dump, "s3cret"),
		   "registry credentials: the type is kept, the secret is not");
		free(dump);
		json_decref(o);
	}
	ok(parse("{" IMG "\"steps\": [{\"type\": \"COPY\", \"args\": [\"sub/../a.txt\", \"rel\", \"\", \"\"],"
		 " \"filesHash\": \"" HASH "\", \"resolveSymlinks\": true, \"gzip\": false, \"forceUpload\": true}]}",
		 &o, &err) == 0 && json_is_true(json_object_get(json_array_get(json_object_get(o, "steps"), 0),
								  "resolveSymlinks")),
	   "the JS SDK's extra step keys, resolveSymlinks kept; a source with .. that stays inside");
	json_decref(o);

	rejects("a JSON that is not an object", "[1, 2]", -1, "", "not a JSON object");
	rejects("text that is not JSON", "{\"fromImage\": ", -1, "", "not JSON");
	rejects("a duplicate key", "{" IMG "\"fromImage\": \"debian:12\"}", -1, "", "not JSON");
	rejects("an unknown top-level key", "{" IMG "\"alias\": \"x\"}", -1, "", "unknown key 'alias'");
	rejects("neither base", "{\"steps\": []}", -1, "fromImage", "neither fromImage nor fromTemplate");
	rejects("both bases", "{" IMG "\"fromTemplate\": \"base\"}", -1, "fromTemplate", "keep one");
	rejects("an unexpanded ARG in FROM", "{\"fromImage\": \"${BASE}\"}", -1, "fromImage", "unexpanded build ARG");
	rejects("a bad image reference", "{\"fromImage\": \"python 3\"}", -1, "fromImage", "not an image reference");
	rejects("a template with a tag", "{\"fromTemplate\": \"web:v2\"}", -1, "fromTemplate", "has a tag");
	rejects("a bad template name", "{\"fromTemplate\": \"Web\"}", -1, "fromTemplate", "folder name");
	rejects("credentials of an unknown type", "{" IMG "\"fromImageRegistry\": {\"type\": \"azure\"}}", -1,
		"fromImageRegistry", "registry, aws or gcp");
	rejects("steps not an array", "{" IMG "\"steps\": {}}", -1, "steps", "array");
	rejects("a step not an object", "{" IMG "\"steps\": [" RUN("a") ", 3]}", 1, "", "must be an object");
	rejects("an unknown step type", "{" IMG "\"steps\": [" RUN("a") ", {\"type\": \"HEALTHCHECK\", \"args\": []}]}",
		1, "type", "unknown step type 'HEALTHCHECK'");
	rejects("a step without a type", "{" IMG "\"steps\": [{\"args\": []}]}", 0, "type", "no type");
	rejects("an unknown step key", "{" IMG "\"steps\": [{\"type\": \"RUN\", \"args\": [\"a\"], \"shell\": 1}]}", 0,
		"", "unknown key 'shell'");
	rejects("a RUN without a command", "{" IMG "\"steps\": [{\"type\": \"RUN\", \"args\": []}]}", 0, "args",
		"RUN takes");
	rejects("a RUN as a bad user", "{" IMG "\"steps\": [{\"type\": \"RUN\", \"args\": [\"a\", \"Root\"]}]}", 0,
		"args", "not a login name");
	rejects("an argument not a string", "{" IMG "\"steps\": [{\"type\": \"RUN\", \"args\": [1]}]}", 0, "args",
		"argument 1 is not a string");
	rejects("a control character", "{" IMG "\"steps\": [" RUN("a\\u001b[2J") "]}", 0, "args", "control character");
	rejects("a COPY without filesHash", "{" IMG "\"steps\": [{\"type\": \"COPY\", \"args\": [\"a\", \"/a\"]}]}", 0,
		"filesHash", "Template.toJSON(t, false) writes none");
	rejects("a COPY with a short filesHash",
		"{" IMG "\"steps\": [{\"type\": \"COPY\", \"args\": [\"a\", \"/a\"], \"filesHash\": \"abc\"}]}", 0,
		"filesHash", "64 lowercase hex");
	rejects("a COPY from an absolute path", COPY_JSON("\"/etc/shadow\", \"/a\""), 0, "args",
		"above the template directory");
	rejects("a COPY from above the folder", COPY_JSON("\"a/../../x\", \"/a\""), 0, "args",
		"above the template directory");
	rejects("a COPY with a bad mode", COPY_JSON("\"a\", \"/a\", \"\", \"0999\""), 0, "args", "octal");
	rejects("a COPY with a bad owner", COPY_JSON("\"a\", \"/a\", \"user:\", \"\""), 0, "args", "USER:GROUP");
	rejects("a filesHash on a RUN",
		"{" IMG "\"steps\": [{\"type\": \"RUN\", \"args\": [\"a\"], \"filesHash\": \"" HASH "\"}]}", 0, "filesHash",
		"only a COPY");
	rejects("an odd ENV", "{" IMG "\"steps\": [{\"type\": \"ENV\", \"args\": [\"A\", \"1\", \"B\"]}]}", 0, "args",
		"pairs");
	rejects("a bad ENV name", "{" IMG "\"steps\": [{\"type\": \"ENV\", \"args\": [\"A-B\", \"1\"]}]}", 0, "args",
		"not a variable name");
	rejects("a WORKDIR of two", "{" IMG "\"steps\": [{\"type\": \"WORKDIR\", \"args\": [\"/a\", \"/b\"]}]}", 0,
		"args", "WORKDIR takes");
	rejects("a WORKDIR with a newline", "{" IMG "\"steps\": [{\"type\": \"WORKDIR\", \"args\": [\"/a\\nb\"]}]}", 0,
		"args", "tab or newline");
	rejects("a COPY destination with a newline", COPY_JSON("\"a\", \"/a\\n#x\""), 0, "args", "tab or newline");
	rejects("a COPY source with a tab", COPY_JSON("\"a\\tb\", \"/a\""), 0, "args", "tab or newline");
	rejects("a USER of 11 digits", "{" IMG "\"steps\": [{\"type\": \"USER\", \"args\": [\"10000000000\"]}]}", 0,
		"args", "numeric uid");
	rejects("a USER of (uid_t)-1", "{" IMG "\"steps\": [{\"type\": \"USER\", \"args\": [\"4294967295\"]}]}", 0,
		"args", "numeric uid");
	rejects("a USER with an empty group", "{" IMG "\"steps\": [{\"type\": \"USER\", \"args\": [\"1000:\"]}]}", 0,
		"args", ":GROUP");
	rejects("a USER of three parts", "{" IMG "\"steps\": [{\"type\": \"USER\", \"args\": [\"1:2:3\"]}]}", 0,
		"args", ":GROUP");
	rejects("a RUN as a negative uid", "{" IMG "\"steps\": [{\"type\": \"RUN\", \"args\": [\"a\", \"-1\"]}]}", 0,
		"args", "numeric uid");
	rejects("a RUN as user:group", "{" IMG "\"steps\": [{\"type\": \"RUN\", \"args\": [\"a\", \"1000:1000\"]}]}",
		0, "args", "numeric uid");
	rejects("a COPY owner of a signed id", COPY_JSON("\"a\", \"/a\", \"+1000\", \"\""), 0, "args", "numeric ids");
	rejects("a USER with a bad sudo flag",
		"{" IMG "\"steps\": [{\"type\": \"USER\", \"args\": [\"app\", \"yes\"]}]}", 0, "args", "sudo");
	rejects("force not a boolean", "{" IMG "\"steps\": [{\"type\": \"RUN\", \"args\": [\"a\"], \"force\": 1}]}", 0,
		"", "true or false");
	rejects("an empty start command", "{" IMG "\"startCmd\": \"\"}", -1, "startCmd", "non-empty");
	{
		/* More than E2B_MAX_STEPS steps. */
		size_t n = (E2B_MAX_STEPS + 1) * (sizeof(RUN("a")) + 1) + 64;
		char *big = malloc(n), *p = big;
		p += sprintf(p, "{" IMG "\"steps\": [");
		for (int i = 0; i <= E2B_MAX_STEPS; i++)
			p += sprintf(p, "%s" RUN("a"), i ? "," : "");
		sprintf(p, "]}");
		rejects("too many steps", big, -1, "steps", "more than 1024 steps");
		free(big);
	}
	{
		char *huge = malloc(E2B_MAX_BYTES + 2);
		memset(huge, ' ', E2B_MAX_BYTES + 1);
		huge[0] = '{';
		huge[E2B_MAX_BYTES] = '}';
		huge[E2B_MAX_BYTES + 1] = '\0';
		ok(e2b_parse(huge, E2B_MAX_BYTES + 1, &o, &err) == -EFBIG && !o && strstr(err.msg, "1 MiB"),
		   "rejects a JSON larger than 1 MiB");
		free(huge);
	}
	ok(e2b_flavor_of("base") && !strcmp(e2b_flavor_of("base"), "e2b-base") && !e2b_flavor_of("desktop"),
	   "E2B's template names");
	{
		static const char *const base[] = { "e2bdev/base", "e2bdev/base:latest", "e2bdev/base:0.1.2_x-y",
						     "e2bdev/base@sha256:" HASH, "e2bdev/base:v1@sha256:" HASH,
						     "docker.io/e2bdev/base:latest", "index.docker.io/e2bdev/base",
						     "registry-1.docker.io/e2bdev/base@sha256:" HASH };
		static const char *const other[] = { "e2bdev/base-extra", "e2bdev/base:", "e2bdev/base:-x",
						      "e2bdev/base@sha256:abc", "e2bdev/base@sha512:" HASH,
						      "myorg/e2bdev/base", "docker.io/library/e2bdev/base",
						      "quay.io/e2bdev/base", "E2BDEV/base", "e2bdev/base/x", "python:3.13" };
		int good = 1;
		for (size_t i = 0; i < sizeof(base) / sizeof(*base); i++)
			if (!e2b_image_template(base[i]) || strcmp(e2b_image_template(base[i]), "base"))
				good = 0, printf("# %s is not base\n", base[i]);
		for (size_t i = 0; i < sizeof(other) / sizeof(*other); i++)
			if (e2b_image_template(other[i]))
				good = 0, printf("# %s is E2B's %s\n", other[i], e2b_image_template(other[i]));
		ok(good && e2b_image_template("e2bdev/code-interpreter:latest") &&
			   !strcmp(e2b_image_template("e2bdev/code-interpreter:latest"), "code-interpreter"),
		   "E2B's images: any tag or digest, Docker Hub's hosts; nothing else");
	}
	{
		static const struct {
			const char *steps;
			long want;
		} bun[] = {
			{ "[" RUN("bun install") "]", 0 },
			{ "[" RUN("apt-get install -y ubuntu-keyring bunny") ", " RUN("bun install -g tsx") "]", 1 },
			{ "[" RUN("npm install -g bun") ", " RUN("bun install") "]", -1 },
			{ "[{\"type\": \"ENV\", \"args\": [\"PATH\", \"/root/.bun/bin\"]}, " RUN("bun install") "]", -1 },
			{ "[" RUN("bun installer") ", " RUN("echo bun install") "]", -1 },
			{ "[]", -1 },
		};
		int good = 1;
		for (size_t i = 0; i < sizeof(bun) / sizeof(*bun); i++) {
			json_t *steps = json_loads(bun[i].steps, 0, NULL);
			long got = e2b_bun_install_step(steps);
			if (!steps || got != bun[i].want)
				good = 0, printf("# %s: %ld, not %ld\n", bun[i].steps, got, bun[i].want);
			json_decref(steps);
		}
		ok(good, "the SDK's bun_install, unless a step before it names bun");
	}
	return tap_done();
}
