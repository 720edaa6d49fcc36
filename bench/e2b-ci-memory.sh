#!/bin/bash
# Idle memory of the e2b-ci stack: Jupyter server + the code-interpreter API
# server + the default python kernel it starts, run from the built image tree
# (chroot, as uid 1000, in a private network namespace with the tree's real
# envd on 127.0.0.1:49983, tests/image_ci/stack.sh). Compared with the pool sizes the stack must
# fit in: `small` (512 MiB) and `medium` (1 GiB, upstream's target).
#
#   bench/e2b-ci-memory.sh [TREE]   (default: out/e2b-ci's build tree or OCI layer)
#   E2B_CI_ARCHIVE=FILE bench/e2b-ci-memory.sh [TREE]
#       lay FILE (a code-interpreter archive, e.g. the real pinned one, or a
#       `git archive` of the pinned commit) over the tree first, with
#       os-image/e2b-ci/prepare.sh (PATCHES applied), as a read-only overlay.
#
# Not a QEMU boot: no systemd or guard here (tests/boot measures the guest). Needs root (unshare, chroot).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
tree=${1:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -z "$tree" ]; then
	if [ -d "$top/out/e2b-ci/work/mkosi-out/image/usr" ]; then
		tree=$top/out/e2b-ci/work/mkosi-out/image
	elif [ -f "$top/out/e2b-ci/oci/index.json" ]; then
		tree=$tmp/tree
		mkdir "$tree"
		layer=$(/usr/bin/python3 - "$top/out/e2b-ci/oci" <<'PY'
import json, sys, pathlib
oci = pathlib.Path(sys.argv[1])
blob = lambda d: oci / "blobs" / d["digest"].replace(":", "/")
m = json.loads(blob(json.loads((oci / "index.json").read_text())["manifests"][0]).read_text())
print(blob(m["layers"][-1]))
PY
)
		tar -xzf "$layer" -C "$tree"
	else
		echo "e2b-ci-memory: no e2b-ci image: run \`make flavor=e2b-ci\` first (skipped)"
		exit 0
	fi
fi
[ -f "$tree/etc/jupyter/jupyter_server_config.py" ] || { echo "e2b-ci-memory: $tree is not an e2b-ci tree" >&2; exit 1; }

if [ -n "${E2B_CI_ARCHIVE:-}" ]; then
	"$top/os-image/e2b-ci/prepare.sh" --archive "$E2B_CI_ARCHIVE" --extra "$tmp/stage" --work "$tmp/work" >/dev/null
	lower="$tmp/stage:$tree"
else
	lower=
fi
cat > "$tmp/inner.sh" <<'INNER'
#!/bin/bash
set -u
top=$1 tree=$2 lower=$3
if [ -n "$lower" ]; then
	mkdir -p "$tree.merged"
	mount -t overlay overlay -o "lowerdir=$lower" "$tree.merged"
	tree=$tree.merged
fi
. "$top/tests/image_ci/stack.sh"
logs=$(mktemp -d)
t0=$(date +%s.%N)
start_e2b_ci_stack "$tree" "$logs" || { echo "e2b-ci-memory: stack did not come up" >&2; tail -5 "$logs"/*.log >&2; exit 1; }
t1=$(date +%s.%N)
sleep 10   # idle
total_rss=0 total_pss=0
for p in $(pgrep -u 1000); do
	rss=$(awk '/^VmRSS:/{print $2}' /proc/$p/status)
	pss=$(awk '/^Pss:/{s+=$2} END{print s+0}' /proc/$p/smaps_rollup)
	cmd=$(tr '\0' ' ' < /proc/$p/cmdline | cut -c1-70)
	printf '  %-72s RSS %6d KiB  PSS %6d KiB\n' "$cmd" "$rss" "$pss"
	total_rss=$((total_rss + rss)); total_pss=$((total_pss + pss))
done
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "startup to /health \"OK\": %.1f s (chroot on the build host, not a VM)\n", b - a }'
printf 'idle total: RSS %d MiB, PSS %d MiB\n' $((total_rss / 1024)) $((total_pss / 1024))
awk -v p="$total_pss" 'BEGIN { printf "PSS / small (512 MiB): %.2f   PSS / medium (1024 MiB): %.2f\n", p / 1024 / 512, p / 1024 / 1024 }'
stop_e2b_ci_stack
rm -rf "$logs"
INNER
chmod +x "$tmp/inner.sh"
echo "e2b-ci idle memory: $tree${E2B_CI_ARCHIVE:+ + $E2B_CI_ARCHIVE}"
ln -s "$tree" "$tmp/t"
timeout 300 unshare --net --mount --pid --fork --mount-proc "$tmp/inner.sh" "$top" "$tmp/t" "$lower"

# In QEMU at the pool sizes (guest MemAvailable, idle and after importing
# pandas and matplotlib): bench/e2b-ci-vm-memory.py. BENCH_QEMU=0 skips it.
if [ "${BENCH_QEMU:-1}" != 0 ]; then
	/usr/bin/python3 "$top/bench/e2b-ci-vm-memory.py"
fi
