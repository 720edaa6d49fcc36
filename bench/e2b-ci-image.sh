#!/usr/bin/env bash
# e2b-ci build figures (issue 12): a cold build (empty package cache: every
# .deb downloaded), a warm rebuild (same cache, mkosi's cached installation),
# the compressed OCI layer, the tree and its package count. Peer in the same
# run: e2b-rt, built the same way (bench/image.sh compares e2b-rt with mkosi's
# own OCI writer); each flavor starts from its own empty cache. Builds with tests/testimages.py's recipes (the shipped
# locks, upstream's archives on a pin mirror; envd built from source). Long: two cold builds.
#
#   bench/e2b-ci-image.sh          BENCH_CACHE=DIR to start from that cache
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
own_cache=
cache=${BENCH_CACHE:-}
if [ -z "$cache" ]; then
	cache=$(mktemp -d /var/tmp/e2b-bench-ci-cache.XXXXXX)
	own_cache=$cache
fi
trap '[ -z "$own_cache" ] || rm -rf "$own_cache"; rm -rf "$top/out/bench-ci"' EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }
build() {  # FLAVOR -> seconds
	local t0 t1
	t0=$(date +%s.%N)
	mkdir -p "$cache/$1"
	E2B_IMAGE_CACHE=$cache/$1 /usr/bin/python3 tests/testimages.py "$1" "$top/out/bench-ci" image \
		> "$top/out/bench-ci.$1.log" 2>&1 || { echo "e2b-ci-image: $1 build failed, see out/bench-ci.$1.log" >&2; exit 1; }
	t1=$(date +%s.%N)
	/usr/bin/python3 -c "print(f'{$t1 - $t0:.0f}')"
}
figures() {  # FLAVOR COLD WARM
	/usr/bin/python3 - "$top/out/bench-ci/$1" "$1" "$2" "$3" <<'PY'
import json, pathlib, subprocess, sys
d, flavor, cold, warm = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
m = json.loads((d / "manifest.json").read_text())
layer = m["outputs"]["oci"]["layers"][0]["size"]
tree = subprocess.run(["du", "-sm", str(d / "work/mkosi-out/image")], capture_output=True, text=True).stdout.split()[0]
ci = next((a["version"][:12] for a in m["artifacts"] if a["name"] == "code-interpreter"), "-")
print(f"{flavor}: cold {cold // 60}m{cold % 60:02d}s, warm {warm // 60}m{warm % 60:02d}s, "
      f"layer {layer / 1048576:.1f} MiB ({layer} B), tree {tree} MiB, {len(m['packages'])} packages, "
      f"code-interpreter {ci}")
print(f"{flavor}-layer-bytes {layer}")
PY
}
echo "e2b-ci-image: $(nproc) cores, load $(load), cache $cache"
for f in e2b-rt e2b-ci; do
	cold=$(build $f)
	warm=$(build $f)
	figures $f "$cold" "$warm" | tee "$top/out/bench-ci.$f.figures"
	echo "  (load $(load))"
done
rt=$(awk '/-layer-bytes/{print $2}' "$top/out/bench-ci.e2b-rt.figures")
ci=$(awk '/-layer-bytes/{print $2}' "$top/out/bench-ci.e2b-ci.figures")
/usr/bin/python3 -c "print(f'e2b-ci-image: layer ratio e2b-ci/e2b-rt {$ci/$rt:.2f}')"
