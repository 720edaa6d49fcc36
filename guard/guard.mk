# envd-guard: the loopback nftables guard (see guard/README.md).

GUARD_LIB_SRCS := guard/args.c common/guarded_ports.c common/why.c guard/ruleset.c guard/nft.c guard/nlbatch.c guard/rtnl.c guard/nlsock.c common/log.c

TOOLS += envd-guard
envd-guard_SRCS := guard/main.c $(GUARD_LIB_SRCS)
envd-guard_PKGS := libnftnl libmnl

UNITS += guard-args-test
guard-args-test_SRCS := guard/args_test.c guard/args.c common/guarded_ports.c common/why.c

UNITS += guard-ruleset-test
guard-ruleset-test_SRCS := guard/ruleset_test.c $(GUARD_LIB_SRCS)
guard-ruleset-test_PKGS := libnftnl libmnl

UNITS += guard-nlsock-test
guard-nlsock-test_SRCS := guard/nlsock_test.c guard/nlsock.c
guard-nlsock-test_PKGS := libmnl

FUZZERS += fuzz-guard-args
fuzz-guard-args_SRCS := guard/args_fuzz.c guard/args.c common/guarded_ports.c common/why.c
