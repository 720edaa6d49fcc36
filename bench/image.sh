#!/usr/bin/env bash
# Image build figures: warm rebuild time and compressed layer size of
# `make flavor=e2b-rt`, against the targets (<= 90 s, <= 70 MiB since git, os-image/README.md), and against
# a named peer: mkosi 24.3's own `Format=oci` output of the very same
# configuration and tree (what you get without os-image/pack.py; it is not
# reproducible, see os-image/README.md). Prints the ratios.
#
# Builds with tests/testimages.py's recipes and pin mirror (the real envd from
# its pinned source; ../shared/upstream's archive on a file:// tree mirror)
# unless BENCH_RECIPES=DIR (and BENCH_MAKE_ARGS) are given.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
flavor=${flavor:-e2b-rt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. bench/lib/test-recipes.sh

now() { date +%s.%N; }
secs() { /usr/bin/python3 -c "print(f'{$2 - $1:.1f}')"; }
mib() { /usr/bin/python3 -c "print(f'{$1 / 1048576:.1f}')"; }

# Fill the caches if needed (not timed), then time a warm rebuild.
make --no-print-directory image flavor="$flavor" recipes="$recipes" $make_args out=out/bench cache=out/cache >/dev/null 2>&1
t0=$(now)
make --no-print-directory image flavor="$flavor" recipes="$recipes" $make_args out=out/bench cache=out/cache >"$tmp/warm.log" 2>&1
t1=$(now)
warm=$(secs "$t0" "$t1")
ours=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["outputs"]["oci"]["layers"][0]["size"])' "out/bench/$flavor/manifest.json")

# Peer: mkosi's own OCI writer, same config and tree, warm caches as well.
make --no-print-directory image flavor="$flavor" recipes="$recipes" $make_args out=out/bench-peer cache=out/cache \
    MKOSI_ARGS="--format oci" PACK=0 >/dev/null 2>&1 || true
t2=$(now)
make --no-print-directory image flavor="$flavor" recipes="$recipes" $make_args out=out/bench-peer cache=out/cache \
    MKOSI_ARGS="--format oci" PACK=0 >"$tmp/peer.log" 2>&1
t3=$(now)
peer_time=$(secs "$t2" "$t3")
peer_dir=out/bench-peer/$flavor/work/mkosi-out/image
peer=$(find "$peer_dir/blobs/sha256" -type f -printf '%s\n' | sort -n | tail -1)

echo "image: flavor=$flavor, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "image: warm rebuild (make image, cached packages):   ${warm} s   (target <= 90 s)"
echo "image: compressed layer (ours: tar --sort + gzip -n): $(mib "$ours") MiB ($ours bytes; target <= 70 MiB)"
echo "image: peer mkosi Format=oci warm build:             ${peer_time} s (no ext4, no manifest)"
echo "image: peer mkosi Format=oci layer:                  $(mib "$peer") MiB ($peer bytes)"
/usr/bin/python3 -c "print(f'image: ratio ours/peer: layer size {$ours/$peer:.3f}, warm build time {$warm/$peer_time:.2f}')"
