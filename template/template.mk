# template/: e2b-template, the one parser of a template's template.conf (see template/README.md)

TOOLS += e2b-template
e2b-template_SRCS := template/e2b-template.c template/conf.c template/e2bjson.c template/files.c \
	common/decimal.c common/fileio.c common/log.c
e2b-template_PKGS := jansson

UNITS += template-conf-test
template-conf-test_SRCS := template/conf_test.c template/conf.c common/decimal.c

FUZZERS += fuzz-template-conf
fuzz-template-conf_SRCS := template/conf_fuzz.c template/conf.c common/decimal.c

UNITS += template-e2bjson-test
template-e2bjson-test_SRCS := template/e2bjson_test.c template/e2bjson.c template/conf.c common/decimal.c
template-e2bjson-test_PKGS := jansson

FUZZERS += fuzz-template-e2bjson
fuzz-template-e2bjson_SRCS := template/e2bjson_fuzz.c template/e2bjson.c template/conf.c common/decimal.c
fuzz-template-e2bjson_PKGS := jansson

# E2B's Python SDK (template/e2b/sdk-requirements.txt, hash-pinned) for the
# Dockerfile formats (e2b.Dockerfile with e2b.toml, a plain Dockerfile):
# template/e2b/dockerfile.py runs with its python. Made on demand: template.sh
# runs the same module, no-op when the venv's stamp matches, only for a
# template in one of those formats, so template.conf and e2b.template.json
# builds never need PyPI. `make e2b-sdk` makes it ahead.
E2B_SDK_REQUIREMENTS := template/e2b/sdk-requirements.txt
E2B_SDK := $(build)/e2b-sdk

.PHONY: e2b-sdk
e2b-sdk: $(E2B_SDK)/requirements.sha256
$(E2B_SDK)/requirements.sha256: $(E2B_SDK_REQUIREMENTS) template/e2b/sdk_venv.py
	PYTHONPATH='$(CURDIR)' $(python) -m template.e2b.sdk_venv --requirements $(E2B_SDK_REQUIREMENTS) --venv $(E2B_SDK) >/dev/null
	touch $@
