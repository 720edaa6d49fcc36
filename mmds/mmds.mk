# mmds-serve: the instance-metadata service (see mmds/README.md).
TOOLS   += mmds-serve
UNITS   += mmds-http-test mmds-document-test mmds-import-test mmds-token-test mmds-vsock-policy-test \
	mmds-answer-cache-test mmds-store-test
FUZZERS += fuzz-mmds-http fuzz-mmds-document

mmds_CORE := mmds/http.c mmds/document.c mmds/token.c

mmds-serve_SRCS := mmds/main.c mmds/listen.c mmds/server.c mmds/conn.c mmds/loop.c mmds/respond.c mmds/answer_cache.c mmds/guest_api.c mmds/control_api.c \
	mmds/store.c mmds/fdstore.c mmds/import.c common/vsock_policy.c $(mmds_CORE) common/fileio.c common/decimal.c common/log.c
# libcrypto linked statically, SHA-256 only: the shared library's load
# alone costs ~3 MiB of RSS against a 4 MiB budget (mmds/README.md).
# Recursive (=), resolved once on first use: parsing runs no pkg-config.
mmds_LIBCRYPTO_A = $(eval mmds_LIBCRYPTO_A := $$(shell $$(PKG_CONFIG) --variable=libdir libcrypto)/libcrypto.a)$(mmds_LIBCRYPTO_A)

mmds-serve_PKGS := libsystemd jansson
mmds-serve_LDLIBS = $(mmds_LIBCRYPTO_A) -lm

mmds-http-test_SRCS := mmds/http_test.c mmds/http.c
mmds-document-test_SRCS := mmds/document_test.c mmds/document.c
mmds-document-test_PKGS := jansson
mmds-import-test_SRCS := mmds/import_test.c mmds/import.c mmds/document.c common/fileio.c
mmds-import-test_PKGS := jansson
mmds-token-test_SRCS := mmds/token_test.c mmds/token.c
mmds-token-test_LDLIBS = $(mmds_LIBCRYPTO_A)
mmds-answer-cache-test_SRCS := mmds/answer_cache_test.c mmds/answer_cache.c
# The store with its real sources (file, PUT/PATCH, fd store): every change
# must drop the answers rendered from the document before it.
mmds-store-test_SRCS := mmds/store_test.c mmds/store.c mmds/fdstore.c mmds/answer_cache.c mmds/document.c \
	common/fileio.c common/log.c
mmds-store-test_PKGS := libsystemd jansson
mmds-vsock-policy-test_SRCS := common/vsock_policy_test.c common/vsock_policy.c

fuzz-mmds-http_SRCS := mmds/http_fuzz.c mmds/http.c
fuzz-mmds-document_SRCS := mmds/document_fuzz.c mmds/document.c
fuzz-mmds-document_PKGS := jansson
