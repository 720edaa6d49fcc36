#!/usr/bin/env bash
# A lean boot (issue 22) against the image before it, under QEMU TCG: e2b-rt
# at 1 vCPU / 512 MiB and e2b-ci at 2 vCPU / 1 GiB (the boot test's sizes),
# each image booted BENCH_RUNS (3) times, old and new alternately, with the
# boot test's own probe (tests/boot). The peer is the same flavor built from
# BENCH_BASE (default: the commit before os-image/mkosi.finalize began
# stamping /etc/.updated), in a worktree, with the same caches and pins.
# Medians and ratios (goals): the guest's busy CPU seconds until the boot has
# settled (<= 0.6), userspace start -> envd healthy (<= 0.8), and for e2b-ci
# userspace start -> :49999 ready (<= 0.8); beside cpu_s, the CPU seconds
# after the test initramfs handed over, and without the test's own units.
# The load average goes with every boot. One boot at a time; the worktree
# and its outputs are removed after.
# With BENCH_QEMU_LOCK=FILE each boot holds an flock on FILE, so boots of
# other processes that take the same lock wait between ours.
#
#   bench/boot.sh [FLAVOR...]      (default: e2b-rt e2b-ci)
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 - "$@" <<'PY'
import dataclasses, os, pathlib, shutil, statistics, subprocess, sys, tempfile
sys.path.insert(0, "tests")
sys.path.insert(0, "tests/boot")
import testimages as t
import vm

flavors = sys.argv[1:] or ["e2b-rt", "e2b-ci"]
runs = int(os.environ.get("BENCH_RUNS", "3"))
root = t.ROOT
base = os.environ.get("BENCH_BASE") or subprocess.run(
    ["git", "-C", str(root), "log", "--format=%H", "-S/etc/.updated", "--", "os-image/mkosi.finalize"],
    capture_output=True, text=True, check=True).stdout.split()[-1] + "^"
load = lambda: " ".join(open("/proc/loadavg").read().split()[:3])

if os.environ.get("BENCH_QEMU_LOCK"):  # vm.boot takes it (tests/boot/vm.py qemu_lock)
    os.environ["E2B_QEMU_LOCK"] = os.environ["BENCH_QEMU_LOCK"]

work = pathlib.Path(tempfile.mkdtemp(prefix="e2b-bench-boot-"))
tree = work / "base"
try:
    subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(tree), base],
                   check=True, capture_output=True)
    subprocess.run(["make", "-s", "-C", str(tree), "tools"], check=True, capture_output=True)
    mirror = work / "mirror"
    t.fill_pin_mirror(mirror)
    images = {}
    for flavor in flavors:
        for name, top in (("before", tree), ("lean", root)):
            out = work / f"out-{name}"
            cp = subprocess.run(["make", "-C", str(top), "--no-print-directory", "image", f"flavor={flavor}",
                                 f"out={out}", f"cache={t.CACHE}", f"pin_mirror=file://{mirror}"],
                                capture_output=True, text=True)
            if cp.returncode != 0:
                sys.exit(f"boot: {flavor} ({name}) build failed:\n{cp.stderr[-3000:]}")
            images[flavor, name] = out / flavor / "rootfs.ext4"
    print(f"boot: base {base}; {os.cpu_count()} cores; {runs} boots of each image, alternately", flush=True)
    for flavor in flavors:
        v = dataclasses.replace(vm.variant(flavor), sdk=False, stop_guard=False)
        figures = {"before": [], "lean": []}
        for _ in range(runs):
            for name in ("before", "lean"):
                res = vm.boot(v, images[flavor, name])
                rep = res.get("report", {})
                try:
                    user_ms = int(rep["userspace_start_us"]) / 1000
                    hz = os.sysconf("SC_CLK_TCK")
                    row = {"cpu_s": int(rep["cpu_busy_ticks"]) / hz,
                           "envd_s": (int(rep["ready_envd_ms"]) - user_ms) / 1000}
                    if rep.get("cpu_busy_ticks_at_switch"):  # the probe's of before this figure existed
                        row["cpu_after_initrd_s"] = (int(rep["cpu_busy_ticks"])
                                                     - int(rep["cpu_busy_ticks_at_switch"])) / hz
                    if rep.get("harness_cpu_ns"):  # the probe's of before this figure existed
                        row["cpu_image_s"] = row["cpu_s"] - int(rep["harness_cpu_ns"]) / 1e9
                    if flavor == "e2b-ci":
                        row["ci_s"] = (int(rep["ready_ci_ms"]) - user_ms) / 1000
                except (KeyError, ValueError) as e:
                    sys.exit(f"boot: {flavor} ({name}): no figure {e}: {res.get('error')} {sorted(rep)[:40]}")
                figures[name].append(row)
                print(f"boot: {flavor} {name}: " + ", ".join(f"{k} {x:.1f}" for k, x in row.items())
                      + f" (load {load()})", flush=True)
        # cpu_after_initrd_s: cpu_s without the kernel's boot and the test
        # initramfs's module loading (a pool boots without one); cpu_image_s:
        # cpu_s without the test's own units (probe, readiness poller, httpd),
        # which both images carry. The goal is cpu_s's.
        for key, goal in (("cpu_s", 0.6), ("cpu_after_initrd_s", None), ("cpu_image_s", None),
                          ("envd_s", 0.8), ("ci_s", 0.8)):
            if not all(key in r for r in figures["lean"] + figures["before"]):
                continue
            old = statistics.median(r[key] for r in figures["before"])
            new = statistics.median(r[key] for r in figures["lean"])
            print(f"boot: {flavor} median {key}: before {old:.1f}, lean {new:.1f}, ratio {new / old:.2f} "
                  + (f"(goal <= {goal})" if goal else "(no goal of its own)"), flush=True)
finally:
    subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tree)], capture_output=True)
    shutil.rmtree(work, ignore_errors=True)
PY
