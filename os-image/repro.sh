#!/usr/bin/env bash
# `make repro flavor=...`: build the same commit twice, in two separate
# output directories, each installing every package afresh (no incremental
# image; the package download cache is shared; envd compiled from source in
# each, from the shared module cache), then compare. Prints the
# differing paths (diffoscope when installed) and exits 1 on any difference
# (with REPRO_UNPINNED's reason, for an E2B template's RUN steps).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
base=${OUT:?}
# One epoch for both builds, even if a commit lands in between.
: "${SOURCE_DATE_EPOCH:=$(git -C "$top" log -1 --format=%ct)}"
export SOURCE_DATE_EPOCH
rm -rf "$base"
# An E2B template's RUN steps (template/template.sh): said before and, if
# the builds differ, after.
[ -z "${REPRO_UNPINNED:-}" ] || echo "repro: note: $REPRO_UNPINNED" >&2
for n in 1 2; do
    echo "repro: build $n of 2 -> $base/$n" >&2
    # envd compiled in each: the shared cache's registry may give artifacts
    # (each checked against its pin) but not envd (regcache/README.md).
    OUT=$base/$n INCREMENTAL=0 ENVD_SOURCE_CACHE=$base/envd-source-$n CACHE_REGISTRY_ENVD=0 \
        CACHE_LEDGER=$base/cache-ledger-$n bash "$here/build.sh"
done
"${PYTHON:?set by os-image/image.mk}" "$here/compare.py" "$base/1" "$base/2" && exit 0
[ -z "${REPRO_UNPINNED:-}" ] || echo "repro: the builds differ; $REPRO_UNPINNED (the differing paths are above)" >&2
exit 1
