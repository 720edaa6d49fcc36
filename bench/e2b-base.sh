#!/usr/bin/env bash
# e2b-base (issue 50) against its peer, e2b-rt, built in the same run:
#  1. layer: e2b-base's compressed OCI layer (target <= 220 MiB) beside
#     e2b-rt's, with the ratio, the packages e2b-base adds (dpkg's
#     Installed-Size in each tree), and E2B's own base image (python:3.11.6
#     plus Node, e2b-dev/E2B templates/base/e2b.Dockerfile), whose layers are
#     read with skopeo (its short name, through the machine's registries.conf)
#     when a registry answers, otherwise named as "over 300 MiB compressed
#     (issue 50), not measured here";
#  2. rebuild: a warm `make image` of each flavor after a unit changed
#     (units/$BENCH_UNIT, default envd.service, gets a new comment line each
#     round), the two alternating, BENCH_RUNS (3) rounds, medians; target
#     e2b-base / e2b-rt <= 1.2. Each build is split by phase from its
#     log's time stamps (bench/lib/phases.py). The changed unit is a copy
#     bind-mounted over units/<unit> in a private mount namespace around
#     each timed make: the checkout is never written (other builds from
#     this checkout, which read units/, never see the change), and the
#     mount ends with the make;
#  3. memory: both rootfs.ext4 booted in QEMU at 512 MiB
#     (bench/e2b-base-vm-memory.py, tests/boot/vm.py's harness), idle
#     BENCH_IDLE (60) s after envd answers /health, BENCH_MEM_ROUNDS (1) boots
#     each, alternating; target: e2b-base's MemAvailable within 10 MiB of
#     e2b-rt's. The whole part holds flock BENCH_QEMU_LOCK
#     (/tmp/e2b-qemu.lock): one QEMU at a time on a shared machine.
# Every figure is printed with the load average (/proc/loadavg).
#
# Builds go to BENCH_OUT (out/bench-base) with a cache of their own,
# BENCH_CACHE (out/bench-cache; mkosi's package cache must not be shared by
# two concurrent builds), with tests/testimages.py's recipes and pin mirror
# (bench/lib/test-recipes.sh) unless BENCH_RECIPES=DIR (and BENCH_MAKE_ARGS).
# The first builds fill the caches (not timed). The boots' kernel is cached
# in E2B_BOOT_CACHE (BENCH_CACHE/boot). BENCH_QEMU=0 skips the boots,
# BENCH_REBUILD=0 the rebuilds. Needs root (mkosi, mount namespace, netns).
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
out=${BENCH_OUT:-out/bench-base}
cache=${BENCH_CACHE:-out/bench-cache}
runs=${BENCH_RUNS:-3}
unit=${BENCH_UNIT:-envd.service}
qemu_lock=${BENCH_QEMU_LOCK:-/tmp/e2b-qemu.lock}
py=/usr/bin/python3

die() { printf 'e2b-base bench: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (mkosi builds, a mount namespace for the unit change, QEMU's network namespace)"
[ -f "units/$unit" ] || die "units/$unit: not found (BENCH_UNIT names a file in units/)"
case $runs in ''|*[!0-9]*|0) die "BENCH_RUNS=$runs: a number of rounds >= 1" ;; esac
for tool in unshare mount dpkg-query; do
    command -v "$tool" >/dev/null || die "$tool: not found (util-linux, dpkg)"
done

tmp=$(mktemp -d /tmp/e2b-bench-base.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
. bench/lib/test-recipes.sh

load() { cut -d' ' -f1-3 /proc/loadavg; }
now() { date +%s.%N; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# Each output line of a build, stamped with its time (for the split by phase).
stamp() { "$py" -u -c 'import sys, time
for line in sys.stdin: sys.stdout.write(f"{time.time():.3f} {line}")'; }

# build FLAVOR [CHANGED_UNIT]: `make image` of FLAVOR into $out, its seconds
# on stdout, its split by phase into $tmp/phases. With CHANGED_UNIT (a file),
# the make runs in a private mount namespace where that file is bind-mounted
# over units/$unit.
build() {
    local flavor=$1 changed=${2:-} log=$tmp/build-$1.log t0 t1
    local cmd=(make --no-print-directory image flavor="$flavor" recipes="$recipes" $make_args
               out="$out" cache="$cache")
    t0=$(now)
    if [ -n "$changed" ]; then
        # shellcheck disable=SC2016
        unshare --mount --propagation private -- \
            sh -c 'mount --bind "$1" "$2" || exit 1; shift 2; exec "$@"' sh "$changed" "$top/units/$unit" "${cmd[@]}"
    else
        "${cmd[@]}"
    fi 2>&1 | stamp > "$log" || {
        tail -n 30 "$log" >&2
        die "make image flavor=$flavor out=$out cache=$cache failed${changed:+ (with units/$unit changed)}: the tail of its log is above"
    }
    t1=$(now)
    # Phases: prepare (os-image/build.sh's removal of the last build's work/,
    # whose image tree is the size of the image, the apt sources, pins, envd
    # and the flavor's prepare step); mkosi's copy of its cached installation;
    # mkosi's build script, postinst, finalize and mtimes; pack.py (tar, the
    # gzip'd OCI layer, ext4).
    "$py" bench/lib/phases.py "$log" prepare '‣ +Copying cached trees' copy-cached-tree '‣ +Running build script' \
        mkosi-steps '‣ .* size is ' pack > "$tmp/phases" 2>&1 || echo "no split by phase: $(cat "$tmp/phases")" > "$tmp/phases"
    "$py" -c "print(f'{$t1 - $t0:.1f}')"
}

echo "e2b-base bench: $(nproc) cores, load $(load); out=$out cache=$cache"
# Fill the caches (not timed): the images as the checkout has them.
for flavor in e2b-rt e2b-base; do
    t=$(build "$flavor")
    echo "e2b-base bench: $flavor built in $t s (filling the caches, not timed: $(cat "$tmp/phases")), load $(load)"
done

# ---- 1. the layer -----------------------------------------------------------
echo
echo "== layer: compressed OCI layer, load $(load)"
"$py" - "$out/e2b-base" "$out/e2b-rt" <<'PY'
import json, pathlib, subprocess, sys
base_dir, rt_dir = map(pathlib.Path, sys.argv[1:])
TARGET = 220
mib = lambda n: n / 1048576

def layer(d):
    return json.loads((d / "manifest.json").read_text())["outputs"]["oci"]["layers"][0]["size"]

base, rt = layer(base_dir), layer(rt_dir)
print(f"layer: e2b-base {mib(base):.1f} MiB ({base} bytes), target <= {TARGET} MiB:"
      f" {'met' if mib(base) <= TARGET else f'NOT met, over by {mib(base) - TARGET:.1f} MiB'}")
print(f"layer: e2b-rt (peer) {mib(rt):.1f} MiB ({rt} bytes); ratio e2b-base / e2b-rt {base / rt:.2f},"
      f" e2b-base adds {mib(base - rt):.1f} MiB")

# E2B's own base: FROM python:3.11.6, then Node 20 (e2b-dev/E2B,
# templates/base/e2b.Dockerfile). Its compressed layers, when a registry answers:
# the short name, resolved by the machine's own containers configuration
# (registries.conf), so no registry's name is written here.
REF = "docker://python:3.11.6"

def skopeo_raw(ref):
    cp = subprocess.run(["skopeo", "inspect", "--raw", ref], capture_output=True, text=True, timeout=60)
    if cp.returncode != 0:
        raise RuntimeError(cp.stderr.strip().splitlines()[-1] if cp.stderr.strip() else f"exit {cp.returncode}")
    return json.loads(cp.stdout)

try:
    m = skopeo_raw(REF)
    if "manifests" in m:  # an index: the linux/amd64 image
        d = next(x["digest"] for x in m["manifests"]
                 if x.get("platform", {}).get("os") == "linux" and x.get("platform", {}).get("architecture") == "amd64")
        m = skopeo_raw(REF.rsplit(":", 1)[0] + "@" + d)
    py = sum(x["size"] for x in m["layers"])
    print(f"layer: E2B's base starts FROM python:3.11.6: {mib(py):.1f} MiB compressed (linux/amd64),"
          f" before Node 20; ratio e2b-base / python:3.11.6 {base / py:.2f}")
except (OSError, RuntimeError, ValueError, KeyError, StopIteration, subprocess.TimeoutExpired) as e:
    why = (f"skopeo: {e}" if isinstance(e, OSError) else
           f"no container registry reachable ({type(e).__name__}: {str(e)[:200]})")
    print("layer: E2B's base (python:3.11.6 plus Node 20, e2b-dev/E2B templates/base/e2b.Dockerfile) is over"
          f" 300 MiB compressed (issue 50); not measured here: {why}")

# What e2b-base adds: packages by dpkg's Installed-Size in each build's tree.
def packages(d):
    tree = d / "work" / "mkosi-out" / "image"
    cp = subprocess.run(["dpkg-query", f"--admindir={tree}/var/lib/dpkg", "-W", "-f", "${Installed-Size}\t${Package}\n"],
                        capture_output=True, text=True)
    if cp.returncode != 0:
        return None
    return {p: int(s or 0) for s, p in (line.split("\t") for line in cp.stdout.splitlines())}

def du(d, sub):
    p = d / "work" / "mkosi-out" / "image" / sub
    if not p.exists():
        return 0
    return int(subprocess.run(["du", "-sk", str(p)], capture_output=True, text=True).stdout.split()[0])

pb, pr = packages(base_dir), packages(rt_dir)
if pb is None or pr is None:
    print("layer: no build tree (work/mkosi-out/image) to list the packages")
else:
    added = sorted(((s, p) for p, s in pb.items() if p not in pr), reverse=True)
    total = sum(s for s, _ in added)
    print(f"layer: e2b-base has {len(added)} packages e2b-rt has not, {total / 1024:.1f} MiB installed"
          f" (dpkg Installed-Size); /usr/local: {du(base_dir, 'usr/local') / 1024:.1f} MiB"
          f" (e2b-rt {du(rt_dir, 'usr/local') / 1024:.1f} MiB); the largest:")
    for s, p in added[:15]:
        print(f"  {s / 1024:7.1f} MiB  {p}")
PY

# ---- 2. warm rebuild after a unit changed ---------------------------------------
if [ "${BENCH_REBUILD:-1}" != 0 ]; then
    echo
    echo "== rebuild: warm make image after units/$unit changed, $runs rounds alternating, load $(load)"
    base_t=() rt_t=()
    for i in $(seq 1 "$runs"); do
        changed=$tmp/$unit.round$i
        cp "units/$unit" "$changed"
        printf '# bench/e2b-base.sh: round %s, %s\n' "$i" "$(date -u +%FT%T.%N)" >> "$changed"
        if [ $((i % 2)) = 1 ]; then order="e2b-base e2b-rt"; else order="e2b-rt e2b-base"; fi
        for flavor in $order; do
            t=$(build "$flavor" "$changed")
            echo "rebuild: round $i $flavor ${t} s ($(cat "$tmp/phases")), load $(load)"
            if [ "$flavor" = e2b-base ]; then base_t+=("$t"); else rt_t+=("$t"); fi
        done
    done
    b=$(median "${base_t[@]}") r=$(median "${rt_t[@]}")
    echo "rebuild: e2b-base median ${b} s (${base_t[*]}), e2b-rt (peer) median ${r} s (${rt_t[*]}), load $(load)"
    "$py" -c "r = $b / $r; print(f'rebuild: ratio e2b-base / e2b-rt {r:.2f} (target <= 1.2: {\"met\" if r <= 1.2 else \"NOT met\"})')"
    # The outputs back to the checkout's units (not timed), for the boots.
    for flavor in e2b-rt e2b-base; do build "$flavor" > /dev/null; done
fi

# ---- 3. memory in a 512 MiB guest -------------------------------------------------
if [ "${BENCH_QEMU:-1}" != 0 ]; then
    command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64: not found (make deps installs it); BENCH_QEMU=0 skips the boots"
    echo
    echo "== memory: waiting for the QEMU lock $qemu_lock (one QEMU at a time on this machine), load $(load)"
    # The lock is held here for the whole part; vm.py must not take it again.
    env -u E2B_QEMU_LOCK E2B_BOOT_CACHE="${E2B_BOOT_CACHE:-$(realpath -m "$cache")/boot}" \
        flock "$qemu_lock" "$py" bench/e2b-base-vm-memory.py --rounds "${BENCH_MEM_ROUNDS:-1}" \
        --idle "${BENCH_IDLE:-60}" "$out/e2b-base/rootfs.ext4" "$out/e2b-rt/rootfs.ext4" \
        || die "the memory part failed (bench/e2b-base-vm-memory.py, above)"
fi
