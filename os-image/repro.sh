#!/usr/bin/env bash
# `make repro flavor=...`: build the same commit twice, in two separate
# output directories, each installing every package afresh (no incremental
# image; the package download cache is shared; envd compiled from source in
# each, from the shared module cache), then compare. Prints the
# differing paths (diffoscope when installed) and exits 1 on any difference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
base=${OUT:?}
# One epoch for both builds, even if a commit lands in between.
: "${SOURCE_DATE_EPOCH:=$(git -C "$top" log -1 --format=%ct)}"
export SOURCE_DATE_EPOCH
rm -rf "$base"
for n in 1 2; do
    echo "repro: build $n of 2 -> $base/$n" >&2
    OUT=$base/$n INCREMENTAL=0 ENVD_SOURCE_CACHE=$base/envd-source-$n bash "$here/build.sh"
done
exec "${PYTHON:?set by os-image/image.mk}" "$here/compare.py" "$base/1" "$base/2"
