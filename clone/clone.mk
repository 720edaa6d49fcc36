# e2b-clone: the guest's clone step, resident, on the listening socket of vsock port 10053
# for the host (see clone/README.md).
TOOLS   += e2b-clone
UNITS   += clone-request-test
FUZZERS += fuzz-clone-request

e2b-clone_SRCS := clone/main.c clone/listener.c clone/request.c clone/steps.c clone/mmds_client.c \
	common/vsock_policy.c common/fileio.c common/decimal.c common/log.c
e2b-clone_PKGS := jansson libsystemd

clone-request-test_SRCS := clone/request_test.c clone/request.c clone/mmds_client.c common/fileio.c

fuzz-clone-request_SRCS := clone/request_fuzz.c clone/request.c clone/mmds_client.c common/fileio.c
