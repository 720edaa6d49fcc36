# mmds-serve: the instance-metadata service (see mmds/README.md).
TOOLS   += mmds-serve
UNITS   += mmds-unit
FUZZERS += mmds-fuzz-http mmds-fuzz-document

mmds_CORE := mmds/http.c mmds/document.c mmds/token.c

mmds-serve_SRCS := mmds/main.c mmds/server.c $(mmds_CORE) common/log.c
# libcrypto linked statically, SHA-256 only: the shared library's load
# alone costs ~3 MiB of RSS against a 4 MiB budget (mmds/README.md).
mmds_LIBCRYPTO_A := $(shell $(PKG_CONFIG) --variable=libdir libcrypto)/libcrypto.a

mmds-serve_PKGS := libsystemd jansson
mmds-serve_LDLIBS := $(mmds_LIBCRYPTO_A) -lm

mmds-unit_SRCS := mmds/test_mmds.c $(mmds_CORE)
mmds-unit_PKGS := jansson
mmds-unit_LDLIBS := $(mmds_LIBCRYPTO_A)

mmds-fuzz-http_SRCS := mmds/fuzz_http.c mmds/http.c
mmds-fuzz-document_SRCS := mmds/fuzz_document.c mmds/document.c
mmds-fuzz-document_PKGS := jansson
