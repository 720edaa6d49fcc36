# pin/: pinfetch and envd-version (see pin/README.md)

TOOLS += pinfetch envd-version
pinfetch_SRCS := pin/pinfetch.c pin/artifact.c pin/run.c pin/report.c pin/stanza.c pin/fetch.c pin/cache.c \
                 pin/lock.c pin/sha256.c pin/atomicfile.c pin/tree.c pin/extract.c pin/nar.c pin/nar_stream.c \
                 common/fileio.c common/decimal.c common/log.c
pinfetch_PKGS := libcurl libcrypto jansson libarchive
envd-version_SRCS := pin/envd-version.c pin/version.c pin/atomicfile.c common/fileio.c common/log.c

UNITS += pin-lock-test pin-version-test pin-policy-test pin-nar-test pin-extract-test pin-nar-stream-test
pin-lock-test_SRCS := pin/lock_test.c pin/lock.c
pin-version-test_SRCS := pin/version_test.c pin/version.c
pin-policy-test_SRCS := pin/fetch_policy_test.c pin/fetch.c pin/sha256.c common/fileio.c
pin-policy-test_PKGS := libcurl libcrypto

FUZZERS += fuzz-pin-lock fuzz-pin-version fuzz-pin-tree-path
fuzz-pin-lock_SRCS := pin/lock_fuzz.c pin/lock.c
fuzz-pin-version_SRCS := pin/version_fuzz.c pin/version.c
pin-nar-test_SRCS := pin/nar_test.c pin/nar.c pin/lock.c
pin-nar-test_PKGS := libcrypto
pin-nar-stream-test_SRCS := pin/nar_stream_test.c pin/nar_stream.c pin/nar.c
pin-nar-stream-test_PKGS := libcrypto
pin-extract-test_SRCS := pin/extract_test.c pin/extract.c pin/nar.c pin/nar_stream.c common/fileio.c
pin-extract-test_PKGS := libarchive libcrypto
fuzz-pin-tree-path_SRCS := pin/extract_fuzz.c pin/extract.c pin/nar.c pin/nar_stream.c pin/lock.c common/fileio.c
fuzz-pin-tree-path_PKGS := libarchive libcrypto
