# envd-guard: the loopback nftables guard (see guard/README.md).

GUARD_LIB_SRCS := guard/args.c guard/ruleset.c guard/nft.c guard/rtnl.c common/log.c

TOOLS += envd-guard
envd-guard_SRCS := guard/main.c $(GUARD_LIB_SRCS)
envd-guard_PKGS := libnftnl libmnl

UNITS += guard-args-test
guard-args-test_SRCS := guard/args_test.c guard/args.c

UNITS += guard-ruleset-test
guard-ruleset-test_SRCS := guard/ruleset_test.c $(GUARD_LIB_SRCS)
guard-ruleset-test_PKGS := libnftnl libmnl

FUZZERS += guard-args-fuzz
guard-args-fuzz_SRCS := guard/args_fuzz.c guard/args.c

# mk/c.mk expands the aggregate targets' prerequisites before the fragments
# are read (immediate expansion), so name ours here too; harmless once the
# top level defers that expansion.
tools:     $(BUILD)/envd-guard
san-tools: $(BUILD)/san/envd-guard
units:     $(BUILD)/unit/guard-args-test $(BUILD)/san/unit/guard-args-test \
           $(BUILD)/unit/guard-ruleset-test $(BUILD)/san/unit/guard-ruleset-test
fuzzers:   $(BUILD)/fuzz/guard-args-fuzz
