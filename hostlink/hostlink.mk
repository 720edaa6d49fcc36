# e2b-hostlink: the pool host's tool (hybrid vsock or AF_VSOCK into a guest).
# Built by `make tools`; never shipped in the image (not in GUEST_TOOLS).

HOSTLINK_LIB_SRCS := hostlink/link.c hostlink/http.c hostlink/io.c hostlink/text.c common/handshake.c

TOOLS += e2b-hostlink
e2b-hostlink_SRCS := hostlink/main.c hostlink/forward.c hostlink/clone.c $(HOSTLINK_LIB_SRCS) common/bridge.c common/fileio.c common/decimal.c common/log.c

UNITS += hostlink-http-test
hostlink-http-test_SRCS := hostlink/http_test.c hostlink/http.c hostlink/io.c hostlink/text.c

FUZZERS += fuzz-hostlink-http
fuzz-hostlink-http_SRCS := hostlink/http_fuzz.c hostlink/http.c hostlink/io.c hostlink/text.c

UNITS += hostlink-text-test
hostlink-text-test_SRCS := hostlink/text_test.c hostlink/text.c

FUZZERS += fuzz-hostlink-text
fuzz-hostlink-text_SRCS := hostlink/text_fuzz.c hostlink/text.c
