#!/usr/bin/env bash
# e2b-ci's kernels (issue 36): the default image (all five kernels) against
# `kernels=python` (python and javascript, which are always in) in the same
# run: each one's compressed OCI layer and their ratio, each kernel's share of
# the default layer (its files by path prefix, compressed alike), then both
# booted in QEMU at 1 GiB (bench/e2b-ci-vm-memory.py --peer): MemAvailable
# with the server's two default contexts, the start ratio (boot to :49999
# healthy, goal <= 1.15x) and the first run per language from its context's
# creation. Builds with tests/testimages.py's recipes, as bench/e2b-ci-image.sh.
#
#   bench/e2b-ci-kernels.sh                  build both, then measure
#   bench/e2b-ci-kernels.sh ALL_DIR PY_DIR [PEER_DIR]
#                                            measure existing builds (make image's
#                                            out/<flavor> directories: manifest.json,
#                                            rootfs.ext4, work/mkosi-out/image); PEER_DIR:
#                                            the image the boots compare against instead
#                                            of PY_DIR, e.g. an e2b-ci built before
#                                            issue 36 (python alone)
#   BENCH_QEMU=0: no boots; BENCH_LOCK=FILE: each build holds flock FILE;
#   BENCH_QEMU_LOCK=FILE: passed to the boots as E2B_QEMU_LOCK (one QEMU at a time)
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
load() { cut -d' ' -f1-3 /proc/loadavg; }

if [ $# = 2 ] || [ $# = 3 ]; then
	all=$1 py=$2 peer=${3:-$2}
elif [ $# = 0 ]; then
	out=$top/out/bench-kernels
	trap 'rm -rf "$out"' EXIT
	for b in "all kernels=python,javascript,r,bash,java" "python kernels=python"; do
		read -r label arg <<< "$b"
		# shellcheck disable=SC2016
		${BENCH_LOCK:+flock "$BENCH_LOCK"} /usr/bin/python3 tests/testimages.py e2b-ci "$out/$label" image "$arg" \
			> "$top/out/bench-kernels.$label.log" 2>&1 \
			|| { echo "e2b-ci-kernels: the $arg build failed, see out/bench-kernels.$label.log" >&2; exit 1; }
	done
	all=$out/all/e2b-ci py=$out/python/e2b-ci peer=$py
else
	sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
	exit 2
fi
for d in "$all" "$py" "$peer"; do
	[ -f "$d/manifest.json" ] && [ -d "$d/work/mkosi-out/image" ] \
		|| { echo "e2b-ci-kernels: $d is not an e2b-ci build (manifest.json, work/mkosi-out/image)" >&2; exit 1; }
done
echo "e2b-ci-kernels: $(nproc) cores, load $(load)"
/usr/bin/python3 - "$all" "$py" <<'PY'
import glob, json, pathlib, subprocess, sys
all_dir, py_dir = map(pathlib.Path, sys.argv[1:])
# Each kernel's files, by path prefix in the tree (globs); the compiler is
# upstream's build-essential, counted apart.
GROUPS = {
    "javascript (node, ijavascript)": ["usr/bin/node", "usr/lib/x86_64-linux-gnu/libnode.so*", "usr/share/nodejs",
                                       "usr/lib/node_modules", "usr/lib/e2b-code-interpreter/ijavascript",
                                       "usr/local/share/jupyter/kernels/javascript"],
    "r (R, IRkernel)": ["usr/lib/R", "usr/share/R", "etc/R", "usr/lib/x86_64-linux-gnu/libR*",
                        "usr/local/share/jupyter/kernels/r"],
    "bash (bash_kernel)": ["usr/lib/e2b-code-interpreter/venv/lib/python3*/site-packages/bash_kernel*",
                           "usr/local/share/jupyter/kernels/bash"],
    "java (JVM, JJava)": ["usr/lib/jvm", "etc/java-*", "etc/ssl/certs/java", "usr/share/java",
                          "usr/local/share/jupyter/kernels/java"],
    "compiler (gcc)": ["usr/lib/gcc", "usr/libexec/gcc"],
}

def layer(d):
    m = json.loads((d / "manifest.json").read_text())
    return m["outputs"]["oci"]["layers"][0]["size"], m.get("kernels")

def compressed(tree, patterns):
    paths = sorted({str(pathlib.Path(p).relative_to(tree)) for pat in patterns for p in glob.glob(str(tree / pat))})
    if not paths:
        return 0, 0
    tar = subprocess.Popen(["tar", "-C", str(tree), "-cf", "-", "--", *paths], stdout=subprocess.PIPE)
    gz = subprocess.run(["gzip", "-6"], stdin=tar.stdout, capture_output=True, check=True)
    tar.wait()
    du = int(subprocess.run(["du", "-sbc", *paths], cwd=tree, capture_output=True, text=True).stdout.split()[-2])
    return len(gz.stdout), du

mib = lambda n: f"{n / 1048576:.1f} MiB"
(a, ka), (p, kp) = layer(all_dir), layer(py_dir)
print(f"layer, kernels {','.join(ka or [])}: {mib(a)} ({a} B)   goal <= 720 MiB")
print(f"layer, kernels {','.join(kp or [])}: {mib(p)} ({p} B)   goal <= 530 MiB")
print(f"layer ratio all/python: {a / p:.2f}; difference {mib(a - p)}")
tree = all_dir / "work/mkosi-out/image"
print("each kernel's share of the default layer (its files, gzip -6, by path prefix):")
for name, patterns in GROUPS.items():
    gz, raw = compressed(tree, patterns)
    print(f"  {name:32s} {mib(gz):>10s} compressed ({100 * gz / a:4.1f} % of the layer), {mib(raw)} on disk")
PY
echo "  (load $(load))"
if [ "${BENCH_QEMU:-1}" != 0 ]; then
	E2B_QEMU_LOCK=${BENCH_QEMU_LOCK:-${E2B_QEMU_LOCK:-}} /usr/bin/python3 bench/e2b-ci-vm-memory.py --sizes 1024 \
		--peer "$peer/rootfs.ext4" "$all/rootfs.ext4"
fi
echo "e2b-ci-kernels: load $(load)"
