# pin/: pinfetch and envd-version (see pin/README.md)

TOOLS += pinfetch envd-version
pinfetch_SRCS := pin/pinfetch.c pin/fetch.c pin/cache.c pin/lock.c pin/sha256.c pin/atomicfile.c common/log.c
pinfetch_PKGS := libcurl libcrypto
envd-version_SRCS := pin/envd-version.c pin/version.c pin/atomicfile.c common/log.c

UNITS += pin-lock-test pin-version-test pin-policy-test
pin-lock-test_SRCS := tests/pin/unit_lock.c pin/lock.c
pin-version-test_SRCS := tests/pin/unit_version.c pin/version.c
pin-policy-test_SRCS := tests/pin/unit_policy.c pin/fetch.c pin/sha256.c pin/atomicfile.c
pin-policy-test_PKGS := libcurl libcrypto

FUZZERS += fuzz-pin-lock fuzz-pin-version
fuzz-pin-lock_SRCS := tests/pin/fuzz_lock.c pin/lock.c
fuzz-pin-version_SRCS := tests/pin/fuzz_version.c pin/version.c

# mk/c.mk declares the aggregate targets before the fragments are read, so
# their prerequisite lists come out empty; name ours here (harmless once fixed).
tools: $(BUILD)/pinfetch $(BUILD)/envd-version
san-tools: $(BUILD)/san/pinfetch $(BUILD)/san/envd-version
units: $(addprefix $(BUILD)/unit/,pin-lock-test pin-version-test pin-policy-test) \
       $(addprefix $(BUILD)/san/unit/,pin-lock-test pin-version-test pin-policy-test)
fuzzers: $(BUILD)/fuzz/fuzz-pin-lock $(BUILD)/fuzz/fuzz-pin-version
