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
