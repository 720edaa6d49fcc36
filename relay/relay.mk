# vsock-relay: the guest's dynamic relay into loopback (see relay/README.md);
# and the handshake lines both it and e2b-hostlink speak (common/handshake.c).

TOOLS += vsock-relay
vsock-relay_SRCS := relay/main.c relay/session.c relay/policy.c common/guarded_ports.c common/why.c common/fileio.c \
	common/bridge.c common/handshake.c common/decimal.c common/log.c

UNITS += relay-handshake-test
relay-handshake-test_SRCS := common/handshake_test.c common/handshake.c

UNITS += decimal-test
decimal-test_SRCS := common/decimal_test.c common/decimal.c

UNITS += bridge-test
bridge-test_SRCS := common/bridge_test.c common/bridge.c

UNITS += relay-policy-test
relay-policy-test_SRCS := relay/policy_test.c relay/policy.c common/guarded_ports.c common/why.c common/decimal.c

FUZZERS += fuzz-handshake
fuzz-handshake_SRCS := common/handshake_fuzz.c common/handshake.c

FUZZERS += fuzz-relay-range
fuzz-relay-range_SRCS := relay/policy_fuzz.c relay/policy.c common/guarded_ports.c common/why.c common/decimal.c
