# mmds-serve: the instance-metadata service (see mmds/README.md).
TOOLS   += mmds-serve
UNITS   += mmds-unit
FUZZERS += mmds-fuzz-http mmds-fuzz-document

mmds_CORE := mmds/http.c mmds/document.c mmds/token.c

mmds-serve_SRCS := mmds/main.c mmds/server.c $(mmds_CORE) common/log.c
mmds-serve_PKGS := libsystemd jansson libcrypto
mmds-serve_LDLIBS := -lm

mmds-unit_SRCS := mmds/test_mmds.c $(mmds_CORE)
mmds-unit_PKGS := jansson libcrypto

mmds-fuzz-http_SRCS := mmds/fuzz_http.c mmds/http.c
mmds-fuzz-document_SRCS := mmds/fuzz_document.c mmds/document.c
mmds-fuzz-document_PKGS := jansson
