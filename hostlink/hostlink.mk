# e2b-hostlink: the pool host's tool (hybrid vsock or AF_VSOCK into a guest).
# Built by `make tools`; never shipped in the image (not in GUEST_TOOLS).
# jansson builds envd's /init body (init_args.c).

HOSTLINK_LIB_SRCS := hostlink/link.c hostlink/http.c hostlink/io.c hostlink/text.c common/handshake.c

TOOLS += e2b-hostlink
e2b-hostlink_SRCS := hostlink/main.c hostlink/forward.c hostlink/clone.c hostlink/clone_cmd.c hostlink/cli.c \
	hostlink/envd.c hostlink/restore.c hostlink/init_args.c $(HOSTLINK_LIB_SRCS) common/bridge.c \
	common/fileio.c common/decimal.c common/log.c common/why.c
e2b-hostlink_PKGS := jansson

UNITS += hostlink-http-test
hostlink-http-test_SRCS := hostlink/http_test.c hostlink/http.c hostlink/io.c hostlink/text.c

FUZZERS += fuzz-hostlink-http
fuzz-hostlink-http_SRCS := hostlink/http_fuzz.c hostlink/http.c hostlink/io.c hostlink/text.c

UNITS += hostlink-text-test
hostlink-text-test_SRCS := hostlink/text_test.c hostlink/text.c

FUZZERS += fuzz-hostlink-text
fuzz-hostlink-text_SRCS := hostlink/text_fuzz.c hostlink/text.c

UNITS += hostlink-init-args-test
hostlink-init-args-test_SRCS := hostlink/init_args_test.c hostlink/init_args.c common/decimal.c common/why.c
hostlink-init-args-test_PKGS := jansson

FUZZERS += fuzz-hostlink-init
fuzz-hostlink-init_SRCS := hostlink/init_args_fuzz.c hostlink/init_args.c common/decimal.c common/why.c
fuzz-hostlink-init_PKGS := jansson
