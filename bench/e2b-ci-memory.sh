#!/bin/bash
# Idle memory of the e2b-ci stack: Jupyter server + the code-interpreter API
# server + the default python kernel it starts, run from the built image tree
# (chroot, as uid 1000, in a private network namespace with a stand-in
# envd /envs on 127.0.0.1:49983). Compared with the pool sizes the stack must
# fit in: `small` (512 MiB) and `medium` (1 GiB, upstream's target).
#
#   bench/e2b-ci-memory.sh [TREE]   (default: out/e2b-ci's build tree or OCI layer)
#   E2B_CI_ARCHIVE=FILE bench/e2b-ci-memory.sh [TREE]
#       lay FILE (a code-interpreter archive, e.g. the real pinned one, or a
#       `git archive` of the pinned commit) over the tree first, with
#       os-image/e2b-ci/prepare.sh (PATCHES applied), as a read-only overlay.
#
# Not a QEMU boot: no systemd, envd or guard here (tests/boot measures the
# guest). Needs root (unshare, chroot).
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
tree=$1 lower=$2
if [ -n "$lower" ]; then
	mkdir -p "$tree.merged"
	mount -t overlay overlay -o "lowerdir=$lower" "$tree.merged"
	tree=$tree.merged
fi
ip link set lo up
mount -t proc proc "$tree/proc"
mount -t tmpfs tmpfs "$tree/tmp"
mount -t tmpfs -o mode=0755 tmpfs "$tree/home"
mkdir -m 0700 "$tree/home/user" && chown 1000:1000 "$tree/home/user"
mount --bind /dev "$tree/dev"
/usr/bin/python3 -c '
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 49983), H).serve_forever()' &
run() { chroot --userspec=1000:1000 "$tree" /usr/bin/env -i HOME=/home/user PATH=/usr/bin:/bin \
	PYTHONPATH=/usr/lib/e2b-code-interpreter/python "$@"; }
t0=$(date +%s.%N)
run sh -c 'cd /home/user && exec python3 -m jupyter_server --config=/etc/jupyter/jupyter_server_config.py' >/dev/null 2>&1 &
for i in $(seq 1 300); do curl -sf -o /dev/null http://127.0.0.1:8888/api/status && break; sleep 0.1; done
run sh -c 'cd /usr/lib/e2b-code-interpreter/server && exec python3 -m uvicorn main:app --host 127.0.0.1 --port 49999 --workers 1 --no-access-log' >/dev/null 2>&1 &
for i in $(seq 1 600); do curl -sf -o /dev/null http://127.0.0.1:49999/health && break; sleep 0.1; done
t1=$(date +%s.%N)
curl -sf http://127.0.0.1:49999/health >/dev/null || { echo "e2b-ci-memory: stack did not come up" >&2; exit 1; }
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
pkill -u 1000 || true
kill %1 2>/dev/null || true
sleep 1
umount "$tree/dev" "$tree/home" "$tree/tmp" "$tree/proc"
INNER
chmod +x "$tmp/inner.sh"
echo "e2b-ci idle memory: $tree${E2B_CI_ARCHIVE:+ + $E2B_CI_ARCHIVE}"
ln -s "$tree" "$tmp/t"
timeout 300 unshare --net --mount --pid --fork --mount-proc "$tmp/inner.sh" "$tmp/t" "$lower"
