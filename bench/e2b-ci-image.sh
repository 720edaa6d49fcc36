#!/usr/bin/env bash
# e2b-ci build figures (issues 12, 21): a cold build (empty cache: every .deb
# and, for pydeps=pip, every wheel downloaded), a warm rebuild (same cache,
# mkosi's cached installation, the wheel cache), the compressed OCI layer, the
# tree and its package count, for both Python stacks (pydeps=debian and
# pydeps=pip). Peer in the same run: e2b-rt, built the same way (bench/image.sh
# compares e2b-rt with mkosi's own OCI writer); each build starts from its own
# empty cache. Builds with tests/testimages.py's recipes (the shipped
# locks, upstream's archives on a pin mirror; envd built from source). Long: two cold builds.
#
#   bench/e2b-ci-image.sh [LABEL...]   LABEL: e2b-rt, e2b-ci-debian, e2b-ci-pip (default: all)
#   BENCH_CACHE=DIR: start from that cache; BENCH_LOCK=FILE: each build holds
#   flock FILE (machines shared with other builds), its time measured inside the lock
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
own_cache=
cache=${BENCH_CACHE:-}
if [ -z "$cache" ]; then
	cache=$(mktemp -d /var/tmp/e2b-bench-ci-cache.XXXXXX)
	own_cache=$cache
fi
trap '[ -z "$own_cache" ] || rm -rf "$own_cache"; rm -rf "$top/out/bench-ci" "$top"/out/bench-ci.*.figures' EXIT
# label flavor make-arguments…
builds=("e2b-rt e2b-rt" "e2b-ci-debian e2b-ci pydeps=debian" "e2b-ci-pip e2b-ci pydeps=pip")
rm -f "$top"/out/bench-ci.*.figures

load() { cut -d' ' -f1-3 /proc/loadavg; }
build() {  # LABEL FLAVOR [MAKE-ARGS…] -> seconds
	local label=$1 flavor=$2
	shift 2
	mkdir -p "$cache/$label"
	# shellcheck disable=SC2016
	${BENCH_LOCK:+flock "$BENCH_LOCK"} bash -c 't0=$(date +%s.%N)
		E2B_IMAGE_CACHE=$1 /usr/bin/python3 tests/testimages.py "$2" "$3" image "${@:5}" > "$4" 2>&1 || exit 1
		t1=$(date +%s.%N); /usr/bin/python3 -c "print(f\"{$t1 - $t0:.0f}\")"' \
		build "$cache/$label" "$flavor" "$top/out/bench-ci/$label" "$top/out/bench-ci.$label.log" "$@" \
		|| { echo "e2b-ci-image: $label build failed, see out/bench-ci.$label.log" >&2; exit 1; }
}
figures() {  # LABEL FLAVOR COLD WARM
	/usr/bin/python3 - "$top/out/bench-ci/$1/$2" "$1" "$3" "$4" <<'PY'
import json, pathlib, subprocess, sys
d, flavor, cold, warm = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
m = json.loads((d / "manifest.json").read_text())
layer = m["outputs"]["oci"]["layers"][0]["size"]
tree = subprocess.run(["du", "-sm", str(d / "work/mkosi-out/image")], capture_output=True, text=True).stdout.split()[0]
ci = next((a["version"][:12] for a in m["artifacts"] if a["name"] == "code-interpreter"), "-")
venv = f" + {len(m['python_packages'])} in the venv" if "python_packages" in m else ""
print(f"{flavor}: cold {cold // 60}m{cold % 60:02d}s, warm {warm // 60}m{warm % 60:02d}s, "
      f"layer {layer / 1048576:.1f} MiB ({layer} B), tree {tree} MiB, {len(m['packages'])} packages{venv}, "
      f"code-interpreter {ci}")
print(f"{flavor}-layer-bytes {layer}")
PY
}
echo "e2b-ci-image: $(nproc) cores, load $(load), cache $cache"
for b in "${builds[@]}"; do
	read -r -a args <<< "$b"
	[ $# = 0 ] || [[ " $* " == *" ${args[0]} "* ]] || continue
	cold=$(build "${args[@]}")
	warm=$(build "${args[@]}")
	figures "${args[0]}" "${args[1]}" "$cold" "$warm" | tee "$top/out/bench-ci.${args[0]}.figures"
	echo "  (load $(load))"
done
layer() { awk '/-layer-bytes/{print $2}' "$top/out/bench-ci.$1.figures" 2>/dev/null; }
for pair in "e2b-ci-debian e2b-rt" "e2b-ci-pip e2b-rt" "e2b-ci-pip e2b-ci-debian"; do
	read -r a b <<< "$pair"
	[ -n "$(layer "$a")" ] && [ -n "$(layer "$b")" ] || continue
	/usr/bin/python3 -c "print(f'e2b-ci-image: layer ratio $a/$b {$(layer "$a") / $(layer "$b"):.2f}')"
done
echo "e2b-ci-image: load $(load)"
